"""A method's compiled model: its runs of CmdStan's NUTS (:class:`MethodModel`), and what
its pilot found (:class:`Found`), which the mode split and the method's own run start from."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import cmdstanpy
import numpy as np
from numpy.typing import NDArray

from pemc_stan.backend.compile import compile_model, message_file_name
from pemc_stan.backend.console import (
    is_cmdstan_failure,
    rewriting_messages,
    run_error,
)
from pemc_stan.backend.progress import stage
from pemc_stan.core.result import MethodEntry, TransformResult
from pemc_stan.output.diagnostics import (
    Note,
)
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.sampling.warm_start import WarmStart
from pemc_stan.stan.inputs import StanProgram, read_data

logger = logging.getLogger(__name__)

__all__ = ["Found", "LogDensity", "MethodModel"]


class LogDensity(Protocol):
    """What evaluates ``log gamma(x)`` with every constant at constrained draws
    (:mod:`pemc_stan.modes.density`)."""

    def log_density(self, draws: Mapping[str, NDArray[np.float64]]) -> NDArray[np.float64]:
        """``log gamma`` at each draw, NaN where it cannot be evaluated."""
        ...


@dataclass(frozen=True)
class Found:
    """What a method's pilot found, handed to the mode split and to the method's run.

    Attributes
    ----------
    base
        The base density in base coordinates (None: none, or the prior under likelihood
        tempering).
    log_scale
        The pilot's estimate of ``log Z`` that scales the method's bridge (continuous
        tempering's ``log zeta``, the pseudo-extended offset).
    search
        The search for modes (:class:`~pemc_stan.core.search.ModeSearch`; None when it
        did not search or failed).
    notes
        What the pilot and the split want the user told.
    mode_centres
        The distinct modes as (K, D) means in base coordinates (None for fewer than two).
    failure
        Why the pilot failed when the run goes on without its estimate (None: it did not).
    widened
        Whether ``base`` was widened to a refused split's chains
        (:meth:`~pemc_stan.modes.scouts.SplitDraws.base`): later rounds keep covering it.
    """

    base: Any = None
    log_scale: float = 0.0
    search: Any = None
    notes: tuple[Note, ...] = ()
    mode_centres: Any = None
    failure: str | None = None
    widened: bool = False

    def noted(self, note: Note | None) -> Found:
        """This with one more note (itself for None)."""
        return self if note is None else dataclasses.replace(self, notes=(*self.notes, note))


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

    #: Whether :meth:`continue_from` re-fits what the run's bridge rests on (continuous
    #: tempering's bootstrap round: ``log zeta``, the beta bias, the base), so that a run
    #: of the same length can fix a bridge one end of which the chains rarely reached.
    refits_bridge: bool = False

    def __init__(self, result: TransformResult, data: Any = None,
                 original_model: cmdstanpy.CmdStanModel | None = None) -> None:
        self.method: MethodEntry = result.require_method()
        self.result = result
        self.program: StanProgram = result.program
        self.data: dict[str, Any] = read_data(self.program, data)
        self._method_model: cmdstanpy.CmdStanModel | None = None
        # a compiled user program does not fit a program rewritten from it (a summed-out
        # parameter): that one is compiled instead
        self._orig_model: cmdstanpy.CmdStanModel | None = (
            None if self.program.original is not None else original_model)
        #: Runs the chains elsewhere (``pemc_stan.backend.chains.DaskChainRunner``); None: here.
        self.chain_runner: Callable[..., cmdstanpy.CmdStanMCMC] | None = None

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

    def own_density(self, fit: ExtendedFit) -> LogDensity | None:
        """``log gamma`` with every constant at arbitrary draws through the method's own
        compiled program, for checks of ``fit``; None (the default): the method's program
        does not compute it, and a density program is compiled instead.

        Raises
        ------
        Nothing.
        """
        return None

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
        :mod:`pemc_stan.sampling.warm_start`) fills in what the user's
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

    def pilot(self) -> Any:
        """A fresh pilot with this method's settings
        (:class:`~pemc_stan.modes.pilot.BasePilot`; None: the method has none); the mode
        split searches again with it.

        Raises
        ------
        Nothing.
        """
        return None

    def search_modes(self, seed: int | None) -> Found:
        """The method's pilot: its base, scale and search for modes (none by default).

        Raises
        ------
        RuntimeError
            If every approximation of the pilot fails (methods with pilots).
        """
        return Found()

    def wants_split(self) -> bool:
        """Whether a run tries the mode split before the method's own run (not by default).

        Raises
        ------
        Nothing.
        """
        return False

    def sample(self, chains: int = 4, iter_warmup: int = 1000, iter_sampling: int = 1000,
               seed: int | None = None, output_dir: str | os.PathLike[str] | None = None,
               show_progress: bool = False, found: Found | None = None,
               **cmdstanpy_kwargs: Any) -> ExtendedFit:
        """Run NUTS on the transformed program and wrap the draws in the method's fit.

        The default runs the program once with the user's data plus
        ``result.data(...)``; methods with pilots override it, starting from ``found``
        (:meth:`search_modes` runs when it is None).

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
        :mod:`pemc_stan.sampling.follow_up`): by default the same program, its chains
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
