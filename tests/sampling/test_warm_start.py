"""Where a method's NUTS run starts (pemc_stan.sampling.warm_start)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.coordinates import base_coordinates
from pemc_stan.sampling.warm_start import (
    LOGIT_UNIFORM_VARIANCE,
    WarmStart,
    base_metric,
    base_variances,
)
from pemc_stan.stan.parser import parse

# every coordinate's prior scale differs, so a metric in the wrong order is visible
PROGRAM = """
data {
  matrix[2, 3] sm;
  array[2] vector[2] sa;
  real ss;
  matrix[4, 3] sl;
}
parameters {
  matrix[2, 3] m;
  array[2] vector[2] a;
  real<lower=0> s;
  cholesky_factor_cov[4, 3] L;
}
model {
  to_vector(m) ~ normal(0, to_vector(sm));
  for (i in 1:2) a[i] ~ normal(0, sa[i]);
  target += normal_lpdf(log(s) | 0, ss) - log(s);  // log(s) ~ normal(0, ss)
  // each free coordinate of L normal (the log of the diagonal, the rest as they are)
  for (i in 1:4) {
    for (j in 1:min(i, 3)) {
      if (i == j) target += normal_lpdf(log(L[i, i]) | 0, sl[i, i]) - log(L[i, i]);
      else target += normal_lpdf(L[i, j] | 0, sl[i, j]);
    }
  }
}
"""
SL = np.arange(1.0, 13.0).reshape(4, 3) / 4  # every coordinate its own scale
DATA = {"sm": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "sa": [[0.1, 0.2], [0.3, 0.4]], "ss": 7.0,
        "sl": SL.tolist()}


def _coords():
    tree = parse(PROGRAM)
    return base_coordinates([(s.type, d.name) for s in tree.parameters.stmts
                             for d in s.declarators])


def _prior_base() -> BaseDensity:
    """The exact prior as a Gaussian in base coordinates (matrices column-major)."""
    sm = np.asarray(DATA["sm"]).reshape(-1, order="F")
    sa = np.asarray(DATA["sa"]).reshape(-1)
    # a Cholesky factor column by column from the diagonal down
    sl = [SL[i, j] for j in range(3) for i in range(j, 4)]
    sd = np.concatenate([sm, sa, [DATA["ss"]], sl])
    return BaseDensity(np.zeros(sd.size), np.diag(sd**2), "diag")


def test_base_variances_are_split_per_parameter_in_declaration_order() -> None:
    parts = base_variances(_prior_base(), _coords(), DATA)
    assert [p.size for p in parts] == [6, 4, 1, 9]
    np.testing.assert_allclose(parts[0], np.array([1, 4, 2, 5, 3, 6.0]) ** 2)
    np.testing.assert_allclose(parts[2], [49.0])
    # Stan's order of a Cholesky factor: row by row, each row's diagonal last
    stan = [SL[m, n] for m in range(4) for n in range(min(m + 1, 3))]
    np.testing.assert_allclose(parts[3], np.square(stan))
    wrong = BaseDensity(np.zeros(3), np.eye(3), "diag")
    with pytest.raises(ValueError, match="base has 3 coordinates but the parameters have 20"):
        base_variances(wrong, _coords(), DATA)


def test_base_metric_repeats_each_parameter_per_copy_then_adds_temperatures() -> None:
    metric = base_metric(_prior_base(), _coords(), DATA, copies=3, temperatures=3)
    parts = base_variances(_prior_base(), _coords(), DATA)
    expected = np.concatenate([np.tile(p, 3) for p in parts] + [np.full(3, math.pi**2 / 3)])
    np.testing.assert_allclose(metric, expected)
    one = base_metric(_prior_base(), _coords(), DATA, temperatures=1)
    assert one.size == 21 and one[-1] == pytest.approx(LOGIT_UNIFORM_VARIANCE)


def test_warm_start_fills_only_what_the_user_left_to_cmdstan() -> None:
    diag = np.array([1.0, 2.0])
    warm = WarmStart(diag, "test")
    assert warm.kwargs({}) == {"inv_metric": diag}
    given = {"inits": 0.5, "inv_metric": np.ones(2), "step_size": 1.0, "adapt_delta": 0.9}
    assert warm.kwargs(given) == given
    # where the chains start is always CmdStan's (or the user's) choice
    assert "inits" not in warm.kwargs({})
    # a diagonal metric goes with the default or a diagonal metric type only
    assert "inv_metric" in warm.kwargs({"metric": "diag_e"})
    assert "inv_metric" not in warm.kwargs({"metric": "dense_e"})
    assert "inv_metric" not in warm.kwargs({"metric": "unit_e"})
    dense = WarmStart(inv_metric=[np.eye(2), np.eye(2)])
    assert "inv_metric" in dense.kwargs({"metric": "dense_e"})
    assert "inv_metric" not in dense.kwargs({})
    assert WarmStart().empty and not warm.empty
    # an explicit None is "not given"; the deprecated array-valued metric= is the user's
    assert warm.kwargs({"inv_metric": None})["inv_metric"] is diag
    assert "inv_metric" not in warm.kwargs({"metric": np.ones(2)})
    assert warm.kwargs({}) is not warm.kwargs({})  # a new dict, the given one untouched


@pytest.mark.compiled
def test_base_metric_is_in_stans_order_of_the_unconstrained_coordinates(compiled, tmp_path: Path
                                                                        ) -> None:
    """At the point where every base coordinate is 1, the gradient of the log density on
    Stan's unconstrained scale is -1 / (prior variance) coordinate by coordinate: the
    metric from the exact prior base must be minus its reciprocal, in Stan's order."""
    model = compiled(PROGRAM)
    chol = np.tril(np.ones((4, 3))) + (math.e - 1) * np.eye(4, 3)  # every coordinate 1
    params = {"m": np.ones((2, 3)).tolist(), "a": np.ones((2, 2)).tolist(), "s": math.e,
              "L": chol.tolist()}
    out = model.log_prob(params=params, data=DATA, jacobian=True)
    grad = out.iloc[0, 1:].to_numpy(dtype=float)
    metric = base_metric(_prior_base(), _coords(), DATA)
    np.testing.assert_allclose(-1.0 / grad, metric, rtol=1e-8)
