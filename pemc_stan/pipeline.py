"""The front doors: :func:`transform` and :func:`sample`, for any registered method.

Each front door settles everything once, before anything is compiled: the
method (one registry lookup), its options (built and validated once by
:meth:`~pemc_stan.methods.registry.Method.build_options`), the program (read
and parsed once into a :class:`~pemc_stan.inputs.StanProgram`) and the
sampler's arguments.  :func:`run` then carries them down: the method's
transformation → its model (``method.model(result, data)``), which compiles
through the content-hash cache and runs CmdStan's NUTS → the method's fit.
Options are the method's options dataclass, given as an object
(``options=PseudoExtendedOptions(n_pseudo=5)``) or as keywords
(``n_pseudo=5``); which keywords belong to which method is read from the
registered options classes.  The command line settles the same things itself
(checking them before it creates its output folder) and calls :func:`run`; a batch
task settles them on the client, then runs :func:`sample` on a worker.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import cmdstanpy

from pemc_stan.backend.console import collapse_cmdstanpy_messages, is_cmdstan_failure, run_error
from pemc_stan.backend.processes import ending_children
from pemc_stan.errors import OptionsError
from pemc_stan.inputs import ProgramSource, StanProgram, read_program
from pemc_stan.methods import registry
from pemc_stan.methods.base import ExtendedFit, MethodModel, TransformResult
from pemc_stan.methods.follow_up import DEFAULT_BUDGET, follow_up
from pemc_stan.methods.options import check_int, check_number, field_names

logger = logging.getLogger(__name__)

__all__ = ["transform", "transform_result", "method_model", "sample", "run", "split_options",
           "SamplerArgs"]


@dataclass
class SamplerArgs:
    """The NUTS arguments of :func:`sample`, checked before anything is compiled.

    Names mirror ``cmdstanpy.CmdStanModel.sample``; ``extra`` holds its other
    keyword arguments (``adapt_delta``, ``max_treedepth``, ...).
    """

    chains: int = 4
    iter_warmup: int = 1000
    iter_sampling: int = 1000
    seed: int | None = None
    show_progress: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    #: Follow-up runs' budget (:mod:`pemc_stan.methods.follow_up`): all runs together
    #: take at most this many times the first run's gradient evaluations; 1: none.
    budget: float = DEFAULT_BUDGET

    def validate(self) -> SamplerArgs:
        """Check every argument.

        Raises
        ------
        OptionsError
            Naming the argument, the value and what was expected.
        """
        check_int("chains", self.chains, 1)
        check_int("iter_warmup", self.iter_warmup, 0)
        check_int("iter_sampling", self.iter_sampling, 1)
        if self.seed is not None:
            check_int("seed", self.seed, 0)
            if self.seed > 2**32 - 1:
                raise OptionsError("seed", self.seed, "an integer in [0, 2^32 - 1]")
        check_number("budget", self.budget, 1.0,
                     expected="a number >= 1 (times the first run's gradient evaluations; "
                              "1: no follow-up runs)")
        if not isinstance(self.show_progress, bool):
            raise OptionsError("show_progress", self.show_progress, "True or False")
        known = set(inspect.signature(cmdstanpy.CmdStanModel.sample).parameters) - {"self"}
        for name, value in self.extra.items():
            if name not in known:
                raise OptionsError(name, value, "an option of the method or an argument of "
                                   "cmdstanpy's CmdStanModel.sample (e.g. adapt_delta, "
                                   "max_treedepth, metric, parallel_chains)")
        if "adapt_delta" in self.extra and self.extra["adapt_delta"] is not None:
            check_number("adapt_delta", self.extra["adapt_delta"], 0.0, 1.0, low_open=True,
                         high_open=True)
        if "max_treedepth" in self.extra and self.extra["max_treedepth"] is not None:
            check_int("max_treedepth", self.extra["max_treedepth"], 1)
        return self


def _check_inputs(model: Any, data: Any) -> None:
    from pemc_stan.stan import ast

    if not isinstance(model, (str, os.PathLike, cmdstanpy.CmdStanModel, StanProgram,
                              ast.Program)):
        raise OptionsError("model", model, "Stan program text, a .stan path, a "
                           "cmdstanpy.CmdStanModel or a pemc_stan StanProgram")
    if data is not None and not isinstance(data, (Mapping, str, os.PathLike)):
        raise OptionsError("data", data, "a dict of data values or a JSON file path")


def split_options(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split keywords into options of the methods and the rest (cmdstanpy's arguments).

    Keywords that are options of any registered method go with the options, so
    that :meth:`~pemc_stan.methods.registry.Method.build_options` reports one of
    another method by name.

    Raises
    ------
    Nothing.
    """
    known: set[str] = set()
    for m in registry.methods():
        known |= set(field_names(m.options))
    options = {k: v for k, v in kwargs.items() if k in known}
    rest = {k: v for k, v in kwargs.items() if k not in known}
    return options, rest


