"""The package's log-sum-exp against SciPy's and against exact values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp as scipy_logsumexp

from pemc_stan.numeric import logsumexp


def test_exact_values_without_overflow() -> None:
    assert logsumexp([0.0, 0.0]) == pytest.approx(math.log(2.0), rel=1e-15)
    assert logsumexp([1000.0, 1000.0]) == pytest.approx(1000.0 + math.log(2.0), rel=1e-15)
    assert logsumexp([-1000.0, -1000.0]) == pytest.approx(-1000.0 + math.log(2.0), rel=1e-15)


@pytest.mark.parametrize("values, expected", [
    ([-np.inf, -np.inf], -np.inf), ([], -np.inf), ([1.0, np.inf], np.inf),
    ([-np.inf, 2.0], 2.0)])
def test_infinite_and_empty(values: list[float], expected: float) -> None:
    assert logsumexp(np.array(values, dtype=float)) == expected


def test_nan_propagates() -> None:
    assert np.isnan(logsumexp([np.nan, 1.0]))


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matches_scipy(axis: int | tuple[int, int] | None, keepdims: bool) -> None:
    a = np.random.default_rng(3).normal(scale=200.0, size=(6, 9))
    a[2, :] = -np.inf
    got = logsumexp(a, axis=axis, keepdims=keepdims)
    want = scipy_logsumexp(a, axis=axis, keepdims=keepdims)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-13)
