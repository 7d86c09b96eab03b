"""What every method shares: the transform result, the model and the fit.

A method (see :mod:`pemc_stan.methods.registry`) transforms the user's
program into an *extended* program whose draws carry, at each iteration,
``K`` weighted *particles* of the original parameters (``K = N``
pseudo-samples for pseudo-extended MCMC, one draw with its ``beta = 1``
weight for continuous tempering, one unweighted draw for a method that only
changes the target).  :class:`ExtendedFit` holds everything that is the
same for all of them: columns, self-normalised expectations with their
Monte-Carlo standard errors, resampled draws of the original parameters,
the original model's transformed parameters and generated quantities on
them, NUTS diagnostics, ``summary()`` and ``to_inference_data()``.  A method
overrides only what differs: where its particles live
(:meth:`ExtendedFit.particle_columns`), their log weights
(:meth:`ExtendedFit.particle_log_weights`) and its own diagnostics.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import cmdstanpy
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from pemc_stan.backend.compile import compile_model, message_file_name
from pemc_stan.backend.console import (
    is_cmdstan_failure,
    rewriting_messages,
    routed_cmdstanpy_logging,
    run_error,
)
from pemc_stan.backend.progress import stage
from pemc_stan.errors import FitSuspectWarning, ImproperPriorError, OptionsError
from pemc_stan.estimators import weights as W
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.estimators.normalisation import improper_prior
from pemc_stan.inputs import StanProgram, read_data
from pemc_stan.methods.base_density import coordinate_draws
from pemc_stan.methods.pilot import UNSEEN_SHARE_MAX
from pemc_stan.methods.warm_start import WarmStart
from pemc_stan.output.diagnostics import (
    CHAIN_Z_MAX,
    DIVERGENT_SHARE_MAX,
    ESS_MIN,
    RHAT_MAX,
    UNVISITED_SHARE_MIN,
    Reason,
    TransitionCounts,
    Verdict,
    chains_disagree,
    convergence_stats,
    transition_counts,
)
from pemc_stan.output.generated_quantities import (
    SAMPLER_COLUMNS,
    recompute_quantities,
    write_resampled_csvs,
)
from pemc_stan.stan.line_map import LineMap
from pemc_stan.stan.reparameterize import NonCentred

if TYPE_CHECKING:
    from pemc_stan.methods.registry import Method

logger = logging.getLogger(__name__)

__all__ = ["TransformResult", "MethodModel", "ExtendedFit", "FitHooks", "WeightedEstimate",
           "emit_warning"]


_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep


def emit_warning(message: str, category: type[Warning], stacklevel: int = 2) -> None:
    """Warn on one channel: ``warnings.warn`` (what a Python user sees, and what the
    warnings filter governs), pointing at the first caller outside pemc-stan (at least
    ``stacklevel`` frames up, as for ``warnings.warn``); the text is also logged, at
    DEBUG: a log record at WARNING would print the message a second time where logging
    is not configured, and would show it where the warnings filter hides it.

    Raises
    ------
    Nothing (unless the warnings filter turns warnings into errors).
    """
    level, frame = 2, sys._getframe(1)
    while frame.f_back is not None and (level < stacklevel + 1
                                        or frame.f_code.co_filename.startswith(_PACKAGE)):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
    logger.debug("warned: %s", message)


class WeightedEstimate(dict[str, float]):
    """``{"mean", "mcse", "ess"}`` of a weighted expectation (a dict with attribute access)."""

    @property
    def mean(self) -> float:
        """The estimate."""
        return self["mean"]

    @property
    def mcse(self) -> float:
        """Its Monte-Carlo standard error."""
        return self["mcse"]

    @property
    def ess(self) -> float:
        """The effective sample size behind it."""
        return self["ess"]


@dataclass(frozen=True, kw_only=True)
class TransformResult:
    """A transformed program and what is needed to run and post-process it.

    Attributes
    ----------
    stan_code
        The transformed Stan program.
    options
        The validated options used.
    program
        The user's program (text, name and parsed tree), carried downstream so
        that nothing parses it again.
    warnings
        Messages of the warnings issued.
    noncentred
        The parameters the generated program declares with their prior's
        location and scale as offset/multiplier (``reparameterize="auto"``).
    method
        The registry entry of the method that made it, set by
        :meth:`~pemc_stan.methods.registry.Method.transform_program` (None for a
        result built by calling a transformation directly); the model and the
        fit take their method from here.
    line_map
        The generated program's lines -> the user's (None when not kept): CmdStan's
        messages about the generated program are told in the user's lines.
    """

    stan_code: str
    options: Any
    program: StanProgram
    warnings: tuple[str, ...] = ()
    noncentred: tuple[NonCentred, ...] = ()
    method: Method | None = None
    line_map: LineMap | None = None

    def require_method(self) -> Method:
        """The method that made this result.

        Raises
        ------
        ValueError
            If the result was not made through the registry.
        """
        if self.method is None:
            raise ValueError("this TransformResult was built by calling a transformation "
                             "directly, so it has no method; build it with "
                             "pemc_stan.transform_result(...) or Method.transform_program")
        return self.method

    @property
    def original_code(self) -> str:
        """The user's program text."""
        return self.program.text

    @property
    def model_name(self) -> str:
        """The user's model name."""
        return self.program.name

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """The user's parameters, in declaration order."""
        return tuple(self.program.parameter_names)

    def data(self, user_data: Mapping[str, Any] | None, **values: Any) -> dict[str, Any]:
        """The transformed program's data: the user's data plus the method's entries.

        Raises
        ------
        ValueError
            If a value the program needs is unknown (methods override this).
        """
        return dict(user_data or {})


def leapfrog_gradients(steps: NDArray[np.float64], config: Mapping[str, Any]) -> int:
    """Gradient evaluations of a NUTS run from its saved ``n_leapfrog__`` (draws, chains)
    and its CmdStan config: the sampling iterations' steps (times ``thin``) plus the
    warm-up iterations at their mean (see :meth:`ExtendedFit.run_gradients`).

    Raises
    ------
    Nothing.
    """
    steps = np.asarray(steps, dtype=float)
    if steps.size == 0:
        return 0
    warmup = int(config.get("num_warmup", 0) or 0)
    thin = max(int(config.get("thin", 1) or 1), 1)
    return int(round(float(np.sum(steps)) * thin + float(np.mean(steps)) * warmup
                     * steps.shape[1]))


