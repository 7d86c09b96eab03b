"""Tests for pemc_stan.methods.continuous_tempering.tempering (CT eqs 14-22) and the
shared pemc_stan.methods.tempering (eq 17's weights, the beta bias), against mpmath and
exact CT draws."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
from fakes import LOG_Z, M, S, ct_draws, ct_log_c
from scipy.integrate import quad
from scipy.stats import norm

from pemc_stan.methods.continuous_tempering.tempering import (
    Strata,
    as_chains,
    beta_of_u,
    ct_thermodynamic_integration,
    log_dbeta_du,
    log_z_estimate,
    pooled_log_ratio,
    stratified_log_w1,
    weighted_expectations,
)
from pemc_stan.methods.tempering import (
    BetaBias,
    delta,
    length_bias,
    log_conditional_beta,
    log_w0,
    log_w1,
)

mp.mp.dps = 50

DELTAS = [1e3, -1e3, 1e-12, -1e-12, 0.0, 1e-300, 3e-7, -0.3, 0.999999, 1.0, -1.0, 1.000001,
          2.5, -7.0, 36.0, -36.0, 709.0, -745.0, 1e5, -1e5]


def _mp_log_w1(d: float) -> float:
    x = mp.mpf(d)
    return 0.0 if x == 0 else float(mp.log(x / mp.expm1(x)))


def _mp_log_w0(d: float) -> float:
    x = mp.mpf(d)
    return 0.0 if x == 0 else float(mp.log(x / -mp.expm1(-x)))


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 4e-15 * max(abs(b), 1e-300) or abs(a - b) < 1e-300


@pytest.mark.parametrize("d", DELTAS)
def test_log_w_against_mpmath(d: float) -> None:
    assert _close(float(log_w1(d)), _mp_log_w1(d))
    assert _close(float(log_w0(d)), _mp_log_w0(d))


def test_log_w_random_against_mpmath() -> None:
    rng = np.random.default_rng(0)
    d = rng.choice([-1, 1], size=400) * np.exp(rng.uniform(-30, 9, size=400))
    lw1, lw0 = log_w1(d), log_w0(d)
    for i in range(d.size):
        assert _close(float(lw1[i]), _mp_log_w1(float(d[i])))
        assert _close(float(lw0[i]), _mp_log_w0(float(d[i])))


def test_log_w_identities_and_shapes() -> None:
    d = np.linspace(-50, 50, 1001)
    np.testing.assert_allclose(log_w0(d), log_w1(-d), rtol=1e-15, atol=0)  # w0(D) = w1(-D)
    np.testing.assert_allclose(log_w0(d) - log_w1(d), d, rtol=1e-13, atol=1e-13)  # w0 = e^D w1
    assert log_w1(np.zeros((2, 3))).shape == (2, 3)
    assert np.ndim(log_w0(0.5)) == 0
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="Delta"):
            log_w1(np.array([0.0, bad]))


@pytest.mark.parametrize("d", [-40.0, -3.0, -1e-9, 0.0, 1e-9, 0.7, 5.0, 60.0])
def test_conditional_beta_is_normalised_and_matches_weights(d: float) -> None:
    """eq 17 integrates to one over [0, 1]; w0 and w1 are its values at beta = 0, 1."""
    total, _ = quad(lambda b: float(np.exp(log_conditional_beta(b, d))), 0.0, 1.0,
                    epsabs=1e-13, epsrel=1e-12)
    assert total == pytest.approx(1.0, rel=1e-9)
    at0, at1 = float(log_conditional_beta(0.0, d)), float(log_conditional_beta(1.0, d))
    assert at0 == pytest.approx(float(log_w0(d)), rel=1e-14, abs=1e-15)
    assert at1 == pytest.approx(float(log_w1(d)), rel=1e-14, abs=1e-15)
    with pytest.raises(ValueError, match="beta"):
        log_conditional_beta(1.5, d)


@pytest.mark.parametrize("u", [-1e3, -40.0, -1.0, 0.0, 1e-8, 2.0, 40.0, 1e3])
def test_beta_and_log_jacobian_against_mpmath(u: float) -> None:
    x = mp.mpf(u)
    b = 1 / (1 + mp.exp(-x))
    assert float(beta_of_u(u)) == pytest.approx(float(b), rel=1e-15, abs=1e-300)
    expected = float(-mp.log1p(mp.exp(-x)) - mp.log1p(mp.exp(x)))  # log(b (1 - b))
    assert float(log_dbeta_du(u)) == pytest.approx(expected, rel=1e-14)


def test_delta_sign_convention() -> None:
    """Delta = phi + log zeta - psi with phi = -log gamma, psi = -log base (eq 17)."""
    assert float(delta(log_gamma=-1.0, log_zeta=0.5, log_base=-2.0)) == pytest.approx(-0.5)
    # target far below zeta*base -> Delta > 0 -> conditional favours beta = 0 (w0 > w1)
    d = delta(log_gamma=-30.0, log_zeta=0.0, log_base=-1.0)
    assert d > 0 and log_w0(d) > log_w1(d)
    with pytest.raises(ValueError, match="inf"):
        delta(-np.inf, 0.0, -1.0)


# ----------------------------------------------------------------- exact CT draws

# target gamma(x) = Z N(x; M, S^2), base N(0, 1): fakes.ct_draws samples its CT joint
_ct_draws = ct_draws


def _ct_delta(x: np.ndarray, log_zeta: float) -> np.ndarray:
    log_gamma = LOG_Z + norm.logpdf(x, M, S)
    return delta(log_gamma, log_zeta, norm.logpdf(x))


@pytest.mark.parametrize("offset", [-0.8, 0.0, 1.5])
def test_log_z_estimate_exact_draws(offset: float) -> None:
    log_zeta = LOG_Z + offset
    rng = np.random.default_rng(11)
    x, _ = _ct_draws(rng, 4000, log_zeta)
    est = log_z_estimate(_ct_delta(x, log_zeta).reshape(4, 1000), log_zeta)
    assert est.method == "ct_eq20"
    assert abs(est.log_z - LOG_Z) < 4 * est.std_error
    assert 0.0 < est.std_error < 0.1
    assert len(est.diagnostics["per_chain_log_z"]) == 4


def test_log_z_estimate_wrong_sign_would_fail() -> None:
    """Guard: flipping the sign of Delta gives a clearly wrong answer."""
    log_zeta = LOG_Z - 0.8
    x, _ = _ct_draws(np.random.default_rng(2), 4000, log_zeta)
    d = _ct_delta(x, log_zeta)
    good, bad = log_z_estimate(d, log_zeta), log_z_estimate(-d, log_zeta)
    assert abs(good.log_z - LOG_Z) < 4 * good.std_error
    assert abs(bad.log_z - LOG_Z) > 20 * bad.std_error


def test_log_z_standard_error_matches_spread_over_seeds() -> None:
    log_zeta = LOG_Z - 0.8
    ests = []
    for seed in range(20):
        x, _ = _ct_draws(np.random.default_rng(100 + seed), 2000, log_zeta)
        ests.append(log_z_estimate(_ct_delta(x, log_zeta), log_zeta,
                                   chain_ids=np.repeat(np.arange(4), 500)))
    values = np.array([e.log_z for e in ests])
    ses = np.array([e.std_error for e in ests])
    ratio = np.std(values, ddof=1) / np.mean(ses)
    assert 0.5 < ratio < 2.0
    assert np.sum(np.abs(values - LOG_Z) < 4 * ses) >= 19


def test_log_z_standard_error_sees_autocorrelation_and_chain_disagreement() -> None:
    log_zeta = LOG_Z
    x, _ = _ct_draws(np.random.default_rng(5), 4000, log_zeta)
    d = _ct_delta(x, log_zeta)
    iid = log_z_estimate(d.reshape(4, 1000), log_zeta)
    # sorting draws within each chain creates strong autocorrelation: SE must grow
    sticky = log_z_estimate(np.sort(d.reshape(4, 1000), axis=1), log_zeta)
    assert sticky.std_error > 3 * iid.std_error
    # chains that each saw a different part of the space disagree: SE must grow
    split = log_z_estimate(np.sort(d).reshape(4, 1000), log_zeta)
    assert split.std_error > 3 * iid.std_error
    assert split.log_z == pytest.approx(iid.log_z, rel=1e-12)


def test_weighted_expectations_target_and_base() -> None:
    log_zeta = LOG_Z - 0.3
    x, _ = _ct_draws(np.random.default_rng(21), 8000, log_zeta)
    d = _ct_delta(x, log_zeta)
    f = np.stack([x, x**2], axis=1)
    tgt = weighted_expectations(f, d, which="target")
    base = weighted_expectations(f, d, which="base")
    np.testing.assert_array_less(np.abs(tgt.mean - [M, M**2 + S**2]), 4 * tgt.std_error)
    np.testing.assert_array_less(np.abs(base.mean - [0.0, 1.0]), 4 * base.std_error)
    scalar = weighted_expectations(x.reshape(4, 2000), d.reshape(4, 2000))
    assert np.ndim(scalar.mean) == 0 and abs(scalar.mean - M) < 4 * scalar.std_error
    with pytest.raises(ValueError, match="which"):
        weighted_expectations(x, d, which="middle")  # type: ignore[arg-type]


def test_weighted_expectation_se_calibrated() -> None:
    log_zeta = LOG_Z - 0.3
    z = []
    for seed in range(40):
        x, _ = _ct_draws(np.random.default_rng(300 + seed), 1000, log_zeta)
        r = weighted_expectations(x, _ct_delta(x, log_zeta), which="target")
        z.append((r.mean - M) / r.std_error)
    assert 0.65 < np.std(z) < 1.4


def test_ct_thermodynamic_integration_exact_draws() -> None:
    """TI over CT draws reweighted to a beta grid (eq 17) recovers log Z, calibrated SE."""
    log_zeta = LOG_Z - 0.8
    ests = []
    for seed in range(20):
        x, _ = _ct_draws(np.random.default_rng(700 + seed), 2000, log_zeta)
        ests.append(ct_thermodynamic_integration(_ct_delta(x, log_zeta), log_zeta, n_grid=51,
                                                 chain_ids=np.repeat(np.arange(4), 500)))
    values = np.array([e.log_z for e in ests])
    ses = np.array([e.std_error for e in ests])
    assert np.sum(np.abs(values - LOG_Z) < 4 * ses) >= 19
    assert 0.5 < np.sqrt(np.mean((values - LOG_Z) ** 2)) / np.mean(ses) < 2.0
    assert ests[0].diagnostics["discretisation_gap"] < 0.05 * ests[0].std_error
    with pytest.raises(ValueError, match="n_grid"):
        ct_thermodynamic_integration(np.zeros(10), 0.0, n_grid=2)


def test_as_chains() -> None:
    v = np.arange(6.0)
    np.testing.assert_array_equal(as_chains(v, [1, 0, 1, 0, 1, 0]), [[0, 2, 4], [1, 3, 5]])
    assert as_chains(v).shape == (1, 6)
    with pytest.raises(ValueError, match="unequal"):
        as_chains(v, [0, 0, 0, 0, 1, 1])
    with pytest.raises(ValueError, match="chain_ids"):
        as_chains(v, [0, 1])


# ------------------------------------------- log Z and eq 21/22 at extreme Delta


def _mp_log_sum(values: list[mp.mpf]) -> mp.mpf:
    return mp.log(mp.fsum(values))


@pytest.mark.parametrize("scale", [1e-9, 1.0, 40.0, 800.0])
@pytest.mark.parametrize("shift", [-900.0, 0.0, 900.0])
def test_log_z_estimate_extreme_delta_against_mpmath(scale: float, shift: float) -> None:
    """Eq 20 in log space for Delta ~ 0, Delta >> 1 and Delta << -1 (w underflows in double)."""
    rng = np.random.default_rng(int(scale * 7 + shift) % 2**32)
    d = shift + scale * rng.standard_normal((2, 50))
    log_zeta = -3.25
    est = log_z_estimate(d, log_zeta)
    w1 = [mp.mpf(v) / mp.expm1(mp.mpf(v)) if v != 0 else mp.mpf(1) for v in d.ravel()]
    w0 = [mp.mpf(v) / -mp.expm1(-mp.mpf(v)) if v != 0 else mp.mpf(1) for v in d.ravel()]
    ref = float(mp.mpf(log_zeta) + _mp_log_sum(w1) - _mp_log_sum(w0))
    assert np.isfinite(est.log_z)
    assert abs(est.log_z - ref) <= 1e-12 * max(1.0, abs(ref))
    assert np.isfinite(est.std_error)


@pytest.mark.parametrize("shift", [-700.0, -30.0, 0.0, 30.0, 700.0])
def test_weighted_expectations_extreme_delta_against_mpmath(shift: float) -> None:
    rng = np.random.default_rng(5)
    d = shift + 3.0 * rng.standard_normal(60)
    f = rng.standard_normal(60)
    for which, sign in (("target", 1), ("base", -1)):
        est = weighted_expectations(f, d, which)
        w = [mp.mpf(v) / (mp.expm1(mp.mpf(v)) if sign == 1 else -mp.expm1(-mp.mpf(v)))
             for v in d]
        ref = float(mp.fsum([wi * mp.mpf(fi) for wi, fi in zip(w, f, strict=True)]) / mp.fsum(w))
        assert abs(float(est.mean) - ref) <= 1e-12 * max(1.0, abs(ref))


# ----------------------------------------------------------------- post-stratification
# Bimodal target gamma = Z2 [0.3 N(-3, 0.5^2) + 0.7 N(3, 0.5^2)], base N(1.2, 3^2): exact
# i.i.d. draws of x from the CT joint's x-marginal q(x) ∝ b(x) (1 - e^-Delta) / Delta, by
# inverse CDF on a fine grid.  Regions: x < 0 and x > 0 (exact base masses).

W2, MU2, SD2, LOG_Z2, BM, BS = 0.3, 3.0, 0.5, 0.7, 1.2, 3.0


def _bimodal_log_gamma(x: np.ndarray) -> np.ndarray:
    return LOG_Z2 + np.logaddexp(np.log(W2) + norm.logpdf(x, -MU2, SD2),
                                 np.log(1 - W2) + norm.logpdf(x, MU2, SD2))


def _bimodal_draws(rng: np.random.Generator, n: int, log_zeta: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Exact x-marginal draws of the CT joint, and their Delta."""
    grid = np.linspace(-15.0, 15.0, 600_001)
    d = delta(_bimodal_log_gamma(grid), log_zeta, norm.logpdf(grid, BM, BS))
    log_q = norm.logpdf(grid, BM, BS) - log_w0(d)  # b(x) int_0^1 e^{-beta Delta} d beta
    q = np.exp(log_q - log_q.max())
    cdf = np.concatenate([[0.0], np.cumsum((q[1:] + q[:-1]) / 2)])
    x = np.interp(rng.uniform(size=n) * cdf[-1], cdf, grid)
    return x, delta(_bimodal_log_gamma(x), log_zeta, norm.logpdf(x, BM, BS))


