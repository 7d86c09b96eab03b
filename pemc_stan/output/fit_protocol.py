"""What the output reads of a fit: the fit protocol, declared once.

Output comes before the methods (it never imports them), so it names here what it takes
from a fit; every method's fit (``pemc_stan.sampling.fit.ExtendedFit`` and its
subclasses) has each of these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = ["RunFit", "by_column", "column_name", "estimate_source", "fit_seed", "judged_run"]


def column_name(name: str, index: tuple[int, ...]) -> str:
    """The CmdStan column of ``name`` at the 0-based ``index``: ``x``, ``x[2]``, ``m[1,2]``
    (the names of ``RunFit.parameter_columns``)."""
    return name if not index else f"{name}[{','.join(str(i + 1) for i in index)}]"


def by_column(draws: Mapping[str, Any], lead: int = 2) -> dict[str, NDArray[np.float64]]:
    """Draws by CmdStan column (``"x"``, ``"x[2]"``, ``"m[1,2]"``) from draws by parameter,
    each with ``lead`` leading axes (chains and draws, or draws) before its own shape."""
    out: dict[str, NDArray[np.float64]] = {}
    for name, v in draws.items():
        v = np.asarray(v, dtype=float)
        for idx in np.ndindex(*v.shape[lead:]):
            out[column_name(name, idx)] = v[(slice(None),) * lead + idx]
    return out


class RunFit(Protocol):
    """A fit as the output sees it.

    Attributes
    ----------
    result
        The method's transform result (program, options, coordinates, method).
    method
        The method's short name.
    data
        The user's data.
    seed
        This run's own seed.
    run_seed
        The seed of the whole call (given or drawn; None when the fit was made outside
        :func:`pemc_stan.sample`).
    follow_up
        The follow-up record (``as_dict()``), or None.
    search
        The search for modes (``centres``, ``major_shares``, ``major_modes``, ``radius``,
        ``as_dict()``), or None.
    split_steps
        Steps the run took before its follow-ups.
    fit
        The ``cmdstanpy.CmdStanMCMC`` of the run the verdict judges (the last round,
        follow-up or split run).
    cell_estimate
        The cells' estimate the fit reports (``describe()``), or None: its run's own.
    cell_note
        Why the estimate is the run's own when the cells were tried ("" otherwise).
    """

    fit: Any
    cell_estimate: Any
    cell_note: str
    result: Any
    data: dict[str, Any]
    seed: int | None
    run_seed: int | None
    follow_up: Any
    search: Any
    split_steps: Sequence[Any]

    @property
    def method(self) -> str: ...

    @property
    def program(self) -> Any: ...

    def parameter_columns(self) -> list[str]: ...

    def title(self) -> str:
        """What the run was, for titles (``continuous-tempering``, or the mode split's name)."""
        ...


def fit_seed(fit: RunFit) -> int | None:
    """The seed that repeats the call that made ``fit``: ``fit.run_seed`` (given or drawn by
    :func:`pemc_stan.sample`), else the fit's own ``seed``.  The one place the output
    decides it.

    Raises
    ------
    Nothing.
    """
    seed = fit.run_seed if fit.run_seed is not None else fit.seed
    return None if seed is None else int(seed)


def estimate_source(fit: RunFit) -> dict[str, Any]:
    """Which estimate the fit reports: ``{"estimate": "cells", ...}`` (its cells', with
    their number, draws and Pareto k) or ``{"estimate": "run"}`` (its own draws', with why
    not the cells' when the run's plan tried them).  The one place the output decides it.

    Raises
    ------
    Nothing.
    """
    if fit.cell_estimate is not None:
        return dict(fit.cell_estimate.describe())
    return {"estimate": "run", **({"cells": fit.cell_note} if fit.cell_note else {})}


#: CmdStan's names (its CSV header) of the judged run's settings, by cmdstanpy's names.
_CONFIG = (("iter_warmup", "num_warmup"), ("iter_sampling", "num_samples"), ("thin", "thin"),
           ("adapt_delta", "delta"), ("max_treedepth", "max_depth"))


def judged_run(fit: RunFit, folder: str | Path | None = None) -> dict[str, Any]:
    """The run the verdict judged, as its own CSV files record it: chains, warm-up and
    sampling iterations, thinning, ``adapt_delta``, ``max_treedepth`` and its CSV folder
    (relative to ``folder`` when inside it).  Empty when the fit has no CmdStan run.

    Raises
    ------
    Nothing.
    """
    try:  # a cmdstanpy.CmdStanMCMC (a fit made of draws alone has none)
        csv_files = list(fit.fit.runset.csv_files)
        config = dict(fit.fit.metadata.cmdstan_config or {})
        out: dict[str, Any] = {"chains": int(fit.fit.chains)}
    except AttributeError:
        return {}
    for name, key in _CONFIG:
        if key in config:
            value = config[key]
            out[name] = float(value) if name == "adapt_delta" else int(value)
    csv = [Path(f) for f in csv_files]
    if csv:
        where = csv[0].parent.resolve()
        if folder is not None and where.is_relative_to(Path(folder).resolve()):
            where = where.relative_to(Path(folder).resolve())
        out["csv_folder"] = f"{where.as_posix()}/"
    return out
