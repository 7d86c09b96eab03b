"""The resolved CmdStan through cmdstanpy's public API, checked against analytic answers.

Model: y_i ~ normal(mu, sigma) with sigma known and mu ~ normal(mu0, tau0), so
the posterior of mu is normal with precision 1/tau0^2 + N/sigma^2.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import arviz as az
import cmdstanpy
import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.compiled

CONJUGATE = """
data {
  int<lower=0> N;
  vector[N] y;
  real mu0;
  real<lower=0> tau0;
  real<lower=0> sigma;
}
transformed data {
  real ybar = mean(y);
}
parameters {
  real mu;
}
transformed parameters {
  real mu_centred = mu - ybar;
}
model {
  mu ~ normal(mu0, tau0);
  y ~ normal(mu, sigma);
}
generated quantities {
  real mu_sq = square(mu);
  real y_rep = normal_rng(mu, sigma);
}
"""

REJECTS = """
parameters {
  real x;
}
model {
  reject("this model rejects every point; x = ", x);
}
"""


@pytest.fixture(scope="module")
def data() -> dict[str, object]:
    rng = np.random.default_rng(20261121)
    y = rng.normal(1.3, 2.0, size=25)
    return {"N": len(y), "y": y.tolist(), "mu0": 0.5, "tau0": 1.5, "sigma": 2.0}


@pytest.fixture(scope="module")
def exact(data: dict[str, object]) -> tuple[float, float]:
    y = np.asarray(data["y"])
    precision = 1 / data["tau0"] ** 2 + len(y) / data["sigma"] ** 2  # type: ignore[operator]
    mean = (data["mu0"] / data["tau0"] ** 2 + y.sum() / data["sigma"] ** 2) / precision  # type: ignore[operator]
    return float(mean), float(1 / math.sqrt(precision))


@pytest.fixture(scope="module")
def model(compiled: Callable[..., cmdstanpy.CmdStanModel]) -> cmdstanpy.CmdStanModel:
    return compiled(CONJUGATE, name="conjugate_normal")


@pytest.fixture(scope="module")
def fit(
    model: cmdstanpy.CmdStanModel, data: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
) -> cmdstanpy.CmdStanMCMC:
    return model.sample(
        data=data,
        chains=4,
        parallel_chains=4,
        iter_warmup=1000,
        iter_sampling=2000,
        seed=11,
        sig_figs=12,
        show_progress=False,
        output_dir=str(tmp_path_factory.mktemp("fit")),
    )


def test_sample_matches_analytic_posterior(
    fit: cmdstanpy.CmdStanMCMC, data: dict[str, object], exact: tuple[float, float]
) -> None:
    mean, sd = exact
    draws = fit.stan_variable("mu")
    assert draws.shape == (8000,)
    ess = float(az.ess(fit.draws()[:, :, list(fit.column_names).index("mu")].T))
    mcse = sd / math.sqrt(ess)
    assert abs(draws.mean() - mean) < 4 * mcse
    # standard deviation: the MC error of a normal sd estimate is about sd / sqrt(2 ess)
    assert abs(draws.std() - sd) < 4 * sd / math.sqrt(2 * ess)
    # transformed parameters and generated quantities are computed per draw
    np.testing.assert_allclose(fit.stan_variable("mu_sq"), draws**2, rtol=1e-9)
    y_bar = float(np.mean(data["y"]))  # type: ignore[arg-type]
    np.testing.assert_allclose(fit.stan_variable("mu_centred"), draws - y_bar, atol=1e-9)


def test_sample_metadata_and_diagnostics(fit: cmdstanpy.CmdStanMCMC) -> None:
    assert fit.chains == 4
    assert fit.num_draws_sampling == 2000
    assert list(fit.divergences) == [0, 0, 0, 0]
    assert fit.metric_type == "diag_e"
    assert fit.step_size is not None and np.all(fit.step_size > 0)
    assert len(fit.time) == 4 and all(t["total"] > 0 for t in fit.time)
    summary = fit.summary()
    assert "mu" in summary.index and "lp__" in summary.index
    assert summary.loc["mu", "R_hat"] < 1.01
    assert "Processing complete" in (fit.diagnose() or "")


def test_chains_run_concurrently_in_one_process(
    model: cmdstanpy.CmdStanModel, data: dict[str, object], tmp_path: Path
) -> None:
    fit = model.sample(
        data=data,
        chains=4,
        parallel_chains=4,
        iter_warmup=3000,
        iter_sampling=3000,
        refresh=1,
        seed=3,
        show_progress=False,
        output_dir=str(tmp_path),
    )
    consoles = sorted(tmp_path.glob("*stdout*.txt")) or sorted(tmp_path.glob("*.txt"))
    assert len(consoles) == 1, f"expected one process for 4 chains, got {consoles}"
    lines = consoles[0].read_text().splitlines()
    chain_of = [int(m.group(1)) for line in lines
                if (m := re.match(r"Chain \[(\d+)\] Iteration", line))]
    assert set(chain_of) == {1, 2, 3, 4}
    # Chains that ran one after another would give 3 switches; interleaving gives many.
    switches = sum(a != b for a, b in zip(chain_of, chain_of[1:], strict=False))
    assert switches > 10
    assert fit.chains == 4


def test_arviz_conversion(fit: cmdstanpy.CmdStanMCMC) -> None:
    idata = az.from_cmdstanpy(fit)
    assert idata.posterior["mu"].shape == (4, 2000)
    assert "diverging" in idata.sample_stats
    assert float(az.rhat(idata, var_names=["mu"])["mu"]) < 1.01


def test_optimize_finds_analytic_mode(
    model: cmdstanpy.CmdStanModel, data: dict[str, object], exact: tuple[float, float]
) -> None:
    mean, sd = exact
    for algorithm in ("lbfgs", "bfgs"):
        opt = model.optimize(data=data, algorithm=algorithm, seed=1, show_console=False)
        assert opt.optimized_params_dict["mu"] == pytest.approx(mean, abs=1e-4), algorithm
    # Stan's Newton method stops once an iteration gains less than 1e-8 in lp, i.e.
    # within about sqrt(2e-8) posterior sd of the mode per step left undone.
    opt = model.optimize(data=data, algorithm="newton", seed=1, show_console=False)
    assert opt.optimized_params_dict["mu"] == pytest.approx(mean, abs=10 * math.sqrt(2e-8) * sd)


def test_laplace_sample_is_exact_for_gaussian_posterior(
    model: cmdstanpy.CmdStanModel, data: dict[str, object], exact: tuple[float, float]
) -> None:
    mean, sd = exact
    laplace = model.laplace_sample(data=data, draws=4000, seed=5)
    draws = laplace.stan_variable("mu")
    assert draws.shape == (4000,)
    assert abs(draws.mean() - mean) < 4 * sd / math.sqrt(4000)
    assert abs(draws.std() - sd) < 4 * sd / math.sqrt(2 * 4000)
    # 6 significant figures: rounding mu (5e-6 relative) doubles when squared, plus mu_sq's own
    np.testing.assert_allclose(laplace.stan_variable("mu_sq"), draws**2, rtol=1.6e-5)


def test_variational(
    model: cmdstanpy.CmdStanModel, data: dict[str, object], exact: tuple[float, float]
) -> None:
    mean, sd = exact
    # Meanfield ADVI is exact for a Gaussian posterior; its error is stochastic-optimisation
    # noise, about 0.02 posterior sd with these settings (measured over 8 seeds).
    vb = model.variational(
        data=data, algorithm="meanfield", seed=7, draws=2000, grad_samples=20,
        tol_rel_obj=1e-4, iter=20000, require_converged=False,
    )
    assert abs(vb.variational_params_dict["mu"] - mean) < 0.15 * sd
    draws = vb.stan_variable("mu", mean=False)
    assert draws.shape[0] == 2000
    assert abs(draws.std() - sd) < 0.15 * sd
    np.testing.assert_allclose(vb.stan_variable("mu_sq", mean=False), draws**2, rtol=1.6e-5)
    # Fullrank at default settings: well-formed output; its optimisation noise at the
    # default tolerance reaches about 0.4 posterior sd, so only a sanity bound here.
    vb = model.variational(data=data, algorithm="fullrank", seed=7, draws=500,
                           require_converged=False)
    draws = vb.stan_variable("mu", mean=False)
    assert draws.shape[0] == 500 and np.all(np.isfinite(draws))
    assert abs(vb.variational_params_dict["mu"] - mean) < sd


def test_pathfinder_single_and_multi_path(
    model: cmdstanpy.CmdStanModel, data: dict[str, object], exact: tuple[float, float]
) -> None:
    mean, sd = exact
    for num_paths in (1, 4):
        pf = model.pathfinder(data=data, num_paths=num_paths, draws=1000, seed=9,
                              show_console=False)
        draws = pf.stan_variable("mu")
        assert len(draws) >= 1000
        assert abs(draws.mean() - mean) < 0.2 * sd, num_paths
        assert 0.7 * sd < draws.std() < 1.4 * sd, num_paths


def test_each_path_draws_what_run_paths_asks(
    model: cmdstanpy.CmdStanModel, data: dict[str, object], exact: tuple[float, float]
) -> None:
    """Without PSIS resampling each path draws ``num_single_draws`` (cmdstanpy's
    ``draws`` sizes only the resampled output): the search's later rounds asked for 100
    a path through ``draws`` and each path drew and evaluated CmdStan's 1,000."""
    from pemc_stan.backend.pathfinder import path_labels, run_paths

    mean, sd = exact
    for num_paths, per_path in ((1, 50), (4, 30)):
        pf = run_paths(model, data, num_paths=num_paths, draws=per_path, seed=9)
        draws = pf.stan_variable("mu")
        assert draws.shape == (num_paths * per_path,)
        labels = path_labels(draws.shape[0], num_paths)
        assert labels is None or np.bincount(labels).tolist() == [per_path] * num_paths
        assert abs(draws.mean() - mean) < 0.5 * sd


