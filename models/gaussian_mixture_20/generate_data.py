"""Write the data and exact moments of the 20-component Gaussian mixture (Kou et al. 2006).

Scenario (a): weights 1/20, covariance 0.01 I.
Scenario (b): weight_j ∝ 1 / ||mu_j - (5, 5)||, covariance (||mu_j - (5, 5)|| / 20) I.

Exact moments of the mixture: E[X_d] = sum_j w_j mu_jd,
E[X_d^2] = sum_j w_j (mu_jd^2 + s_j^2) with s_j^2 the component variance.
``python generate_data.py`` rewrites scenario_a.data.json, scenario_b.data.json
and exact_moments.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

MEANS = np.array([
    (2.18, 5.76), (8.67, 9.59), (4.24, 8.48), (8.41, 1.68), (3.93, 8.82),
    (3.25, 3.47), (1.70, 0.50), (4.59, 5.60), (6.91, 5.81), (6.87, 5.40),
    (5.41, 2.65), (2.70, 7.88), (4.98, 3.70), (1.14, 2.39), (8.33, 9.50),
    (4.93, 1.50), (1.83, 0.09), (2.26, 0.31), (5.54, 6.86), (1.69, 8.11),
])

#: Support of each coordinate: the uniform(-10, 10) box of Nemeth et al.'s code for
#: scenario (a) and its uniform(-100, 100) box for scenario (b).  Scenario (b)'s
#: components near (8.5, 9.5) have standard deviations of about 0.53, so a box
#: ending at 10 would cut off about a fifth of their mass (E[X2^2] would drop by
#: about 0.8); 100 leaves less than exp(-15000) outside.
BOX = {"a": (-10.0, 10.0), "b": (-100.0, 100.0)}


def scenario(name: str) -> dict[str, object]:
    """Stan data of scenario ``"a"`` or ``"b"``."""
    k = len(MEANS)
    if name == "a":
        w = np.full(k, 1.0 / k)
        var = np.full(k, 0.01)
    elif name == "b":
        dist = np.linalg.norm(MEANS - np.array([5.0, 5.0]), axis=1)
        w = (1.0 / dist) / np.sum(1.0 / dist)
        var = dist / 20.0
    else:
        raise ValueError(f"unknown scenario {name!r}; expected 'a' or 'b'")
    return {"K": k, "mu": MEANS.tolist(), "w": w.tolist(), "sigma": np.sqrt(var).tolist(),
            "box_lower": BOX[name][0], "box_upper": BOX[name][1]}


def exact_moments(data: dict[str, object]) -> dict[str, float]:
    """E[X1], E[X2], E[X1^2], E[X2^2] of the mixture."""
    mu = np.asarray(data["mu"], dtype=float)
    w = np.asarray(data["w"], dtype=float)
    var = np.asarray(data["sigma"], dtype=float) ** 2
    m1 = w @ mu
    m2 = w @ (mu**2 + var[:, None])
    return {"E[X1]": float(m1[0]), "E[X2]": float(m1[1]),
            "E[X1^2]": float(m2[0]), "E[X2^2]": float(m2[1])}


def main() -> None:
    here = Path(__file__).resolve().parent
    moments = {}
    for name in ("a", "b"):
        data = scenario(name)
        (here / f"scenario_{name}.data.json").write_text(json.dumps(data, indent=1) + "\n")
        moments[name] = exact_moments(data)
    (here / "exact_moments.json").write_text(json.dumps(moments, indent=1) + "\n")
    print(json.dumps(moments, indent=1))


if __name__ == "__main__":
    main()
