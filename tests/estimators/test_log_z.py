"""Evidence estimators on problems with analytic normalising constants."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal, norm

from pemc_stan.estimators.log_z import (
    EvidenceEstimate,
    bayes_factor,
    bridge_sampling,
    compare,
    importance_sampling,
    thermodynamic_integration,
)

# ------------------------------------------------------------------ 5-D Gaussian target

D = 5
LOG_Z5 = 3.7
MU5 = np.array([0.5, -1.0, 2.0, 0.0, 1.0])
_A = np.random.default_rng(123).normal(size=(D, D))
COV5 = _A @ _A.T / D + 0.5 * np.eye(D)
CHOL5 = np.linalg.cholesky(COV5)


def log_gamma5(x: np.ndarray) -> np.ndarray:
    """Unnormalised 5-D Gaussian target with normalising constant exp(LOG_Z5)."""
    return LOG_Z5 + multivariate_normal.logpdf(x, MU5, COV5)


def gaussian_chains(rng: np.random.Generator, n_chains: int, n_draws: int,
                    mean: np.ndarray, chol: np.ndarray, rho: float = 0.0) -> np.ndarray:
    """Chains with exact N(mean, chol chol^T) marginals and AR(1) autocorrelation rho."""
    z = np.empty((n_chains, n_draws, mean.size))
    eps = rng.standard_normal(z.shape)
    z[:, 0] = eps[:, 0]
    for t in range(1, n_draws):
        z[:, t] = rho * z[:, t - 1] + np.sqrt(1 - rho**2) * eps[:, t]
    return mean + z @ chol.T


def check_calibration(ests: list[EvidenceEstimate], truth: float) -> None:
    """>= 9/10 within 4 SE and seed spread within a factor 2 of the mean reported SE."""
    values = np.array([e.log_z for e in ests])
    ses = np.array([e.std_error for e in ests])
    hits = np.abs(values - truth) < 4 * ses
    assert hits.sum() >= 0.9 * len(ests), (values - truth, ses)
    ratio = np.sqrt(np.mean((values - truth) ** 2)) / np.mean(ses)
    assert 0.5 < ratio < 2.0, (ratio, values - truth, ses)


def run_bridge(seed: int, rho: float, n_chains: int = 4, n_draws: int = 1000,
               use_neff: bool = True) -> EvidenceEstimate:
    rng = np.random.default_rng(seed)
    draws = gaussian_chains(rng, n_chains, n_draws, MU5, CHOL5, rho)
    return bridge_sampling(draws, log_gamma5(draws), log_gamma5, rng, use_neff=use_neff)


def test_bridge_sampling_5d_gaussian_iid() -> None:
    ests = [run_bridge(seed, rho=0.0) for seed in range(10)]
    check_calibration(ests, LOG_Z5)
    d = ests[0].diagnostics
    assert d["converged"] and d["n1"] == 2000 and d["n2"] == 2000 and d["n_fit"] == 2000


@pytest.mark.parametrize("use_neff", [False, True])
def test_bridge_sampling_error_accounts_for_autocorrelation(use_neff: bool) -> None:
    """AR(1) chains (rho = 0.93) with exact Gaussian marginals.

    With ``use_neff=False`` the posterior-draw term dominates the relative
    MSE; the error formula without the autocorrelation time ``tau_f2`` would
    then under-report the seed-to-seed spread by more than a factor 2.
    """
    ests = [run_bridge(500 + seed, rho=0.93, n_draws=2000, use_neff=use_neff)
            for seed in range(20)]
    check_calibration(ests, LOG_Z5)
    diag = [e.diagnostics for e in ests]
    assert np.median([d["tau_f2"] for d in diag]) > 5
    if not use_neff:
        se_iid = np.sqrt([d["re2_proposal_term"] + d["re2_posterior_term"] / d["tau_f2"]
                          for d in diag])
        assert np.mean([e.std_error for e in ests]) > 2 * np.mean(se_iid)


def test_bridge_sampling_flat_input_and_errors() -> None:
    rng = np.random.default_rng(9)
    draws = gaussian_chains(rng, 1, 2000, MU5, CHOL5)[0]
    est = bridge_sampling(draws, log_gamma5(draws), log_gamma5, rng, n_proposal=3000,
                          use_neff=False)
    assert abs(est.log_z - LOG_Z5) < 4 * est.std_error
    assert est.diagnostics["n2"] == 3000 and est.diagnostics["n1_eff"] == 1000
    with pytest.raises(ValueError, match="log_target_post"):
        bridge_sampling(draws, np.full(2000, np.nan), log_gamma5, rng)
    with pytest.raises(ValueError, match="shape"):
        bridge_sampling(draws, log_gamma5(draws), lambda x: np.zeros(3), rng)
    with pytest.raises(ValueError, match="too few"):
        bridge_sampling(draws[:6], log_gamma5(draws[:6]), log_gamma5, rng)


# ------------------------------------------------------------------ normal-normal conjugate

SIGMA, MU0, TAU0 = 1.3, 0.5, 2.0
Y = np.random.default_rng(77).normal(1.7, SIGMA, size=(2, 15))  # 2 independent groups


def log_joint_conj(theta: np.ndarray) -> np.ndarray:
    """log p(y, theta) for theta of shape (..., 2): prior N(MU0, TAU0^2) per group."""
    theta = np.asarray(theta)
    lp = norm.logpdf(theta, MU0, TAU0).sum(axis=-1)
    ll = norm.logpdf(Y[None, :, :], theta.reshape(-1, 2)[:, :, None], SIGMA).sum(axis=(1, 2))
    return lp + ll.reshape(theta.shape[:-1])


def log_evidence_conj() -> float:
    """Analytic log p(y): per group y ~ N(MU0 1, SIGMA^2 I + TAU0^2 1 1^T)."""
    n = Y.shape[1]
    cov = SIGMA**2 * np.eye(n) + TAU0**2 * np.ones((n, n))
    return float(sum(multivariate_normal.logpdf(Y[g], np.full(n, MU0), cov) for g in range(2)))


def conj_posterior() -> tuple[np.ndarray, np.ndarray]:
    n = Y.shape[1]
    prec = 1 / TAU0**2 + n / SIGMA**2
    mean = (MU0 / TAU0**2 + Y.sum(axis=1) / SIGMA**2) / prec
    return mean, np.full(2, 1 / np.sqrt(prec))


def test_bridge_sampling_conjugate_normal() -> None:
    mean, sd = conj_posterior()
    truth = log_evidence_conj()
    ests = []
    for seed in range(10):
        rng = np.random.default_rng(40 + seed)
        draws = gaussian_chains(rng, 4, 500, mean, np.diag(sd), rho=0.5)
        ests.append(bridge_sampling(draws, log_joint_conj(draws), log_joint_conj, rng))
    check_calibration(ests, truth)


def test_importance_sampling_conjugate_normal() -> None:
    mean, sd = conj_posterior()
    truth = log_evidence_conj()
    ests = []
    for seed in range(10):
        rng = np.random.default_rng(60 + seed)
        x = mean + 1.5 * sd * rng.standard_normal((4000, 2))
        lq = norm.logpdf(x, mean, 1.5 * sd).sum(axis=1)
        ests.append(importance_sampling(log_joint_conj(x), lq))
    check_calibration(ests, truth)
    assert all(e.diagnostics["pareto_k"] < 0.5 for e in ests)


# ------------------------------------------------------------------ importance sampling, 5-D

def run_is(seed: int, smooth: bool, n: int = 4000) -> EvidenceEstimate:
    rng = np.random.default_rng(seed)
    shift = np.full(D, 0.2)
    x = MU5 + shift + 1.3 * rng.standard_normal((n, D)) @ CHOL5.T
    lq = multivariate_normal.logpdf(x, MU5 + shift, 1.69 * COV5)
    return importance_sampling(log_gamma5(x), lq, pareto_smooth=smooth)


@pytest.mark.parametrize("smooth", [True, False])
def test_importance_sampling_5d_gaussian(smooth: bool) -> None:
    ests = [run_is(seed, smooth) for seed in range(10)]
    check_calibration(ests, LOG_Z5)
    assert ests[0].method == ("psis" if smooth else "importance_sampling")
    assert all(e.diagnostics["pareto_k"] < 0.7 for e in ests)


def test_importance_sampling_flags_bad_proposal() -> None:
    """A proposal much narrower than the target gives a large Pareto k."""
    rng = np.random.default_rng(1)
    x = rng.normal(0.0, 0.3, size=4000)
    est = importance_sampling(norm.logpdf(x, 0.0, 1.0), norm.logpdf(x, 0.0, 0.3))
    assert est.diagnostics["pareto_k"] > 0.7


def test_importance_sampling_input_errors() -> None:
    with pytest.raises(ValueError, match="shape"):
        importance_sampling(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="NaN"):
        importance_sampling(np.array([0.0, np.nan, 1.0]), np.zeros(3))
    with pytest.raises(ValueError, match="zero"):
        importance_sampling(np.full(20, -np.inf), np.zeros(20))


# ------------------------------------------------------------------ thermodynamic integration

M_TI, S_TI, LOG_Z_TI = 1.0, 0.7, 2.3  # target Z N(M, S^2) bridged from base N(0, 1)


def ti_ladder(rng: np.random.Generator, beta: np.ndarray, n: int) -> np.ndarray:
    """log L = log gamma - log base at exact draws from p_b ∝ base^(1-b) gamma^b."""
    lam = beta[:, None] / S_TI**2 + (1 - beta[:, None])
    x = beta[:, None] * M_TI / S_TI**2 / lam + rng.standard_normal((beta.size, n)) / np.sqrt(lam)
    return LOG_Z_TI + norm.logpdf(x, M_TI, S_TI) - norm.logpdf(x)


@pytest.mark.parametrize("rule", ["trapezoid", "simpson"])
def test_thermodynamic_integration_gaussian_path(rule: str) -> None:
    beta = np.linspace(0.0, 1.0, 21)
    ests = [thermodynamic_integration(beta, ti_ladder(np.random.default_rng(s), beta, 500), rule)
            for s in range(10)]
    check_calibration(ests, LOG_Z_TI)
    assert ests[0].diagnostics["discretisation_gap"] < 0.2 * ests[0].std_error


def test_thermodynamic_integration_chain_shaped_and_ragged() -> None:
    beta = np.linspace(0.0, 1.0, 11)
    ll = ti_ladder(np.random.default_rng(3), beta, 800)
    a = thermodynamic_integration(beta, ll.reshape(11, 4, 200))
    b = thermodynamic_integration(beta, [row for row in ll])
    assert a.log_z == pytest.approx(b.log_z)
    with pytest.raises(ValueError, match="beta"):
        thermodynamic_integration(beta[::-1], ll)
    with pytest.raises(ValueError, match="rungs"):
        thermodynamic_integration(beta, ll[:5])
    with pytest.raises(ValueError, match="rule"):
        thermodynamic_integration(beta, ll, rule="midpoint")  # type: ignore[arg-type]


def test_thermodynamic_integration_exact_integrand() -> None:
    """Zero-variance rungs: the estimate is the quadrature of the exact integrand."""
    beta = np.linspace(0.0, 1.0, 41)
    lam = beta / S_TI**2 + (1 - beta)
    mu, v = beta * M_TI / S_TI**2 / lam, 1 / lam
    e = (LOG_Z_TI - 0.5 * np.log(S_TI**2) - ((mu - M_TI) ** 2 + v) / (2 * S_TI**2)
         + (mu**2 + v) / 2)
    est = thermodynamic_integration(beta, np.repeat(e[:, None], 8, axis=1), rule="simpson")
    assert est.log_z == pytest.approx(LOG_Z_TI, abs=1e-5)
    assert est.std_error == 0.0


# ------------------------------------------------------------------ comparisons

def test_bayes_factor_two_gaussians() -> None:
    log_za, log_zb = 1.2, -0.9
    z_scores, agree = [], []
    for seed in range(10):
        rng = np.random.default_rng(900 + seed)
        xa = rng.normal(0.0, 1.5, size=(3000, 2))
        ea = importance_sampling(log_za + norm.logpdf(xa, 0.3, 1.0).sum(1),
                                 norm.logpdf(xa, 0.0, 1.5).sum(1))
        xb = rng.normal(1.0, 2.0, size=(3000, 2))
        eb = importance_sampling(log_zb + norm.logpdf(xb, 1.0, [1.5, 0.8]).sum(1),
                                 norm.logpdf(xb, 1.0, 2.0).sum(1))
        bf = bayes_factor(ea, eb)
        assert bf.std_error == pytest.approx(np.hypot(ea.std_error, eb.std_error))
        z_scores.append((bf.log_bf - (log_za - log_zb)) / bf.std_error)
        agree.append(not compare(ea, EvidenceEstimate(log_za, 0.0, "exact")).disagree)
    assert np.sum(np.abs(z_scores) < 4) >= 9
    assert sum(agree) >= 9  # compare() at z = 3 agrees with the exact value
    assert 0.5 < np.sqrt(np.mean(np.square(z_scores))) < 2.0


def test_a_bayes_factor_carries_both_verdicts_and_says_when_one_is_suspect() -> None:
    ok = EvidenceEstimate(-10.0, 0.1, "ct", {"verdict": "ok", "reasons": []})
    bad = EvidenceEstimate(-12.0, 0.2, "bridge", {"verdict": "suspect",
                                                  "reasons": ["rhat: R-hat of mu is 1.4"]})
    bf = bayes_factor(ok, bad)
    assert bf.verdicts == ("ok", "suspect") and not bf.ok
    assert bf.reasons == ((), ("rhat: R-hat of mu is 1.4",))
    assert "SUSPECT: the estimate of model b is suspect (rhat: R-hat of mu is 1.4)" in str(bf)
    assert "verdicts=('ok', 'suspect')" in repr(bf)
    both = bayes_factor(ok, ok)
    assert both.ok and "SUSPECT" not in str(both) and str(both).startswith("log BF = 0 +/- 0.14")
    bare = bayes_factor(EvidenceEstimate(0.0, 0.1, "exact"), ok)
    assert bare.verdicts == ("not judged", "ok") and not bare.ok
    assert "model a was not judged" in str(bare)


def test_compare() -> None:
    a = EvidenceEstimate(1.0, 0.1, "a")
    b = EvidenceEstimate(1.2, 0.1, "b")
    c = EvidenceEstimate(2.0, 0.1, "c")
    r = compare(a, b)
    assert r.difference == pytest.approx(-0.2)
    assert r.z_score == pytest.approx(-0.2 / np.hypot(0.1, 0.1))
    assert not r.disagree
    assert compare(a, c).disagree
    assert compare(a, EvidenceEstimate(1.0, 0.0, "x")).z_score == 0.0
    with pytest.raises(ValueError, match="standard error"):
        compare(a, EvidenceEstimate(1.0, float("nan"), "bad"))
    with pytest.raises(ValueError, match="z_threshold"):
        compare(a, b, z_threshold=0.0)


def test_evidence_estimate_is_frozen() -> None:
    est = EvidenceEstimate(0.0, 1.0, "m")
    with pytest.raises(AttributeError):
        est.log_z = 2.0  # type: ignore[misc]



# ------------------------------------------------------------------ additions (issue 6)


def test_importance_sampling_exact_proposal_has_constant_weights() -> None:
    """Proposal == normalised target: no Pareto tail (k_hat = -inf), SE at the rounding floor."""
    x = np.random.default_rng(0).normal(size=200)
    lg = norm.logpdf(x)
    est = importance_sampling(lg + 2.5, lg)
    assert est.diagnostics["constant_weights"]
    assert est.diagnostics["pareto_k"] == -np.inf
    assert est.log_z == pytest.approx(2.5, abs=1e-12)
    assert 0 < est.std_error < 1e-13


def test_bridge_sampling_repeated_runs_calibrated() -> None:
    """Over 40 independent i.i.d. runs the reported SE matches the observed spread."""
    rng = np.random.default_rng(42)
    z, se = [], []
    for _ in range(40):
        post = MU5 + rng.standard_normal((2, 300, D)) @ CHOL5.T
        est = bridge_sampling(post, log_gamma5(post.reshape(-1, D)), log_gamma5, rng)
        z.append(est.log_z)
        se.append(est.std_error)
    ratio = np.std(z, ddof=1) / np.mean(se)
    assert 0.6 < ratio < 1.6, ratio
    assert abs(np.mean(z) - LOG_Z5) < 4 * np.std(z, ddof=1) / np.sqrt(len(z))


# ------------------------------------------------------------------ Warp-3 bridge

LOG_Z_SKEW = 1.3
SHAPES = np.array([1.5, 3.0])


def log_gamma_skew(u: np.ndarray) -> np.ndarray:
    """log of exp(LOG_Z_SKEW) x density of u = log(g), g_k ~ Gamma(SHAPES_k) independent
    (left-skewed on the log scale)."""
    from scipy.special import gammaln

    u = np.atleast_2d(u)
    return LOG_Z_SKEW + np.sum(SHAPES * u - np.exp(u) - gammaln(SHAPES), axis=1)


@pytest.mark.parametrize("warp", [False, True])
def test_bridge_sampling_skewed_target_calibrated(warp: bool) -> None:
    rng = np.random.default_rng(5)
    z, se = [], []
    for _ in range(30):
        post = np.log(rng.gamma(SHAPES, size=(2, 400, 2)))
        est = bridge_sampling(post, log_gamma_skew(post.reshape(-1, 2)), log_gamma_skew, rng,
                              warp=warp)
        assert est.diagnostics["warp"] is warp and est.diagnostics["converged"]
        z.append(est.log_z)
        se.append(est.std_error)
    z_arr, se_arr = np.array(z), np.array(se)
    assert np.mean(np.abs(z_arr - LOG_Z_SKEW) <= 4 * se_arr) >= 0.9
    assert 0.6 < np.std(z_arr, ddof=1) / np.mean(se_arr) < 1.6
    assert abs(np.mean(z_arr) - LOG_Z_SKEW) < 4 * np.std(z_arr, ddof=1) / np.sqrt(len(z_arr))


def test_warp3_is_more_precise_on_a_skewed_target() -> None:
    def mean_se(warp: bool) -> float:
        rng = np.random.default_rng(9)
        out = []
        for _ in range(10):
            post = np.log(rng.gamma(SHAPES, size=(2, 400, 2)))
            out.append(bridge_sampling(post, log_gamma_skew(post.reshape(-1, 2)),
                                       log_gamma_skew, rng, warp=warp).std_error)
        return float(np.mean(out))

    assert mean_se(True) < mean_se(False)


def _bimodal_log_density(u: np.ndarray) -> np.ndarray:
    """0.2 N(-3, 0.5^2) + 0.8 N(2, 1) (normalised), at ``u`` of shape (..., 1)."""
    x = u[..., 0]
    return np.logaddexp(np.log(0.2) + norm.logpdf(x, -3, 0.5),
                        np.log(0.8) + norm.logpdf(x, 2, 1))


def test_bridge_sampling_of_a_region_s_mass_takes_the_draws_inside_it() -> None:
    # the mass of x > 1 under a bimodal density, from exact draws of the whole density:
    # those inside the region are draws of the density restricted to it, and the bridge
    # on them is right; on all the draws the bridge's Gaussian (fitted to both modes)
    # weighs the region wrongly, by far more than its own error bar (the scouts' masses
    # of a chain's region, pemc_stan.modes.scouts)
    rng = np.random.default_rng(7)
    n = 160_000
    x = np.where(rng.random(n) < 0.2, rng.normal(-3, 0.5, n), rng.normal(2, 1, n))
    draws = x[None, :, None]
    lp = _bimodal_log_density(draws)

    def restricted(u: np.ndarray) -> np.ndarray:
        return np.where(u[:, 0] > 1.0, _bimodal_log_density(u), -np.inf)

    exact = np.log(0.2 * norm.sf(1.0, -3, 0.5) + 0.8 * norm.sf(1.0, 2, 1))
    inside = x > 1.0
    right = bridge_sampling(draws[:, inside], lp[:, inside], restricted,
                            np.random.default_rng(8))
    assert abs(right.log_z - exact) <= 4 * right.std_error < 0.01
    every = bridge_sampling(draws, lp, restricted, np.random.default_rng(8))
    assert abs(every.log_z - exact) > 4 * every.std_error