def _sign_strata(x: np.ndarray) -> Strata:
    b_left = norm.cdf(0.0, BM, BS)
    return Strata((x > 0).astype(np.intp), np.log([b_left, 1.0 - b_left]), 0)


def test_one_region_is_eq_20_and_21_exactly() -> None:
    x, d = _bimodal_draws(np.random.default_rng(1), 4000, 0.3)
    x, d = x.reshape(4, 1000), d.reshape(4, 1000)
    one = Strata(np.zeros(d.shape, dtype=np.intp), np.zeros(1), 0)
    a, b = log_z_estimate(d, 0.3), log_z_estimate(d, 0.3, strata=one)
    assert b.log_z == pytest.approx(a.log_z, abs=1e-12)
    assert b.std_error == pytest.approx(a.std_error, rel=1e-9)
    e, f = weighted_expectations(x, d), weighted_expectations(x, d, strata=one)
    assert float(f.mean) == pytest.approx(float(e.mean), abs=1e-12)
    assert float(f.std_error) == pytest.approx(float(e.std_error), rel=1e-9)
    lw = stratified_log_w1(d, one)
    np.testing.assert_allclose(lw - lw.max(), log_w1(d) - log_w1(d).max(), atol=1e-12)


def test_stratified_estimates_do_not_depend_on_how_long_chains_stay_in_each_mode() -> None:
    """Keeping only 30% of the draws of the left mode (chains that rarely went there) biases
    eq 21's mode mass by many standard errors; the stratified estimates stay right."""
    rng = np.random.default_rng(7)
    x, d = _bimodal_draws(rng, 40_000, 0.5)
    keep = (x > 0) | (rng.uniform(size=x.size) < 0.3)
    x, d = x[keep][:16_000].reshape(4, 4000), d[keep][:16_000].reshape(4, 4000)
    st = _sign_strata(x)
    neg = (x < 0).astype(float)
    plain_p, strat_p = weighted_expectations(neg, d), weighted_expectations(neg, d, strata=st)
    assert abs(float(plain_p.mean) - W2) > 10 * float(plain_p.std_error)
    assert abs(float(strat_p.mean) - W2) < 4 * float(strat_p.std_error)
    strat_z = log_z_estimate(d, 0.5, strata=st)
    assert abs(strat_z.log_z - LOG_Z2) < 4 * strat_z.std_error
    assert strat_z.diagnostics["regions"] == 2
    np.testing.assert_allclose(np.exp(strat_z.diagnostics["region_log_z"]),
                               np.exp(LOG_Z2) * np.array([W2, 1 - W2]), rtol=0.1)
    mean = weighted_expectations(x, d, strata=st)
    exact_mean = (1 - 2 * W2) * MU2
    assert abs(float(mean.mean) - exact_mean) < 4 * float(mean.std_error)
    # resampling weights: the stratified weights reproduce the stratified mean
    w = np.exp(stratified_log_w1(d, st))
    assert np.sum(w * x) / np.sum(w) == pytest.approx(float(mean.mean), rel=1e-12)