def transform_result(program: ProgramSource,
                     method: str | registry.Method = registry.DEFAULT_METHOD,
                     options: Any = None, *, name: str | None = None,
                     **option_kwargs: Any) -> TransformResult:
    """Transform a program and return the program with its metadata.

    Parameters
    ----------
    program
        Stan program text, a ``.stan`` path, a parsed program or a
        :class:`~pemc_stan.inputs.StanProgram`.
    method
        A registered method's name or alias (pe, ct, ...), or its registry entry.
    options
        The method's options object; keywords override its fields.
    name
        The model's name (default: the file stem, or ``"model"``).
    **option_kwargs
        Fields of the method's options class.

    Returns
    -------
    TransformResult
        The method's result class; ``result.method`` is the method.

    Raises
    ------
    OptionsError
        For an unknown method or invalid options.
    StanProgramError
        For programs the transformation does not apply to.
    """
    spec = registry.get(method)
    opts = spec.build_options(options, **option_kwargs)
    return spec.transform_program(read_program(program, name), opts)


def method_model(program: ProgramSource, data: Any = None,
                 method: str | registry.Method = registry.DEFAULT_METHOD, options: Any = None,
                 **option_kwargs: Any) -> MethodModel:
    """The method's model of a program, ready to run its pilots or ``sample``.

    :func:`transform_result` then ``method.model(result, data)``: the same
    settling as :func:`sample` (method, options and program once), for code
    that drives a method's steps itself (benchmarks, tests).

    Raises
    ------
    OptionsError, StanProgramError, DataError
        As :func:`sample`, before anything is compiled.
    """
    given = program if isinstance(program, cmdstanpy.CmdStanModel) else None
    result = transform_result(program, method, options, **option_kwargs)
    return result.require_method().model(result, data, given)


def transform(program: ProgramSource, method: str | registry.Method = registry.DEFAULT_METHOD,
              options: Any = None,
              *, name: str | None = None, **option_kwargs: Any) -> str:
    """Return the Stan code of the transformed program.

    Parameters and errors as :func:`transform_result`.

    Returns
    -------
    str

    Raises
    ------
    OptionsError, StanProgramError
        As :func:`transform_result`.
    """
    return transform_result(program, method, options, name=name, **option_kwargs).stan_code


