"""Write data.json for beta_binomial.stan (seeded) and its exact log evidence.

``p(k) = prod_j C(n_j, k_j) B(k_j + a, n_j - k_j + b) / B(a, b)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy.special import betaln, gammaln


def make_data(seed: int = 1) -> dict[str, object]:
    """Three groups of binomial counts with a Beta(2, 3) prior."""
    rng = np.random.default_rng(seed)
    n = [12, 30, 7]
    theta = rng.beta(2.0, 3.0, size=3)
    k = [int(rng.binomial(nj, tj)) for nj, tj in zip(n, theta)]
    return {"J": 3, "n": n, "k": k, "a": 2.0, "b": 3.0}


def log_evidence(data: dict[str, object]) -> float:
    """Exact ``log p(k)`` with all constants."""
    n = np.asarray(data["n"], dtype=float)
    k = np.asarray(data["k"], dtype=float)
    a, b = float(data["a"]), float(data["b"])  # type: ignore[arg-type]
    log_choose = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
    return float(np.sum(log_choose + betaln(k + a, n - k + b) - betaln(a, b)))


if __name__ == "__main__":
    here = Path(__file__).parent
    data = make_data()
    (here / "data.json").write_text(json.dumps(data, indent=1))
    exact = {"log_evidence": log_evidence(data)}
    (here / "exact.json").write_text(json.dumps(exact, indent=1) + "\n")
    print(json.dumps(exact, indent=1))