def test_stratified_standard_errors_are_calibrated() -> None:
    zs, zz = [], []
    for seed in range(60):
        x, d = _bimodal_draws(np.random.default_rng(500 + seed), 2000, 0.2)
        x, d = x.reshape(4, 500), d.reshape(4, 500)
        st = _sign_strata(x)
        e = weighted_expectations(x, d, strata=st)
        zs.append((float(e.mean) - (1 - 2 * W2) * MU2) / float(e.std_error))
        z = log_z_estimate(d, 0.2, strata=st)
        zz.append((z.log_z - LOG_Z2) / z.std_error)
    for z in (np.array(zs), np.array(zz)):
        assert abs(np.mean(z)) < 0.45
        assert 0.7 < np.std(z) < 1.35


def test_estimated_region_masses_widen_the_standard_error() -> None:
    x, d = _bimodal_draws(np.random.default_rng(3), 4000, 0.2)
    x, d = x.reshape(4, 1000), d.reshape(4, 1000)
    exact = _sign_strata(x)
    rough = exact._replace(n_mass=100)  # masses from 100 base draws: a large binomial error
    a, b = log_z_estimate(d, 0.2, strata=exact), log_z_estimate(d, 0.2, strata=rough)
    assert b.std_error > a.std_error
    assert b.diagnostics["mass_variance"] > 0 == a.diagnostics["mass_variance"]
    ea, eb = weighted_expectations(x, d, strata=exact), weighted_expectations(x, d, strata=rough)
    assert float(eb.std_error) > float(ea.std_error)


