"""ArviZ InferenceData of pemc-stan fits: groups, dims, coords, values, NetCDF, az.summary.

The fast tests build a PseudoExtendedFit on synthetic draws (no compilation) and
check every value against the fit's own arrays; the compiled tests run both
methods on a small model with a transformed parameter, generated quantities,
observed and constant data.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import arviz as az
import numpy as np
import pytest
from fakes import DATA, SAMPLER, FakeCTFit, fake_pe_fit

from pemc_stan.output.inference_data import EXTENDED_GROUP, from_pemc_stan, to_inference_data


def test_groups_dims_and_coords_follow_the_declarations() -> None:
    fit = fake_pe_fit()
    idata = to_inference_data(fit)
    assert set(idata.groups()) == {"posterior", "sample_stats", EXTENDED_GROUP,
                                   "observed_data", "constant_data"}
    post = idata.posterior
    assert post["v"].dims == ("chain", "draw", "K_dim")
    assert post["tau"].dims == ("chain", "draw")
    np.testing.assert_array_equal(post["K_dim"].values, [1, 2, 3])  # Stan's 1-based indices
    assert post.sizes["chain"] == 3 and post.sizes["draw"] == 40
    ext = idata[EXTENDED_GROUP]
    assert ext["v"].dims == ("chain", "draw", "pseudo", "K_dim")
    np.testing.assert_array_equal(ext["pseudo"].values, [1, 2, 3])
    # the temperatures and weights once, in sample_stats, not again beside the draws (#76)
    assert not set(ext.data_vars) & {"pemc_beta", "pemc_log_weight"}
    assert idata.sample_stats["beta"].dims == ("chain", "draw", "pseudo")
    np.testing.assert_allclose(idata.sample_stats["log_weight"].values, fit.log_weights())
    assert idata.observed_data["y"].dims == ("K_dim",)  # variate of the likelihood
    assert set(idata.constant_data.data_vars) == {"K", "s"}
    np.testing.assert_array_equal(idata.observed_data["y"].values, DATA["y"])


def test_posterior_is_the_resampled_pseudo_sample() -> None:
    fit = fake_pe_fit()
    idata = to_inference_data(fit)
    idx = fit.resample_index()  # (chains, draws), 0-based
    np.testing.assert_array_equal(idata.sample_stats["resample_index"].values, idx + 1)
    for j in (1, 2, 3):
        copies = fit.pseudo_samples(f"v[{j}]")  # (chains, draws, N)
        chosen = np.take_along_axis(copies, idx[..., None], axis=-1)[..., 0]
        np.testing.assert_array_equal(idata.posterior["v"].sel(K_dim=j).values, chosen)
        np.testing.assert_array_equal(
            idata[EXTENDED_GROUP]["v"].sel(K_dim=j).values, copies)
    np.testing.assert_array_equal(idata.posterior["tau"].values,
                                  np.take_along_axis(fit.pseudo_samples("tau"),
                                                     idx[..., None], axis=-1)[..., 0])


class _Cells:
    """What a fit reads of its cells' estimate (``ExtendedFit.cell_estimate``)."""

    def resampled(self, n: int, seed: int | None) -> dict[str, np.ndarray]:
        return {c: np.arange(n) + 100.0 * j
                for j, c in enumerate(("tau", "v[1]", "v[2]", "v[3]"))}

    def describe(self) -> dict[str, object]:
        return {"estimate": "cells", "cells": 2, "draws": 64, "pareto_k": 0.1}

    def evidence(self) -> object:
        from pemc_stan.estimators.log_z import EvidenceEstimate

        return EvidenceEstimate(1.5, 0.1, "cells", self.describe())


def test_a_fit_reporting_its_cells_has_their_draws_as_its_posterior() -> None:
    """The posterior is the cells' resampled draws, cut into the run's chains; no
    ``resample_index`` ties it to the extended draws; the attributes say so."""
    fit = fake_pe_fit()
    fit.cell_estimate = _Cells()
    idata = to_inference_data(fit)
    np.testing.assert_array_equal(idata.posterior["tau"].values, np.arange(120).reshape(3, 40))
    np.testing.assert_array_equal(idata.posterior["v"].sel(K_dim=2).values,
                                  200 + np.arange(120).reshape(3, 40))
    assert "resample_index" not in idata.sample_stats
    attrs = idata.posterior.attrs
    assert json.loads(attrs["pemc_estimate"]) == _Cells().describe()
    assert attrs["pemc_log_z"] == 1.5 and attrs["pemc_log_z_method"] == "cells"


