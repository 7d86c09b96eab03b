"""Run pseudo-extended MCMC on a Stan program.

:func:`sample` transforms the program (:mod:`pemc_stan.pseudo_extended`),
compiles it through the content-hash cache (:func:`pemc_stan.compile.compile_model`),
runs NUTS with cmdstanpy and returns a
:class:`~pemc_stan.pseudo_extended_fit.PseudoExtendedFit`.

Default scale (``log_scale=None``)
----------------------------------
``gamma~ = gamma / Z^`` needs an offset ``log Z^``; the default is a cheap
Pathfinder importance-sampling estimate of the evidence ``log Z = log int
gamma(x) dx`` (:func:`estimate_log_scale`).  CmdStan's Pathfinder writes
``lp__ = log gamma(x) + log|J(u)|`` at the unconstrained point ``u``
(``~`` statements evaluated with ``propto=false``, i.e. with every constant)
and ``lp_approx__`` = the normalised log density of the path's Gaussian
approximation ``q(u)`` (both checked against closed forms: a Gaussian target
gives ``lp__ - lp_approx__ = log Z`` exactly).  With ``psis_resample=False``
every draw comes from its own path's ``q``, and each path ``p`` gives the
importance-sampling estimate ``Z_p = mean_s exp(lp___s - lp_approx__s)`` of the
mass its Gaussian covers.  Paths that found the same mode (draw means within
3 sd) contribute their largest ``Z_p``; distinct modes add up::

    log Z^ = log sum_{modes m} max_{p in m} Z_p

It is only an offset: modes no path found make it too low (by the log of the
missed mass), which tilts ``q(beta)`` towards ``beta = 1`` (less tempering);
when the normalising constant is known (e.g. 0 for a normalised density),
pass ``log_scale``.  When Pathfinder fails, 0 is used and a warning is logged.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cmdstanpy
import numpy as np
from scipy.special import logsumexp

from pemc_stan import ast
from pemc_stan.compile import compile_model
from pemc_stan.parser import parse
from pemc_stan.pseudo_extended import (
    PseudoExtendedOptions,
    TransformResult,
    transform_pseudo_extended,
)
from pemc_stan.pseudo_extended_fit import PseudoExtendedFit

logger = logging.getLogger(__name__)

__all__ = ["sample", "PseudoExtendedModel", "estimate_log_scale"]


def _model_source(model: str | os.PathLike[str] | cmdstanpy.CmdStanModel
                  ) -> tuple[str, str, Path | None]:
    """(program text, name, path) of Stan text, a path or a CmdStanModel."""
    if isinstance(model, cmdstanpy.CmdStanModel):
        if model.stan_file is None:
            raise ValueError("the CmdStanModel has no stan_file; pass the program text")
        path = Path(model.stan_file)
        return path.read_text(), model.name, path
    if isinstance(model, os.PathLike) or (isinstance(model, str) and "\n" not in model
                                          and model.strip().endswith(".stan")):
        path = Path(model)
        return path.read_text(), path.stem, path
    return str(model), "model", None


def _load_data(data: Any) -> dict[str, Any] | None:
    if data is None:
        return None
    if isinstance(data, (str, os.PathLike)):
        import json
        return dict(json.loads(Path(data).read_text()))
    return dict(data)


def estimate_log_scale(
    model: cmdstanpy.CmdStanModel,
    program: ast.Program,
    data: dict[str, Any] | None,
    seed: int | None = None,
    num_paths: int = 4,
    draws: int = 1000,
) -> float:
    """Pilot estimate of ``log Z`` with Pathfinder importance sampling (see module docstring).

    Parameters
    ----------
    model
        The compiled ORIGINAL model.
    program
        Its parsed program (unused; kept for future estimators).
    data
        Its data.
    seed
        Pathfinder seed.
    num_paths, draws
        Pathfinder settings (``draws`` per path, no PSIS resampling).

    Returns
    -------
    float

    Raises
    ------
    Nothing (falls back to 0.0 with a warning).
    """
    try:
        pf = model.pathfinder(data=data, seed=seed, num_paths=num_paths, draws=draws,
                              psis_resample=False, show_console=False)
        names = list(pf.column_names)
        arr = np.asarray(pf.draws(), dtype=float)
        est = _mode_aware_log_z(arr, names, num_paths)
        logger.info("pilot log-scale (Pathfinder IS estimate of log Z): %.4g", est)
        return est
    except Exception as exc:  # noqa: BLE001 - a pilot failure must not stop sampling
        logger.warning("Pathfinder pilot failed (%s); using log_scale = 0. Pass log_scale= "
                       "to set it.", exc)
        return 0.0


def _mode_aware_log_z(arr: np.ndarray, names: list[str], num_paths: int) -> float:
    """Combine per-path Pathfinder importance-sampling estimates of ``log Z``.

    Each path ``p`` gives ``Z_p = mean exp(lp__ - lp_approx__)`` over its own
    draws (an estimate of the mass its Gaussian covers).  Paths whose draw
    means lie within 3 standard deviations of each other (every coordinate)
    are taken to have found the same mode and contribute their largest
    estimate (too-narrow approximations underestimate); distinct modes add
    their masses.  Falls back to the pooled mean when the draws cannot be
    split by path.

    Raises
    ------
    RuntimeError
        If no draw has a finite ``lp__ - lp_approx__``.
    """
    lw = arr[:, names.index("lp__")] - arr[:, names.index("lp_approx__")]
    params = arr[:, [i for i, n in enumerate(names) if not n.endswith("__")]]
    ok = np.isfinite(lw)
    if not np.any(ok):
        raise RuntimeError("no finite pathfinder draws")
    n = arr.shape[0]
    if num_paths < 1 or n % num_paths or params.shape[1] == 0:
        return float(logsumexp(lw[ok]) - math.log(int(np.sum(ok))))
    per = n // num_paths
    paths = []
    for p in range(num_paths):
        sl = slice(p * per, (p + 1) * per)
        good = ok[sl]
        if not np.any(good):
            continue
        est = float(logsumexp(lw[sl][good]) - math.log(int(np.sum(good))))
        x = params[sl][good]
        paths.append((est, x.mean(axis=0), x.std(axis=0)))
    groups: list[list[tuple[float, np.ndarray, np.ndarray]]] = []
    for path in paths:
        for g in groups:
            ref = g[0]
            tol = 3.0 * np.maximum(np.maximum(path[2], ref[2]), 1e-12)
            if np.all(np.abs(path[1] - ref[1]) <= tol):
                g.append(path)
                break
        else:
            groups.append([path])
    return float(logsumexp([max(p[0] for p in g) for g in groups]))


class PseudoExtendedModel:
    """A Stan model prepared for pseudo-extended sampling.

    Parameters
    ----------
    model
        Stan text, a ``.stan`` path or a ``cmdstanpy.CmdStanModel``.
    data
        The model's data (dict or JSON path).
    options
        :class:`~pemc_stan.pseudo_extended.PseudoExtendedOptions`, or pass its
        fields as keyword arguments.

    Raises
    ------
    ValueError, StanProgramError
        As :func:`~pemc_stan.pseudo_extended.transform_pseudo_extended`
        (raised here, before anything is compiled).
    """

    def __init__(self, model: str | os.PathLike[str] | cmdstanpy.CmdStanModel,
                 data: Any = None, options: PseudoExtendedOptions | None = None,
                 **option_kwargs: Any) -> None:
        self.code, self.name, self.path = _model_source(model)
        self._given_model = model if isinstance(model, cmdstanpy.CmdStanModel) else None
        self.data = _load_data(data)
        self.program = parse(self.code, filename=self.name)
        self.result: TransformResult = transform_pseudo_extended(
            self.program, options, name=self.name, **option_kwargs)
        self._pe_model: cmdstanpy.CmdStanModel | None = None
        self._orig_model: cmdstanpy.CmdStanModel | None = self._given_model

    @property
    def options(self) -> PseudoExtendedOptions:
        """The validated options."""
        return self.result.options

    @property
    def stan_code(self) -> str:
        """The pseudo-extended Stan program."""
        return self.result.stan_code

    def pe_model(self) -> cmdstanpy.CmdStanModel:
        """The compiled PE program (cached by content hash)."""
        if self._pe_model is None:
            self._pe_model = compile_model(self.result.stan_code, name=f"{self.name}_pe")
        return self._pe_model

    def original_model(self) -> cmdstanpy.CmdStanModel:
        """The compiled original program (cached by content hash)."""
        if self._orig_model is None:
            self._orig_model = compile_model(self.code, name=self.name)
        return self._orig_model

    def log_scale(self, seed: int | None = None) -> float:
        """``options.log_scale`` or the Pathfinder pilot estimate."""
        if self.options.log_scale is not None:
            return float(self.options.log_scale)
        return estimate_log_scale(self.original_model(), self.program, self.data, seed=seed)

    def sample(self, chains: int = 4, iter_warmup: int = 1000, iter_sampling: int = 1000,
               seed: int | None = None, output_dir: str | os.PathLike[str] | None = None,
               show_progress: bool = False, **cmdstanpy_kwargs: Any) -> PseudoExtendedFit:
        """Run NUTS on the PE program.

        Parameters
        ----------
        chains, iter_warmup, iter_sampling, seed, output_dir, show_progress
            Passed to ``CmdStanModel.sample``.
        **cmdstanpy_kwargs
            Further ``CmdStanModel.sample`` arguments (``adapt_delta``, ...).

        Returns
        -------
        PseudoExtendedFit

        Raises
        ------
        RuntimeError
            If CmdStan fails.
        """
        # resampled draws are written back as CSV for generate_quantities: keep enough
        # digits for CmdStan's simplex / correlation checks (tolerance 1e-8)
        cmdstanpy_kwargs.setdefault("sig_figs", 12)
        scale = self.log_scale(seed)
        data = self.result.data(self.data, log_scale=scale)
        model = self.pe_model()
        fit = model.sample(data=data, chains=chains, iter_warmup=iter_warmup,
                           iter_sampling=iter_sampling, seed=seed,
                           output_dir=None if output_dir is None else str(output_dir),
                           show_progress=show_progress, **cmdstanpy_kwargs)
        return PseudoExtendedFit(fit, self.result, scale, data=self.data,
                                 original_model=self.original_model, seed=seed)


def sample(
    model: str | os.PathLike[str] | cmdstanpy.CmdStanModel,
    data: Any = None,
    method: str = "pseudo_extended",
    n_pseudo: int = 2,
    chains: int = 4,
    iter_warmup: int = 1000,
    iter_sampling: int = 1000,
    seed: int | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = False,
    *,
    beta: str | Sequence[float] = "estimate",
    temper: str = "posterior",
    beta_prior: Any = "uniform",
    instrumental: Any = "uniform",
    log_scale: float | None = None,
    beta_min: float = 0.0,
    **cmdstanpy_kwargs: Any,
) -> PseudoExtendedFit:
    """Sample a Stan model with pseudo-extended MCMC.

    Parameters
    ----------
    model
        Stan program text, a ``.stan`` path or a ``cmdstanpy.CmdStanModel``
        (its ``stan_file`` is used).
    data
        Data dict or JSON path.
    method
        ``"pseudo_extended"`` / ``"pe"`` (``"continuous_tempering"`` raises
        NotImplementedError).
    n_pseudo, beta, temper, beta_prior, instrumental, log_scale, beta_min
        :class:`~pemc_stan.pseudo_extended.PseudoExtendedOptions`.
    chains, iter_warmup, iter_sampling, seed, output_dir, show_progress, **cmdstanpy_kwargs
        Passed to ``CmdStanModel.sample``.

    Returns
    -------
    PseudoExtendedFit

    Raises
    ------
    ValueError
        For invalid options or an unknown method (before compiling).
    NotImplementedError
        For continuous tempering.
    StanProgramError
        For programs the transformation does not apply to (before compiling).
    """
    from pemc_stan.transform import _canonical

    if _canonical(method) != "pseudo_extended":
        raise NotImplementedError(f"method={method!r} is not implemented in "
                                  "pemc_stan.sample yet; use method='pseudo_extended'")
    options = PseudoExtendedOptions(n_pseudo=n_pseudo, beta=beta, temper=temper,
                                    beta_prior=beta_prior, instrumental=instrumental,
                                    log_scale=log_scale, beta_min=beta_min)
    pe = PseudoExtendedModel(model, data, options)
    return pe.sample(chains=chains, iter_warmup=iter_warmup, iter_sampling=iter_sampling,
                     seed=seed, output_dir=output_dir, show_progress=show_progress,
                     **cmdstanpy_kwargs)