def test_strata_are_checked() -> None:
    x, d = _bimodal_draws(np.random.default_rng(4), 400, 0.0)
    with pytest.raises(ValueError, match="shape"):
        log_z_estimate(d.reshape(4, 100), 0.0, strata=Strata(np.zeros(3, np.intp), np.zeros(1)))
    empty = Strata(np.zeros((4, 100), np.intp), np.log([0.5, 0.5]))
    with pytest.raises(ValueError, match="no draw"):
        log_z_estimate(d.reshape(4, 100), 0.0, strata=empty)


def test_stratified_base_moments_need_only_the_sampling_within_cells() -> None:
    """Eq 22 with each cell given its known base mass: right under a distorted occupation of
    the cells (where the plain eq 22 is many SE off), and calibrated on exact draws."""
    rng = np.random.default_rng(12)
    x, d = _bimodal_draws(rng, 40_000, 0.5)
    keep = (x > 0) | (rng.uniform(size=x.size) < 0.3)
    x, d = x[keep][:16_000].reshape(4, 4000), d[keep][:16_000].reshape(4, 4000)
    st = _sign_strata(x)
    plain = weighted_expectations(x, d, which="base")
    strat = weighted_expectations(x, d, which="base", strata=st)
    assert abs(float(plain.mean) - BM) > 10 * float(plain.std_error)
    assert abs(float(strat.mean) - BM) < 4 * float(strat.std_error)
    zs = []
    for seed in range(40):
        x, d = _bimodal_draws(np.random.default_rng(900 + seed), 2000, 0.2)
        x, d = x.reshape(4, 500), d.reshape(4, 500)
        e = weighted_expectations(x, d, which="base", strata=_sign_strata(x))
        zs.append((float(e.mean) - BM) / float(e.std_error))
    assert abs(np.mean(zs)) < 0.45 and 0.7 < np.std(zs) < 1.35