def sample(
    model: ProgramSource,
    data: Any = None,
    method: str | registry.Method = registry.DEFAULT_METHOD,
    options: Any = None,
    *,
    chains: int = 4,
    iter_warmup: int = 1000,
    iter_sampling: int = 1000,
    seed: int | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = False,
    client: Any = None,
    budget: float = DEFAULT_BUDGET,
    **kwargs: Any,
) -> ExtendedFit:
    """Sample a Stan model with a registered method (pseudo-extended MCMC, continuous tempering).

    Parameters
    ----------
    model
        Stan program text, a ``.stan`` path, a ``cmdstanpy.CmdStanModel``
        (its ``stan_file`` is used) or a :class:`~pemc_stan.inputs.StanProgram`.
    data
        Data dict or JSON path.
    method
        pseudo_extended / pe, continuous_tempering / ct, or another registered
        method (default :data:`~pemc_stan.methods.registry.DEFAULT_METHOD`).
    options
        The method's options object
        (:class:`~pemc_stan.methods.pseudo_extended.options.PseudoExtendedOptions`,
        :class:`~pemc_stan.methods.continuous_tempering.options.ContinuousTemperingOptions`);
        or pass its fields as keywords.
    chains, iter_warmup, iter_sampling, seed, output_dir, show_progress
        Passed to ``CmdStanModel.sample``.
    client
        A ``distributed.Client``: run every chain as a task of its cluster
        (needs ``pemc-stan[distributed]``).  Each chain keeps its seed and
        chain id, so the draws and estimates are those of the same call
        without ``client``; pilots and post-processing run here.
    budget
        When the first run's verdict names a problem with a mechanical remedy
        (divergences: a higher ``adapt_delta``; chains that mix too slowly: twice the
        draws, continuing from where the run ended), follow-up runs apply it while all
        runs together take at most ``budget`` times the first run's gradient
        evaluations (:mod:`pemc_stan.methods.follow_up`); ``budget=1`` makes none.
        The steps are in ``fit.follow_up``.
    **kwargs
        The method's options (``n_pseudo=5``, ``base_covariance="dense"``, ...)
        and further ``CmdStanModel.sample`` arguments (``adapt_delta``, ...).

    Returns
    -------
    ExtendedFit
        The method's fit (``PseudoExtendedFit``, ``ContinuousTemperingFit``, ...).

    Raises
    ------
    OptionsError
        For invalid options, options of another method, or an unknown method
        (before compiling).
    StanProgramError
        For programs the transformation does not apply to (before compiling).
    DataError
        For data that do not match the program's data block (before compiling).
    CmdStanRunError
        If CmdStan fails; its ``reason`` holds CmdStan's own explanation.
    ImportError
        For ``client=`` without Dask installed, naming the extra to install.
    KeyboardInterrupt
        When interrupted (``Interrupted`` for SIGTERM/SIGHUP), after ending the
        CmdStan, make and compiler processes the call started.
    """
    spec = registry.get(method)
    option_kwargs, cmdstanpy_kwargs = split_options(kwargs)
    opts = spec.build_options(options, **option_kwargs)
    sampler = SamplerArgs(chains, iter_warmup, iter_sampling, seed, show_progress,
                          cmdstanpy_kwargs, budget).validate()
    _check_inputs(model, data)
    given = model if isinstance(model, cmdstanpy.CmdStanModel) else None
    result = spec.transform_program(read_program(model), opts)  # program errors first
    return run(result, data, sampler, output_dir=output_dir, client=client, original_model=given)


def run(result: TransformResult, data: Any, sampler: SamplerArgs, *,
        output_dir: str | os.PathLike[str] | None = None, client: Any = None,
        original_model: cmdstanpy.CmdStanModel | None = None) -> ExtendedFit:
    """Run a transformed program whose method, options, program and sampler arguments
    are settled (:func:`sample` settles them; so does the command line).

    Parameters
    ----------
    result
        A result of :meth:`~pemc_stan.methods.registry.Method.transform_program`.
    data
        The user's data (dict or JSON path), checked against the data block here.
    sampler
        Validated NUTS arguments.
    output_dir, client
        As :func:`sample`.
    original_model
        The user's compiled program, if they gave one.

    Returns
    -------
    ExtendedFit

    Raises
    ------
    DataError
        For data that do not match the data block (before compiling).
    CmdStanRunError, KeyboardInterrupt, ImportError
        As :func:`sample`.
    """
    method_model = result.require_method().model(result, data, original_model)
    if client is not None:
        from pemc_stan.backend.chains import DaskChainRunner

        method_model.chain_runner = DaskChainRunner(client)
    collapse_cmdstanpy_messages()
    try:
        with ending_children():
            fit: ExtendedFit = method_model.sample(
                chains=sampler.chains, iter_warmup=sampler.iter_warmup,
                iter_sampling=sampler.iter_sampling, seed=sampler.seed, output_dir=output_dir,
                show_progress=sampler.show_progress, **sampler.extra)
            fit = follow_up(method_model, fit, iter_warmup=sampler.iter_warmup,
                            iter_sampling=sampler.iter_sampling, seed=sampler.seed,
                            budget=sampler.budget, output_dir=output_dir,
                            show_progress=sampler.show_progress, **sampler.extra)
    except RuntimeError as exc:
        if not is_cmdstan_failure(exc):
            raise
        raise run_error(exc, "CmdStan") from exc
    return fit
