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
