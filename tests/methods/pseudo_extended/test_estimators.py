"""The pooled mixture estimator of pseudo-extended draws, on exact draws of an extended target."""

from __future__ import annotations

import numpy as np
import pytest

from pemc_stan.estimators.weights import log_normalise
from pemc_stan.methods.pseudo_extended.estimators import (
    copies_spread,
    mixture_log_ratio,
    mixture_mean,
    mixture_weights,
)

# Exact draws from a PE extended target (eq 8) for gamma(x) = exp(-x^2 / 2)
# (Z = sqrt(2 pi)): q(x, beta) = gamma(x)^beta g(beta) / Z_q has x | beta ~ N(0, 1 / beta)
# and, for g uniform on (b0, 1), beta-marginal proportional to beta^(-1/2), so
# Z_q = sqrt(2 pi) * 2 (1 - sqrt(b0)) / (1 - b0) and r = Z / Z_q = (1 - b0) / (2 (1 - sqrt(b0))).

def _extended_draws(rng: np.random.Generator, t: int, n: int, b0: float,
                    ladder: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``t`` iid draws (x, log w) of shape (t, n); pi = g uniform, or a fixed ladder."""
    if ladder is None:
        sb = np.sqrt(b0) + rng.uniform(size=(t, n)) * (1.0 - np.sqrt(b0))
        beta = sb ** 2  # inverse CDF of the q-marginal of beta
    else:
        beta = np.broadcast_to(ladder, (t, n)).copy()
    x = rng.normal(size=(t, n)) / np.sqrt(beta)
    target = rng.integers(n, size=t)  # the pseudo-sample drawn from the target
    rows = np.arange(t)
    x[rows, target] = rng.normal(size=t)
    if ladder is None:
        beta[rows, target] = rng.uniform(b0, 1.0, size=t)  # pi(beta)
    log_w = -(1.0 - beta) * x ** 2 / 2  # (1 - beta) log gamma + log pi - log g, pi = g
    return x, log_w


def test_mixture_log_ratio_recovers_z_over_zq() -> None:
    b0, n, t = 0.01, 4, 40_000
    x, lw = _extended_draws(np.random.default_rng(7), t, n, b0)
    exact = np.log((1 - b0) / (2 * (1 - np.sqrt(b0))))
    rho = mixture_weights(lw)
    # SE of log r^ from its estimating equation: sd(sum_j rho_j) / (sqrt(t) |d mean / d log r|)
    se = np.std(rho.sum(-1)) / np.sqrt(t) / np.mean((rho * (1 - rho)).sum(-1))
    assert abs(float(mixture_log_ratio(lw)) - exact) < 4 * se
    assert se < 0.02  # the check is sharp: a wrong equation (mean rho = 1) is off by > 1
    assert np.mean(rho) == pytest.approx(1 / n, rel=1e-9)


def test_mixture_log_ratio_per_pseudo_sample_on_a_ladder() -> None:
    """Fixed ladder: r_j = Z / Z(beta_j) = sqrt(beta_j)."""
    ladder = np.array([1.0, 0.3, 0.05])
    x, lw = _extended_draws(np.random.default_rng(8), 40_000, 3, 0.0, ladder)
    got = mixture_log_ratio(lw, pooled=False)
    assert got.shape == (3,)
    np.testing.assert_allclose(got, 0.5 * np.log(ladder), atol=0.03)
    rho = mixture_weights(lw, pooled=False)
    np.testing.assert_allclose(rho.mean(axis=0), 1 / 3, rtol=1e-9)


@pytest.mark.parametrize("ladder", [None, np.array([1.0, 0.3, 0.05])])
def test_mixture_mean_and_its_se_are_calibrated(ladder: np.ndarray | None) -> None:
    """E[x^2] = 1 and E[x] = 0 under the target; z-scores over replicates ~ N(0, 1)."""
    n, t, reps = 3, 1000, 300
    z = np.empty((reps, 2))
    for rep in range(reps):
        x, lw = _extended_draws(np.random.default_rng(5000 + rep), t, n, 0.01, ladder)
        for k, (f, truth) in enumerate(((x ** 2, 1.0), (x, 0.0))):
            est = mixture_mean(f, lw, pooled=ladder is None)
            assert est.influence.shape == (t,)
            z[rep, k] = (est.mean - truth) / (np.std(est.influence, ddof=1) / np.sqrt(t))
    # sd(z) has sampling sd ~ 0.04: an SE without the log r term, or a
    # biased estimator, leaves this window.
    assert np.all(np.abs(np.std(z, axis=0) - 1) < 0.15)
    assert np.all(np.abs(np.mean(z, axis=0)) < 4 / np.sqrt(reps) + 0.05)


def test_mixture_mean_beats_per_draw_weights() -> None:
    """Same iid draws, same truth: the pooled estimator has the smaller spread.

    With N = 2 its sd over replicates is about 13% below the per-draw
    estimator's (the gain shrinks with N for iid draws; on MCMC draws of the
    20-Gaussian mixture it was 4-9% at N = 2-10).
    """
    n, t, reps = 2, 500, 200
    pooled, per_draw = np.empty(reps), np.empty(reps)
    for rep in range(reps):
        x, lw = _extended_draws(np.random.default_rng(9000 + rep), t, n, 0.01)
        f = x ** 2
        pooled[rep] = mixture_mean(f, lw).mean
        wn = np.exp(log_normalise(lw))
        per_draw[rep] = np.mean(np.sum(wn * f, axis=-1))
    assert abs(np.mean(per_draw) - 1) < 4 * np.std(per_draw) / np.sqrt(reps)
    assert abs(np.mean(pooled) - 1) < 4 * np.std(pooled) / np.sqrt(reps)
    assert np.std(pooled) < 0.95 * np.std(per_draw)


@pytest.mark.parametrize("pooled", [True, False])
def test_mixture_influence_includes_the_error_of_log_r(pooled: bool) -> None:
    """The influence's log r term equals the sensitivity of the estimate to log r.

    Linearising the estimating equations gives u_t = (A_t - theta B_t) - sum_j k_j psi_tj with
    k_j = (d theta / d log r_j) / (d mean psi_j / d log r_j); both derivatives are checked here
    by finite differences of the estimate recomputed at shifted ratios.
    """
    from scipy.special import expit

    n = 3
    ladder = None if pooled else np.array([1.0, 0.3, 0.05])
    x, lw = _extended_draws(np.random.default_rng(11), 4000, n, 0.01, ladder)
    f = x ** 2 + x
    est = mixture_mean(f, lw, pooled=pooled)
    log_r = np.broadcast_to(mixture_log_ratio(lw, pooled=pooled), (n,))
    theta = est.mean

    def at(shift: np.ndarray) -> tuple[float, np.ndarray]:
        rho = expit(lw - np.log(n - 1) - (log_r + shift))
        return float(np.sum(rho * f) / np.sum(rho)), rho

    rho0 = at(np.zeros(n))[1]
    a, b = np.sum(rho0 * f, -1), np.sum(rho0, -1)
    r_part = est.influence - (a - theta * b)  # = -sum_j k_j psi_tj
    h = 1e-6
    groups = [np.ones(n)] if pooled else list(np.eye(n))
    expected = np.zeros_like(r_part)
    for e in groups:
        (tp, rp), (tm, rm) = at(h * e), at(-h * e)
        dtheta = (tp - tm) / (2 * h)
        if pooled:
            psi = b - 1.0
            dpsi = (np.mean(rp.sum(-1)) - np.mean(rm.sum(-1))) / (2 * h)
        else:
            j = int(np.argmax(e))
            psi = n * rho0[:, j] - 1.0
            dpsi = n * (np.mean(rp[:, j]) - np.mean(rm[:, j])) / (2 * h)
        expected -= dtheta / dpsi * psi
    assert np.max(np.abs(expected)) > 1e-3  # the term is not negligible here
    np.testing.assert_allclose(r_part, expected, rtol=1e-4, atol=1e-8)


def test_mixture_mean_with_one_pseudo_sample_is_the_plain_mean() -> None:
    f = np.array([[1.0], [2.0], [6.0]])
    est = mixture_mean(f, np.array([[-3.0], [0.0], [5.0]]))
    assert est.mean == pytest.approx(3.0)
    np.testing.assert_allclose(est.influence, [-2.0, -1.0, 3.0])
    assert float(mixture_log_ratio(np.zeros((3, 1)))) == 0.0


def test_mixture_estimate_is_invariant_to_a_constant_in_the_log_weights() -> None:
    x, lw = _extended_draws(np.random.default_rng(3), 2000, 4, 0.01)
    a, b = mixture_mean(x ** 2, lw), mixture_mean(x ** 2, lw + 123.0)
    assert a.mean == pytest.approx(b.mean, rel=1e-9)
    assert float(mixture_log_ratio(lw + 123.0)) == pytest.approx(
        float(mixture_log_ratio(lw)) + 123.0)


def test_mixture_zero_weights_and_errors() -> None:
    lw = np.array([[0.0, -np.inf], [0.0, -1.0], [-np.inf, 0.5]])
    rho = mixture_weights(lw)
    assert rho[0, 1] == 0.0 and rho[2, 0] == 0.0
    est = mixture_mean(np.array([[1.0, np.nan], [2.0, 3.0], [np.inf, 4.0]]), lw)
    assert np.isfinite(est.mean)
    with pytest.raises(ValueError, match="shape"):
        mixture_mean(np.zeros((3, 3)), lw)
    with pytest.raises(ValueError, match="finite"):
        mixture_log_ratio(np.array([[0.0, -np.inf, -np.inf, -np.inf]] * 2))


def _in_modes(seed: int, stay: bool, chains: int = 4, t: int = 1000, n: int = 3
              ) -> tuple[np.ndarray, np.ndarray]:
    """Exact PE draws (chains, t, n) moved to modes at -3 and +3 of a symmetric target:
    every draw's copies pick their modes afresh, or (``stay``) copy 1 sits at +3 and the
    others at -3 in every chain and draw (copies that never leave their modes)."""
    rng = np.random.default_rng(seed)
    x, log_w = _extended_draws(rng, chains * t, n, 0.1)
    side = np.where(np.arange(n) == 0, 1.0, -1.0) if stay \
        else rng.choice([-1.0, 1.0], size=x.shape)
    return (x + 3.0 * side).reshape(chains, t, n), log_w.reshape(chains, t, n)


@pytest.mark.parametrize("seed", range(5))
def test_copies_that_move_between_modes_agree_and_copies_that_stay_do_not(seed: int) -> None:
    """The copies' own estimates spread as chance allows (chi-square per degree of
    freedom near 1) while each copy visits both modes; where each stays in its mode they
    lie hundreds of errors apart, and the within-draw estimate, which every chain gives
    alike, weighs the modes 1:2 by their copies instead of 1:1 by their masses."""
    x, log_w = _in_modes(seed, stay=False)
    assert copies_spread(x, log_w).spread < 3.0
    x, log_w = _in_modes(seed, stay=True)
    assert copies_spread(x, log_w).spread > 100.0
    w = np.exp(log_normalise(log_w, axis=-1))
    chain_means = np.mean(np.sum(w * x, axis=-1), axis=1)
    assert np.all(np.abs(chain_means + 1.0) < 0.2), chain_means  # E[x] = 0


def test_copies_spread_needs_two_copies_with_an_error() -> None:
    """One chain's one copy, or copies whose weighted terms never vary, give no spread."""
    x, log_w = _in_modes(0, stay=False, chains=1, n=1)
    assert np.isnan(copies_spread(x, log_w).spread)
    assert np.isnan(copies_spread(np.ones((2, 10, 3)), np.zeros((2, 10, 3))).spread)
    with pytest.raises(ValueError, match="one shape"):
        copies_spread(np.ones((2, 10, 3)), np.zeros((2, 10, 2)))