def test_sample_stats_hold_nuts_statistics_weights_and_beta() -> None:
    fit = fake_pe_fit()
    stats = to_inference_data(fit).sample_stats
    raw = fit.fit.draws()
    np.testing.assert_array_equal(stats["lp"].values, raw[:, :, 0].T)
    assert stats["diverging"].dtype == bool
    assert int(stats["diverging"].sum()) == int(raw[:, :, SAMPLER.index("divergent__")].sum())
    np.testing.assert_array_equal(stats["beta"].values, fit.beta())
    np.testing.assert_allclose(stats["log_weight"].values, fit.log_weights())
    np.testing.assert_allclose(stats["weight"].sum("pseudo").values, 1.0)
    np.testing.assert_allclose(stats["weight_ess"].values, fit.weight_ess())
    assert stats["beta"].dims == ("chain", "draw", "pseudo")


def test_attributes_record_method_options_and_evidence() -> None:
    from pemc_stan.estimators.log_z import EvidenceEstimate

    fit = fake_pe_fit()
    estimate = EvidenceEstimate(log_z=-4.25, std_error=0.125, method="bridge")
    idata = to_inference_data(fit, evidence=estimate)
    for group in idata.groups():
        attrs = idata[group].attrs
        assert attrs["pemc_method"] == "pseudo_extended"
        assert attrs["pemc_log_z"] == -4.25 and attrs["pemc_log_z_std_error"] == 0.125
        assert attrs["pemc_log_z_method"] == "bridge"
    options = json.loads(idata.posterior.attrs["pemc_options"])
    assert options["n_pseudo"] == 3 and options["temper"] == "likelihood"
    assert idata.posterior.attrs["pemc_log_scale"] == -1.5
    assert "pemc_log_z" not in to_inference_data(fit).posterior.attrs  # PE has no own log Z


def test_netcdf_round_trip_and_summary(tmp_path: Path) -> None:
    fit = fake_pe_fit()
    idata = from_pemc_stan(fit)
    path = tmp_path / "fit.nc"
    idata.to_netcdf(str(path))
    back = az.from_netcdf(str(path))
    assert set(back.groups()) == set(idata.groups())
    for group in idata.groups():
        for name, values in idata[group].data_vars.items():
            np.testing.assert_array_equal(back[group][name].values, values.values)
            assert back[group][name].dims == values.dims
    assert back.posterior.attrs["pemc_options"] == idata.posterior.attrs["pemc_options"]
    summary = az.summary(back, var_names=["tau", "v"])
    assert list(summary.index) == ["tau", "v[1]", "v[2]", "v[3]"]
    np.testing.assert_allclose(summary.loc["v[2]", "mean"],
                               idata.posterior["v"].sel(K_dim=2).values.mean(), atol=1e-3)


def test_continuous_tempering_groups(tmp_path: Path) -> None:
    fit = FakeCTFit()
    idata = to_inference_data(fit)
    stats, ext = idata.sample_stats, idata[EXTENDED_GROUP]
    np.testing.assert_array_equal(stats["beta"].values, fit.beta())
    np.testing.assert_array_equal(stats["delta"].values, fit.delta())
    np.testing.assert_array_equal(stats["log_weight"].values, fit.log_weights())
    w = np.exp(fit.log_weights())
    np.testing.assert_allclose(stats["weight"].values, w / w.sum())
    assert stats.attrs["weight_ess"] == pytest.approx(w.sum() ** 2 / np.sum(w ** 2))
    assert ext["v"].dims == ("chain", "draw", "K_dim")
    np.testing.assert_array_equal(ext["v"].sel(K_dim=2).values, fit._column("v[2]"))
    np.testing.assert_array_equal(ext["pemc_u"].values, fit._column("pemc_u"))
    assert "pemc_log_weight" not in ext  # sample_stats' log_weight, kept once (#76)
    assert "lp__" not in ext and "lp" in stats
    np.testing.assert_array_equal(idata.posterior["v"].sel(K_dim=3).values,
                                  fit._resampled["v[3]"].to_numpy().reshape(2, 50))
    attrs = idata.posterior.attrs
    assert attrs["pemc_method"] == "continuous_tempering" and attrs["pemc_log_zeta"] == -2.0
    assert attrs["pemc_log_z"] == -2.1 and attrs["pemc_log_z_method"] == "ct_eq20"
    assert json.loads(attrs["pemc_options"])["base"] == "pathfinder"
    assert json.loads(attrs["pemc_estimate"]) == {"estimate": "run"}
    idata.to_netcdf(str(tmp_path / "ct.nc"))
    back = az.from_netcdf(str(tmp_path / "ct.nc"))
    np.testing.assert_array_equal(back[EXTENDED_GROUP]["pemc_beta"].values, fit.beta())
    assert list(az.summary(back, var_names=["v"]).index) == ["v[1]", "v[2]", "v[3]"]