# ----------------------------------------------------------------- a bias g(beta)

def _biased_ct_draws(rng: np.random.Generator, n: int, log_zeta: float, bias: BetaBias
                     ) -> np.ndarray:
    """Exact x draws of the CT joint with -g(beta) added (Gaussian case above)."""
    grid = np.linspace(0.0, 1.0, 200_001)
    logp = grid * (LOG_Z - log_zeta) + ct_log_c(grid) - bias(grid)
    p = np.exp(logp - logp.max())
    cdf = np.concatenate([[0.0], np.cumsum((p[1:] + p[:-1]) / 2)])
    beta = np.interp(rng.uniform(size=n) * cdf[-1], cdf, grid)
    lam = beta / S**2 + (1 - beta)
    return beta * M / S**2 / lam + rng.normal(size=n) / np.sqrt(lam)


def _exact_log_marginal(grid: np.ndarray, log_zeta: float, bias: BetaBias) -> np.ndarray:
    return grid * (LOG_Z - log_zeta) + ct_log_c(grid) - bias(grid)


def test_bias_normaliser_against_quadrature() -> None:
    bias = BetaBias([0.0, 0.003, 0.05, 0.4, 1.0], [0.0, -4.0, 2.5, 1.0, 7.0])
    for d in (-800.0, -30.0, -1.0, -1e-9, 0.0, 0.7, 12.0, 400.0, 5e4):
        ref = sum(quad(lambda b, d=d: np.exp(-b * d - bias(b) - (-min(d, 0.0) + 4.0)), lo, hi,
                       epsabs=0, epsrel=1e-13, limit=200)[0]
                  for lo, hi in zip(bias.knots[:-1], bias.knots[1:], strict=True))
        got = float(bias.log_normaliser(d))
        assert got == pytest.approx(np.log(ref) - min(d, 0.0) + 4.0, abs=1e-9), d
        lw0, lw1 = bias.log_w_pair(np.array([d]))
        assert float(lw0[0]) == pytest.approx(-got, abs=1e-12)
        assert float(lw1[0]) == pytest.approx(-d - bias.offset - got, abs=1e-9)
    flat = BetaBias()
    d = np.array([-50.0, -0.2, 0.0, 3e-8, 2.0, 700.0])
    lw0, lw1 = flat.log_w_pair(d)
    np.testing.assert_array_equal(lw0, log_w0(d))
    np.testing.assert_array_equal(lw1, log_w1(d))
    np.testing.assert_allclose(BetaBias([0, 0.5, 1], [0, 0, 0]).log_normaliser(d),
                               -log_w0(d), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="knots"):
        BetaBias([0.0, 0.5], [0.0, 1.0])
    with pytest.raises(ValueError, match="finite"):
        BetaBias([0.0, 1.0], [0.0, np.inf])