class MethodModel:
    """A user's model prepared for one method: transformed program, data, compiled programs.

    Built by the front doors as ``method.model(result, data)`` from a result of
    :meth:`~pemc_stan.methods.registry.Method.transform_program` (the program
    read once, the options validated once); it does neither again.

    Parameters
    ----------
    result
        The method's :class:`TransformResult` (it carries the method).
    data
        The model's data (dict or JSON path), checked against the data block.
    original_model
        The user's compiled program, when they gave a ``cmdstanpy.CmdStanModel``
        (otherwise it is compiled when first needed).

    Raises
    ------
    DataError
        For data that do not match the data block (before anything is compiled).
    ValueError
        For a result that was not made through the registry.
    """

    def __init__(self, result: TransformResult, data: Any = None,
                 original_model: cmdstanpy.CmdStanModel | None = None) -> None:
        self.method: Method = result.require_method()
        self.result = result
        self.program: StanProgram = result.program
        self.data: dict[str, Any] = read_data(self.program, data)
        self._method_model: cmdstanpy.CmdStanModel | None = None
        self._orig_model: cmdstanpy.CmdStanModel | None = original_model
        #: Runs the chains elsewhere (``pemc_stan.backend.chains.DaskChainRunner``); None: here.
        self.chain_runner: Callable[..., cmdstanpy.CmdStanMCMC] | None = None
        #: The sampler's follow-up budget (:mod:`pemc_stan.methods.follow_up`), for the
        #: steps a method takes within its own run (the mode split's longer run); None:
        #: the default.
        self.follow_up_budget: float | None = None

    @property
    def name(self) -> str:
        """The model's name."""
        return self.program.name

    @property
    def code(self) -> str:
        """The user's program text."""
        return self.program.text

    @property
    def options(self) -> Any:
        """The validated options."""
        return self.result.options

    @property
    def stan_code(self) -> str:
        """The transformed Stan program."""
        return str(self.result.stan_code)

    def method_model(self) -> cmdstanpy.CmdStanModel:
        """The compiled transformed program (cached by content hash).

        Raises
        ------
        StanCompileError
            If the program does not compile.
        """
        if self._method_model is None:
            self._method_model = compile_model(self.result.stan_code,
                                               name=f"{self.name}_{self.method.short}")
        return self._method_model

    def original_model(self) -> cmdstanpy.CmdStanModel:
        """The compiled original program (cached by content hash).

        Raises
        ------
        StanCompileError
            If the program does not compile.
        """
        if self._orig_model is None:
            self._orig_model = compile_model(self.code, name=self.name)
        return self._orig_model

    def run_nuts(self, data: Mapping[str, Any], chains: int, iter_warmup: int,
                 iter_sampling: int, seed: int | None,
                 output_dir: str | os.PathLike[str] | None, show_progress: bool,
                 warm: WarmStart | None = None, **cmdstanpy_kwargs: Any) -> cmdstanpy.CmdStanMCMC:
        """Run CmdStan's NUTS on the transformed program.

        Resampled draws are written back as CSV for generate_quantities, so
        12 significant digits are kept by default (CmdStan checks simplexes and
        correlation matrices to 1e-8).  With a :attr:`chain_runner` the chains
        run as tasks of a cluster, with the same seed and chain ids, so the
        draws are those of a run here.  ``warm`` (an initial inverse metric;
        :mod:`pemc_stan.methods.warm_start`) fills in what the user's
        arguments leave to CmdStan; when CmdStan fails from that start, the
        run is repeated from CmdStan's own.

        Raises
        ------
        RuntimeError
            If CmdStan fails.
        """
        cmdstanpy_kwargs.setdefault("sig_figs", 12)
        if seed is None and self.chain_runner is not None:
            # one seed for every chain, as a run in one process has
            seed = int(np.random.default_rng().integers(0, 2**31 - 1))
        started = cmdstanpy_kwargs if warm is None else warm.kwargs(cmdstanpy_kwargs)
        added = [k for k, v in started.items() if v is not None
                 and cmdstanpy_kwargs.get(k) is None]
        if warm is not None and added:
            folder = None if output_dir is None else Path(output_dir)
            before = set(folder.iterdir()) if folder is not None and folder.is_dir() else set()
            try:
                return self._launch(data, chains, iter_warmup, iter_sampling, seed, output_dir,
                                    show_progress, started)
            except RuntimeError as exc:
                logger.warning("CmdStan failed when started from %s (%s: %s); running again "
                               "without them", warm.source or "the warm start",
                               ", ".join(added), str(exc).splitlines()[0] if str(exc)
                               else type(exc).__name__)
                if folder is not None and folder.is_dir():  # the failed attempt's files
                    for path in set(folder.iterdir()) - before:
                        if path.is_file():
                            path.unlink()
        return self._launch(data, chains, iter_warmup, iter_sampling, seed, output_dir,
                            show_progress, cmdstanpy_kwargs)

    def _launch(self, data: Mapping[str, Any], chains: int, iter_warmup: int,
                iter_sampling: int, seed: int | None,
                output_dir: str | os.PathLike[str] | None, show_progress: bool,
                kwargs: Mapping[str, Any]) -> cmdstanpy.CmdStanMCMC:
        """One CmdStan run of the transformed program, as a stage of the run; CmdStan's
        messages about it (warnings, the reason of a failure) in the user's lines."""
        name = f"{self.name}_{self.method.short}"
        model = None if self.chain_runner is not None else self.method_model()
        label = (f"sampling {chains} chain{'s' if chains != 1 else ''} x {iter_sampling} "
                 f"draws ({iter_warmup} warm-up)")
        rewrite = self._message_rewrite()
        try:
            with stage(label), rewriting_messages(rewrite):
                if model is None:
                    assert self.chain_runner is not None and seed is not None
                    return self.chain_runner(self.result.stan_code, name, data, chains,
                                             iter_warmup, iter_sampling, seed, output_dir,
                                             **kwargs)
                return model.sample(
                    data=dict(data), chains=chains, iter_warmup=iter_warmup,
                    iter_sampling=iter_sampling, seed=seed,
                    output_dir=None if output_dir is None else str(output_dir),
                    show_progress=show_progress, **kwargs)
        except RuntimeError as exc:
            if not is_cmdstan_failure(exc):
                raise
            error = run_error(exc, "sampling", rewrite)
            if error is exc:
                raise
            raise error from exc

    def _message_rewrite(self) -> Callable[[str], str] | None:
        """CmdStan's locations in the transformed program told in the user's lines (None
        without a line map)."""
        line_map = self.result.line_map
        if line_map is None:
            return None
        if self._method_model is not None:
            generated = message_file_name(self._method_model)  # an adopted executable's own
        else:  # compiled on the workers (chain_runner): named as compile_model names it
            stem = re.sub(r"[^A-Za-z0-9_]", "_", f"{self.name}_{self.method.short}")
            generated = ("m_" + stem if stem[:1].isdigit() else stem or "model") + ".stan"
        return lambda text: line_map.rewrite(text, generated)

    def messages_in_user_lines(self) -> contextlib.AbstractContextManager[None]:
        """A block within which CmdStan's messages about the transformed program (the
        warnings cmdstanpy passes on, the reasons of
        :func:`~pemc_stan.backend.console.run_error`) are told in the user's lines.

        Raises
        ------
        Nothing.
        """
        return rewriting_messages(self._message_rewrite())

    def sample(self, chains: int = 4, iter_warmup: int = 1000, iter_sampling: int = 1000,
               seed: int | None = None, output_dir: str | os.PathLike[str] | None = None,
               show_progress: bool = False, **cmdstanpy_kwargs: Any) -> ExtendedFit:
        """Run NUTS on the transformed program and wrap the draws in the method's fit.

        The default runs the program once with the user's data plus
        ``result.data(...)``; methods with pilots override it.

        Raises
        ------
        RuntimeError
            If CmdStan fails.
        """
        run = self.run_nuts(self.result.data(self.data), chains, iter_warmup, iter_sampling,
                            seed, output_dir, show_progress, **cmdstanpy_kwargs)
        fit: ExtendedFit = self.method.fit(run, self.result, data=self.data,
                                           original_model=self.original_model, seed=seed)
        return fit

    def continue_from(self, fit: ExtendedFit, iter_warmup: int, iter_sampling: int,
                      seed: int | None, output_dir: str | os.PathLike[str] | None = None,
                      show_progress: bool = False, **cmdstanpy_kwargs: Any) -> ExtendedFit:
        """A further run that carries on from ``fit`` (a follow-up of
        :mod:`pemc_stan.methods.follow_up`): by default the same program, its chains
        started at ``fit``'s last draws.  Methods with pilots or rounds override it.

        Raises
        ------
        RuntimeError
            If CmdStan fails.
        """
        cmdstanpy_kwargs.setdefault("inits", fit.continuation_inits())
        run = self.run_nuts(self.result.data(self.data), fit.fit.chains, iter_warmup,
                            iter_sampling, seed, output_dir, show_progress, **cmdstanpy_kwargs)
        new: ExtendedFit = self.method.fit(run, self.result, data=self.data,
                                           original_model=self.original_model, seed=seed)
        return new


