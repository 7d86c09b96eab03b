"""Data and exact ground truth of the tilted double-well potential (double_well.stan).

The density factorises over coordinates, so every answer follows from 1-D
quadrature of ``f_d(t) = exp(-kappa (t^2 - 1)^2 + h_d t)``:

- ``log_z`` = sum_d log Z_d with Z_d = ∫ f_d(t) dt (the Stan model's density
  carries no other constant),
- ``p_positive[d]`` = P(x_d > 0) (mass of the right-hand well),
- ``mean[d]`` = E[x_d] and ``second_moment[d]`` = E[x_d^2].

``python generate_data.py`` rewrites ``double_well.data.json`` and
``ground_truth.json`` (no randomness: the data are fixed constants).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from scipy import integrate

#: The shipped configuration: two coordinates, barrier of 10 nats, unequal wells.
DATA: dict[str, Any] = {"D": 2, "kappa": 10.0, "h": [0.5, -0.25]}


def log_density(x: np.ndarray, kappa: float, h: np.ndarray) -> np.ndarray:
    """Log density of the Stan model at points ``x`` of shape (..., D)."""
    x = np.asarray(x, dtype=float)
    return -kappa * np.sum((x**2 - 1.0) ** 2, axis=-1) + x @ np.asarray(h, dtype=float)


def _coordinate(kappa: float, h: float) -> dict[str, float]:
    """log Z_d, P(x_d > 0), E[x_d], E[x_d^2] of one coordinate by adaptive quadrature.

    The integrand is scaled by its maximum (at the larger well) to avoid underflow;
    both half-lines are integrated separately (the barrier sits at 0).
    """
    grid = np.linspace(-3.0, 3.0, 60001)
    log_max = float(np.max(-kappa * (grid**2 - 1) ** 2 + h * grid))

    def f(t: float, k: int) -> float:
        return t**k * math.exp(-kappa * (t * t - 1.0) ** 2 + h * t - log_max)

    opts = {"epsabs": 0.0, "epsrel": 1e-13, "limit": 200}
    neg = [integrate.quad(f, -np.inf, 0.0, args=(k,), **opts)[0] for k in range(3)]
    pos = [integrate.quad(f, 0.0, np.inf, args=(k,), **opts)[0] for k in range(3)]
    z = neg[0] + pos[0]
    return {"log_z": math.log(z) + log_max, "p_positive": pos[0] / z,
            "mean": (neg[1] + pos[1]) / z, "second_moment": (neg[2] + pos[2]) / z}


def ground_truth(data: dict[str, Any]) -> dict[str, Any]:
    """Exact log Z, well masses and moments of every coordinate.

    Raises
    ------
    ValueError
        If ``h`` does not have ``D`` entries.
    """
    h = [float(v) for v in data["h"]]
    if len(h) != int(data["D"]):
        raise ValueError(f"h has {len(h)} entries; expected D = {data['D']}")
    coords = [_coordinate(float(data["kappa"]), hd) for hd in h]
    return {
        "log_z": sum(c["log_z"] for c in coords),
        "p_positive": [c["p_positive"] for c in coords],
        "mean": [c["mean"] for c in coords],
        "second_moment": [c["second_moment"] for c in coords],
    }


def main() -> None:
    """Rewrite double_well.data.json and ground_truth.json."""
    here = Path(__file__).resolve().parent
    (here / "double_well.data.json").write_text(json.dumps(DATA, indent=1) + "\n")
    truth = ground_truth(DATA)
    (here / "ground_truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    print(json.dumps(truth, indent=1))


if __name__ == "__main__":
    main()