def test_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match="from_cmdstanpy"):
        to_inference_data(object())


# --------------------------------------------------------------------------- compiled

HIER = """
// group means with a shared scale: vector parameter, bounded scale, TP and GQ
data {
  int<lower=1> N;
  int<lower=1> K;
  vector[N] y;
  array[N] int<lower=1, upper=K> g;
}
parameters {
  vector[K] mu;
  real<lower=0> s;
}
transformed parameters {
  vector[K] mu2 = 2 * mu;
}
model {
  mu ~ normal(0, 3);
  s ~ lognormal(0, 0.5);
  y ~ normal(mu[g], s);
}
generated quantities {
  real mu_mean = mean(mu);
  array[2] vector[K] both = {mu, mu2};
  vector[N] log_lik;
  for (n in 1:N) {
    log_lik[n] = normal_lpdf(y[n] | mu[g[n]], s);
  }
}
"""
HIER_DATA = {"N": 6, "K": 3, "y": [-1.2, -0.8, 0.4, 0.6, 2.1, 1.9], "g": [1, 1, 2, 2, 3, 3]}


def _check_real_fit(idata: az.InferenceData, method: str, tmp_path: Path) -> None:
    post = idata.posterior
    assert post["mu"].dims == ("chain", "draw", "K_dim")
    assert post["both"].dims == ("chain", "draw", "both_dim_0", "K_dim")
    assert post["mu_mean"].dims == ("chain", "draw")
    # the generated quantities were recomputed by the original model on the resampled draws
    np.testing.assert_allclose(post["mu_mean"].values, post["mu"].mean("K_dim").values,
                               atol=1e-5)
    np.testing.assert_allclose(post["both"].sel(both_dim_0=1).values, post["mu"].values,
                               atol=1e-5)
    # CmdStan writes 6 significant digits; the cells' draws go in at full precision
    np.testing.assert_allclose(post["both"].sel(both_dim_0=2).values, 2 * post["mu"].values,
                               rtol=1e-5, atol=1e-5)
    assert idata.posterior.attrs["pemc_method"] == method
    # log_lik is the log_likelihood group, at the posterior's own (resampled) draws
    assert "log_lik" not in post.data_vars
    log_lik = idata.log_likelihood["log_lik"]
    assert log_lik.dims == ("chain", "draw", "N_dim")
    y, g = np.asarray(HIER_DATA["y"]), np.asarray(HIER_DATA["g"])
    mu = post["mu"].values[..., g - 1]
    s = post["s"].values[..., None]
    np.testing.assert_allclose(log_lik.values, -0.5 * ((y - mu) / s) ** 2
                               - np.log(s * np.sqrt(2 * np.pi)), atol=1e-5)
    assert np.isfinite(az.loo(idata).elpd_loo)
    assert set(idata.observed_data.data_vars) == {"y"}
    assert set(idata.constant_data.data_vars) == {"N", "K", "g"}
    assert idata.observed_data["y"].dims == ("N_dim",)
    path = tmp_path / f"{method}.nc"
    idata.to_netcdf(str(path))
    back = az.from_netcdf(str(path))
    assert set(back.groups()) == set(idata.groups())
    np.testing.assert_array_equal(back.posterior["mu"].values, post["mu"].values)
    summary = az.summary(back, var_names=["mu", "s"])
    assert list(summary.index) == ["mu[1]", "mu[2]", "mu[3]", "s"]
    assert np.all(np.isfinite(summary[["mean", "sd", "ess_bulk", "r_hat"]].to_numpy()))


