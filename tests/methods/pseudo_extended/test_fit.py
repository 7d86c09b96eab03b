"""PseudoExtendedFit post-processing on a synthetic fit (no compilation)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from pemc_stan.errors import PseudoExtendedDiagnosticWarning, PseudoExtendedWarning
from pemc_stan.methods.pseudo_extended.fit import PseudoExtendedFit
from pemc_stan.run.pipeline import transform_result

CODE = """
parameters { real<lower=0> tau; real<lower=-tau, upper=tau> x; vector[2] v; }
model { tau ~ exponential(1); x ~ normal(0, 1); v ~ normal(0, 1); }
"""


class _FakeFit:
    """Just what PseudoExtendedFit reads from a CmdStanMCMC."""

    def __init__(self, columns: list[str], draws: np.ndarray) -> None:
        self.column_names = tuple(columns)
        self._draws = draws

    def draws(self, concat_chains: bool = False) -> np.ndarray:
        assert not concat_chains
        return self._draws


def _fake(n_chains: int = 2, n_draws: int = 50, seed: int = 0,
          nuts_columns: bool = False) -> tuple[PseudoExtendedFit, dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PseudoExtendedWarning)
        res = transform_result(CODE, method="pe", n_pseudo=2, beta_prior=(2, 2), temper="posterior")
    cols = ["lp__", "tau[1]", "tau[2]", "pemc_x_1", "pemc_x_2", "v[1,1]", "v[2,1]", "v[1,2]",
            "v[2,2]", "pemc_beta[1]", "pemc_beta[2]", "pemc_log_weight[1]",
            "pemc_log_weight[2]", "pemc_log_gamma[1]", "pemc_log_gamma[2]"]
    if nuts_columns:
        cols += ["treedepth__", "divergent__"]
    rng = np.random.default_rng(seed)
    arr = rng.normal(size=(n_draws, n_chains, len(cols)))
    c = {name: i for i, name in enumerate(cols)}
    arr[:, :, c["pemc_beta[1]"]] = rng.uniform(0.05, 0.95, size=(n_draws, n_chains))
    arr[:, :, c["pemc_beta[2]"]] = rng.uniform(0.05, 0.95, size=(n_draws, n_chains))
    arr[:, :, c["pemc_log_gamma[1]"]] *= 5
    arr[:, :, c["pemc_log_gamma[2]"]] *= 5
    return PseudoExtendedFit(_FakeFit(cols, arr), res, log_scale=-0.5, seed=1), c


def test_parameter_columns_map_copies() -> None:
    fit, c = _fake()
    assert fit.parameter_columns() == ["tau", "x", "v[1]", "v[2]"]
    raw = fit._draws  # (draws, chains, cols)
    np.testing.assert_array_equal(fit.pseudo_samples("v[2]")[..., 1],
                                  raw[:, :, c["v[2,2]"]].T)
    np.testing.assert_array_equal(fit.pseudo_samples("x")[..., 0], raw[:, :, c["pemc_x_1"]].T)
    with pytest.raises(KeyError):
        fit.pseudo_samples("nope")


def test_log_weights_formula_with_beta_prior() -> None:
    from scipy import stats

    fit, _ = _fake()
    beta, lg = fit.beta(), fit.log_gamma()
    expected = (1 - beta) * (lg + 0.5) + stats.beta.logpdf(beta, 2, 2)
    np.testing.assert_allclose(fit.log_weights(), expected)
    np.testing.assert_allclose(fit.normalised_weights().sum(axis=-1), 1.0)
    ess = fit.weight_ess()
    assert ess.shape == (2, 50) and np.all((ess >= 1 - 1e-12) & (ess <= 2 + 1e-12))


def test_resampling_keeps_one_copy_per_iteration() -> None:
    fit, _ = _fake()
    idx = fit.resample_index()
    assert idx.shape == (2, 50)
    df = fit.resampled_parameters_pd()
    assert list(df.columns) == ["chain__", "iter__", "draw__", "tau", "x", "v[1]", "v[2]"]
    copies = fit.pseudo_samples("v[1]")
    chosen = np.take_along_axis(copies, idx[..., None], axis=-1)[..., 0].reshape(-1)
    np.testing.assert_array_equal(df["v[1]"].to_numpy(), chosen)
    assert (df.groupby("chain__").size() == 50).all()


def test_expectation_weights_pseudo_samples_by_theorem_2_1() -> None:
    """Draws alternate between two states whose weighted estimates are known by hand:
    within a draw ``w_i ∝ gamma(x_i)^(1 - beta_i) pi(beta_i) / g(beta_i)`` (Theorem 2.1), so
    with equal temperatures (0.5, 0.5) and log gamma (0, 2) the weights are (1, e) / (1 + e);
    with equal log gamma they are equal."""
    fit, c = _fake()
    d = fit._draws
    a, b = slice(0, None, 2), slice(1, None, 2)
    for state, beta, log_gamma, tau in ((a, 0.5, (0.0, 2.0), (1.0, 3.0)),
                                        (b, 0.3, (1.0, 1.0), (2.0, 4.0))):
        d[state, :, c["pemc_beta[1]"]] = d[state, :, c["pemc_beta[2]"]] = beta
        d[state, :, c["pemc_log_gamma[1]"]], d[state, :, c["pemc_log_gamma[2]"]] = log_gamma
        d[state, :, c["tau[1]"]], d[state, :, c["tau[2]"]] = tau
    e = np.e
    h_a, h_b = (1.0 + 3.0 * e) / (1.0 + e), 3.0
    est = fit.expectation("tau")
    assert est.mean == pytest.approx((h_a + h_b) / 2, rel=1e-12)
    assert est.mcse > 0 and est.ess > 1
    info = fit.diagnostics(warn=False)
    assert set(info) >= {"weight_ess_mean", "max_weight_share", "beta_quantiles", "messages"}


def test_diagnostics_advise_a_deeper_tree_when_trajectories_are_cut() -> None:
    fit, c = _fake(n_draws=100, nuts_columns=True)
    fit._draws[:, :, c["treedepth__"]] = 5
    fit._draws[:, :, c["divergent__"]] = 0
    info = fit.diagnostics(warn=False)  # no recorded max_depth: nothing counted
    assert info["max_treedepth_hits"] == 0
    assert not any("max_treedepth" in m for m in info["messages"])
    fit.fit.metadata = SimpleNamespace(cmdstan_config={"max_depth": 10})
    fit._draws[:3, 0, c["treedepth__"]] = 10  # 3 of 200 transitions: 1.5%
    with pytest.warns(PseudoExtendedDiagnosticWarning, match="max_treedepth=12"):
        info = fit.diagnostics(warn=True)
    assert info["max_treedepth_hits"] == 3 and info["divergences"] == 0
    fit._draws[1:3, 0, c["treedepth__"]] = 9  # 1 of 200: under the 1% threshold
    info = fit.diagnostics(warn=False)
    assert info["max_treedepth_hits"] == 1
    assert not any("max_treedepth" in m for m in info["messages"])


def test_mixture_expectation_pools_all_pseudo_samples() -> None:
    from pemc_stan.methods.pseudo_extended.estimators import mixture_mean

    fit, _ = _fake()
    est = fit.expectation("tau", estimator="mixture")
    ref = mixture_mean(fit.pseudo_samples("tau"), fit.log_weights())
    assert est.mean == pytest.approx(ref.mean)
    assert ref.influence.shape == (2, 50)  # (chains, draws)
    assert est.mcse == pytest.approx(np.std(ref.influence, ddof=1) / np.sqrt(est.ess))
    assert est.mean != pytest.approx(fit.expectation("tau").mean)  # not the per-draw estimate
    assert list(fit.summary(estimator="mixture")["mean"])[0] == pytest.approx(est.mean)
    with pytest.raises(ValueError, match="estimator='pooled'"):
        fit.expectation("tau", estimator="pooled")
    with pytest.raises(ValueError, match="shape"):
        fit.expectation(lambda v: v["tau"][..., 0])


def test_a_draw_whose_every_density_failed_is_the_chains_previous_draw() -> None:
    """posteriordb lotka_volterra: the ODE solver failed in generated quantities for every
    pseudo-sample of 3 draws (NaN log densities), and resampling stopped ('rows of
    log-weights are all -inf').  Such a draw is now the chain's previous one, as after a
    rejected proposal, and the verdict says how many."""
    from fakes import fake_pe_fit

    clean = fake_pe_fit(n_chains=2, n_draws=30, n_pseudo=3)
    fit = fake_pe_fit(n_chains=2, n_draws=30, n_pseudo=3,
                      nan_density=((5, 0, 0), (5, 0, 1), (5, 0, 2),  # draw 5 of chain 0
                                   (0, 1, 0), (0, 1, 1), (0, 1, 2),  # the first of chain 1
                                   (9, 1, 2)))  # one pseudo-sample only
    assert (fit.density_failures, fit.failed_draws) == (7, 2)
    tau = fit.particles("tau")
    assert np.array_equal(tau[0, 5], tau[0, 4]) and np.array_equal(tau[1, 0], tau[1, 1])
    assert np.array_equal(tau[0, 6:], clean.particles("tau")[0, 6:])
    lw = fit.particle_log_weights()
    assert np.isneginf(lw[1, 9, 2]) and np.all(np.isfinite(lw[1, 9, :2]))
    assert np.isfinite(fit.expectation("tau").mean)
    assert np.all(np.isfinite(fit.resampled_parameters_pd()["tau"]))
    # 7 of 180 pseudo-samples (3.9% > 1%): suspect, naming the replaced draws
    reasons = {r.name: r for r in fit.check().reasons}
    assert "2 draw(s) where every pseudo-sample failed" in reasons["density_failures"].message
    assert clean.failed_draws == 0
    assert "density_failures" not in {r.name for r in clean.check().reasons}
    # one failed pseudo-sample in 600 (0.17%) is advice, not a fault
    few = fake_pe_fit(n_chains=2, n_draws=100, n_pseudo=3, nan_density=((3, 1, 2),))
    assert "density_failures" not in {r.name for r in few.check().reasons}
    assert few.diagnostics(warn=False)["density_failures"] == 1


@pytest.mark.parametrize(("share", "rhat", "named"), [
    (1.0, 1.30, True),   # collapsed copies and chains in different modes: PE fails here
    (1.0, 1.01, False),  # a concentrated posterior: one copy carries it, the chains agree
    (0.5, 1.30, False),  # copies that share the weight: a slow run, for the follow-ups
])
def test_collapsed_copies_are_a_reason_only_while_the_chains_disagree(
        share: float, rhat: float, named: bool) -> None:
    """``copies_collapsed`` names PE's failure and the method that tempers the whole
    target; neither sign alone makes it (the follow-ups lengthen a slow run)."""
    from fakes import fake_pe_fit

    fit = fake_pe_fit()
    fit.max_weight_share = lambda threshold=0.99: share  # type: ignore[method-assign]
    fit.worst_rhat = lambda: rhat  # type: ignore[method-assign]
    found = dict(fit.method_checks())["copies_collapsed"]
    assert (found is not None) == named, found
    if found is not None:
        assert "R-hat 1.30" in found.message and "method='ct'" in found.remedy


@pytest.mark.parametrize("stay", [False, True])
def test_copies_that_stay_in_their_modes_are_named_though_the_chains_agree(stay: bool) -> None:
    """``copies_agree``: where one copy of every chain sits 6 sd from the others, every
    chain gives the same estimate (the chains agree) and the run is still suspect, with
    the column and the method that moves between modes; copies drawn alike are not."""
    from fakes import fake_pe_fit

    fit = fake_pe_fit(n_chains=4, n_draws=400)
    if stay:
        fit._draws[:, :, fit._col["v[1,1]"]] += 6.0
    found = dict(fit.method_checks())["copies_agree"]
    assert (found is not None) == stay, found
    names = {r.name for r in fit.check().reasons}
    assert ("copies_agree" in names) == stay
    assert "chains_agree" not in names
    if found is not None:
        assert "v[1]" in found.message and "method='ct'" in found.remedy
        assert fit.check().status == "suspect"