def test_estimates_with_a_bias_are_right_and_wrong_without_it() -> None:
    bias = BetaBias([0.0, 0.01, 0.1, 0.5, 1.0], [0.0, -3.0, -2.0, 0.5, 2.0])
    log_zeta = LOG_Z - 0.4
    x = _biased_ct_draws(np.random.default_rng(8), 8000, log_zeta, bias).reshape(4, 2000)
    d = _ct_delta(x, log_zeta)
    est = log_z_estimate(d, log_zeta, bias=bias)
    assert abs(est.log_z - LOG_Z) < 4 * est.std_error < 0.2
    ignored = log_z_estimate(d, log_zeta)
    assert abs(ignored.log_z - LOG_Z) > 10 * ignored.std_error
    mean = weighted_expectations(x, d, bias=bias)
    assert abs(float(mean.mean) - M) < 4 * float(mean.std_error)
    base = weighted_expectations(x, d, which="base", bias=bias)
    assert abs(float(base.mean)) < 4 * float(base.std_error)
    ti = ct_thermodynamic_integration(d, log_zeta, bias=bias)
    assert abs(ti.log_z - LOG_Z) < 4 * ti.std_error


@pytest.mark.parametrize("shift", [0.0, 0.8])
def test_a_uniform_length_bias_makes_the_next_marginal_flat(shift: float) -> None:
    """uniform_share=1: the next round's beta-marginal (exact, from the closed form) is flat,
    also when the next round's log zeta moves by ``shift``."""
    log_zeta = LOG_Z - shift
    x = _ct_draws(np.random.default_rng(9), 8000, log_zeta)[0]
    d = _ct_delta(x, log_zeta)
    new = length_bias(d + shift, -BetaBias().log_normaliser(d), uniform_share=1.0)
    grid = np.linspace(0.0, 1.0, 1001)
    before = _exact_log_marginal(grid, log_zeta, BetaBias())
    after = _exact_log_marginal(grid, log_zeta + shift, new)
    assert np.ptp(before) > 0.15  # the flat joint's marginal is not flat here ...
    assert np.ptp(after) < 0.04  # ... the biased one is


