"""The tail of an estimate's terms (:mod:`pemc_stan.estimators.tails`) against known
shapes: a Student-t of ``nu`` degrees of freedom has ``k = 1/nu`` for ``|x|`` and ``2/nu``
for ``x^2``; light tails have ``k <= 0``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from fakes import FrameRun

from pemc_stan.estimators.tails import khat_bound, tail_fields, tail_khat
from pemc_stan.run.pipeline import transform_result
from pemc_stan.sampling.fit import ExtendedFit


def test_the_bound_follows_the_sample_size() -> None:
    assert khat_bound(100) == pytest.approx(0.5)
    assert khat_bound(1000) == pytest.approx(2 / 3)
    assert khat_bound(4000) == pytest.approx(0.7) and khat_bound(1e6) == 0.7
    assert khat_bound(5) == -np.inf


@pytest.mark.parametrize("nu", [1.5, 2.5, 4.0])
def test_a_student_t_s_shape_is_one_over_nu(nu: float) -> None:
    ks = [tail_khat(np.random.default_rng(s).standard_t(nu, 20_000)) for s in range(10)]
    assert np.mean(ks) == pytest.approx(1 / nu, abs=0.06)
    squares = [tail_khat(np.random.default_rng(s).standard_t(nu, 20_000) ** 2)
               for s in range(10)]
    assert np.mean(squares) == pytest.approx(2 / nu, abs=0.1)


def test_light_tails_stay_far_below_the_bound() -> None:
    for s in range(10):
        rng = np.random.default_rng(s)
        x = rng.normal(size=4000)
        assert tail_khat(x - x.mean()) < 0.25
        assert tail_khat((x - x.mean()) ** 2) < 0.4
        assert tail_khat(rng.exponential(size=4000) - 1.0) < 0.3


def test_degenerate_terms_have_no_tail() -> None:
    assert np.isnan(tail_khat(np.zeros(100)))
    assert np.isnan(tail_khat(np.ones(10)))
    assert np.isnan(tail_khat(np.tile([0.0, 1.0], 500)))  # an indicator: ties, no tail
    assert np.isnan(tail_khat(np.random.default_rng(0).normal(size=20)))  # too few
    assert tail_khat(np.array([*np.ones(50), np.inf])) == np.inf
    fields = tail_fields(np.random.default_rng(1).normal(size=1000))
    assert set(fields) == {"khat", "khat_max"} and fields["khat_max"] == pytest.approx(2 / 3)


PROGRAM = "parameters { real a; real b; } model { a ~ normal(0, 1); b ~ normal(0, 1); }"


def _fit(b: np.ndarray) -> ExtendedFit:
    rng = np.random.default_rng(2)
    frame = {"a": rng.normal(size=b.size), "b": b, "divergent__": np.zeros(b.size),
             "treedepth__": np.full(b.size, 3.0)}
    return ExtendedFit(FrameRun(frame, 4), transform_result(PROGRAM, method="ct"), seed=1)


def test_a_heavy_tailed_sd_is_named_in_the_verdict_and_a_light_one_is_not() -> None:
    heavy = _fit(np.random.default_rng(5).standard_t(2.5, 8000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verdict = heavy.check()
        table = heavy.summary()
    assert [n.name for n in verdict.notes] == ["tails"]
    note = str(verdict.notes[0])
    assert "the sd of b (tail k 0." in note and "the sd of a" not in note
    assert "note: tails: the sd of b" in str(verdict)
    assert table.attrs["notes"] == [note]
    assert table.loc["a", "khat"] < 0.4
    light = _fit(np.random.default_rng(5).normal(size=8000))
    assert light.check().notes == ()
