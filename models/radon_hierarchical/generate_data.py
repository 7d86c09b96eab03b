"""Seeded synthetic data shaped like the radon data of Gelman & Hill (2006).

No internet, so no real data: this generator reproduces the shapes of the
Minnesota radon data the CT paper (Graham & Storkey 2017, section 7.3) uses --
N = 919 houses in J = 85 counties with very unequal county sizes (a few large
counties, many with one to five houses), a binary floor indicator (about 16% of
measurements on the ground floor) and a county-level log-uranium covariate --
and effect sizes close to the published fits (intercept about 1.5, floor effect
-0.7, uranium effect 0.7, county sd 0.15, residual sd 0.75).

``python generate_data.py [--seed S]`` rewrites ``radon_hierarchical.data.json``
(seed 919 by default). Prior scales (data, not in the paper's text): normal
priors with sd 100 on the means and half-Cauchy(0, 5) on the scales, as in the
PyMC3 radon tutorials of the time.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

SEED = 919
N, J = 919, 85
TRUTH = {"mu_alpha": 1.5, "sigma_alpha": 0.15, "beta": [-0.7, 0.7], "epsilon": 0.75}


def county_sizes(rng: np.random.Generator, n: int = N, j: int = J) -> np.ndarray:
    """Unequal county sizes: at least one house each, log-normal shares for the rest.

    Raises
    ------
    ValueError
        If there are fewer houses than counties.
    """
    if n < j:
        raise ValueError(f"n={n} houses for j={j} counties; expected n >= j")
    shares = rng.lognormal(mean=0.0, sigma=1.2, size=j)
    return 1 + rng.multinomial(n - j, shares / shares.sum())


def make_data(seed: int = SEED) -> dict[str, Any]:
    """Stan data of radon_hierarchical.stan drawn with ``numpy.random.default_rng(seed)``.

    Raises
    ------
    ValueError
        If ``seed`` is negative.
    """
    if seed < 0:
        raise ValueError(f"seed={seed} is negative; expected a non-negative integer")
    rng = np.random.default_rng(seed)
    sizes = county_sizes(rng)
    county = np.repeat(np.arange(1, J + 1), sizes)
    log_uranium = rng.normal(0.0, 0.35, size=J)
    floor = (rng.uniform(size=N) < 0.16).astype(float)
    x = np.column_stack([floor, log_uranium[county - 1]])
    alpha = rng.normal(TRUTH["mu_alpha"], TRUTH["sigma_alpha"], size=J)
    y = alpha[county - 1] + x @ np.asarray(TRUTH["beta"]) + rng.normal(0.0, TRUTH["epsilon"], N)
    return {"N": N, "J": J, "county": county.tolist(), "x": np.round(x, 6).tolist(),
            "y": np.round(y, 6).tolist(), "prior_scale_mu": 100.0, "prior_scale_sigma": 5.0}


def main(argv: list[str] | None = None) -> None:
    """Rewrite radon_hierarchical.data.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    data = make_data(args.seed)
    out = Path(__file__).resolve().parent / "radon_hierarchical.data.json"
    out.write_text(json.dumps(data) + "\n")
    sizes = np.bincount(data["county"], minlength=J + 1)[1:]
    print(f"wrote {out.name}: N={data['N']}, J={data['J']}, county sizes {sizes.min()}..{sizes.max()} "
          f"(median {int(np.median(sizes))}), ground floor {np.mean(np.asarray(data['x'])[:, 0]):.2f}")


if __name__ == "__main__":
    main()
