"""The full log density ``log gamma`` (every constant kept) against scipy, absolutely.

``tests/stan/test_logdensity_numeric.py`` compares the rewrite with Stan's ``log_prob``,
which drops constants, so it checks most programs only up to an additive constant: a
wrong truncation constant with constant bounds would pass there.  Here the density
program that the evidence estimators use (:class:`pemc_stan.modes.density.DensityEvaluator`)
is evaluated at fixed points of one program with truncated (constant, data and parameter
bounds; lower, upper and both; continuous and discrete) and bounded priors, and compared
term by term with scipy's densities and CDFs.  Compiled (one program).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from pemc_stan.errors import CmdStanRunError
from pemc_stan.modes.density import DensityEvaluator

pytestmark = pytest.mark.compiled

PROGRAM = """
data {
  real L;
  int<lower=1> cnt;
  real y;
}
parameters {
  real<lower=0, upper=10> s;
  real<lower=L> t;
  real<lower=0, upper=5> g;
  real<lower=0> sigma;
  real<lower=-1, upper=3> u;
  real<lower=0> lambda;
  real mu;
}
model {
  s ~ normal(2, 3) T[0, 10];
  t ~ normal(0, 1) T[L, ];
  g ~ gamma(2, 1.5) T[, 5];
  sigma ~ normal(0, 3);
  u ~ uniform(-1, 3);
  lambda ~ exponential(0.5);
  cnt ~ poisson(lambda) T[1, ];
  mu ~ student_t(4, 1, 2);
  y ~ normal(mu, sigma) T[mu - 2 * sigma, ];
}
"""
DATA = {"L": 0.5, "cnt": 3, "y": 1.3}


def _scipy_log_density(p: dict[str, float]) -> float:
    """The same density with every constant, truncations normalised by their CDFs."""
    norm = stats.norm
    terms = [
        norm.logpdf(p["s"], 2, 3) - np.log(norm.cdf(10, 2, 3) - norm.cdf(0, 2, 3)),
        norm.logpdf(p["t"]) - norm.logsf(DATA["L"]),
        stats.gamma.logpdf(p["g"], 2, scale=1 / 1.5) - stats.gamma.logcdf(5, 2, scale=1 / 1.5),
        norm.logpdf(p["sigma"], 0, 3),  # as written: no T[0, ], so no log 2
        -np.log(4.0),
        stats.expon.logpdf(p["lambda"], scale=2.0),
        stats.poisson.logpmf(DATA["cnt"], p["lambda"]) - stats.poisson.logsf(0, p["lambda"]),
        stats.t.logpdf(p["mu"], 4, 1, 2),
        norm.logpdf(DATA["y"], p["mu"], p["sigma"])
        - norm.logsf(p["mu"] - 2 * p["sigma"], p["mu"], p["sigma"]),
    ]
    return float(np.sum(terms))


POINTS = [
    {"s": 1.0, "t": 0.7, "g": 0.8, "sigma": 0.5, "u": 0.0, "lambda": 2.0, "mu": 1.0},
    {"s": 9.5, "t": 3.0, "g": 4.9, "sigma": 4.0, "u": 2.9, "lambda": 0.3, "mu": -2.0},
    {"s": 0.01, "t": 0.5001, "g": 0.01, "sigma": 0.05, "u": -0.99, "lambda": 9.0, "mu": 1.2},
]


def test_full_log_density_of_truncated_and_bounded_priors_matches_scipy(
        cmdstan_installation: Any) -> None:
    evaluator = DensityEvaluator(PROGRAM, DATA, name="truncations")
    draws = {name: np.array([p[name] for p in POINTS]) for name in POINTS[0]}
    got = evaluator.log_density(draws)
    want = np.array([_scipy_log_density(p) for p in POINTS])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_a_failed_evaluation_names_cmdstans_reason(cmdstan_installation: Any) -> None:
    """The executable runs without cmdstanpy: its failure still says what CmdStan said."""
    evaluator = DensityEvaluator(PROGRAM, {k: v for k, v in DATA.items() if k != "y"},
                                 name="truncations")
    draws = {name: np.array([p[name] for p in POINTS]) for name in POINTS[0]}
    with pytest.raises(CmdStanRunError, match="variable does not exist.*y|y.*not exist"):
        evaluator.log_density(draws)


def test_a_batch_evaluated_in_parts_side_by_side_is_the_same(
        cmdstan_installation: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from pemc_stan.backend.standalone import PART_DRAWS_MIN, generated_column

    evaluator = DensityEvaluator(PROGRAM, DATA, name="truncations")
    rng = np.random.default_rng(1)
    n = 2 * PART_DRAWS_MIN + 7
    draws = {name: np.full(n, value) * rng.uniform(0.5, 1.0, n)
             for name, value in POINTS[0].items()}
    draws["t"] = DATA["L"] + rng.uniform(0.01, 2.0, n)
    monkeypatch.chdir(tmp_path)  # folders given relative to where the user is
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = generated_column(evaluator.model, DATA, draws, "pemc_log_gamma", Path("one"),
                           parts=1)
    two = generated_column(evaluator.model, DATA, draws, "pemc_log_gamma", Path("two"),
                           parts=3)
    assert one.shape == (n,) and np.all(np.isfinite(one))
    assert len(list((tmp_path / "two").glob("part_*"))) == 2  # at most n // PART_DRAWS_MIN
    np.testing.assert_array_equal(one, two)
