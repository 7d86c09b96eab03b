"""Pseudo-extended sampling end to end (compiled; few, small models).

Tolerances are Monte-Carlo standard errors: ``|estimate - exact| < 4 * MCSE``
with the MCSE of :meth:`PseudoExtendedFit.expectation` (per-draw weighted
estimates, autocorrelation-aware multi-chain ESS), or of plain chain means.
Seeds are fixed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import pemc_stan
from pemc_stan.estimators.weights import chain_ess
from pemc_stan.run.pipeline import method_model

pytestmark = pytest.mark.compiled

ROOT = Path(__file__).resolve().parents[3]
BIMODAL = ROOT / "models" / "bimodal_1d" / "bimodal_1d.stan"
BIMODAL_DATA = json.loads((ROOT / "models" / "bimodal_1d" / "bimodal_1d.data.json").read_text())

# Bounded scalar, parameter-dependent bound, simplex and cholesky_factor_corr, with
# closed-form posterior means:
#   theta | k ~ Beta(2 + k, 3 + n - k)
#   s | counts ~ Dirichlet(alpha + counts)
#   L ~ LKJ-Cholesky(eta)  =>  E[L L'] = I
#   a ~ Exp(1), b - a | a ~ Exp(2) on b > a  =>  E[a] = 1, E[b] = 1.5
CONSTRAINED = """
data {
  int<lower=0> n;
  int<lower=0, upper=n> k;
  vector<lower=0>[3] alpha;
  array[3] int<lower=0> counts;
  real<lower=0> eta;
}
parameters {
  real<lower=0, upper=1> theta;
  simplex[3] s;
  cholesky_factor_corr[3] L;
  real<lower=0> a;
  real<lower=a> b;
}
model {
  theta ~ beta(2, 3);
  k ~ binomial(n, theta);
  s ~ dirichlet(alpha);
  counts ~ multinomial(s);
  L ~ lkj_corr_cholesky(eta);
  a ~ exponential(1);
  target += exponential_lpdf(b - a | 2);
}
generated quantities {
  matrix[3, 3] Omega = multiply_lower_tri_self_transpose(L);
}
"""
CONSTRAINED_DATA = {"n": 20, "k": 6, "alpha": [1.0, 2.0, 3.0], "counts": [4, 7, 2], "eta": 2.0}


def _exact_constrained() -> dict[str, float]:
    n, k = CONSTRAINED_DATA["n"], CONSTRAINED_DATA["k"]
    post = np.asarray(CONSTRAINED_DATA["alpha"]) + np.asarray(CONSTRAINED_DATA["counts"])
    out = {"theta": (2 + k) / (5 + n), "a": 1.0, "b": 1.5}
    for j in range(3):
        out[f"s[{j + 1}]"] = post[j] / post.sum()
    return out


def _within(est: float, se: float, exact: float, what: str, k: float = 4.0) -> None:
    assert abs(est - exact) < k * se, f"{what}: {est:.4f} vs exact {exact:.4f} (se {se:.4f})"


@pytest.fixture(scope="module")
def bimodal_pe(compiled, cmdstan_installation):
    return method_model(BIMODAL, BIMODAL_DATA, method="pe", split_modes="never", n_pseudo=5)


def test_plain_nuts_stays_in_one_mode(compiled) -> None:
    model = compiled(BIMODAL)
    fit = model.sample(data=BIMODAL_DATA, chains=4, iter_warmup=500, iter_sampling=1000,
                       seed=11, show_progress=False)
    x = fit.stan_variable("x").reshape(4, -1)
    left = (x < 0).mean(axis=1)
    # every chain stays in the mode it started in ...
    assert set(np.round(left, 12)) <= {0.0, 1.0}, left
    # ... so the within-chain mode masses are 0 or 1, never the true 0.3
    assert np.all(np.abs(left - BIMODAL_DATA["w"]) >= 0.3)


def test_pe_recovers_mode_masses(bimodal_pe) -> None:
    fit = bimodal_pe.sample(chains=4, iter_warmup=1000, iter_sampling=2000, seed=3)
    w, m1, m2 = BIMODAL_DATA["w"], BIMODAL_DATA["mu1"], BIMODAL_DATA["mu2"]
    for estimator in ("draw", "mixture"):
        left = fit.expectation(lambda v: (v["x"] < 0).astype(float), estimator=estimator)
        _within(left.mean, left.mcse, w, f"{estimator} P(x < 0)")
        assert left.mcse < 0.06  # informative: the two masses 0.3 / 0.7 are resolved
        mean = fit.expectation("x", estimator=estimator)
        _within(mean.mean, mean.mcse, w * m1 + (1 - w) * m2, f"{estimator} E[x]")
    # every chain visits both modes (resampled draws keep chains)
    res = fit.resampled_draws_pd()
    for _, chain in res.groupby("chain__"):
        assert 0.05 < (chain["x"] < 0).mean() < 0.95
    info = fit.diagnostics(warn=False)
    assert info["weight_ess_mean"] > 1.2  # the tempered copies share the weight
    assert info["beta_quantiles"][0] < 0.1  # small inverse temperatures are reached


def test_weights_python_agree_with_generated_quantities(bimodal_pe) -> None:
    fit = bimodal_pe.sample(chains=2, iter_warmup=300, iter_sampling=300, seed=5,
                            sig_figs=15)
    lw_py, lw_stan = fit.log_weights(), fit.log_weights_stan()
    np.testing.assert_allclose(lw_py, lw_stan, rtol=1e-9, atol=1e-9)
    # independent check: log gamma from scipy, eq 3 with uniform pi = g
    x = np.stack([fit.pseudo_samples("x")], axis=0)[0]
    d = BIMODAL_DATA
    log_gamma = np.logaddexp(np.log(d["w"]) + stats.norm.logpdf(x, d["mu1"], d["sigma"]),
                             np.log1p(-d["w"]) + stats.norm.logpdf(x, d["mu2"], d["sigma"]))
    np.testing.assert_allclose(fit.log_gamma(), log_gamma, rtol=1e-8, atol=1e-8)
    expected = (1 - fit.beta()) * (log_gamma - fit.log_scale)
    np.testing.assert_allclose(lw_py, expected, rtol=1e-8, atol=1e-8)
    wn = fit.normalised_weights()
    np.testing.assert_allclose(wn.sum(axis=-1), 1.0, rtol=1e-12)


def test_weighted_beta_follows_pi(compiled, cmdstan_installation) -> None:
    # Theorem 2.1 holds for (x, beta) jointly: the weighted pseudo-sample's (x_i, beta_i)
    # follows pi(x) x pi(beta), so sum_i W_i beta_i estimates E_pi[beta] = 0.37 exactly.  A pi
    # or g term missing from the weight or the target (dropping g from the target gives 0.50),
    # or a beta law tilted by 1/beta (0.10), fails here.
    b0 = 0.01
    pe = method_model(BIMODAL, BIMODAL_DATA, method="pe", split_modes="never",
                      n_pseudo=3, beta_min=b0,
                             beta_prior=(0.5, 1), instrumental=(0.5, 1))
    fit = pe.sample(chains=4, iter_warmup=1000, iter_sampling=2000, seed=7)
    # pi = Beta(0.5, 1) restricted to (b0, 1): density proportional to beta^(-1/2)
    exact_beta = (1 - b0 ** 1.5) / (3 * (1 - b0 ** 0.5))
    weighted_beta = fit.expectation(lambda _: fit.beta())  # sum_i W_i beta_i per draw
    _within(weighted_beta.mean, weighted_beta.mcse, exact_beta, "E_pi[beta]")
    assert weighted_beta.mcse < 0.02
    # the pooled mixture estimator weights (x_i, beta_i) by its target-component probability
    pooled_beta = fit.expectation(lambda _: fit.beta(), estimator="mixture")
    _within(pooled_beta.mean, pooled_beta.mcse, exact_beta, "mixture E_pi[beta]")
    assert pooled_beta.mcse < 0.02
    left = fit.expectation(lambda v: (v["x"] < 0).astype(float))
    _within(left.mean, left.mcse, BIMODAL_DATA["w"], "P(x < 0)")
    assert left.mcse < 0.06
    assert fit.beta().min() > b0


@pytest.fixture(scope="module")
def constrained_pe(compiled, cmdstan_installation):
    # 7 unconstrained dimensions, two with exponential tails: with g uniform on (0, 1)
    # q(x, beta) would be improper (int gamma^beta ~ beta^-2), so beta lives on (0.1, 1).
    return method_model(CONSTRAINED, CONSTRAINED_DATA, method="pe", split_modes="never",
                        n_pseudo=3, beta_min=0.1)


def _check_constrained(fit, label: str) -> None:
    for col, exact in _exact_constrained().items():
        for estimator in ("draw", "mixture"):  # mixture: one Z/Z_q per copy on a ladder
            est = fit.expectation(col, estimator=estimator)
            _within(est.mean, est.mcse, exact, f"{label} {estimator} E[{col}]")
    # E[Omega] = I via the resampled draws and the ORIGINAL model's generated quantities
    res = fit.resampled_draws_pd()
    n_chains = res["chain__"].nunique()
    for i, j in ((1, 2), (1, 3), (2, 3)):
        v = res[f"Omega[{i},{j}]"].to_numpy().reshape(n_chains, -1)
        se = v.std(ddof=1) / np.sqrt(chain_ess(v))
        _within(v.mean(), se, 0.0, f"{label} E[Omega[{i},{j}]]")
    np.testing.assert_allclose(res["Omega[2,2]"], 1.0, atol=1e-8)


def test_constrained_posterior_means(constrained_pe) -> None:
    fit = constrained_pe.sample(chains=4, iter_warmup=700, iter_sampling=1000, seed=7)
    assert fit.result.parameters[-1].unrolled  # b has lower=a: one copy per pseudo-sample
    assert fit.beta().min() >= 0.1
    _check_constrained(fit, "PE N=3")


def test_n1_reproduces_original_posterior(compiled) -> None:
    pe = method_model(CONSTRAINED, CONSTRAINED_DATA, method="pe", split_modes="never", n_pseudo=1)
    fit = pe.sample(chains=4, iter_warmup=700, iter_sampling=1000, seed=8)
    np.testing.assert_allclose(fit.normalised_weights(), 1.0)
    _check_constrained(fit, "PE N=1")


def test_likelihood_tempering_with_fixed_ladder(compiled) -> None:
    pe = method_model(CONSTRAINED, CONSTRAINED_DATA, method="pe", split_modes="never",
                      n_pseudo=3, temper="likelihood",
                             beta=[0.2, 0.6, 1.0])
    fit = pe.sample(chains=4, iter_warmup=700, iter_sampling=1000, seed=9, sig_figs=15)
    np.testing.assert_allclose(fit.log_weights(), fit.log_weights_stan(), rtol=1e-9, atol=1e-9)
    _check_constrained(fit, "PE likelihood ladder")


NONCENTRED = """
data { int<lower=0> n; int<lower=0, upper=n> k; }
parameters {
  real<lower=0, upper=1> theta;
  real<lower=0> lambda;
  real<upper=0> w;
  vector[2] v;
}
model {
  theta ~ beta(2, 3);
  k ~ binomial(n, theta);
  lambda ~ gamma(3, 2);
  w ~ normal(-1, 1);
  v ~ normal(1, 2);
}
"""


def test_noncentring_keeps_the_target(compiled, cmdstan_installation) -> None:
    # Exact: Beta(2 + k, 3 + n - k), Gamma(3, 2), N(-1, 1) truncated above at 0, N(1, 2).
    # A wrong log-Jacobian of a constraint shifts these by many SEs.  Dropping the
    # beta^(-alpha/2) term tilts pi and g alike, which the x-marginal cannot see (the weights
    # only use pi / g), but the weighted beta then no longer follows pi (E = 0.55 -> 0.70).
    pe = method_model(NONCENTRED, {"n": 20, "k": 6}, method="pe", split_modes="never",
                      n_pseudo=3, beta_min=0.1,
                             noncentring=0.5, log_scale=0.0)
    fit = pe.sample(chains=4, iter_warmup=700, iter_sampling=1000, seed=12, sig_figs=15)
    np.testing.assert_allclose(fit.log_weights(), fit.log_weights_stan(), rtol=1e-9, atol=1e-9)
    w_mean = -1 - stats.norm.pdf(1) / stats.norm.cdf(1)
    exact = {"theta": 8 / 25, "lambda": 1.5, "w": w_mean, "v[1]": 1.0, "v[2]": 1.0}
    for col, value in exact.items():
        for estimator in ("draw", "mixture"):
            est = fit.expectation(col, estimator=estimator)
            _within(est.mean, est.mcse, value, f"noncentring {estimator} E[{col}]")
    var_v = fit.expectation(lambda v: (v["v[1]"] - 1) ** 2)
    _within(var_v.mean, var_v.mcse, 4.0, "noncentring Var[v[1]]")
    weighted_beta = fit.expectation(lambda _: fit.beta())
    _within(weighted_beta.mean, weighted_beta.mcse, 0.55, "noncentring E_pi[beta]")
    assert fit.beta().min() >= 0.1
    assert fit.diagnostics(warn=False)["divergences"] == 0


def test_sample_entry_point_accepts_cmdstanmodel(compiled) -> None:
    import pemc_stan

    model = compiled(BIMODAL)
    # budget=1: this short run is suspect, and a follow-up would double its draws
    fit = pemc_stan.sample(model, BIMODAL_DATA, method="pe", split_modes="never",
                           n_pseudo=2, log_scale=0.0, chains=2,
                           iter_warmup=200, iter_sampling=200, seed=4, budget=1)
    assert fit.log_scale == 0.0 and fit.follow_up.steps == []
    assert fit.beta().shape == (2, 200, 2)
    assert fit.resampled_parameters_pd().shape == (400, 4)
    assert fit._original() is model  # the given model is reused for generated quantities


def test_default_target_is_proper_in_five_dimensions(compiled) -> None:
    """Defaults on a 5-D standard normal (no likelihood: whole-posterior tempering).

    With g = pi = Beta((d + 1)/2, 1) the instrumental's beta marginal is proportional to
    int gamma^beta dx * g(beta) = (2 pi)^(d (1 - beta) / 2) beta^(-d/2) * beta^((d - 1)/2),
    i.e. beta^(-1/2) exp(-c beta), c = (d/2) log(2 pi), on (a, 1), a = beta_min = 0.01 (the
    default under whole-posterior tempering): proper; its mean by quadrature.  Each
    pseudo-sample is the target one with probability 1/N (beta ~ pi, mean
    ((d + 1)/2) / ((d + 3)/2); its mass below a is 1e-6).  With a uniform g (the paper's)
    the marginal is beta^(-d/2) exp(-c beta), piled at a, and this test fails."""
    d = 5
    code = "parameters { vector[5] x; } model { x ~ normal(0, 1); }"
    fit = pemc_stan.sample(code, method="pe", split_modes="never",
                           log_scale=0.0, chains=4, iter_warmup=500,
                           iter_sampling=1000, seed=11)
    n = fit.result.options.n_pseudo  # the default N
    assert fit.result.temper == "posterior" and fit.g_shape == (d + 1) / 2
    from scipy.integrate import quad

    c, a = d / 2 * np.log(2 * np.pi), 0.01
    q_mean = (quad(lambda b: b ** 0.5 * np.exp(-c * b), a, 1)[0]
              / quad(lambda b: b ** -0.5 * np.exp(-c * b), a, 1)[0])
    pi_mean = ((d + 1) / 2) / ((d + 3) / 2)
    exact = pi_mean / n + (1 - 1 / n) * q_mean
    per_draw = fit.beta().mean(axis=-1)  # (chains, draws)
    import arviz as az

    mcse = float(np.std(per_draw) / np.sqrt(float(az.ess(per_draw, method="mean"))))
    assert mcse < 0.02
    assert abs(per_draw.mean() - exact) < 4 * mcse, (per_draw.mean(), exact, mcse)
    x1 = fit.expectation("x[1]")
    assert abs(x1.mean) < 4 * x1.mcse
    second = fit.expectation(lambda v: v["x[1]"] ** 2)
    assert abs(second.mean - 1.0) < 4 * second.mcse
    assert fit.nuts_counts().divergences < 40  # < 1% of the transitions


def _log_tempered_mass(beta: float, m: np.ndarray, S: np.ndarray) -> float:
    """log int N(x | m, S)^(1 - beta) N(x | 0, I)^beta dx, in closed form."""
    d, a = len(m), 1.0 - beta
    s_inv = np.linalg.inv(S)
    lam = a * s_inv + beta * np.eye(d)
    eta = a * s_inv @ m
    return float(-a / 2 * np.linalg.slogdet(2 * np.pi * S)[1] - beta * d / 2 * np.log(2 * np.pi)
                 - a / 2 * m @ s_inv @ m + d / 2 * np.log(2 * np.pi)
                 - 0.5 * np.linalg.slogdet(lam)[1] + 0.5 * eta @ np.linalg.solve(lam, eta))


def test_base_tempered_target_in_five_dimensions(compiled) -> None:
    """temper='base' on a 5-D standard normal: the whole density is tempered
    towards the pilot's Gaussian base b = N(m, S), q(x, beta) ∝ b^(1 - beta) gamma^beta with
    a uniform g on (0, 1).  Its beta marginal is ∝ int b^(1 - beta) gamma^beta dx, in closed
    form for the fitted base; each pseudo-sample is the target one (beta ~ pi = g, mean 1/2)
    with probability 1/N.  A wrong log b in the program (a missing Jacobian or constant)
    moves the marginal and fails this test."""
    from scipy.integrate import quad

    n = 2
    code = "parameters { vector[5] x; } model { x ~ normal(0, 1); }"
    fit = pemc_stan.sample(code, method="pe", split_modes="never",
                           log_scale=0.0, temper="base", chains=4,
                           iter_warmup=500, iter_sampling=1000, seed=11)
    assert fit.result.temper == "base" and fit.base is not None
    m, S = fit.base.mean, fit.base.cov
    log_norm = _log_tempered_mass(0.5, m, S)
    dens = [quad(lambda b, k=k: b ** k * np.exp(_log_tempered_mass(b, m, S) - log_norm), 0, 1)[0]
            for k in (0, 1)]
    exact = 0.5 / n + (1 - 1 / n) * dens[1] / dens[0]
    per_draw = fit.beta().mean(axis=-1)
    import arviz as az

    mcse = float(np.std(per_draw) / np.sqrt(float(az.ess(per_draw, method="mean"))))
    assert mcse < 0.02
    assert abs(per_draw.mean() - exact) < 4 * mcse, (per_draw.mean(), exact, mcse)
    second = fit.expectation(lambda v: v["x[1]"] ** 2)
    assert abs(second.mean - 1.0) < 4 * second.mcse and second.mcse < 0.1
    assert fit.check().ok, fit.check()


FLAT_NORMAL = """
data { int<lower=3> n; vector[n] y; }
parameters { real mu; real<lower=0> sigma; }
model { y ~ normal(mu, sigma); }
"""
FLAT_NORMAL_Y = [5.582, -3.611, 2.336, 0.364, 0.595, 1.069, -2.54, 1.036, -0.23, 8.146, 1.952,
                 0.795, 0.937, 0.164, -0.61, 0.718, 2.464, 1.023, 3.416, 1.1]


def test_defaults_with_flat_priors_are_proper(compiled) -> None:
    """Normal data, flat priors on mu and sigma (n = 20).  gamma^beta is not integrable for
    beta <= 2/n (sigma^(1 - n beta) tails after integrating mu out), so tempering the whole
    posterior with beta down to 0.01 is improper; the default tempers towards the base.
    Exact (S the sum of squared deviations): E[mu] = mean(y), E[sigma] = sqrt(S/2)
    Gamma((n-3)/2) / Gamma((n-2)/2), E[sigma^2] = S / (n - 4).  (The evidence is refused:
    the priors are improper.)"""
    from scipy.special import gammaln

    y = np.asarray(FLAT_NORMAL_Y)
    n, s = len(y), float(((y - y.mean()) ** 2).sum())
    e_sigma = np.sqrt(s / 2) * np.exp(gammaln((n - 3) / 2) - gammaln((n - 2) / 2))
    fit = pemc_stan.sample(FLAT_NORMAL, {"n": n, "y": y.tolist()}, method="pe", split_modes="never",
                           seed=4)
    assert fit.result.temper == "base"
    for f, exact in (("mu", y.mean()), ("sigma", e_sigma),
                     (lambda v: v["sigma"] ** 2, s / (n - 4))):
        e = fit.expectation(f)
        assert abs(e.mean - exact) < 4 * e.mcse and e.mcse < 0.1 * exact, (f, e, exact)
    assert fit.nuts_counts().divergences < 40  # < 1% of the transitions
    verdict = fit.check()
    assert verdict.ok, verdict


FUNNEL = """
parameters { real v; vector[4] z; }
model { v ~ normal(0, 3); z ~ normal(0, exp(v / 2)); }
"""


def test_defaults_non_centre_neals_funnel(compiled) -> None:
    """Neal's funnel in 5-D, normalised: log Z = 0, E[v] = 0, E[v^2] = 9.  The program
    declares z with its prior's scale as multiplier, and with no likelihood split the
    default tempers towards the base: gamma^beta would push v to about 18 / beta (92% of
    transitions diverged).  The caps make a log 2 error in log Z, or a missed neck, fail."""
    fit = pemc_stan.sample(FUNNEL, {}, method="pe", split_modes="never", seed=3)
    assert [nc.name for nc in fit.result.noncentred] == ["z"]
    assert fit.result.temper == "base"
    assert "vector<multiplier=exp(v[1] / 2)>[4] pemc_z_1;" in fit.result.stan_code
    for f, exact, cap in (("v", 0.0, 0.15), (lambda v: v["v"] ** 2, 9.0, 1.0)):
        e = fit.expectation(f)
        assert 0 < e.mcse < cap and abs(e.mean - exact) < 4 * e.mcse, (f, e)
    est = pemc_stan.evidence(fit, estimator="bridge", seed=3)
    assert 0 < est.std_error < 0.1 and abs(est.log_z) < 4 * est.std_error, est
    assert fit.nuts_counts().divergences < 40  # < 1% of the transitions
    assert fit.check().ok, fit.check()