def test_generate_quantities_from_previous_fit(
    model: cmdstanpy.CmdStanModel, data: dict[str, object], fit: cmdstanpy.CmdStanMCMC
) -> None:
    gq = model.generate_quantities(data=data, previous_fit=fit, seed=13)
    mu = fit.stan_variable("mu")
    np.testing.assert_allclose(gq.stan_variable("mu_sq"), mu**2, rtol=1e-5)  # mu has 12 figures
    y_rep = gq.stan_variable("y_rep")
    assert y_rep.shape == mu.shape
    # y_rep ~ normal(mu, sigma): the standardised residuals are standard normal
    z = (y_rep - mu) / data["sigma"]  # type: ignore[operator]
    assert abs(z.mean()) < 4 / math.sqrt(len(z))
    assert abs(z.std() - 1) < 4 / math.sqrt(2 * len(z))


def test_log_prob_matches_analytic_density(
    model: cmdstanpy.CmdStanModel, data: dict[str, object]
) -> None:
    y = np.asarray(data["y"])
    mu0, tau0, sigma = data["mu0"], data["tau0"], data["sigma"]
    for mu in (-1.0, 0.3, 2.5):
        out = model.log_prob(params={"mu": mu}, data=data)
        assert isinstance(out, pd.DataFrame)
        # `~` drops the constants: -0.5 z^2 terms only (sigma, tau0 are data)
        lp = (-0.5 * ((mu - mu0) / tau0) ** 2  # type: ignore[operator]
              - 0.5 * np.sum(((y - mu) / sigma) ** 2))  # type: ignore[operator]
        grad = -(mu - mu0) / tau0**2 + np.sum(y - mu) / sigma**2  # type: ignore[operator]
        assert out["lp__"].iloc[0] == pytest.approx(lp, rel=1e-6)
        assert out.iloc[0, 1] == pytest.approx(grad, rel=1e-6)


