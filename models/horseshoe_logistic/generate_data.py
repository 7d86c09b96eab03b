"""Seeded synthetic data for the regularised-horseshoe logistic regression.

In the spirit of section 4.3 of the pseudo-extended MCMC paper (micro-array
cancer classification: few observations, many predictors, a handful of them
relevant), at a size that samples in seconds:

- N + N_test = 100 observations split 80 / 20 (the paper holds out a random 20%),
  D = 50 standardised Gaussian predictors;
- three relevant predictors (columns 1, 2, 3) with coefficients 3, -2.5, 2;
- column 4 is a noisy copy of column 1 (correlation about 0.95) and column 5 of
  column 2: the posterior cannot tell which of each pair carries the signal, so
  (beta_1, beta_4) and (beta_2, beta_5) are bimodal -- one coefficient at zero and
  the other away from it, the multimodality the paper targets;
- the prior settings of Piironen & Vehtari (2017) for logistic regression:
  tau0 = p0 / (D - p0) * 2 / sqrt(N) with p0 = 3 (2 = pseudo-sigma at p = 1/2),
  half-Cauchy local and global scales, slab_scale = 2, slab_df = 4,
  scale_icept = 5.

``python generate_data.py [--seed S]`` rewrites ``horseshoe_logistic.data.json``
(seed 2019 by default).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

SEED = 2019
N_TOTAL, N_TEST, D, P0 = 100, 20, 50, 3
TRUE_BETA0 = 0.0
TRUE_COEF = {0: 3.0, 1: -2.5, 2: 2.0}  # 0-based columns
COPIES = {3: 0, 4: 1}                  # column -> the column it nearly duplicates
COPY_CORRELATION = 0.95


def make_data(seed: int = SEED) -> dict[str, Any]:
    """Stan data drawn with ``numpy.random.default_rng(seed)``.

    Returns
    -------
    dict
        The data block of ``horseshoe_logistic.stan`` plus nothing else.

    Raises
    ------
    ValueError
        If ``seed`` is negative.
    """
    if seed < 0:
        raise ValueError(f"seed={seed} is negative; expected a non-negative integer")
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N_TOTAL, D))
    for col, src in COPIES.items():
        x[:, col] = (COPY_CORRELATION * x[:, src]
                     + math.sqrt(1 - COPY_CORRELATION**2) * rng.normal(size=N_TOTAL))
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    beta = np.zeros(D)
    for col, value in TRUE_COEF.items():
        beta[col] = value
    eta = TRUE_BETA0 + x @ beta
    y = (rng.uniform(size=N_TOTAL) < 1 / (1 + np.exp(-eta))).astype(int)
    test = np.zeros(N_TOTAL, dtype=bool)
    test[rng.choice(N_TOTAL, size=N_TEST, replace=False)] = True
    n = N_TOTAL - N_TEST
    x = np.round(x, 6)
    return {
        "N": n, "D": D, "X": x[~test].tolist(), "y": y[~test].tolist(),
        "N_test": N_TEST, "X_test": x[test].tolist(), "y_test": y[test].tolist(),
        "scale_icept": 5.0,
        "scale_global": P0 / (D - P0) * 2.0 / math.sqrt(n),
        "nu_global": 1.0, "nu_local": 1.0,
        "slab_scale": 2.0, "slab_df": 4.0,
    }


def main(argv: list[str] | None = None) -> None:
    """Rewrite horseshoe_logistic.data.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    data = make_data(args.seed)
    out = Path(__file__).resolve().parent / "horseshoe_logistic.data.json"
    out.write_text(json.dumps(data) + "\n")
    print(f"wrote {out.name}: N={data['N']}, N_test={data['N_test']}, D={data['D']}, "
          f"mean(y)={np.mean(data['y']):.2f}, scale_global={data['scale_global']:.4f}")


if __name__ == "__main__":
    main()
