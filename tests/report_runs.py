"""Synthetic run folders for the report tests (no compilation; imported as ``report_runs``).

Each builder saves a synthetic fit with :func:`pemc_stan.output.writers.save_fit`
through a :class:`~pemc_stan.output.folder.RunFolder`, so the folder holds exactly
what ``pemc-stan sample`` leaves (manifest included), except the pictures and the
report, which the tests write themselves.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
from fakes import LOG_Z, exact_ct_fit, fake_pe_fit

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.search import ModeSearch
from pemc_stan.output.folder import RunFolder
from pemc_stan.output.writers import SavedFit, save_fit

#: The modes the synthetic CT run's "pilot" found (x = 1 holds most of the mass).
CT_MODES = np.array([[1.0], [-1.5]])
CT_SHARES = (0.8, 0.2)


def ct_search() -> ModeSearch:
    """A pilot search record with two modes of ``x`` (base coordinates = x)."""
    return ModeSearch(radii=(2.0, 8.0), modes=2, major_modes=2, paths=16,
                      stopped="unseen share 0.01 <= 0.02", mode_shares=CT_SHARES,
                      centres=CT_MODES, major_shares=CT_SHARES,
                      base=BaseDensity(np.zeros(1), np.eye(1)))


def _save(fit: object, folder: Path, name: str) -> SavedFit:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with RunFolder(folder) as run:
            saved = save_fit(fit, run.staging, name=name, model_label=f"{name}.stan",
                             sampler={"chains": 4, "iter_warmup": 100, "iter_sampling": 500,
                                      "seed": 1})
            run.commit()
    return saved


def ct_run(folder: Path, name: str = "toy") -> Path:
    """A continuously tempered run of ``x ~ normal(1, 0.7)`` with a log Z estimate and the
    pilot's two modes; returns the folder."""
    fit = exact_ct_fit(LOG_Z, n=2000, chains=4, search=ct_search())
    _save(fit, folder, name)
    return folder


def pe_run(folder: Path, name: str = "hier") -> Path:
    """A pseudo-extended run of a small hierarchical model (10% divergences: suspect, no
    log Z, no search); returns the folder."""
    _save(fake_pe_fit(n_chains=2, n_draws=60), folder, name)
    return folder