@dataclass(frozen=True)
class OutputExtras:
    """A method's own additions to the InferenceData and to ``estimates.json``.

    Attributes
    ----------
    attributes
        Attributes of the posterior group (numbers and strings: ``pemc_log_zeta``).
    settings
        Values the run used besides its options (an estimated offset), for ``estimates.json``.
    sample_stats
        ``sample_stats`` variables, ``name -> (dims, values)``.
    sample_stats_attrs
        Attributes of the ``sample_stats`` group.
    extended
        Variables of the ``extended_posterior`` group, ``(chain, draw[, particle])``.
    """

    attributes: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    sample_stats: Mapping[str, tuple[tuple[str, ...], NDArray[Any]]] = dataclasses.field(
        default_factory=dict)
    sample_stats_attrs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    extended: Mapping[str, NDArray[Any]] = dataclasses.field(default_factory=dict)


class FitHooks(Protocol):
    """What a method's fit supplies; :class:`ExtendedFit` has a default for each.

    A method's fit subclasses :class:`ExtendedFit` and overrides only these
    public hooks (and the class attributes ``particle_dim`` and ``resampling``);
    everything else (expectations, resampling, generated quantities, the shared
    checks, summaries, output) is :class:`ExtendedFit`'s and works from them.
    """

    def particle_columns(self) -> dict[str, list[str]]:
        """Original parameter column -> the extended columns of its particles."""

    def particle_log_weights(self) -> NDArray[np.float64]:
        """Unnormalised log weights of the particles, shape (chains, draws, K)."""

    def chain_expectations(self, column: str) -> tuple[NDArray[np.float64],
                                                       NDArray[np.float64]]:
        """Each chain's weighted mean of ``column`` and its standard error."""

    def method_checks(self) -> Iterator[tuple[str, Reason | None]]:
        """The method's own named checks of the verdict."""

    def log_z(self) -> EvidenceEstimate | None:
        """The method's own ``log Z`` estimate (None when it has none)."""

    def evidence_estimate(self, estimator: str, **settings: Any) -> EvidenceEstimate:
        """``log Z`` by one of the method's own estimators."""

    def output_extras(self) -> OutputExtras:
        """The method's additions to the InferenceData and the run folder."""


class _ColumnView:
    """``view["x"]`` -> the particles of original column ``x``, shape (chains, draws, K)."""

    def __init__(self, fit: ExtendedFit) -> None:
        self._fit = fit

    def __getitem__(self, column: str) -> NDArray[np.float64]:
        return self._fit.particles(column)