def test_a_length_bias_spreads_time_along_the_thermodynamic_length() -> None:
    """uniform_share=0: the next marginal is proportional to sd_beta(Delta), computed here from
    exact draws of each tempered Gaussian."""
    log_zeta = LOG_Z
    x = _ct_draws(np.random.default_rng(10), 8000, log_zeta)[0]
    d = _ct_delta(x, log_zeta)
    new = length_bias(d, -BetaBias().log_normaliser(d), uniform_share=0.0)
    grid = np.array([0.0, 0.05, 0.2, 0.5, 0.8, 1.0])
    lam = grid / S**2 + (1 - grid)
    rng = np.random.default_rng(11)
    sd = np.array([np.std(_ct_delta(b * M / S**2 / la + rng.normal(size=200_000) / np.sqrt(la),
                                     log_zeta)) for b, la in zip(grid, lam, strict=True)])
    log_p = _exact_log_marginal(grid, log_zeta, new)
    ratio = np.exp(log_p - np.log(sd))
    assert np.ptp(np.log(sd)) > 0.3  # the length is not spread evenly in beta here
    np.testing.assert_allclose(ratio / ratio.mean(), 1.0, atol=0.15)


def test_a_length_bias_is_for_the_next_rounds_own_base() -> None:
    """Draws of a round with base N(0, 1) give the bias for a next round with base
    N(M, S^2) = the target (then Delta' = log zeta - log Z is constant and the bridge has no
    length): the unbiased marginal of the new bridge, (Z / zeta)^beta, is made flat."""
    log_zeta = LOG_Z - 0.5
    x = _ct_draws(np.random.default_rng(13), 8000, log_zeta)[0]
    d = _ct_delta(x, log_zeta)
    log_b_next = norm.logpdf(x, M, S)
    d_next = LOG_Z + log_b_next - (LOG_Z + norm.logpdf(x, M, S))  # zeta' = Z
    new = length_bias(d_next, log_b_next - norm.logpdf(x) - BetaBias().log_normaliser(d),
                      uniform_share=0.0)
    np.testing.assert_allclose(new.values, 0.0, atol=1e-6)
    # a next base the draws cannot judge (far from them): the flat joint
    far = norm.logpdf(x, 40.0, 0.1)
    assert length_bias(LOG_Z + far - (LOG_Z + norm.logpdf(x, M, S)),
                       far - norm.logpdf(x) - BetaBias().log_normaliser(d)).is_flat


# --------------------------------------------------------------------------- #
# the round's draws pooled with iid draws of the next base
# --------------------------------------------------------------------------- #