def test_exe_info_reports_stan_version(model: cmdstanpy.CmdStanModel) -> None:
    info = model.exe_info()
    assert info.get("stan_version_major") == "2"
    assert int(info["stan_version_minor"]) >= 35


def test_missing_data_variable_is_a_clear_error(
    model: cmdstanpy.CmdStanModel, data: dict[str, object]
) -> None:
    incomplete = {k: v for k, v in data.items() if k != "tau0"}
    with pytest.raises(RuntimeError, match="tau0"):
        model.sample(data=incomplete, chains=1, iter_warmup=10, iter_sampling=10,
                     show_progress=False, timeout=120)


def test_wrongly_sized_vector_is_a_clear_error(
    model: cmdstanpy.CmdStanModel, data: dict[str, object]
) -> None:
    wrong = dict(data, N=int(data["N"]) + 3)  # type: ignore[call-overload]
    with pytest.raises(RuntimeError, match=r"(?i)mismatch|size|dimension"):
        model.sample(data=wrong, chains=1, iter_warmup=10, iter_sampling=10,
                     show_progress=False, timeout=120)


def test_model_rejecting_every_point_fails_without_hanging(
    compiled: Callable[..., cmdstanpy.CmdStanModel]
) -> None:
    rejecting = compiled(REJECTS, name="rejects_everything")
    # cmdstanpy shows the model's own message for each rejected initial value
    with pytest.raises(RuntimeError, match="this model rejects every point"):
        rejecting.sample(chains=1, iter_warmup=10, iter_sampling=10, show_progress=False,
                         timeout=120)


def test_data_file_written_by_user(
    model: cmdstanpy.CmdStanModel, data: dict[str, object], tmp_path: Path,
    exact: tuple[float, float],
) -> None:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data))
    opt = model.optimize(data=str(path))
    assert opt.optimized_params_dict["mu"] == pytest.approx(exact[0], abs=1e-4)
