"""Known-answer tests for pemc_stan.estimators.weights (pure NumPy, fast)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import norm

from pemc_stan.estimators.weights import (
    chain_ess,
    ess,
    log_normalise,
    max_weight_share,
    resample_indices,
    weighted_mean,
)


def test_log_normalise_sums_to_one_and_keeps_zeros() -> None:
    lw = np.array([[0.0, -np.inf, 3.0, 1000.0], [-1e3, -1e3 + 1.0, -np.inf, -1e3]])
    out = log_normalise(lw, axis=-1)
    np.testing.assert_allclose(np.exp(out).sum(axis=-1), 1.0, rtol=1e-14)
    assert np.isneginf(out[0, 1]) and np.isneginf(out[1, 2])
    np.testing.assert_allclose(log_normalise(lw.T, axis=0), out.T)


def test_ess_one_nonzero_weight_is_one() -> None:
    assert ess(np.array([-np.inf, 5.0, -np.inf, -np.inf])) == pytest.approx(1.0, rel=1e-14)


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_ess_equal_weights_is_n(n: int) -> None:
    assert ess(np.full(n, -123.4)) == pytest.approx(n, rel=1e-12)


def test_ess_known_value_and_axis() -> None:
    w = np.array([1.0, 2.0, 3.0, 4.0])
    expected = w.sum() ** 2 / np.sum(w**2)
    assert ess(np.log(w)) == pytest.approx(expected, rel=1e-14)
    mat = np.log(np.stack([w, np.ones(4)]))
    np.testing.assert_allclose(ess(mat, axis=1), [expected, 4.0], rtol=1e-14)
    np.testing.assert_allclose(ess(mat.T, axis=0), [expected, 4.0], rtol=1e-14)


def test_weights_invariant_to_adding_constant() -> None:
    rng = np.random.default_rng(0)
    lw = rng.normal(size=50) * 3
    f = rng.normal(size=50)
    for c in (-800.0, 0.0, 650.0):
        assert ess(lw + c) == pytest.approx(ess(lw), rel=1e-12)
        np.testing.assert_allclose(log_normalise(lw + c), log_normalise(lw), atol=1e-12)
        a, b = weighted_mean(f, lw + c), weighted_mean(f, lw)
        assert a.mean == pytest.approx(b.mean, rel=1e-12)
        assert a.std_error == pytest.approx(b.std_error, rel=1e-12)


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.array([0.0, np.nan]), "NaN"),
        (np.array([-np.inf, -np.inf]), "all -inf"),
        (np.array([0.0, np.inf]), r"\+inf"),
    ],
)
def test_invalid_log_weights_raise(bad: np.ndarray, message: str) -> None:
    rng = np.random.default_rng(0)
    for fn in (log_normalise, ess, max_weight_share):
        with pytest.raises(ValueError, match=message):
            fn(bad)
    with pytest.raises(ValueError, match=message):
        resample_indices(bad, rng)
    with pytest.raises(ValueError, match=message):
        weighted_mean(np.zeros(2), bad)


def test_all_neg_inf_row_in_matrix_raises() -> None:
    lw = np.array([[0.0, 1.0], [-np.inf, -np.inf]])
    with pytest.raises(ValueError, match="1 row"):
        ess(lw)


def test_weighted_mean_equal_weights_known_answer() -> None:
    f = np.arange(10.0)
    res = weighted_mean(f, np.zeros(10))
    assert res.mean == pytest.approx(4.5)
    assert res.std_error == pytest.approx(np.std(f) / np.sqrt(10), rel=1e-12)


def test_weighted_mean_ignores_values_at_zero_weight() -> None:
    res = weighted_mean(np.array([1.0, np.nan, 3.0]), np.array([0.0, -np.inf, 0.0]))
    assert res.mean == pytest.approx(2.0)
    with pytest.raises(ValueError, match="positive weight"):
        weighted_mean(np.array([1.0, np.nan]), np.zeros(2))


def test_weighted_mean_vector_values() -> None:
    rng = np.random.default_rng(3)
    f = rng.normal(size=(100, 3))
    lw = rng.normal(size=100)
    res = weighted_mean(f, lw)
    assert res.mean.shape == (3,) and res.std_error.shape == (3,)
    for j in range(3):
        one = weighted_mean(f[:, j], lw)
        assert res.mean[j] == pytest.approx(float(one.mean))
        assert res.std_error[j] == pytest.approx(float(one.std_error))


def test_weighted_mean_mcse_is_calibrated_over_seeds() -> None:
    """IS of E[x] = 1 under N(1, 1) with proposal N(0, 1.5^2): z-scores ~ N(0, 1)."""
    n, reps = 2000, 300
    z = np.empty(reps)
    for seed in range(reps):
        rng = np.random.default_rng(1000 + seed)
        x = rng.normal(0.0, 1.5, size=n)
        lw = norm.logpdf(x, 1.0, 1.0) - norm.logpdf(x, 0.0, 1.5)
        res = weighted_mean(x, lw)
        z[seed] = (res.mean - 1.0) / res.std_error
    # sd(z) has sampling sd ~ 1/sqrt(2*300) ~ 0.04; a wrong SE (e.g. sd/sqrt(n)
    # ignoring the weights, ratio ~1.6 here) fails this window.
    assert 0.85 < np.std(z) < 1.15
    assert abs(np.mean(z)) < 4 / np.sqrt(reps)


@pytest.mark.parametrize("method", ["systematic", "multinomial"])
def test_resampling_frequencies_flat(method: str) -> None:
    rng = np.random.default_rng(42)
    p = np.array([0.1, 0.0, 0.2, 0.3, 0.4, 0.0])
    n = 200_000
    with np.errstate(divide="ignore"):
        lp = np.log(p)
    idx = resample_indices(lp, rng, method=method, n_samples=n)
    assert idx.shape == (n,)
    counts = np.bincount(idx, minlength=p.size) / n
    assert counts[1] == 0 and counts[5] == 0
    se = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(counts - p) <= 4 * se + 1e-12)


def test_systematic_default_count_and_low_variance() -> None:
    rng = np.random.default_rng(1)
    p = np.array([0.25, 0.5, 0.25])
    idx = resample_indices(np.log(p), rng, method="systematic", n_samples=8)
    # systematic resampling: each count within 1 of n p
    assert np.all(np.abs(np.bincount(idx, minlength=3) - 8 * p) < 1)
    assert resample_indices(np.log(p), rng).shape == (3,)


@pytest.mark.parametrize("method", ["systematic", "multinomial"])
def test_resampling_one_index_per_row(method: str) -> None:
    rng = np.random.default_rng(7)
    rows = 100_000
    p_even = np.array([0.7, 0.2, 0.1, 0.0])
    p_odd = np.array([0.0, 0.1, 0.3, 0.6])
    with np.errstate(divide="ignore"):
        lw = np.log(np.where(np.arange(rows)[:, None] % 2 == 0, p_even, p_odd))
    lw = lw + rng.normal(size=(rows, 1)) * 50  # per-row constants must not matter
    idx = resample_indices(lw, rng, method=method)
    assert idx.shape == (rows,)
    for sel, p in ((idx[::2], p_even), (idx[1::2], p_odd)):
        freq = np.bincount(sel, minlength=4) / sel.size
        se = np.sqrt(p * (1 - p) / sel.size)
        assert np.all(np.abs(freq - p) <= 4 * se + 1e-12)
        assert freq[p == 0].sum() == 0
    # axis handling: transposed input gives the same distribution shape
    assert resample_indices(lw.T, rng, method=method, axis=0).shape == (rows,)


def test_resampling_chain_shaped_input() -> None:
    rng = np.random.default_rng(0)
    lw = rng.normal(size=(4, 250, 8))
    assert resample_indices(lw, rng).shape == (4, 250)
    with pytest.raises(ValueError, match="n_samples"):
        resample_indices(lw, rng, n_samples=3)
    with pytest.raises(ValueError, match="unknown"):
        resample_indices(lw, rng, method="stratified")  # type: ignore[arg-type]


def test_max_weight_share() -> None:
    lw = np.array([[0.0, -10.0, -10.0], [0.0, 0.0, 0.0], [-np.inf, 5.0, -np.inf], [0, -3, -4]])
    assert max_weight_share(lw, threshold=0.99) == pytest.approx(0.5)
    assert max_weight_share(lw, threshold=0.9) == pytest.approx(0.75)
    assert max_weight_share(np.array([0.0, -100.0])) == 1.0
    with pytest.raises(ValueError, match="threshold"):
        max_weight_share(lw, threshold=0.0)


def test_chain_ess_iid_and_ar1() -> None:
    rng = np.random.default_rng(5)
    iid = rng.normal(size=(4, 2000))
    assert 0.85 * iid.size < chain_ess(iid) < 1.15 * iid.size
    rho = 0.9
    x = np.empty((4, 5000))
    x[:, 0] = rng.normal(size=4)
    eps = rng.normal(size=(4, 5000)) * np.sqrt(1 - rho**2)
    for t in range(1, 5000):
        x[:, t] = rho * x[:, t - 1] + eps[:, t]
    expected = x.size * (1 - rho) / (1 + rho)
    assert 0.7 * expected < chain_ess(x) < 1.3 * expected
    assert chain_ess(np.ones((2, 10))) == 20.0


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, st.integers(1, 40),
           elements=st.one_of(st.floats(-700, 700), st.just(-np.inf))).filter(
        lambda a: np.isfinite(a).any()),
    st.floats(-500, 500),
)
def test_ess_bounds_and_shift_invariance_property(lw: np.ndarray, shift: float) -> None:
    n_pos = int(np.isfinite(lw).sum())
    value = ess(lw)
    assert 1.0 - 1e-9 <= value <= n_pos * (1 + 1e-9)
    assert ess(lw + shift) == pytest.approx(value, rel=1e-9)
    idx = resample_indices(lw, np.random.default_rng(0), n_samples=50)
    assert np.all(np.isfinite(lw[idx]))  # zero-weight entries are never drawn


# --------------------------------------------------------------------------- mixture estimator


@pytest.mark.parametrize("k", [0.2, 0.5, 0.8])
def test_pareto_k_of_weights_with_a_known_tail(k: float) -> None:
    """Generalised-Pareto weights of shape k: k_hat within 0.1 at 20,000 draws; the
    smoothed weights keep their order and scale."""
    from pemc_stan.estimators.weights import pareto_smooth

    u = np.random.default_rng(int(10 * k)).random(20_000)
    w = ((1 - u) ** -k - 1) / k + 1  # GPD(k) shifted to start at 1
    smoothed, k_hat = pareto_smooth(np.log(w))
    assert k_hat == pytest.approx(k, abs=0.1)
    order = np.argsort(w)
    assert np.all(np.diff(smoothed[order]) >= -1e-12)
    assert np.median(smoothed) == pytest.approx(np.median(np.log(w)))


def test_constant_weights_have_no_tail() -> None:
    from pemc_stan.estimators.weights import pareto_smooth

    lw = np.full(50, -3.0)
    smoothed, k_hat = pareto_smooth(lw)
    assert k_hat == -np.inf and np.array_equal(smoothed, lw)
