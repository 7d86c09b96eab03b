"""The front doors: :func:`transform` and :func:`sample`, for any registered method.

Stan text → :class:`~pemc_stan.inputs.StanProgram` (read and parsed once) →
the method's transformation (:mod:`pemc_stan.methods.registry`) → its model
class, which compiles through the content-hash cache and runs CmdStan's NUTS →
the method's fit.  Options are the method's options dataclass, given as an
object (``options=PseudoExtendedOptions(n_pseudo=5)``) or as keywords
(``n_pseudo=5``); which keywords belong to which method is read from the
registered options classes.
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
from pemc_stan.inputs import ProgramSource, read_program
from pemc_stan.methods import registry
from pemc_stan.methods.base import (
    ExtendedFit,
    TransformResult,
    build_options,
    transform_program,
)
from pemc_stan.methods.options import check_int, check_number, field_names

logger = logging.getLogger(__name__)

__all__ = ["transform", "transform_result", "sample", "split_options", "SamplerArgs"]


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
    import cmdstanpy as _cmdstanpy

    from pemc_stan.inputs import StanProgram
    from pemc_stan.stan import ast

    if not isinstance(model, (str, os.PathLike, _cmdstanpy.CmdStanModel, StanProgram,
                              ast.Program)):
        raise OptionsError("model", model, "Stan program text, a .stan path, a "
                           "cmdstanpy.CmdStanModel or a pemc_stan StanProgram")
    if data is not None and not isinstance(data, (Mapping, str, os.PathLike)):
        raise OptionsError("data", data, "a dict of data values or a JSON file path")


def split_options(method: registry.Method, kwargs: dict[str, Any]
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split keywords into the method's options and the rest.

    Keywords that are options of another registered method stay with the
    options, so that :func:`~pemc_stan.methods.base.build_options` reports
    them by name.

    Raises
    ------
    Nothing.
    """
    known = set(field_names(method.options))
    for m in registry.methods():
        known |= set(field_names(m.options))
    options = {k: v for k, v in kwargs.items() if k in known}
    rest = {k: v for k, v in kwargs.items() if k not in known}
    return options, rest


def transform_result(program: ProgramSource, method: str = registry.DEFAULT_METHOD,
                     options: Any = None, *, name: str | None = None,
                     **option_kwargs: Any) -> TransformResult:
    """Transform a program and return the program with its metadata.

    Parameters
    ----------
    program
        Stan program text, a ``.stan`` path, a parsed program or a
        :class:`~pemc_stan.inputs.StanProgram`.
    method
        A registered method's name or alias (pe, ct, ...).
    options
        The method's options object; keywords override its fields.
    name
        The model's name (default: the file stem, or ``"model"``).
    **option_kwargs
        Fields of the method's options class.

    Returns
    -------
    TransformResult
        The method's result class.

    Raises
    ------
    OptionsError
        For an unknown method or invalid options.
    StanProgramError
        For programs the transformation does not apply to.
    """
    spec = registry.get(method)
    opts = build_options(spec, options, **option_kwargs)
    result: TransformResult = transform_program(spec, read_program(program, name), opts)
    return result


def transform(program: ProgramSource, method: str = registry.DEFAULT_METHOD, options: Any = None,
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
    method: str = registry.DEFAULT_METHOD,
    options: Any = None,
    *,
    chains: int = 4,
    iter_warmup: int = 1000,
    iter_sampling: int = 1000,
    seed: int | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = False,
    client: Any = None,
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
    option_kwargs, cmdstanpy_kwargs = split_options(spec, kwargs)
    opts = build_options(spec, options, **option_kwargs)
    SamplerArgs(chains, iter_warmup, iter_sampling, seed, show_progress,
                cmdstanpy_kwargs).validate()
    _check_inputs(model, data)
    method_model = spec.model(model, data, opts)
    if client is not None:
        from pemc_stan.batch.chains import DaskChainRunner

        method_model.chain_runner = DaskChainRunner(client)
    collapse_cmdstanpy_messages()
    try:
        with ending_children():
            fit: ExtendedFit = method_model.sample(
                chains=chains, iter_warmup=iter_warmup, iter_sampling=iter_sampling, seed=seed,
                output_dir=output_dir, show_progress=show_progress, **cmdstanpy_kwargs)
    except RuntimeError as exc:
        if not is_cmdstan_failure(exc):
            raise
        raise run_error(exc, "CmdStan") from exc
    return fit