def test_a_copy_whose_weight_sits_in_a_few_draws_is_not_judged() -> None:
    """Hot copies that carry weight in one draw each (a concentrated posterior: one copy
    holds it) give their own means an error near 0; they are left out
    (``COPY_DRAWS_MIN``), and the copies that carry the weight, alike, agree."""
    x, log_w = _in_modes(1, stay=False)
    x = x.copy()
    log_w = np.full_like(log_w, -80.0)
    log_w[..., 0] = 0.0
    log_w[:, 7, 1:] = 5.0  # the hot copies' one heavy draw each
    x[..., 1:] += 40.0
    assert copies_spread(x, log_w).spread < 3.0


def _ar1(rng: np.random.Generator, shape: tuple[int, ...], phi: float) -> np.ndarray:
    """Unit-variance AR(1) series along axis 1 (draws)."""
    e = rng.normal(size=shape)
    x = np.empty(shape)
    x[:, 0] = e[:, 0]
    for t in range(1, shape[1]):
        x[:, t] = phi * x[:, t - 1] + np.sqrt(1 - phi**2) * e[:, t]
    return x


@pytest.mark.parametrize("seed", range(3))
def test_slowly_moving_copies_are_judged_by_their_autocorrelation(seed: int) -> None:
    """Copies that change modes every 50 draws or so, alike in law, agree once each copy's
    error carries its autocorrelation (it fails with the draws counted as independent);
    hot copies, a e^-40 share of every draw's weight, are judged on their own scale."""
    rng = np.random.default_rng(seed)
    side = np.where(_ar1(rng, (4, 1000, 3), 0.98) > 0, 3.0, -3.0)
    x = side + _ar1(rng, (4, 1000, 3), 0.9)
    log_w = rng.normal(scale=0.3, size=x.shape)
    log_w[..., 1:] -= 40.0
    assert copies_spread(x, log_w).spread < 5.0


def test_copies_that_stay_are_seen_when_the_hot_ones_weigh_e_to_the_minus_800() -> None:
    """A copy's weights are rescaled to its own largest before any square: weights of
    e^-800 of a draw's (below the smallest double) still give each copy its error."""
    rng = np.random.default_rng(2)
    x = np.where(np.arange(3) == 0, 3.0, -3.0) + rng.normal(size=(4, 1000, 3))
    log_w = rng.normal(scale=0.3, size=x.shape)
    log_w[..., 1:] -= 800.0
    found = copies_spread(x, log_w)
    assert found.copies == 12 and found.spread > 100.0