@pytest.mark.compiled
def test_pseudo_extended_fit_to_inference_data(cmdstan_installation: object,
                                               tmp_path: Path) -> None:
    import pemc_stan

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pemc_stan.sample(HIER, data=HIER_DATA, method="pe", split_modes="never", n_pseudo=2,
                               temper="likelihood", chains=2, iter_warmup=200,
                               iter_sampling=200, seed=11)
    idata = fit.to_inference_data()
    _check_real_fit(idata, "pseudo_extended", tmp_path)
    ext = idata[EXTENDED_GROUP]
    assert ext["mu"].dims == ("chain", "draw", "pseudo", "K_dim")
    np.testing.assert_array_equal(ext["mu"].sel(pseudo=2, K_dim=3).values,
                                  fit.pseudo_samples("mu[3]")[..., 1])
    if fit.cell_estimate is not None:  # the posterior is the cells' draws, not the run's
        assert "resample_index" not in idata.sample_stats
        assert json.loads(idata.posterior.attrs["pemc_estimate"])["estimate"] == "cells"
        fit.cell_estimate = None
        fit._resampled = None
        idata = fit.to_inference_data()
        ext = idata[EXTENDED_GROUP]
    # the resampled posterior draw is one of that iteration's pseudo-samples
    chosen = idata.sample_stats["resample_index"].values - 1
    np.testing.assert_array_equal(
        idata.posterior["s"].values,
        np.take_along_axis(ext["s"].values, chosen[..., None], axis=-1)[..., 0])
    # the summary has the transformed parameters and generated quantities too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = fit.summary()
    assert list(table.index[:4]) == ["mu[1]", "mu[2]", "mu[3]", "s"]
    assert {"mu2[3]", "mu_mean", "both[2,1]", "log_lik[6]"} <= set(table.index)
    row = table.loc["mu_mean"]
    assert row["mean"] == pytest.approx(float(idata.posterior["mu_mean"].mean()), rel=1e-9)
    assert np.isfinite(row[["mcse", "sd", "hdi_5%", "hdi_95%", "r_hat"]].to_numpy(
        dtype=float)).all()
    assert table.loc["mu2[1]", "mean"] == pytest.approx(2 * table.loc["mu[1]", "mean"],
                                                        abs=4 * table.loc["mu2[1]", "mcse"])


@pytest.mark.compiled
def test_posterior_has_transformed_parameters(cmdstan_installation: object) -> None:
    import pemc_stan

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pemc_stan.sample(HIER, data=HIER_DATA, method="pe", split_modes="never", n_pseudo=2,
                               temper="likelihood", chains=2, iter_warmup=200,
                               iter_sampling=200, seed=11)
    post = fit.to_inference_data(include_extended=False).posterior
    np.testing.assert_allclose(post["mu2"].values, 2 * post["mu"].values, rtol=1e-5,
                               atol=1e-5)  # CmdStan writes 6 significant digits


@pytest.mark.compiled
def test_continuous_tempering_fit_to_inference_data(cmdstan_installation: object,
                                                    tmp_path: Path) -> None:
    import pemc_stan
    from pemc_stan.methods.continuous_tempering import fit as ct

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pemc_stan.sample(HIER, data=HIER_DATA, method="ct", split_modes="never",
                               chains=2, iter_warmup=300,
                               iter_sampling=300, seed=12)
    assert isinstance(fit, ct.ContinuousTemperingFit)
    idata = fit.to_inference_data()
    _check_real_fit(idata, "continuous_tempering", tmp_path)
    stats = idata.sample_stats
    np.testing.assert_allclose(stats["beta"].values, fit.beta())
    np.testing.assert_allclose(stats["delta"].values, fit.delta())
    np.testing.assert_allclose(stats["log_weight"].values, fit.log_weights())
    # transformed parameters of the resampled draws (the reporting program)
    np.testing.assert_allclose(idata.posterior["mu2"].values, 2 * idata.posterior["mu"].values,
                               atol=1e-5)
    np.testing.assert_allclose(float(stats["weight"].sum()), 1.0)
    estimate = fit.log_z()
    assert idata.posterior.attrs["pemc_log_z"] == pytest.approx(estimate.log_z)
    ext = idata[EXTENDED_GROUP]
    assert ext["mu"].dims == ("chain", "draw", "K_dim")
    np.testing.assert_allclose(ext["pemc_beta"].values, fit.beta())  # the CT program's own
    np.testing.assert_allclose(stats["log_weight"].values, fit.log_weights())


@pytest.mark.compiled
def test_loo_and_compare_run_on_two_fits_with_log_lik(cmdstan_installation: object) -> None:
    """Two models of the same data, each with a log_lik generated quantity: az.compare
    ranks them as it would two az.from_cmdstanpy(log_likelihood="log_lik") fits."""
    import pemc_stan

    pooled = HIER.replace("y ~ normal(mu[g], s);", "y ~ normal(mean(mu), s);").replace(
        "log_lik[n] = normal_lpdf(y[n] | mu[g[n]], s);",
        "log_lik[n] = normal_lpdf(y[n] | mean(mu), s);")
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, program in (("groups", HIER), ("pooled", pooled)):
            fit = pemc_stan.sample(program, data=HIER_DATA, method="ct", split_modes="never",
                                   chains=2, iter_warmup=300, iter_sampling=300, seed=12)
            fits[name] = fit.to_inference_data(include_extended=False)
        table = az.compare(fits)
    assert set(table.index) == {"groups", "pooled"}
    assert np.all(np.isfinite(table["elpd_loo"].to_numpy()))
