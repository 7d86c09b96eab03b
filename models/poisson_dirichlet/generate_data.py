"""Write data.json for poisson_dirichlet.stan (seeded) and print the exact answers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from scipy.special import gammaln


def make_data(seed: int = 3, n: int = 12, k: int = 4) -> dict[str, object]:
    """Data drawn from the model's prior predictive with a fixed seed."""
    rng = np.random.default_rng(seed)
    a, b = 3.0, 0.5
    alpha = [1.0, 2.0, 1.5, 0.8][:k]
    lam = rng.gamma(a, 1 / b)
    theta = rng.dirichlet(alpha)
    return {"N": n, "y": rng.poisson(lam, size=n).tolist(), "a": a, "b": b, "K": k,
            "counts": rng.multinomial(25, theta).tolist(), "alpha": alpha}


def exact(data: dict[str, object]) -> dict[str, object]:
    """Posterior means and the log evidence log p(y, counts) with all constants."""
    y = np.asarray(data["y"], dtype=float)
    c = np.asarray(data["counts"], dtype=float)
    al = np.asarray(data["alpha"], dtype=float)
    a, b, n = float(data["a"]), float(data["b"]), len(y)  # type: ignore[arg-type]
    s, m, big_a = y.sum(), c.sum(), al.sum()
    # gamma-Poisson: p(y) = b^a / Gamma(a) * Gamma(a + S) / (b + N)^(a + S) / prod y_i!
    log_py = (a * math.log(b) - gammaln(a) + gammaln(a + s) - (a + s) * math.log(b + n)
              - gammaln(y + 1).sum())
    # Dirichlet-multinomial: p(c) = M! / prod c_k! * B(alpha + c) / B(alpha)
    log_pc = (gammaln(m + 1) - gammaln(c + 1).sum() + gammaln(big_a) - gammaln(big_a + m)
              + (gammaln(al + c) - gammaln(al)).sum())
    return {"lambda_mean": (a + s) / (b + n),
            "theta_mean": ((al + c) / (big_a + m)).tolist(),
            "log_evidence": float(log_py + log_pc)}


if __name__ == "__main__":
    data = make_data()
    (Path(__file__).parent / "data.json").write_text(json.dumps(data, indent=1))
    print(json.dumps(exact(data), indent=1))
