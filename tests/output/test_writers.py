"""The summary table: one label spelling, numbers for every element, the verdict's R-hat/ESS."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from fakes import FrameRun

from pemc_stan.errors import ImproperPriorError
from pemc_stan.methods.continuous_tempering.fit import ContinuousTemperingFit
from pemc_stan.output.writers import save_fit, stan_label, summary_table
from pemc_stan.run.pipeline import transform_result

#: A matrix, an array of vectors and a scalar (CmdStan writes M[2,1], a[1,3], s).
MATRIX_PROGRAM = """
data { int<lower=1> N; vector[N] y; }
parameters { matrix[2, 2] M; array[2] vector[3] a; real<lower=0> s; }
model {
  to_vector(M) ~ normal(0, 1);
  for (i in 1:2) a[i] ~ normal(0, 1);
  s ~ exponential(1);
  y ~ normal(M[1, 1], s);
}
"""
#: The same with a flat, improper prior on mu.
IMPROPER_PROGRAM = """
data { int<lower=1> N; vector[N] y; }
parameters { real mu; real<lower=0> sigma; }
model { sigma ~ exponential(1); y ~ normal(mu, sigma); }
"""
DATA = {"N": 3, "y": [0.1, -0.4, 0.7]}


def _columns(program: str) -> list[str]:
    if "matrix" in program:
        return ([f"M[{i},{j}]" for j in (1, 2) for i in (1, 2)]  # column-major, as CmdStan
                + [f"a[{i},{j}]" for i in (1, 2) for j in (1, 2, 3)] + ["s"])
    return ["mu", "sigma"]


def ct_fit(program: str = MATRIX_PROGRAM, chains: int = 3, draws: int = 60,
           seed: int = 3, shift: float = 0.0) -> ContinuousTemperingFit:
    """A CT fit of ``program`` on random draws; ``shift`` moves the first chain's draws
    (chains that disagree)."""
    rng = np.random.default_rng(seed)
    n = chains * draws
    frame: dict[str, np.ndarray] = {}
    for c in _columns(program):
        x = rng.normal(size=n)
        x[:draws] += shift
        frame[c] = np.abs(x) if c in ("s", "sigma") else x
    u = rng.normal(size=n)
    frame.update({"pemc_u": u, "pemc_beta": 1 / (1 + np.exp(-u)),
                  "pemc_log_gamma": rng.normal(size=n), "pemc_log_base": rng.normal(size=n),
                  "divergent__": np.zeros(n), "treedepth__": np.full(n, 3.0)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = transform_result(program, method="ct")
    return ContinuousTemperingFit(FrameRun(frame, chains), result, -1.0, data=DATA, seed=seed)


@pytest.fixture()
def matrix_fit() -> ContinuousTemperingFit:
    return ct_fit()


def _table(fit: ContinuousTemperingFit):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = fit.to_inference_data()
        return summary_table(fit, idata)


def test_stan_label_is_cmdstans_spelling() -> None:
    assert stan_label("L[2, 1]") == "L[2,1]"
    assert stan_label("a[1, 2, 3]") == "a[1,2,3]"
    assert stan_label("theta[4]") == "theta[4]"
    assert stan_label("sigma") == "sigma"


def test_matrix_and_array_elements_get_numbers_in_every_table(
        matrix_fit: ContinuousTemperingFit) -> None:
    table, weighted = _table(matrix_fit)
    columns = _columns(MATRIX_PROGRAM)
    assert list(table.index) == columns  # CmdStan's spelling and order, as fit.summary()
    assert list(weighted.index) == columns
    assert not any(re.search(r", ", label) for label in table.index)
    numbers = table[["mean", "mcse", "ess_mean", "sd", "hdi_5%", "hdi_95%", "ess_bulk",
                     "ess_tail", "r_hat"]]
    assert np.all(np.isfinite(numbers.to_numpy(dtype=float))), table
    np.testing.assert_allclose(table["mean"], weighted["mean"])


def test_estimates_json_has_the_same_labels(matrix_fit: ContinuousTemperingFit,
                                            tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved = save_fit(matrix_fit, tmp_path / "out")
    assert list(saved.estimates["expectations"]) == list(saved.table.index)
    assert all(v["mean"] is not None for v in saved.estimates["expectations"].values())


@pytest.mark.parametrize("shift", [0.0, 1.5])
def test_table_and_verdict_agree_on_rhat_and_ess(shift: float) -> None:
    fit = ct_fit(shift=shift)
    table, _ = _table(fit)
    mixing = fit.convergence()
    for col in ("r_hat", "ess_bulk", "ess_tail"):
        np.testing.assert_array_equal(table[col].to_numpy(), mixing[col].to_numpy())
    verdict = fit.check()
    reasons = {r.name: r.message for r in verdict.reasons}
    worst_rhat = float(table["r_hat"].max())
    if "rhat" in reasons:  # the verdict names the table's largest R-hat
        column = str(table["r_hat"].idxmax())
        assert f"of {column} is {worst_rhat:.3f}" in reasons["rhat"]
    else:
        assert worst_rhat <= 1.05
    assert "ess" in reasons  # 3 chains x 60 draws: below the threshold of 100
    lowest = table[["ess_bulk", "ess_mean"]].min(axis=1)
    column = str(lowest.idxmin())
    assert f"of {column} is {lowest.min():.0f} " in reasons["ess"], (reasons["ess"], table)
    if shift:
        assert "rhat" in reasons


def test_log_z_of_an_improper_prior_is_refused_with_the_reason(tmp_path: Path) -> None:
    fit = ct_fit(IMPROPER_PROGRAM)
    with pytest.raises(ImproperPriorError, match="'mu'"):
        fit.log_z()
    with pytest.raises(ImproperPriorError):
        fit.evidence_estimate("ti")
    assert np.isfinite(fit.log_normaliser().log_z)  # what the bootstrap still uses
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diagnostics = fit.diagnostics(warn=False)
        saved = save_fit(fit, tmp_path / "out")
    assert diagnostics["log_z"] == "undefined (improper prior)"
    assert "bootstrap_log_z" not in diagnostics and "log_z_se" not in diagnostics
    assert saved.log_z is not None and saved.log_z["log_z"] is None
    assert "'mu'" in saved.log_z["undefined"] and "improper" in saved.log_z["undefined"]
    assert saved.estimates["log_z"]["undefined"] == saved.log_z["undefined"]
    assert saved.estimates["diagnostics"]["log_z"] == "undefined (improper prior)"


def test_log_z_of_a_proper_prior_is_a_number(matrix_fit: ContinuousTemperingFit,
                                             tmp_path: Path) -> None:
    assert matrix_fit.log_z_undefined() is None
    est = matrix_fit.log_z()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved = save_fit(matrix_fit, tmp_path / "out")
    assert saved.log_z is not None and saved.log_z["log_z"] == pytest.approx(est.log_z)
    assert "undefined" not in saved.log_z