class ExtendedFit:
    """A fit of a method's extended program (see the module docstring).

    Parameters
    ----------
    fit
        The cmdstanpy fit of the transformed program.
    result
        The :class:`TransformResult` it was built from.
    data
        The user's data (for generated quantities of the original model).
    original_model
        The compiled original model, or a callable returning it (compiled
        lazily, for :meth:`resampled_draws_pd` with generated quantities).
    seed
        Seed of the resampling.

    Attributes
    ----------
    fit, result, data, seed
    """

    #: Name of the particle dimension in InferenceData (None: one particle per draw).
    particle_dim: ClassVar[str | None] = None
    #: How the resampled draws are drawn (:meth:`resample_index`): ``"within_draw"``
    #: (the particles of one draw share a target) or ``"pooled"`` (one particle per
    #: draw, weights on one scale across all draws and chains).
    resampling: ClassVar[Literal["within_draw", "pooled"]] = "within_draw"
    #: The follow-up record (set per fit by ``sample``; None when it made none).
    follow_up: Any = None
    #: The seed of the whole call that made the fit (given or drawn; set by
    #: :func:`pemc_stan.pipeline.run`).  ``seed`` is this run's own: a bootstrap
    #: round's or follow-up's seed is derived from it.
    run_seed: int | None = None
    #: How widely the pilot searched for modes (:class:`~pemc_stan.methods.pilot.ModeSearch`;
    #: set per fit by methods with a search, None otherwise).
    search: Any = None
    #: The suspect verdict :meth:`summary` warned about (set per fit; it warns once).
    _suspect_warned: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.resampling not in ("within_draw", "pooled"):
            raise TypeError(f"{cls.__name__}.resampling = {cls.resampling!r}; expected "
                            "'within_draw' or 'pooled'")

    def __init__(self, fit: cmdstanpy.CmdStanMCMC, result: TransformResult,
                 data: Mapping[str, Any] | None = None,
                 original_model: cmdstanpy.CmdStanModel | Callable[[], cmdstanpy.CmdStanModel]
                 | None = None, seed: int | None = None) -> None:
        self.fit = fit
        self.result = result
        self.data = dict(data or {})
        self._original_model = original_model
        self.seed = seed
        self._draws = np.asarray(fit.draws(concat_chains=False), dtype=float)  # (iter, ch, col)
        self._columns = list(fit.column_names)
        self._col = {c: i for i, c in enumerate(self._columns)}
        self._resampled: pd.DataFrame | None = None
        self._index: NDArray[np.intp] | None = None
        self._chain_index: NDArray[np.intp] | None = None
        self._convergence: pd.DataFrame | None = None
        #: The follow-up runs ``sample`` made after the first run's verdict
        #: (:class:`~pemc_stan.methods.follow_up.FollowUp`; empty when none).
        self.follow_up: Any = None

    # ------------------------------------------------------------------ identity
    @property
    def method(self) -> str:
        """The canonical name of the method that made the fit (its result's method).

        Raises
        ------
        ValueError
            For a fit of a result that was not made through the registry.
        """
        return self.result.require_method().name

    @property
    def program(self) -> StanProgram:
        """The user's program."""
        return self.result.program

    # ------------------------------------------------------------------ columns
    def _column(self, name: str) -> NDArray[np.float64]:
        """One column of the extended draws, shape (chains, draws)."""
        try:
            return self._draws[:, :, self._col[name]].T.copy()
        except KeyError:
            raise KeyError(f"{name!r} is not a column of the {type(self).__name__}") from None

    def _stack(self, names: list[str]) -> NDArray[np.float64]:
        """Columns stacked last, shape (chains, draws, len(names))."""
        idx = [self._col[n] for n in names]
        return np.transpose(self._draws[:, :, idx], (1, 0, 2)).astype(float)

    def particle_columns(self) -> dict[str, list[str]]:
        """Original parameter column -> the extended columns of its ``K`` particles.

        The default: the original columns themselves, one particle each.

        Raises
        ------
        Nothing.
        """
        names = set(self.program.parameter_names)
        return {c: [c] for c in self._columns if c.split("[")[0].split(".")[0] in names}

    def parameter_columns(self) -> list[str]:
        """Columns (CmdStan names) of the original parameters, in output order."""
        return list(self.particle_columns())

    def particles(self, column: str) -> NDArray[np.float64]:
        """The particles of one original column, shape (chains, draws, K).

        Raises
        ------
        KeyError
            If ``column`` is not a column of an original parameter.
        """
        cols = self.particle_columns().get(column)
        if cols is None:
            raise KeyError(f"{column!r} is not a parameter column of the original model")
        return self._stack(cols)

    def particle_log_weights(self) -> NDArray[np.float64]:
        """Unnormalised log weights of the particles, shape (chains, draws, K).

        The default: equal weights (a method that only changes the target).

        Raises
        ------
        Nothing.
        """
        n_iter, n_chains = self._draws.shape[:2]
        k = len(next(iter(self.particle_columns().values()), [None]))
        return np.zeros((n_chains, n_iter, k))

    # ------------------------------------------------------------------ estimates
    def _estimate(self, h: NDArray[np.float64], mean: float | None = None) -> WeightedEstimate:
        """Mean of per-draw estimates ``h`` (chains, draws), MCSE from their multi-chain ESS."""
        ess = W.chain_ess(h)
        sd = float(np.std(h, ddof=1)) if h.size > 1 else 0.0
        return WeightedEstimate(mean=float(np.mean(h)) if mean is None else mean,
                                mcse=sd / np.sqrt(ess), ess=ess)

    def _values(self, f: Callable[[Any], NDArray[np.float64]] | str) -> NDArray[np.float64]:
        """Values of ``f`` at every particle, shape (chains, draws, K)."""
        if isinstance(f, str):
            return self.particles(f)
        return np.asarray(f(_ColumnView(self)), dtype=float)

    def expectation(self, f: Callable[[Any], NDArray[np.float64]] | str) -> WeightedEstimate:
        """``E[f(x)]`` with within-draw self-normalised weights, and its MCSE.

        The estimate is ``mean_t h_t`` with ``h_t = sum_i W_ti f(x_ti)``; the
        MCSE is ``sd(h) / sqrt(ESS(h))`` with the autocorrelation-aware
        multi-chain ESS of :func:`pemc_stan.estimators.weights.chain_ess`.

        Parameters
        ----------
        f
            A column of an original parameter (``"x"``, ``"theta[2]"``) for its
            mean, or a callable taking a view ``column -> particles`` and
            returning an array of the particles' shape.

        Raises
        ------
        KeyError
            For an unknown column.
        ValueError
            For a callable returning the wrong shape.
        """
        values = self._values(f)
        lw = self.particle_log_weights()
        if values.shape != lw.shape:
            raise ValueError(f"f returned shape {values.shape}; expected (chains, draws, "
                             f"particles) = {lw.shape}")
        wn = np.exp(W.log_normalise(lw, axis=-1))
        h = np.sum(np.where(wn > 0, wn * values, 0.0), axis=-1)
        return self._estimate(h)

    def summary(self, **kwargs: Any) -> pd.DataFrame:
        """Weighted mean, MCSE and ESS of every original parameter column.

        Parameters
        ----------
        **kwargs
            Passed to :meth:`expectation` (e.g. ``estimator=`` of PE fits).

        Raises
        ------
        ValueError
            For an invalid keyword value.
        """
        rows = []
        for c in self.parameter_columns():
            est = self.expectation(c, **kwargs)
            rows.append({"name": c, "mean": est.mean, "mcse": est.mcse, "ess": est.ess})
        table = pd.DataFrame(rows, columns=["name", "mean", "mcse", "ess"]).set_index("name")
        verdict = self.check()
        table.attrs["verdict"] = verdict.status
        table.attrs["reasons"] = [str(r) for r in verdict.reasons]
        table.attrs["follow_up"] = [] if self.follow_up is None else self.follow_up.describe()
        if not verdict.ok:
            message = f"these estimates are suspect: {verdict}"
            if message != self._suspect_warned:  # once per fit, however often it is asked
                self._suspect_warned = message
                emit_warning(message, FitSuspectWarning)
        return table

    def log_z(self) -> EvidenceEstimate | None:
        """The method's own ``log Z`` estimate, or None when it has none.

        Raises
        ------
        Nothing in the default.
        """
        return None

    def evidence_estimate(self, estimator: str, **settings: Any) -> EvidenceEstimate:
        """``log Z`` by one of the method's own estimators (its registry entry's ``estimators``).

        Raises
        ------
        OptionsError
            For an estimator the method does not have.
        """
        raise OptionsError("estimator", estimator, "an estimator of this fit: 'bridge'",
                           message=f"{type(self).__name__} has no estimator {estimator!r} of "
                                   "its own; use estimator='bridge'")

    # ------------------------------------------------------------------ resampling
    def resample_index(self) -> NDArray[np.intp]:
        """What is kept at each iteration of the resampled draws, shape (chains, draws).

        ``resampling = "within_draw"``: the particle kept (0-based), multinomial
        within each draw by the normalised particle weights.  ``"pooled"``: the
        draw kept, as an index into the draws of all chains in chain order
        (chain ``c``, draw ``t`` is ``c * draws + t``), by systematic resampling
        over all draws; the indices are sorted and cut into chains of the
        original length, so resampled chain ``c`` holds mostly draws of chain
        ``c`` in their order and diagnostics across chains keep their meaning.

        Raises
        ------
        Nothing.
        """
        if self._index is None:
            rng = np.random.default_rng(self.seed)
            lw = self.particle_log_weights()
            if self.resampling == "pooled":
                if lw.shape[-1] != 1:
                    raise ValueError(f"{type(self).__name__}: pooled resampling needs one "
                                     f"particle per draw, not {lw.shape[-1]}")
                flat = W.resample_indices(lw[..., 0].reshape(-1), rng, method="systematic")
                self._index = np.sort(flat).reshape(lw.shape[:2])
            else:
                self._index = W.resample_indices(lw, rng, axis=-1)
        return self._index

    def _resampled_values(self, column: str) -> NDArray[np.float64]:
        """The kept particle's value of ``column`` at every iteration, (chains, draws)."""
        idx = self.resample_index()
        if self.resampling == "pooled":
            return self.particles(column)[..., 0].reshape(-1)[idx]
        return np.take_along_axis(self.particles(column), idx[..., None], axis=-1)[..., 0]

    def _chain_resampled_values(self, column: str) -> NDArray[np.float64]:
        """Resampled values of ``column`` with each chain's draws drawn from that chain
        alone, for the R-hat and ESS checks (do the chains agree?).  Under pooled
        resampling each chain is resampled (systematic) by its own draws' weights: the
        pooled resampling blurs the chains by moving a heavy chain's draws into its
        neighbours."""
        if self.resampling != "pooled":
            return self._resampled_values(column)
        if self._chain_index is None:
            rng = np.random.default_rng(self.seed)
            lw = self.particle_log_weights()[..., 0]
            self._chain_index = np.stack([
                np.sort(W.resample_indices(lw[c], rng, method="systematic"))
                for c in range(lw.shape[0])])
        return np.take_along_axis(self.particles(column)[..., 0], self._chain_index, axis=1)

    def _sampler_values(self, chain: int, cols: list[int]) -> NDArray[np.float64]:
        """Columns ``cols`` of the extended run's rows that go with resampled chain ``chain``."""
        if self.resampling == "pooled":
            draws = np.swapaxes(self._draws, 0, 1).reshape(-1, self._draws.shape[2])
            return np.asarray(draws[self.resample_index()[chain]][:, cols])
        return np.asarray(self._draws[:, chain][:, cols])

    def resampled_parameters_pd(self) -> pd.DataFrame:
        """Resampled draws of the original parameters (chains kept as chains).

        Returns
        -------
        pandas.DataFrame
            ``chain__``, ``iter__``, ``draw__``, then the original parameter
            columns (CmdStan bracket names).
        """
        n_iter, n_chains = self._draws.shape[:2]
        frame: dict[str, Any] = {
            "chain__": np.repeat(np.arange(1, n_chains + 1), n_iter),
            "iter__": np.tile(np.arange(1, n_iter + 1), n_chains),
            "draw__": np.arange(1, n_chains * n_iter + 1),
        }
        for c in self.parameter_columns():
            frame[c] = self._resampled_values(c).reshape(-1)
        return pd.DataFrame(frame)

    def _original(self) -> cmdstanpy.CmdStanModel:
        m = self._original_model
        if m is None:
            raise ValueError("no original model available for generated quantities; pass "
                             "original_model= when building the fit")
        if not isinstance(m, cmdstanpy.CmdStanModel):
            m = m()
            self._original_model = m
        return m

    def resampled_draws_pd(self, output_dir: str | os.PathLike[str] | None = None
                           ) -> pd.DataFrame:
        """Resampled draws with the original model's transformed parameters and GQs.

        Writes the resampled parameter draws as Stan CSV files (one per chain,
        keeping the extended run's configuration comments) and runs cmdstanpy's
        standalone ``generate_quantities`` of the ORIGINAL model on them.

        Returns
        -------
        pandas.DataFrame
            ``chain__``, ``iter__``, ``draw__``, parameters, transformed
            parameters, generated quantities.

        Raises
        ------
        RuntimeError
            If CmdStan's generate_quantities fails.
        """
        if self._resampled is not None:
            return self._resampled
        if output_dir:
            with routed_cmdstanpy_logging():
                resampled = recompute_quantities(
                    self.program, self.data, self.resampled_parameters_pd(), self._write_csvs,
                    self._original, self.seed, Path(output_dir))
        else:  # the draws are read into memory: no CSVs are left behind
            with tempfile.TemporaryDirectory(prefix="pemc_gq_") as tmp, \
                    routed_cmdstanpy_logging():
                resampled = recompute_quantities(
                    self.program, self.data, self.resampled_parameters_pd(), self._write_csvs,
                    self._original, self.seed, Path(tmp))
        self._resampled = resampled
        return resampled

    def _write_csvs(self, params: pd.DataFrame, out_dir: Path) -> list[str]:
        sampler = [c for c in SAMPLER_COLUMNS if c in self._col]
        cols = [self._col[c] for c in sampler]
        values = [self._sampler_values(chain, cols) for chain in range(self._draws.shape[1])]
        return write_resampled_csvs(self.fit.runset.csv_files, params, sampler, values, out_dir)

    def extended_draws_pd(self) -> pd.DataFrame:
        """All draws of the extended program, as cmdstanpy gives them."""
        return self.fit.draws_pd()

    # ------------------------------------------------------------------ cost and state
    def gradients(self) -> int:
        """Gradient evaluations of the run and of the runs it continued (bootstrap
        rounds); by default :meth:`run_gradients`.

        Raises
        ------
        Nothing.
        """
        return self.run_gradients()

    def run_gradients(self) -> int:
        """Gradient evaluations of this run (warm-up estimated): the leapfrog steps of
        the sampling iterations, plus the warm-up iterations at their mean.  With
        ``thin`` > 1 only every thin-th iteration is saved: each saved one stands for
        ``thin`` iterations.

        CmdStan saves no warm-up draws by default, so the warm-up's own steps are not
        known; its late iterations take about as many steps as sampling, its early ones
        (unit metric) often more, so this is a lower estimate.

        Raises
        ------
        Nothing.
        """
        col = self._col.get("n_leapfrog__")
        if col is None:
            return 0
        return leapfrog_gradients(self._draws[:, :, col],
                                  getattr(self.fit.metadata, "cmdstan_config", {}))

    def continuation_inits(self) -> list[dict[str, Any]]:
        """Initial values that continue each chain from its last draw (every variable
        of the extended program; CmdStan reads the parameters' entries).

        Raises
        ------
        Nothing.
        """
        stan_vars = self.fit.metadata.stan_vars
        return [{name: np.asarray(var.extract_reshape(self._draws[-1, c])).tolist()
                 for name, var in stan_vars.items()}
                for c in range(self._draws.shape[1])]

    # ------------------------------------------------------------------ diagnostics
    def nuts_counts(self) -> TransitionCounts:
        """Divergences and max-treedepth hits of the extended run.

        Raises
        ------
        Nothing.
        """
        return transition_counts(self.fit, self._draws, self._col)

    def diagnostics(self, warn: bool = True) -> dict[str, Any]:
        """NUTS diagnostics with advice (methods add their own).

        Returns
        -------
        dict
            ``divergences``, ``max_treedepth_hits``, ``messages``.
        """
        from pemc_stan.output.diagnostics import treedepth_advice

        nuts = self.nuts_counts()
        msgs = [f"{nuts.divergences} divergent transitions: increase adapt_delta."] \
            if nuts.divergences else []
        deeper = treedepth_advice(nuts)
        if deeper:
            msgs.append(deeper)
        return self._report({"divergences": nuts.divergences,
                             "max_treedepth_hits": nuts.max_treedepth_hits}, msgs, warn,
                            UserWarning)

    def check(self) -> Verdict:
        """The fit's verdict: ``ok``, or ``suspect`` with named reasons and what to do.

        Made from evidence the fit already has (no new run): divergences, R-hat
        and bulk ESS of the resampled draws of every original parameter, whether
        the chains agree on the weighted means, and each method's own checks
        (temperatures, weights, pilots; see the method's fit class).  Thresholds
        are the constants of :mod:`pemc_stan.output.diagnostics`.

        Raises
        ------
        Nothing beyond the fit's own errors.
        """
        reasons: list[Reason] = []
        names: list[str] = []
        for name, found in (*self._shared_checks(), *self.method_checks()):
            names.append(name)
            if found is not None:
                reasons.append(found)
        return Verdict(tuple(reasons), tuple(names))

    def convergence(self) -> pd.DataFrame:
        """R-hat, bulk and tail ESS of the resampled draws of every original parameter column.

        Computed once per fit, by
        :func:`~pemc_stan.output.diagnostics.convergence_stats` on the draws the verdict
        judges (:meth:`_chain_resampled_values`: under pooled resampling each chain is
        resampled by its own weights, so the chains' agreement is not blurred); the
        verdict's R-hat and ESS checks and the summary table both read this table, so
        they show the same numbers.

        Chains of different groups (:meth:`chain_groups`) sample different parts of the
        target by design: each group is judged apart, and a column's row shows the
        largest R-hat and the smallest ESS of its groups.

        Returns
        -------
        pandas.DataFrame
            Index: the parameter columns (CmdStan names, ``L[2,1]``); columns
            ``r_hat``, ``ess_bulk``, ``ess_tail``.

        Raises
        ------
        Nothing beyond the fit's own errors.
        """
        cached: pd.DataFrame | None = getattr(self, "_convergence", None)
        if cached is None:
            columns = self.parameter_columns()
            groups = self.chain_groups()
            rows = []
            for c in columns:  # each group of chains apart; the worst group counts
                values = self._chain_resampled_values(c)
                stats = np.array([convergence_stats(values[groups == g])
                                  for g in np.unique(groups)], dtype=float)
                rows.append((float(np.max(stats[:, 0])), float(np.min(stats[:, 1])),
                             float(np.min(stats[:, 2]))))
            cached = pd.DataFrame(rows, index=pd.Index(columns, name="name"),
                                  columns=["r_hat", "ess_bulk", "ess_tail"], dtype=float)
            self._convergence = cached
        return cached.copy()

    def worst_rhat(self) -> float:
        """The largest finite R-hat of :meth:`convergence` (the verdict's ``rhat`` check),
        NaN when no column has one.

        Raises
        ------
        Nothing beyond the fit's own errors.
        """
        rhat = self.convergence()["r_hat"].to_numpy(dtype=float)
        finite = rhat[np.isfinite(rhat)]
        return float(finite.max()) if finite.size else float("nan")

    def log_z_undefined(self) -> ImproperPriorError | None:
        """Why ``log Z`` of this fit's model is undefined, or None when it is defined.

        ``log Z`` needs a proper prior: a parameter with a flat, improper prior makes its
        scale arbitrary.  This is the check of :func:`pemc_stan.evidence` (which raises
        the error returned here), so :meth:`log_z`, ``estimates.json`` and the command
        line refuse the same models it does.

        Raises
        ------
        Nothing (the error is returned, not raised).
        """
        return improper_prior(self.program, self.data)

    def chain_groups(self) -> NDArray[np.intp]:
        """The group of each chain, shape (chains,): chains of one group sample the same
        distribution, so R-hat and the chains' agreement are judged within groups.  The
        default: one group (every chain samples the whole extended target).

        Raises
        ------
        Nothing.
        """
        return np.zeros(self._draws.shape[1], dtype=np.intp)

    def chain_expectations(self, column: str) -> tuple[NDArray[np.float64],
                                                       NDArray[np.float64]]:
        """Each chain's weighted mean of ``column`` and its Monte-Carlo standard error.

        Raises
        ------
        KeyError
            For an unknown column.
        """
        lw = self.particle_log_weights()
        wn = np.exp(W.log_normalise(lw, axis=-1))
        h = np.sum(np.where(wn > 0, wn * self.particles(column), 0.0), axis=-1)
        means, ses = [], []
        for chain in h:
            ess = W.chain_ess(chain[None, :]) if chain.size > 3 and np.ptp(chain) > 0 else 1.0
            means.append(float(np.mean(chain)))
            ses.append(float(np.std(chain, ddof=1) / np.sqrt(max(ess, 1.0))))
        return np.asarray(means), np.asarray(ses)

    def hot_mask(self) -> NDArray[np.bool_]:
        """Which particles, (chains, draws, K), sit at the target's end of the method's
        tempering (the default: every particle is a draw of the target).

        Raises
        ------
        Nothing.
        """
        lw = self.particle_log_weights()
        return np.ones(lw.shape, dtype=bool)

    def hot_coordinates(self) -> NDArray[np.float64] | None:
        """Base coordinates (M, D) of the particles of :meth:`hot_mask`, or None when the
        parameters have no base coordinates.

        Raises
        ------
        Nothing (None when the coordinates cannot be computed).
        """
        coords = getattr(self.result, "coordinates", None)
        if coords is None or not coords.blocks:
            return None
        mask = self.hot_mask()
        columns = self.parameter_columns()
        try:
            values = np.stack([self.particles(c)[mask] for c in columns], axis=-1)
            z, _ = coords.forward(coordinate_draws(coords, values, columns, self.data),
                                  self.data)
        except Exception as exc:  # a type without coordinates, a missing column
            logger.info("no base coordinates of the draws (%s)", exc)
            return None
        return np.asarray(z, dtype=float)

    def unvisited_modes(self) -> list[tuple[int, float]]:
        """The pilot's modes (holding at least ``UNVISITED_SHARE_MIN`` of the mass it
        found) that no particle of :meth:`hot_mask` visits, as ``(index, pilot share)``.

        A mode's cell is the region nearer, in the metric of the search's Gaussian, to the
        mode's centre than to any other found mode's.  Empty without a search, with
        fewer than two modes found, or without base coordinates.

        Raises
        ------
        Nothing.
        """
        search = self.search
        centres = None if search is None else search.centres
        if (centres is None or search.base is None or len(search.major_shares) < 2
                or np.shape(centres)[1] != search.base.dim):
            return []
        z = self.hot_coordinates()
        if z is None or z.ndim != 2 or z.shape[1] != search.base.dim:
            return []
        seen = (np.bincount(search.base.nearest_centre(z, centres), minlength=len(centres))
                if z.shape[0] else np.zeros(len(centres), dtype=int))
        return [(k, float(p)) for k, p in enumerate(search.major_shares)
                if p >= UNVISITED_SHARE_MIN and seen[k] == 0]

    def _unvisited_modes(self) -> Reason | None:
        missed = self.unvisited_modes()
        if not missed:
            return None
        shares = ", ".join(f"{100 * p:.0f}%" for _, p in missed)
        return Reason(
            "unvisited_modes", f"the pilot found {len(missed)} mode(s) (with {shares} of the "
            "mass it found) that no draw of the target visits: the estimates leave them out",
            "run longer (iter_sampling); the modes are in the diagnostics (pilot_modes)")

    def _search_incomplete(self) -> Reason | None:
        """The search found several modes and stopped while one more path had more than
        :data:`~pemc_stan.methods.pilot.UNSEEN_SHARE_MAX` chance of finding another.

        Modes split or tempered, the run reaches what the search found: the split samples
        the found modes, and tempering's base covers them.  A mode out of both is missing
        from every estimate with nothing in the draws to show it (the 28-unit Boltzmann
        relaxation, CT seed 5: 13 modes found, unseen share 0.042, 48 round trips of beta
        per chain, every other check passed, log Z 10 standard errors low).
        """
        search = self.search
        unseen = float(getattr(search, "unseen", float("nan")))
        if search is None or search.major_modes < 2 or not unseen > UNSEEN_SHARE_MAX:
            return None
        return Reason(
            "mode_search", f"the search for modes stopped ({search.stopped}) with an "
            f"estimated {100 * unseen:.0f}% chance that one more path would find a mode not "
            "yet seen: a mode it missed is missing from these estimates",
            "search longer: with method='ct', raise num_paths (the search runs up to 16 x "
            "num_paths paths); the modes found are in the diagnostics (pilot_modes)")

    def method_checks(self) -> Iterator[tuple[str, Reason | None]]:
        """The method's own ``(check name, Reason or None)`` pairs, after the shared ones.

        Raises
        ------
        Nothing in the default (which has none).
        """
        return iter(())

    def _shared_checks(self) -> Iterator[tuple[str, Reason | None]]:
        """The ``(check name, Reason or None)`` pairs every method's fit is judged by."""
        nuts = self.nuts_counts()
        share = nuts.divergences / max(nuts.transitions, 1)
        yield "divergences", None if share <= DIVERGENT_SHARE_MAX else Reason(
            "divergences", f"{nuts.divergences} of {nuts.transitions} transitions "
            f"({100 * share:.1f}%) diverged, so the extended target was not explored "
            "faithfully", "increase adapt_delta (e.g. 0.95)")
        worst_rhat = (float("nan"), "")
        worst_ess: tuple[float, str, str] = (float("inf"), "", "")
        worst_chain = (0.0, "")
        n_chains = self._draws.shape[1]
        groups = self.chain_groups()
        mixing = self.convergence()
        for column in self.parameter_columns():
            rhat, ess = (float(v) for v in mixing.loc[column, ["r_hat", "ess_bulk"]])
            if np.isfinite(rhat) and not rhat <= worst_rhat[0]:
                worst_rhat = (rhat, column)
            if np.isfinite(ess) and ess < worst_ess[0]:
                worst_ess = (ess, column, "bulk ESS of the resampled draws")
            # the ESS behind the error bar reported with the estimate (the weighted
            # estimator's): resampling adds independent noise, which can hide how slowly
            # the weighted estimate itself mixes
            own = float(self.expectation(column).ess)
            if np.isfinite(own) and own < worst_ess[0]:
                worst_ess = (own, column, "ESS of the weighted estimate")
            if n_chains > 1:
                means, ses = self.chain_expectations(column)
                for g in np.unique(groups):
                    z = chains_disagree(means[groups == g], ses[groups == g])
                    if np.isfinite(z) and z > worst_chain[0]:
                        worst_chain = (z, column)
        yield "rhat", None if not worst_rhat[0] > RHAT_MAX else Reason(
            "rhat", f"R-hat of the resampled draws of {worst_rhat[1]} is {worst_rhat[0]:.3f} "
            f"(> {RHAT_MAX}): the chains disagree", "run longer (iter_sampling) or more "
            "chains, and check whether the chains sit in different modes")
        yield "ess", None if not worst_ess[0] < ESS_MIN else Reason(
            "ess", f"the {worst_ess[2]} of {worst_ess[1]} is {worst_ess[0]:.0f} "
            f"(< {ESS_MIN:.0f})", "run longer (iter_sampling)")
        if self.search is not None:
            yield "unvisited_modes", self._unvisited_modes()
            yield "mode_search", self._search_incomplete()
        if n_chains > 1:
            yield "chains_agree", None if worst_chain[0] <= CHAIN_Z_MAX else Reason(
                "chains_agree", f"one chain's weighted mean of {worst_chain[1]} is "
                f"{worst_chain[0]:.1f} standard errors from the other chains': the chains saw "
                "different distributions (modes)", "run longer, or change the method's "
                "options so that it moves between modes (see the diagnostics' advice)")

    def _report(self, info: dict[str, Any], msgs: list[str], warn: bool,
                category: type[Warning]) -> dict[str, Any]:
        """Attach the pilot's search (``pilot_modes``, ``modes_found``, ``search_radius``),
        the follow-up steps (``follow_up``, when any were considered) and the advice to
        ``info`` and, with ``warn``, warn and log each message."""
        if self.search is not None:
            info["pilot_modes"] = self.search.describe()
            info["modes_found"] = self.search.major_modes
            info["search_radius"] = self.search.radius
        if self.follow_up is not None and self.follow_up.steps:
            info["follow_up"] = self.follow_up.describe()
        info["messages"] = msgs
        if warn:
            for m in msgs:
                emit_warning(m, category, stacklevel=3)
        return info

    # ------------------------------------------------------------------ output
    def output_extras(self) -> OutputExtras:
        """The method's own attributes, settings and variables for the InferenceData
        and the run folder (the default has none).

        Raises
        ------
        Nothing.
        """
        return OutputExtras()

    def weights_frame(self) -> pd.DataFrame:
        """Per draw: chain, draw and the particles' log weights (``weights.csv``).

        Raises
        ------
        Nothing.
        """
        lw = self.particle_log_weights()
        n_chains, n_draws, k = lw.shape
        frame: dict[str, Any] = {"chain": np.repeat(np.arange(1, n_chains + 1), n_draws),
                                 "draw": np.tile(np.arange(1, n_draws + 1), n_chains)}
        for j in range(k):
            frame["log_weight" if k == 1 else f"log_weight_{j + 1}"] = lw[:, :, j].reshape(-1)
        return pd.DataFrame(frame)

    def to_inference_data(self, **kwargs: Any) -> Any:
        """ArviZ InferenceData of this fit (see :mod:`pemc_stan.output.inference_data`).

        Raises
        ------
        RuntimeError
            If the original model's generate_quantities fails.
        """
        from pemc_stan.output.inference_data import to_inference_data

        return to_inference_data(self, **kwargs)
