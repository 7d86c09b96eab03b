"""Write data.json for normal_normal.stan (seeded) and print the exact answers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np


def make_data(seed: int = 1, n: int = 20) -> dict[str, object]:
    """Data drawn from the model's prior predictive with a fixed seed."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(0.0, 2.0)
    return {"N": n, "y": rng.normal(mu, 1.5, size=n).round(6).tolist(), "mu0": 0.0, "tau0": 2.0, "sigma": 1.5}


def exact(data: dict[str, object]) -> dict[str, float]:
    """Posterior mean and sd of mu, and log evidence log p(y) with all constants."""
    y = np.asarray(data["y"], dtype=float)
    n, mu0, tau0, sigma = len(y), float(data["mu0"]), float(data["tau0"]), float(data["sigma"])  # type: ignore[arg-type]
    precision = 1 / tau0**2 + n / sigma**2
    mean = (mu0 / tau0**2 + y.sum() / sigma**2) / precision
    # y ~ MVN(mu0 1, sigma^2 I + tau0^2 11'): determinant and quadratic form in closed form
    r = y - mu0
    quad = (r @ r) / sigma**2 - (tau0**2 / sigma**4) * r.sum() ** 2 / (1 + n * tau0**2 / sigma**2)
    logdet = 2 * n * math.log(sigma) + math.log(1 + n * tau0**2 / sigma**2)
    log_z = -0.5 * (n * math.log(2 * math.pi) + logdet + quad)
    return {"mu_mean": mean, "mu_sd": 1 / math.sqrt(precision), "log_evidence": log_z}


if __name__ == "__main__":
    data = make_data()
    (Path(__file__).parent / "data.json").write_text(json.dumps(data, indent=1))
    print(json.dumps(exact(data), indent=1))
