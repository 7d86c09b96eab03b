"""What every method's fit shares: a suspect fit warns once, on one channel."""

from __future__ import annotations

import logging
import warnings

import pytest
from fakes import fake_pe_fit

from pemc_stan.errors import FitSuspectWarning


def test_a_suspect_fit_warns_once_however_often_it_is_summarised(
        caplog: pytest.LogCaptureFixture) -> None:
    """One ``FitSuspectWarning`` for the fit (not one per ``summary()``), and no log record
    at WARNING beside it: with no logging configured Python would print that one too."""
    fit = fake_pe_fit()
    assert not fit.check().ok
    caplog.set_level(logging.DEBUG, logger="pemc_stan")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = fit.summary()
        fit.summary()
        fit.check()
    suspect = [w for w in caught if issubclass(w.category, FitSuspectWarning)]
    assert len(suspect) == 1 and "these estimates are suspect" in str(suspect[0].message)
    assert suspect[0].filename == __file__  # points at the caller
    assert first.attrs["verdict"] == "suspect"
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not loud, [r.getMessage() for r in loud]
    assert sum("these estimates are suspect" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("thin", [1, 3])
def test_run_gradients_count_every_iteration_when_thinned(thin: int) -> None:
    """The follow-up budget counts gradients: with ``thin`` each saved draw stands for
    ``thin`` iterations, and the warm-up adds its iterations at the mean step count."""
    import types

    import numpy as np

    from pemc_stan.sampling.fit import ExtendedFit

    steps = np.array([[[3.0], [5.0]], [[7.0], [1.0]]])  # 2 saved draws x 2 chains
    fit = object.__new__(ExtendedFit)
    fit._col = {"n_leapfrog__": 0}
    fit._draws = steps
    fit.fit = types.SimpleNamespace(metadata=types.SimpleNamespace(
        cmdstan_config={"num_warmup": 10, "thin": thin}))
    assert fit.run_gradients() == 16 * thin + 4 * 10 * 2


class _Target:
    """``log gamma`` of ``fakes.CT_PROGRAM``: ``Z N(x; M, S^2)``."""

    def log_density(self, draws: dict[str, object]) -> object:
        import numpy as np
        from fakes import LOG_Z, M, S
        from scipy.stats import norm

        return LOG_Z + norm.logpdf(np.asarray(draws["x"]).reshape(-1), M, S)


def test_a_fit_with_cells_reports_the_cells_estimate_and_is_judged_by_its_run() -> None:
    """With :attr:`cell_estimate` set, ``expectation``, ``summary``, ``log_z``, the resampled draws
    and the diagnostics are the cells' (exact answers: ``x ~ N(1, 0.7^2)``, ``log Z``
    2.3), while ``run_expectation``, the method's own estimators and the verdict stay the
    run's."""
    import numpy as np
    from fakes import LOG_Z, M, S, exact_ct_fit

    from pemc_stan.modes.cells import cell_draws

    fit = exact_ct_fit(LOG_Z - 0.5, n=4000, seed=3)
    run_mean, run_log_z = fit.expectation("x"), fit.log_z()
    verdict, diagnostics = fit.check(), fit.diagnostics(warn=False)
    assert diagnostics["estimate"] == {"estimate": "run"}
    z = fit.particle_coordinates()
    with np.errstate(divide="ignore"):
        log_w = np.log(fit.target_weights()).reshape(-1)
    fit.cell_estimate = cell_draws(fit.result.coordinates, _Target(), fit.data, fit.base,
                           np.array([[M]]), np.array([[[S**2]]]), z, log_w, seed=4)
    assert fit.cell_estimate is not None
    mean = fit.expectation("x")
    assert mean == fit.cell_estimate.expectation("x") and mean != run_mean
    assert abs(mean.mean - M) < 4 * mean.mcse < 0.05 and mean.ess > 1000
    second = fit.expectation(lambda v: v["x"] ** 2)
    assert abs(second.mean - (M**2 + S**2)) < 4 * second.mcse
    assert fit.run_expectation("x") == run_mean
    assert float(fit.summary().loc["x", "mean"]) == mean.mean
    log_z = fit.log_z()
    assert log_z is not None and log_z.method == "cells"
    assert abs(log_z.log_z - LOG_Z) < 4 * log_z.std_error < 0.05
    assert log_z.diagnostics["pareto_k"] < 0.7
    assert fit.run_log_z() == run_log_z == fit.evidence_estimate("ct")
    drawn = fit.resampled_parameters_pd()
    assert len(drawn) == 4000 and list(drawn["chain__"].unique()) == [1, 2, 3, 4]
    assert abs(drawn["x"].mean() - M) < 4 * S / np.sqrt(4000)
    assert abs(drawn["x"].std() - S) < 0.05
    # the draws are independent and shuffled: every chain holds the same distribution
    chain_means = drawn.groupby("chain__")["x"].mean().to_numpy()
    assert np.ptp(chain_means) < 8 * S / np.sqrt(1000)
    assert fit.diagnostics(warn=False)["estimate"] == fit.cell_estimate.describe()
    assert verdict.ok and fit.check() == verdict


class _Forced:
    """A later check that finds ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, fit: object) -> tuple[str, object]:
        from pemc_stan.output.diagnostics import Reason

        return self.name, Reason(self.name, "forced", "nothing")


def test_with_cells_the_run_s_own_mixing_alone_is_not_suspect_but_a_missed_region_is(
        ) -> None:
    """A reason about how well the run's own estimate is known (R-hat, its ESS) makes a
    fit suspect, unless the fit reports its cells' estimate; a reason that the run missed
    a region (divergences, the wide checks) makes it suspect either way."""
    import numpy as np
    from fakes import LOG_Z, M, S, exact_ct_fit

    from pemc_stan.modes.cells import cell_draws
    from pemc_stan.sampling.checks import RUN_ESTIMATE_REASONS

    assert {"rhat", "ess", "chains_agree"} <= RUN_ESTIMATE_REASONS
    assert not {"divergences", "max_treedepth", "wide_moments", "wide_excess",
                "split_chains", "mode_search"} & RUN_ESTIMATE_REASONS
    for names, with_cells, ok in [(("rhat",), False, False), (("rhat", "ess"), True, True),
                                  (("rhat", "wide_moments"), True, False),
                                  (("divergences",), True, False)]:
        fit = exact_ct_fit(LOG_Z - 0.5, n=2000, seed=5)
        assert fit.check().ok
        fit.later_checks = tuple(_Forced(n) for n in names)
        if with_cells:
            z = fit.particle_coordinates()
            with np.errstate(divide="ignore"):
                log_w = np.log(fit.target_weights()).reshape(-1)
            fit.cell_estimate = cell_draws(fit.result.coordinates, _Target(), fit.data,
                                           fit.base, np.array([[M]]), np.array([[[S**2]]]),
                                           z, log_w, seed=6, n=1000)
        verdict = fit.check()
        assert verdict.ok is ok, (names, with_cells, verdict)
        if not ok:
            assert set(verdict.names()) == set(names)
