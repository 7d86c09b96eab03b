"""Write the data of linear_regression.stan (seeded) and the exact log evidence.

``full.data.json`` has an intercept and two predictors (K = 3);
``reduced.data.json`` is the same data with the last predictor dropped (K = 2):
the nested pair of the Bayes-factor test.  ``exact.json`` holds both log
evidences (all constants) and the log Bayes factor full vs reduced.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np


def make_data(seed: int = 1, n: int = 30) -> dict[str, object]:
    """Design with an intercept and two standard-normal predictors; y from fixed coefficients."""
    rng = np.random.default_rng(seed)
    x = np.column_stack([np.ones(n), rng.normal(size=(n, 2))]).round(6)
    beta = np.array([0.5, 1.0, 0.4])
    sigma = 1.0
    y = (x @ beta + rng.normal(0.0, sigma, size=n)).round(6)
    return {"N": n, "K": 3, "X": x.tolist(), "y": y.tolist(), "sigma": sigma, "tau": 2.0}


def drop_last_predictor(data: dict[str, object]) -> dict[str, object]:
    """The nested model's data: same y, X without its last column."""
    x = np.asarray(data["X"], dtype=float)[:, :-1]
    return {**data, "K": x.shape[1], "X": x.tolist()}


def log_evidence(data: dict[str, object]) -> float:
    """``log N(y | 0, sigma^2 I + tau^2 X X')`` with all constants."""
    x = np.asarray(data["X"], dtype=float)
    y = np.asarray(data["y"], dtype=float)
    sigma, tau = float(data["sigma"]), float(data["tau"])  # type: ignore[arg-type]
    cov = sigma**2 * np.eye(len(y)) + tau**2 * x @ x.T
    chol = np.linalg.cholesky(cov)
    z = np.linalg.solve(chol, y)
    return float(-0.5 * len(y) * math.log(2 * math.pi) - np.sum(np.log(np.diag(chol)))
                 - 0.5 * z @ z)


if __name__ == "__main__":
    here = Path(__file__).parent
    full = make_data()
    reduced = drop_last_predictor(full)
    (here / "full.data.json").write_text(json.dumps(full, indent=1))
    (here / "reduced.data.json").write_text(json.dumps(reduced, indent=1))
    exact = {"log_evidence_full": log_evidence(full),
             "log_evidence_reduced": log_evidence(reduced)}
    exact["log_bayes_factor_full_vs_reduced"] = (exact["log_evidence_full"]
                                                 - exact["log_evidence_reduced"])
    (here / "exact.json").write_text(json.dumps(exact, indent=1) + "\n")
    print(json.dumps(exact, indent=1))