def _round_marginal_draws(rng: np.random.Generator, n: int, log_zeta: float, mu: float,
                          s: float) -> np.ndarray:
    """Exact draws of a flat-bias round's x-marginal q(x) = b(x) N(x) / C (grid inverse CDF),
    base N(0, 3^2), target exp(log_zeta) N(mu, s^2): most of q's mass sits at the target."""
    grid = np.linspace(-15.0, 15.0, 200001)
    log_b = norm.logpdf(grid, 0.0, 3.0)
    d = log_zeta + log_b - (log_zeta + norm.logpdf(grid, mu, s))  # zeta = Z: Delta = log b/p
    log_q = log_b + BetaBias().log_normaliser(d)
    cdf = np.cumsum(np.exp(log_q - log_q.max()))
    return np.interp(rng.uniform(0, cdf[-1], n), cdf, grid)


@pytest.mark.parametrize("n_run", [400, 4000])
def test_pooled_draws_represent_the_next_base_and_the_target(n_run: int) -> None:
    rng = np.random.default_rng(3)
    log_zeta, mu, s = -2.0, 4.0, 0.3
    x = _round_marginal_draws(rng, n_run, log_zeta, mu, s)
    # the next round: base N(2, 2^2), wider than the target, zeta' = Z
    m2, s2 = 2.0, 2.0
    y = rng.normal(m2, s2, n_run)

    def parts(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        log_b, log_b2 = norm.logpdf(v, 0.0, 3.0), norm.logpdf(v, m2, s2)
        log_p = norm.logpdf(v, mu, s)
        d_old = log_b - log_p  # this round's Delta (zeta = Z)
        return log_b - log_b2, BetaBias().log_normaliser(d_old), log_b2 - log_p  # Delta'

    qr_x, ln_x, d_x = parts(x)
    qr_y, ln_y, d_y = parts(y)
    r_x, r_y = pooled_log_ratio(qr_x, ln_x, qr_y, ln_y)
    draws, d, r = np.concatenate([x, y]), np.concatenate([d_x, d_y]), np.concatenate([r_x, r_y])
    for beta, mean, sd in ((0.0, m2, s2), (1.0, mu, s)):
        lw = r - beta * d
        w = np.exp(lw - lw.max())
        w /= w.sum()
        ess = 1.0 / np.sum(w**2)
        est = float(w @ draws)
        assert abs(est - mean) < 5 * sd / np.sqrt(ess), (beta, est, ess)
        if beta == 0.0:
            # the next base's end rests on about n_run effective draws, not on the few
            # draws of the round that sat near beta = 0
            assert ess > 0.5 * n_run
            alone = -qr_x - ln_x  # log b'/q + const: the round's draws alone
            w0 = np.exp(alone - alone.max())
            assert 1.0 / np.sum((w0 / w0.sum()) ** 2) < 0.2 * n_run


def test_pooled_log_ratio_rejects_a_round_without_finite_normalisers() -> None:
    with pytest.raises(ValueError, match="finite log N"):
        pooled_log_ratio([0.0], [np.inf], [0.0], [0.0])


def test_a_bias_remembers_weights_only_for_the_same_delta() -> None:
    """The memo of ``log_w_pair`` gives what a fresh bias computes, for the same Delta
    only; writing to the arrays it returned changes no later answer, and a pickled bias
    carries no memo."""
    import pickle

    bias = BetaBias([0.0, 0.4, 1.0], [0.0, 1.5, -0.5])
    rng = np.random.default_rng(8)
    d1, d2 = rng.normal(0, 5, 200), rng.normal(0, 5, 200)
    first = bias.log_w_pair(d1)
    first[0][:] = 0.0
    for d in (d1, d2, d1):
        fresh = BetaBias([0.0, 0.4, 1.0], [0.0, 1.5, -0.5]).log_w_pair(d)
        for got, want in zip(bias.log_w_pair(d), fresh, strict=True):
            np.testing.assert_array_equal(got, want)
    clone = pickle.loads(pickle.dumps(bias))
    assert clone._memo == {}
    np.testing.assert_array_equal(clone.log_w_pair(d2)[0], bias.log_w_pair(d2)[0])
