"""Where a method's NUTS run starts (pemc_stan.methods.warm_start)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pemc_stan.methods.base_density import BaseDensity, base_coordinates
from pemc_stan.methods.warm_start import (
    LOGIT_UNIFORM_VARIANCE,
    WarmStart,
    base_inits,
    base_metric,
    base_variances,
    from_fit,
)
from pemc_stan.stan.parser import parse

# every coordinate's prior scale differs, so a metric in the wrong order is visible
PROGRAM = """
data {
  matrix[2, 3] sm;
  array[2] vector[2] sa;
  real ss;
}
parameters {
  matrix[2, 3] m;
  array[2] vector[2] a;
  real<lower=0> s;
}
model {
  to_vector(m) ~ normal(0, to_vector(sm));
  for (i in 1:2) a[i] ~ normal(0, sa[i]);
  target += normal_lpdf(log(s) | 0, ss) - log(s);  // log(s) ~ normal(0, ss)
}
"""
DATA = {"sm": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "sa": [[0.1, 0.2], [0.3, 0.4]], "ss": 7.0}


def _coords():
    tree = parse(PROGRAM)
    return base_coordinates([(s.type, d.name) for s in tree.parameters.stmts
                             for d in s.declarators])


def _prior_base() -> BaseDensity:
    """The exact prior as a Gaussian in base coordinates (matrices column-major)."""
    sm = np.asarray(DATA["sm"]).reshape(-1, order="F")
    sa = np.asarray(DATA["sa"]).reshape(-1)
    sd = np.concatenate([sm, sa, [DATA["ss"]]])
    return BaseDensity(np.zeros(sd.size), np.diag(sd**2), "diag")


def test_base_variances_are_split_per_parameter_in_declaration_order() -> None:
    parts = base_variances(_prior_base(), _coords(), DATA)
    assert [p.size for p in parts] == [6, 4, 1]
    np.testing.assert_allclose(parts[0], np.array([1, 4, 2, 5, 3, 6.0]) ** 2)
    np.testing.assert_allclose(parts[2], [49.0])
    wrong = BaseDensity(np.zeros(3), np.eye(3), "diag")
    with pytest.raises(ValueError, match="base has 3 coordinates but the parameters have 11"):
        base_variances(wrong, _coords(), DATA)


def test_base_metric_repeats_each_parameter_per_copy_then_adds_temperatures() -> None:
    metric = base_metric(_prior_base(), _coords(), DATA, copies=3, temperatures=3)
    parts = base_variances(_prior_base(), _coords(), DATA)
    expected = np.concatenate([np.tile(parts[0], 3), np.tile(parts[1], 3), np.tile(parts[2], 3),
                               np.full(3, math.pi**2 / 3)])
    np.testing.assert_allclose(metric, expected)
    one = base_metric(_prior_base(), _coords(), DATA, temperatures=1)
    assert one.size == 12 and one[-1] == pytest.approx(LOGIT_UNIFORM_VARIANCE)


def test_base_inits_are_one_base_draw_per_chain_in_the_constrained_space() -> None:
    inits = base_inits(_prior_base(), _coords(), DATA, 4, np.random.default_rng(3))
    assert len(inits) == 4
    for init in inits:
        assert np.shape(init["m"]) == (2, 3) and np.shape(init["a"]) == (2, 2)
        assert init["s"] > 0
    assert inits[0]["m"] != inits[1]["m"]


def test_warm_start_fills_only_what_the_user_left_to_cmdstan() -> None:
    diag = np.array([1.0, 2.0])
    warm = WarmStart([{"x": 1.0}, {"x": 2.0}], diag, 0.1, "test")
    assert warm.kwargs({}) == {"inits": warm.inits, "inv_metric": diag, "step_size": 0.1}
    given = {"inits": 0.5, "inv_metric": np.ones(2), "step_size": 1.0, "adapt_delta": 0.9}
    assert warm.kwargs(given) == given
    # a diagonal metric goes with the default or a diagonal metric type only
    assert "inv_metric" in warm.kwargs({"metric": "diag_e"})
    assert "inv_metric" not in warm.kwargs({"metric": "dense_e"})
    assert "inv_metric" not in warm.kwargs({"metric": "unit_e"})
    dense = WarmStart(inv_metric=[np.eye(2), np.eye(2)])
    assert "inv_metric" in dense.kwargs({"metric": "dense_e"})
    assert "inv_metric" not in dense.kwargs({})
    assert WarmStart().empty and not warm.empty
    assert warm.kwargs({}) is not warm.kwargs({})  # a new dict, the given one untouched


@pytest.mark.compiled
def test_base_metric_is_in_stans_order_of_the_unconstrained_coordinates(compiled, tmp_path: Path
                                                                        ) -> None:
    """At the point where every base coordinate is 1, the gradient of the log density on
    Stan's unconstrained scale is -1 / (prior variance) coordinate by coordinate: the
    metric from the exact prior base must be minus its reciprocal, in Stan's order."""
    model = compiled(PROGRAM)
    params = {"m": np.ones((2, 3)).tolist(), "a": np.ones((2, 2)).tolist(), "s": math.e}
    out = model.log_prob(params=params, data=DATA, jacobian=True)
    grad = out.iloc[0, 1:].to_numpy(dtype=float)
    metric = base_metric(_prior_base(), _coords(), DATA)
    np.testing.assert_allclose(-1.0 / grad, metric, rtol=1e-8)


@pytest.mark.compiled
def test_from_fit_starts_each_chain_at_its_last_draw_with_its_adapted_metric(compiled) -> None:
    model = compiled(PROGRAM)
    fit = model.sample(data=DATA, chains=2, iter_warmup=150, iter_sampling=20, seed=5,
                       show_progress=False)
    warm = from_fit(fit, ["m", "a", "s"], "test")
    assert warm.inits is not None and len(warm.inits) == 2
    last = fit.draws(concat_chains=False)[-1]
    columns = list(fit.column_names)
    assert warm.inits[1]["m"][1][2] == last[1, columns.index("m[2,3]")]
    assert warm.inits[0]["a"][1][0] == last[0, columns.index("a[2,1]")]
    assert warm.inits[0]["s"] == last[0, columns.index("s")]
    assert warm.inv_metric is not None and len(warm.inv_metric) == 2
    np.testing.assert_array_equal(warm.inv_metric[1], fit.inv_metric[1])
    assert warm.step_size == pytest.approx(float(np.median(fit.step_size)))
    # the next run from there: CmdStan accepts every part of it
    again = model.sample(data=DATA, chains=2, iter_warmup=150, iter_sampling=20, seed=6,
                         show_progress=False, **warm.kwargs({}))
    assert again.draws().shape[:2] == (20, 2)
    header = Path(again.runset.csv_files[0]).read_text().split("lp__", 1)[0]
    assert ".json" in header.split("init = ", 1)[1].splitlines()[0]  # inits from a file
