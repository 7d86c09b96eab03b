"""Run pseudo-extended MCMC or continuous tempering on a Stan program.

:func:`sample` transforms the program (:mod:`pemc_stan.methods.pseudo_extended.transform` or
:mod:`pemc_stan.methods.continuous_tempering.transform`), compiles it through the content-hash
cache (:func:`pemc_stan.backend.compile.compile_model`), runs NUTS with cmdstanpy and
returns a :class:`~pemc_stan.methods.pseudo_extended.fit.PseudoExtendedFit` or a
:class:`~pemc_stan.methods.continuous_tempering.fit.ContinuousTemperingFit`.

Continuous tempering (:class:`ContinuousTemperingModel`): the base density and
``log zeta`` are fitted on the original model (section 6 of Graham & Storkey:
multi-path Pathfinder by default, paths grouped by mode and combined as the
moment-matched mixture of eq 25; ADVI or Laplace selectable), then the CT
program is run and, for ``bootstrap_rounds`` more rounds, the base is re-fitted
to the eq-21 weighted draws and ``log zeta`` set to the eq-20 estimate, stopping
early once ``log Z`` moves by less than ``bootstrap_tol`` combined standard
errors.

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cmdstanpy
import numpy as np
from scipy.special import logsumexp

from pemc_stan.stan import ast
from pemc_stan.methods.continuous_tempering.base_density import BaseDensity, extract_variable, moment_match
from pemc_stan.backend.compile import compile_model
from pemc_stan.methods.continuous_tempering.transform import (
    ContinuousTemperingOptions,
    ContinuousTemperingResult,
    transform_continuous_tempering,
)
from pemc_stan.methods.continuous_tempering.fit import ContinuousTemperingFit
from pemc_stan.stan.parser import parse
from pemc_stan.methods.pseudo_extended.transform import (
    PseudoExtendedOptions,
    TransformResult,
    transform_pseudo_extended,
)
from pemc_stan.methods.pseudo_extended.fit import PseudoExtendedFit

logger = logging.getLogger(__name__)

__all__ = ["sample", "PseudoExtendedModel", "ContinuousTemperingModel", "estimate_log_scale"]


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


class _TransformedModel:
    """What both methods' model classes share: the user's program, data and compiled programs.

    Subclasses set :attr:`suffix` (the compiled program's name suffix) and
    pass their transformation.
    """

    suffix = "transformed"

    def __init__(self, model: str | os.PathLike[str] | cmdstanpy.CmdStanModel, data: Any,
                 transform: Callable[..., Any], options: Any,
                 option_kwargs: dict[str, Any]) -> None:
        self.code, self.name, self.path = _model_source(model)
        self._given_model = model if isinstance(model, cmdstanpy.CmdStanModel) else None
        self.data = _load_data(data)
        self.program = parse(self.code, filename=self.name)
        self.result = transform(self.program, options, name=self.name, **option_kwargs)
        self._method_model: cmdstanpy.CmdStanModel | None = None
        self._orig_model: cmdstanpy.CmdStanModel | None = self._given_model

    @property
    def stan_code(self) -> str:
        """The transformed Stan program."""
        return str(self.result.stan_code)

    def method_model(self) -> cmdstanpy.CmdStanModel:
        """The compiled transformed program (cached by content hash)."""
        if self._method_model is None:
            self._method_model = compile_model(self.result.stan_code,
                                               name=f"{self.name}_{self.suffix}")
        return self._method_model

    def original_model(self) -> cmdstanpy.CmdStanModel:
        """The compiled original program (cached by content hash)."""
        if self._orig_model is None:
            self._orig_model = compile_model(self.code, name=self.name)
        return self._orig_model


class PseudoExtendedModel(_TransformedModel):
    """A Stan model prepared for pseudo-extended sampling.

    Parameters
    ----------
    model
        Stan text, a ``.stan`` path or a ``cmdstanpy.CmdStanModel``.
    data
        The model's data (dict or JSON path).
    options
        :class:`~pemc_stan.methods.pseudo_extended.transform.PseudoExtendedOptions`, or pass its
        fields as keyword arguments.

    Raises
    ------
    ValueError, StanProgramError
        As :func:`~pemc_stan.methods.pseudo_extended.transform.transform_pseudo_extended`
        (raised here, before anything is compiled).
    """

    suffix = "pe"
    result: TransformResult

    def __init__(self, model: str | os.PathLike[str] | cmdstanpy.CmdStanModel,
                 data: Any = None, options: PseudoExtendedOptions | None = None,
                 **option_kwargs: Any) -> None:
        super().__init__(model, data, transform_pseudo_extended, options, option_kwargs)

    @property
    def options(self) -> PseudoExtendedOptions:
        """The validated options."""
        return self.result.options

    def pe_model(self) -> cmdstanpy.CmdStanModel:
        """The compiled PE program (cached by content hash)."""
        return self.method_model()

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


# --------------------------------------------------------------------------- #
# Continuous tempering
# --------------------------------------------------------------------------- #


def _pathfinder_groups(z: np.ndarray, lw: np.ndarray, num_paths: int
                       ) -> tuple[list[tuple[np.ndarray, float]], float]:
    """Group Pathfinder paths by mode (section 6, eq 25).

    Each path ``p`` has an importance-sampling mass estimate ``log Z_p =
    log mean exp(lp__ - lp_approx__)`` over its own draws.  Paths whose draw
    means (in base coordinates) lie within 3 standard deviations of each other
    found the same mode; a mode's mass is its paths' largest ``Z_p`` and its
    draws are all its paths' draws.  Returns ``([(indices, log mass)], log
    zeta)`` with ``log zeta = log sum_modes mass``.

    Raises
    ------
    RuntimeError
        If no draw has a finite importance weight.
    """
    ok = np.isfinite(lw) & np.all(np.isfinite(z), axis=1)
    if not np.any(ok):
        raise RuntimeError("Pathfinder returned no draw with a finite density")
    n = z.shape[0]
    if num_paths < 1 or n % num_paths:
        idx = np.flatnonzero(ok)
        lm = float(logsumexp(lw[idx]) - math.log(idx.size))
        return [(idx, lm)], lm
    per = n // num_paths
    paths = []
    for p in range(num_paths):
        idx = np.arange(p * per, (p + 1) * per)
        idx = idx[ok[idx]]
        if idx.size < 2:
            continue
        lm = float(logsumexp(lw[idx]) - math.log(idx.size))
        paths.append((idx, lm, z[idx].mean(axis=0), z[idx].std(axis=0)))
    groups: list[list[Any]] = []
    for path in paths:
        for g in groups:
            ref = g[0]
            tol = 3.0 * np.maximum(np.maximum(path[3], ref[3]), 1e-12)
            if np.all(np.abs(path[2] - ref[2]) <= tol):
                g.append(path)
                break
        else:
            groups.append([path])
    out = [(np.concatenate([p[0] for p in g]), max(p[1] for p in g)) for g in groups]
    return out, float(logsumexp([m for _, m in out]))


class ContinuousTemperingModel(_TransformedModel):
    """A Stan model prepared for continuous tempering (Graham & Storkey 2017).

    Parameters
    ----------
    model
        Stan text, a ``.stan`` path or a ``cmdstanpy.CmdStanModel``.
    data
        The model's data (dict or JSON path).
    options
        :class:`~pemc_stan.methods.continuous_tempering.transform.ContinuousTemperingOptions`, or
        pass its fields as keyword arguments.

    Raises
    ------
    ValueError, StanProgramError
        As :func:`~pemc_stan.methods.continuous_tempering.transform.transform_continuous_tempering`
        (raised here, before anything is compiled), and when the base
        coordinates' sizes or bounds cannot be evaluated from the data.
    """

    suffix = "ct"
    result: ContinuousTemperingResult

    def __init__(self, model: str | os.PathLike[str] | cmdstanpy.CmdStanModel,
                 data: Any = None, options: ContinuousTemperingOptions | None = None,
                 **option_kwargs: Any) -> None:
        super().__init__(model, data, transform_continuous_tempering, options, option_kwargs)
        if self.options.temper == "posterior":
            self.dim = self.result.coordinates.dim(self.data)  # sizes must come from data

    @property
    def options(self) -> ContinuousTemperingOptions:
        """The validated options."""
        return self.result.options

    def ct_model(self) -> cmdstanpy.CmdStanModel:
        """The compiled CT program (cached by content hash)."""
        return self.method_model()

    def _param_draws(self, values: np.ndarray, columns: list[str]) -> dict[str, np.ndarray]:
        out = {}
        for b in self.result.coordinates.blocks:
            arr, el = b.shape(self.data or {})
            out[b.name] = extract_variable(values, columns, b.name, (*arr, *el))
        return out

    def fit_base(self, seed: int | None = None) -> tuple[BaseDensity | None, float]:
        """Initial base density and ``log zeta`` (section 6).

        ``base="pathfinder"``: multi-path Pathfinder (no PSIS resampling) on
        the original model; paths are grouped by mode, each mode's draws
        moment-matched and the modes combined as the mixture of eq 25 with
        weights from their importance-sampling masses; ``log zeta = log
        sum_modes Z_m``.  ``"advi"`` / ``"laplace"``: the base is
        moment-matched to the approximation's draws; as CmdStan's ``log_p__``
        of these methods drops the density's constants, ``log zeta`` comes
        from the Pathfinder importance-sampling estimate.  A fixed
        ``BaseDensity`` is used as is.  ``options.log_zeta`` overrides the
        estimate.

        Returns
        -------
        (BaseDensity or None, float)
            None under likelihood tempering (the base is the prior).

        Raises
        ------
        RuntimeError
            If the approximation fails (the message says what to pass instead).
        """
        opts = self.options
        model = self.original_model()
        coords = self.result.coordinates
        need_pf = opts.log_zeta is None or (opts.temper == "posterior" and opts.base ==
                                            "pathfinder")
        base: BaseDensity | None = opts.base if isinstance(opts.base, BaseDensity) else None
        log_zeta = opts.log_zeta
        pf_groups = None
        if need_pf:
            try:
                pf = model.pathfinder(data=self.data, seed=seed, num_paths=opts.num_paths,
                                      draws=opts.base_draws, psis_resample=False,
                                      show_console=False)
            except Exception as exc:  # noqa: BLE001
                raise RuntimeError(
                    f"Pathfinder on {self.name} failed ({exc}); pass log_zeta= and a "
                    "BaseDensity as base=, or base='advi'/'laplace' with log_zeta=") from exc
            cols = list(pf.column_names)
            arr = np.asarray(pf.draws(), dtype=float)
            lw = arr[:, cols.index("lp__")] - arr[:, cols.index("lp_approx__")]
            if opts.temper == "posterior":
                z, _ = coords.forward(self._param_draws(arr, cols), self.data)
            else:  # group by the raw parameter columns
                pcols = [i for i, c in enumerate(cols) if not c.endswith("__")]
                z = arr[:, pcols]
            pf_groups, pf_log_zeta = _pathfinder_groups(z, lw, opts.num_paths)
            if log_zeta is None:
                log_zeta = pf_log_zeta
            if base is None and opts.temper == "posterior" and opts.base == "pathfinder":
                base = moment_match(z, None, pf_groups, opts.base_covariance)
                base.info.update({"method": "pathfinder", "modes": len(pf_groups)})
        if base is None and opts.temper == "posterior":
            if opts.base == "advi":
                fit = model.variational(data=self.data, seed=seed, draws=opts.base_draws,
                                        algorithm="meanfield", show_console=False,
                                        require_converged=False)
                cols = list(fit.column_names)
                arr = np.asarray(fit.variational_sample, dtype=float)
            else:  # laplace
                # the mode is written with 12 significant digits: CmdStan re-reads it and
                # checks simplexes / correlation matrices to 1e-8
                mode = model.optimize(data=self.data, seed=seed, jacobian=True, sig_figs=12,
                                      show_console=False)
                fit = model.laplace_sample(data=self.data, mode=mode, seed=seed,
                                           draws=opts.base_draws, sig_figs=12)
                cols = list(fit.column_names)
                arr = np.asarray(fit.draws(), dtype=float)
            z, _ = coords.forward(self._param_draws(arr, cols), self.data)
            base = moment_match(z, None, None, opts.base_covariance)
            base.info.update({"method": opts.base})
        assert log_zeta is not None
        logger.info("initial log zeta = %.6g (base %s)", log_zeta,
                    "prior" if base is None else base.info.get("method", "given"))
        return base, float(log_zeta)

    def _run(self, base: BaseDensity | None, log_zeta: float, chains: int, iter_warmup: int,
             iter_sampling: int, seed: int | None, output_dir: str | os.PathLike[str] | None,
             show_progress: bool, history: list[dict[str, Any]], **kw: Any
             ) -> ContinuousTemperingFit:
        data = self.result.data(self.data, log_zeta=log_zeta, base=base)
        fit = self.ct_model().sample(data=data, chains=chains, iter_warmup=iter_warmup,
                                     iter_sampling=iter_sampling, seed=seed,
                                     output_dir=None if output_dir is None else str(output_dir),
                                     show_progress=show_progress, **kw)
        return ContinuousTemperingFit(fit, self.result, log_zeta, base=base, data=self.data,
                                      original_model=self.original_model, seed=seed,
                                      history=history)

    def sample(self, chains: int = 4, iter_warmup: int = 1000, iter_sampling: int = 1000,
               seed: int | None = None, output_dir: str | os.PathLike[str] | None = None,
               show_progress: bool = False, **cmdstanpy_kwargs: Any) -> ContinuousTemperingFit:
        """Fit the base and log zeta, run NUTS on the CT program, bootstrap (section 6).

        After each run the base is moment-matched to the eq-21 weighted draws
        in base coordinates (diagonal or dense, as configured) and ``log zeta``
        set to the eq-20 estimate, for up to ``options.bootstrap_rounds`` extra
        runs; the loop stops early when ``|log Z_r - log Z_{r-1}| <=
        bootstrap_tol * sqrt(se_r^2 + se_{r-1}^2)``.  A fixed ``BaseDensity``
        is not re-fitted (only ``log zeta`` is updated); a given ``log_zeta``
        with ``bootstrap_rounds=0`` is used as is.

        Parameters
        ----------
        chains, iter_warmup, iter_sampling, seed, output_dir, show_progress
            Passed to ``CmdStanModel.sample`` (every round; round ``r`` writes
            to ``output_dir/round_r`` when given).
        **cmdstanpy_kwargs
            Further ``CmdStanModel.sample`` arguments (``adapt_delta``, ...).

        Returns
        -------
        ContinuousTemperingFit
            The last round's fit; ``fit.history`` lists every round.

        Raises
        ------
        RuntimeError
            If CmdStan or the base fit fails.
        """
        cmdstanpy_kwargs.setdefault("sig_figs", 12)
        opts = self.options
        base, log_zeta = self.fit_base(seed)
        history: list[dict[str, Any]] = []
        fit: ContinuousTemperingFit | None = None
        for r in range(opts.bootstrap_rounds + 1):
            round_dir = None if output_dir is None else Path(output_dir) / f"round_{r}"
            round_seed = None if seed is None else seed + r
            fit = self._run(base, log_zeta, chains, iter_warmup, iter_sampling, round_seed,
                            round_dir, show_progress, history, **cmdstanpy_kwargs)
            est = fit.log_z()
            history.append({"round": r, "log_zeta": log_zeta, "log_z": est.log_z,
                            "std_error": est.std_error,
                            "share_near_1": float(np.mean(fit.beta() > 0.95)),
                            "share_near_0": float(np.mean(fit.beta() < 0.05))})
            logger.info("CT round %d: log zeta %.6g -> log Z %.6g +/- %.3g", r, log_zeta,
                        est.log_z, est.std_error)
            if r == opts.bootstrap_rounds:
                break
            if r > 0:
                prev = history[-2]
                if abs(est.log_z - prev["log_z"]) <= opts.bootstrap_tol * math.sqrt(
                        est.std_error**2 + prev["std_error"] ** 2):
                    logger.info("bootstrap converged after round %d", r)
                    break
            if not math.isfinite(est.log_z):
                break
            log_zeta = est.log_z
            if opts.temper == "posterior" and not isinstance(opts.base, BaseDensity):
                z = np.stack([fit._column(f"pemc_z[{j + 1}]") for j in range(self.dim)],
                             axis=-1).reshape(-1, self.dim)
                try:
                    new = moment_match(z, fit.log_weights().reshape(-1), None,
                                       opts.base_covariance)
                    new.info.update({"method": "bootstrap", "round": r + 1})
                    base = new
                except ValueError as exc:
                    logger.warning("bootstrap re-fit of the base failed (%s); keeping the "
                                   "previous base", exc)
        assert fit is not None
        fit.history = history
        return fit


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
    noncentring: float = 0.0,
    base: Any = "pathfinder",
    base_covariance: str = "diag",
    bootstrap_rounds: int = 1,
    bootstrap_tol: float = 1.0,
    log_zeta: float | None = None,
    num_paths: int = 4,
    base_draws: int = 1000,
    **cmdstanpy_kwargs: Any,
) -> PseudoExtendedFit | ContinuousTemperingFit:
    """Sample a Stan model with pseudo-extended MCMC or continuous tempering.

    Parameters
    ----------
    model
        Stan program text, a ``.stan`` path or a ``cmdstanpy.CmdStanModel``
        (its ``stan_file`` is used).
    data
        Data dict or JSON path.
    method
        ``"pseudo_extended"`` / ``"pe"`` or ``"continuous_tempering"`` / ``"ct"``.
    n_pseudo, beta, beta_prior, instrumental, log_scale, beta_min, noncentring
        Pseudo-extended only: :class:`~pemc_stan.methods.pseudo_extended.transform.PseudoExtendedOptions`.
    temper
        ``"posterior"`` or ``"likelihood"`` (both methods).
    base, base_covariance, bootstrap_rounds, bootstrap_tol, log_zeta, num_paths, base_draws
        Continuous tempering only:
        :class:`~pemc_stan.methods.continuous_tempering.transform.ContinuousTemperingOptions`.
    chains, iter_warmup, iter_sampling, seed, output_dir, show_progress, **cmdstanpy_kwargs
        Passed to ``CmdStanModel.sample``.

    Returns
    -------
    PseudoExtendedFit or ContinuousTemperingFit

    Raises
    ------
    ValueError
        For invalid options, options of the other method, or an unknown method
        (before compiling).
    StanProgramError
        For programs the transformation does not apply to (before compiling).
    """
    from pemc_stan.methods.registry import _canonical

    canonical = _canonical(method)
    pe_given = {k: v for k, v in (("n_pseudo", n_pseudo != 2), ("beta", beta != "estimate"),
                                  ("beta_prior", beta_prior != "uniform"),
                                  ("instrumental", instrumental != "uniform"),
                                  ("log_scale", log_scale is not None),
                                  ("beta_min", beta_min != 0.0),
                                  ("noncentring", noncentring != 0.0)) if v}
    ct_given = {k: v for k, v in (
        ("base", not (isinstance(base, str) and base == "pathfinder")),
        ("base_covariance", base_covariance != "diag"),
        ("bootstrap_rounds", bootstrap_rounds != 1), ("bootstrap_tol", bootstrap_tol != 1.0),
        ("log_zeta", log_zeta is not None), ("num_paths", num_paths != 4),
        ("base_draws", base_draws != 1000)) if v}
    if canonical == "continuous_tempering":
        if pe_given:
            raise ValueError(f"{sorted(pe_given)} are pseudo-extended options but "
                             f"method={method!r}; remove them or use method='pe'")
        ct_options = ContinuousTemperingOptions(
            temper=temper, base=base, base_covariance=base_covariance, log_zeta=log_zeta,
            bootstrap_rounds=bootstrap_rounds, bootstrap_tol=bootstrap_tol,
            num_paths=num_paths, base_draws=base_draws)
        ct = ContinuousTemperingModel(model, data, ct_options)
        return ct.sample(chains=chains, iter_warmup=iter_warmup, iter_sampling=iter_sampling,
                         seed=seed, output_dir=output_dir, show_progress=show_progress,
                         **cmdstanpy_kwargs)
    if ct_given:
        raise ValueError(f"{sorted(ct_given)} are continuous-tempering options but "
                         f"method={method!r}; remove them or use method='ct'")
    options = PseudoExtendedOptions(n_pseudo=n_pseudo, beta=beta, temper=temper,
                                    beta_prior=beta_prior, instrumental=instrumental,
                                    log_scale=log_scale, beta_min=beta_min,
                                    noncentring=noncentring)
    pe = PseudoExtendedModel(model, data, options)
    return pe.sample(chains=chains, iter_warmup=iter_warmup, iter_sampling=iter_sampling,
                     seed=seed, output_dir=output_dir, show_progress=show_progress,
                     **cmdstanpy_kwargs)
