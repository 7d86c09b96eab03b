"""Known-answer tests for pemc_stan.estimators.psis: ArviZ's ``psislw`` as the reference,
and the shape of an exact Pareto tail."""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pytest

from pemc_stan.estimators.psis import gpd_fit, psis


def _log_weights(kind: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 4000))
    lw = rng.normal(size=n) * rng.uniform(0.1, 3.0)
    if kind == "heavy":
        lw = np.log(np.abs(rng.standard_t(df=rng.uniform(0.5, 5.0), size=n)))
    elif kind == "zeros":  # draws of no weight
        lw[rng.integers(0, n, size=n // 10)] = -np.inf
    elif kind == "ties":
        lw = np.round(lw, 1)
    return lw


@pytest.mark.parametrize("kind", ["normal", "heavy", "zeros", "ties"])
@pytest.mark.parametrize("reff", [1.0, 0.4])
def test_equal_to_arviz(kind: str, reff: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(40):
            lw = _log_weights(kind, seed)
            ours, k = psis(lw, reff)
            ref, k_ref = az.psislw(lw.copy(), reff=reff, normalize=False)
            np.testing.assert_allclose(ours, np.asarray(ref), rtol=1e-12, atol=1e-12,
                                       equal_nan=True, err_msg=f"{kind} seed {seed}")
            assert k == pytest.approx(float(k_ref), rel=1e-12, nan_ok=True)


def test_shape_of_a_pareto_tail() -> None:
    # weights U^-k have a Pareto tail of shape k; one fit's sd is about 0.06 (424 tail
    # draws), the median of nine about 0.025
    for k_true in (0.3, 0.8):
        fits = [psis(-k_true * np.log(np.random.default_rng(s).uniform(size=20_000)))[1]
                for s in range(9)]
        assert float(np.median(fits)) == pytest.approx(k_true, abs=0.07)


def test_gpd_fit_of_exponential_excesses_is_near_zero() -> None:
    x = np.sort(np.random.default_rng(2).exponential(2.0, size=5000))
    k, sigma = gpd_fit(x)
    assert abs(k) < 0.05 and sigma == pytest.approx(2.0, rel=0.05)


def test_smoothing_keeps_the_body_and_caps_at_the_largest_weight() -> None:
    lw = np.random.default_rng(3).standard_t(2.0, size=1000)
    smoothed, k = psis(lw)
    tail = int(np.ceil(min(1000 / 5, 3 * np.sqrt(1000))))
    body = np.argsort(lw)[:-tail]
    np.testing.assert_allclose(smoothed[body], lw[body], rtol=1e-12, atol=1e-12)
    assert np.max(smoothed) <= np.max(lw) and np.isfinite(k)


def test_too_short_a_tail_is_not_fitted() -> None:
    lw = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    smoothed, k = psis(lw)
    assert k == np.inf
    np.testing.assert_array_equal(smoothed, lw)
