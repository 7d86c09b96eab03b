"""The front doors: :func:`transform` and :func:`sample`, for any registered method.

Each front door settles everything once, before anything is compiled: the
method (one registry lookup), its options (built and validated once by
:meth:`~pemc_stan.methods.registry.Method.build_options`), the program (read
and parsed once into a :class:`~pemc_stan.stan.inputs.StanProgram`) and the
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

import contextlib
import dataclasses
import inspect
import json
import logging
import math
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cmdstanpy

from pemc_stan.backend import progress
from pemc_stan.backend.console import collapse_cmdstanpy_messages, is_cmdstan_failure, run_error
from pemc_stan.backend.processes import ending_children
from pemc_stan.core.options import check_int, check_number, field_names, option
from pemc_stan.core.result import TransformResult
from pemc_stan.errors import OptionsError
from pemc_stan.methods import registry
from pemc_stan.output.folder import check_output_folder
from pemc_stan.run.conductor import run_plan
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.sampling.follow_up import DEFAULT_BUDGET, Budget
from pemc_stan.sampling.model import MethodModel
from pemc_stan.stan.inputs import ProgramSource, StanProgram, read_data, read_program

logger = logging.getLogger(__name__)

__all__ = ["transform", "transform_result", "method_model", "sample", "run", "split_options",
           "SamplerArgs", "METRICS", "draw_seed", "parse_inits", "nuts_fields", "check_inits",
           "RunInputs", "settle"]


#: Seeds are drawn from [0, 2^31 - 1): the seeds derived from a run's seed (bootstrap
#: rounds ``seed + r``, follow-ups ``seed + 1000 k``, pilots) then stay within CmdStan's
#: range [0, 2^32 - 1].
SEED_DRAW_BOUND = 2**31 - 1

#: ``metric`` values (cmdstanpy also takes ``diag``, ``dense`` and ``unit``).
METRICS = ("diag_e", "dense_e", "unit_e")
_METRIC_SPELLINGS = (*METRICS, "diag", "dense", "unit")


def draw_seed() -> int:
    """A seed for a run given none: every run is reproducible from the seed it records.

    Raises
    ------
    Nothing.
    """
    return secrets.randbelow(SEED_DRAW_BOUND)


def parse_inits(text: str) -> float | str:
    """``--inits`` text: a number R (uniform(-R, R) inits), else a JSON file's path.

    Raises
    ------
    Nothing (the value is checked by :meth:`SamplerArgs.validate`).
    """
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) else text


@dataclass
class SamplerArgs:
    """The NUTS arguments of :func:`sample`, checked before anything is compiled.

    Names mirror ``cmdstanpy.CmdStanModel.sample``.  Each field with a flag
    (:func:`~pemc_stan.core.options.option`) becomes one of ``pemc-stan
    sample``'s (``max_treedepth`` is ``--max-treedepth``); its default is
    written here only.  A NUTS argument left at None is not passed, so
    CmdStan's own default applies.  ``extra`` holds the other keyword
    arguments of ``CmdStanModel.sample`` (``step_size``, ``inv_metric``, ...);
    an argument that has a field here and is given in ``extra`` moves to its
    field.
    """

    chains: int = option(4, "number of chains", metavar="N")
    iter_warmup: int = option(1000, "warm-up iterations per chain", metavar="N")
    iter_sampling: int = option(1000, "sampling iterations per chain", metavar="N")
    seed: int | None = option(
        None, "random seed of every run, pilot and resampling, in [0, 2^32 - 1] (default: "
        "drawn at random, printed and recorded, so that the run can be repeated)",
        parse=int, metavar="SEED")
    show_progress: bool = option(False, "progress bars", cli=False)
    extra: dict[str, Any] = field(default_factory=dict, metadata={"cli": False})
    #: Follow-up runs' budget (:mod:`pemc_stan.sampling.follow_up`): all runs together
    #: take at most this many times the first attempt's gradient evaluations; 1: none.
    budget: float = option(DEFAULT_BUDGET, "follow-up budget", cli=False)
    adapt_delta: float | None = option(
        None, "NUTS target acceptance rate in (0, 1) (default: CmdStan's, 0.8)",
        parse=float, metavar="D")
    max_treedepth: int | None = option(
        None, "maximum depth of a NUTS trajectory's tree (default: CmdStan's, 10)",
        parse=int, metavar="N")
    metric: str | None = option(
        None, "the mass matrix NUTS adapts: diagonal, dense or unit (default: CmdStan's, "
        "diag_e; a method's warm start is used when it fits)", choices=METRICS)
    thin: int | None = option(
        None, "keep every N-th draw (default: CmdStan's, 1); weights and estimates use the "
        "draws kept", parse=int, metavar="N")
    parallel_chains: int | None = option(
        None, "chains run at once (default: cmdstanpy's, all of them up to the CPU count)",
        parse=int, metavar="N")
    inits: Any = option(
        None, "initial values: a number R >= 0 (uniform on (-R, R) in the unconstrained "
        "space; 0: all zero) or a JSON file of parameter values (default: the method's own "
        "starts, else CmdStan's R = 2)", parse=parse_inits, metavar="R|FILE.json")
    refresh: int | None = option(
        None, "report progress every N iterations (default: cmdstanpy's)",
        parse=int, metavar="N")

    def __post_init__(self) -> None:
        self.extra = dict(self.extra)  # the caller's dict is left as it was
        for name in nuts_fields():
            if name in self.extra and getattr(self, name) is None:
                setattr(self, name, self.extra.pop(name))

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
                     expected="a number >= 1 (times the first attempt's gradient evaluations; "
                              "1: no follow-up runs)")
        if not isinstance(self.show_progress, bool):
            raise OptionsError("show_progress", self.show_progress, "True or False")
        known = set(inspect.signature(cmdstanpy.CmdStanModel.sample).parameters) - {"self"}
        for name, value in self.extra.items():
            if name in nuts_fields():
                raise OptionsError(name, value, f"{name} given once (it was also given as "
                                   f"{name}={getattr(self, name)!r})")
            if name not in known:
                raise OptionsError(name, value, "an option of the method or an argument of "
                                   "cmdstanpy's CmdStanModel.sample (e.g. adapt_delta, "
                                   "max_treedepth, metric, parallel_chains)")
        if self.adapt_delta is not None:
            check_number("adapt_delta", self.adapt_delta, 0.0, 1.0, low_open=True,
                         high_open=True)
        for name in ("max_treedepth", "thin", "parallel_chains", "refresh"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        if self.metric is not None and (not isinstance(self.metric, str)
                                        or self.metric not in _METRIC_SPELLINGS):
            raise OptionsError("metric", self.metric, " or ".join(repr(m) for m in METRICS)
                               + " (cmdstanpy's names; give a metric's values as inv_metric)")
        _check_inits_value(self.inits, self.chains)
        return self

    def seeded(self) -> SamplerArgs:
        """These arguments with a seed: ``self`` when it has one, else a copy with a seed
        drawn by :func:`draw_seed` (used for every run, pilot and resampling).

        Raises
        ------
        Nothing.
        """
        return self if self.seed is not None else dataclasses.replace(self, seed=draw_seed())

    def cmdstan_kwargs(self) -> dict[str, Any]:
        """The keyword arguments for ``CmdStanModel.sample`` besides chains, iterations,
        seed, output folder and progress: the NUTS fields that are set, then ``extra``.

        Raises
        ------
        Nothing.
        """
        out = {name: getattr(self, name) for name in nuts_fields()
               if getattr(self, name) is not None}
        if isinstance(out.get("inits"), os.PathLike):
            out["inits"] = os.fspath(out["inits"])
        out.update(self.extra)
        return out

    def record(self) -> dict[str, Any]:
        """What ``estimates.json`` records of the sampler: chains, iterations, seed and
        the NUTS arguments given (an inits file by its path).

        Raises
        ------
        Nothing.
        """
        out: dict[str, Any] = {"chains": self.chains, "iter_warmup": self.iter_warmup,
                               "iter_sampling": self.iter_sampling, "seed": self.seed}
        out.update(self.cmdstan_kwargs())
        return out


def nuts_fields() -> tuple[str, ...]:
    """The :class:`SamplerArgs` fields passed to ``CmdStanModel.sample`` as keywords
    (``adapt_delta``, ``max_treedepth``, ``metric``, ``thin``, ``parallel_chains``,
    ``inits``, ``refresh``).

    Raises
    ------
    Nothing.
    """
    fixed = ("chains", "iter_warmup", "iter_sampling", "seed", "show_progress", "extra",
             "budget")
    return tuple(f.name for f in dataclasses.fields(SamplerArgs) if f.name not in fixed)


_INITS_EXPECTED = ("a number R >= 0 (uniform(-R, R) inits), a JSON file of initial values, "
                   "a dict of them, or a list of one per chain")


def _check_inits_value(inits: Any, chains: int) -> None:
    """Raise unless ``inits`` is one of the forms cmdstanpy takes (a file is read).

    Raises
    ------
    OptionsError
        Naming ``inits``, the value and the accepted forms.
    """
    if inits is None or isinstance(inits, Mapping):
        return
    if isinstance(inits, (int, float)) and not isinstance(inits, bool):
        check_number("inits", inits, 0.0, expected=_INITS_EXPECTED)
        return
    if isinstance(inits, (str, os.PathLike)):
        _load_inits_file(inits)
        return
    if isinstance(inits, list) and inits:
        if len(inits) != chains:
            raise OptionsError("inits", inits, f"one entry per chain ({chains}), got "
                               f"{len(inits)}")
        for entry in inits:
            if not isinstance(entry, Mapping):
                _load_inits_file(entry)
        return
    raise OptionsError("inits", inits, _INITS_EXPECTED)


def _load_inits_file(path: Any) -> dict[str, Any]:
    """The values of a JSON inits file.

    Raises
    ------
    OptionsError
        If ``path`` is not a path, the file cannot be read, or it holds no JSON object.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise OptionsError("inits", path, _INITS_EXPECTED)
    try:
        loaded = json.loads(Path(path).read_text())
    except OSError as exc:
        raise OptionsError("inits", os.fspath(path), _INITS_EXPECTED, message=(
            f"inits={os.fspath(path)!r} cannot be read ({exc.strerror or exc}); expected "
            f"{_INITS_EXPECTED}")) from None
    except ValueError as exc:
        raise OptionsError("inits", os.fspath(path), _INITS_EXPECTED, message=(
            f"inits={os.fspath(path)!r} is not JSON ({exc}); expected a JSON object of "
            "parameter values, e.g. {\"mu\": 0.5, \"theta\": [1, 2]}")) from None
    if not isinstance(loaded, dict):
        raise OptionsError("inits", os.fspath(path), _INITS_EXPECTED, message=(
            f"inits={os.fspath(path)!r} holds a JSON {type(loaded).__name__}; expected a "
            "JSON object of parameter values, e.g. {\"mu\": 0.5, \"theta\": [1, 2]}"))
    return loaded


def check_inits(result: TransformResult, data: Mapping[str, Any] | None, inits: Any) -> None:
    """Check the user's initial values against the program the method runs (before
    anything is compiled).

    A method's program may hold a parameter differently from the model (the
    pseudo-extended program holds ``N`` copies of each): values shaped as the
    model declares them then do not fit it, and CmdStan would only say so after
    compiling.  Values are checked where their shape can be worked out from the
    data; names that are no parameter of either program are left to CmdStan
    (which ignores them).

    Parameters
    ----------
    result
        The method's transformation of the model.
    data
        The user's data.
    inits
        As :attr:`SamplerArgs.inits` (validated).

    Raises
    ------
    OptionsError
        Naming ``inits``, the parameter, both declarations and what to give instead.
    """
    from pemc_stan.stan.inputs import _expected_shape, _json_shape
    from pemc_stan.stan.printer import print_type

    if inits is None or isinstance(inits, (int, float)):
        return
    entries = inits if isinstance(inits, list) else [inits]
    values = [dict(e) if isinstance(e, Mapping) else _load_inits_file(e) for e in entries]
    label = result.method.short if result.method is not None else "transformed"
    try:
        extended = {name: t for t, name in read_program(result.stan_code,
                                                        result.model_name).parameters}
    except Exception as exc:  # the check is a courtesy: CmdStan checks the values too
        logger.debug("inits not checked: the %s program did not parse (%s)", label, exc)
        return
    original = {name: t for t, name in result.program.parameters}
    sizes = dict(data or {})
    additions = getattr(result, "data_additions", None)  # data the method's program adds
    if isinstance(additions, Mapping):
        sizes.update({k: v for k, v in additions.items() if v is not None})
    given = inits if isinstance(inits, (str, os.PathLike)) else "the inits given"
    remedy = (f"give inits as a number R (uniform(-R, R) in the unconstrained space), or "
              f"values for the {label} program's parameters ('pemc-stan transform' prints it)")
    for entry in values:
        for name, value in entry.items():
            if name not in extended:
                if name in original:
                    raise OptionsError("inits", given, remedy, message=(
                        f"inits give {name}, a parameter of the model, but the {label} "
                        f"program has no parameter {name} (its parameters: "
                        f"{', '.join(extended)}): {remedy}"))
                continue
            want = _expected_shape(extended[name], sizes)
            got = _json_shape(value)
            if want is None or got is None or got == want:
                continue
            declared = f"{print_type(extended[name])} {name}"
            if name in original and extended[name] != original[name]:
                raise OptionsError("inits", given, remedy, message=(
                    f"inits give {name} with shape {got}, but the {label} program declares "
                    f"{declared} (shape {want}; the model: {print_type(original[name])} "
                    f"{name}): {remedy}"))
            raise OptionsError("inits", given, f"{name} of shape {want}", message=(
                f"inits give {name} with shape {got}; the {label} program declares "
                f"{declared} (shape {want}): give {name} that shape"))


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
        :class:`~pemc_stan.stan.inputs.StanProgram`.
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
    show_progress: bool | None = None,
    client: Any = None,
    budget: float = DEFAULT_BUDGET,
    **kwargs: Any,
) -> ExtendedFit:
    """Sample a Stan model with a registered method (pseudo-extended MCMC, continuous tempering).

    Parameters
    ----------
    model
        Stan program text, a ``.stan`` path, a ``cmdstanpy.CmdStanModel``
        (its ``stan_file`` is used) or a :class:`~pemc_stan.stan.inputs.StanProgram`.
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
    show_progress
        Progress bars, and a line for each stage of the run (the pilot's search, the
        mode split, each round and follow-up) on standard error, as the command line
        prints them.  Default: when standard error is a terminal or the call runs in
        a Jupyter notebook (as cmdstanpy); False: quiet.
    chains, iter_warmup, iter_sampling, seed, output_dir
        Passed to ``CmdStanModel.sample``.  Without ``seed`` one is drawn
        (:func:`draw_seed`) and used for everything; it is ``fit.run_seed``, and
        the InferenceData and ``estimates.json`` record it.
    client
        A ``distributed.Client``: run every chain as a task of its cluster
        (needs ``pemc-stan[distributed]``).  Each chain keeps its seed and
        chain id, so the draws and estimates are those of the same call
        without ``client``; pilots and post-processing run here.
    budget
        When the first run's verdict names a problem with a mechanical remedy
        (divergences: a higher ``adapt_delta``; chains that mix too slowly: twice the
        draws, continuing from where the run ended), follow-up runs apply it while all
        runs together take at most ``budget`` times the first attempt's gradient
        evaluations (the mode split's runs and the method's first run:
        :mod:`pemc_stan.sampling.follow_up`); ``budget=1`` makes none.
        The steps are in ``fit.follow_up``.
    **kwargs
        The method's options (``n_pseudo=5``, ``base_covariance="dense"``, ...)
        and further ``CmdStanModel.sample`` arguments (:class:`SamplerArgs`:
        ``adapt_delta``, ``max_treedepth``, ``metric``, ``thin``,
        ``parallel_chains``, ``inits``, ``refresh``; and any other, such as
        ``step_size``).  ``inits`` given here win over a method's own starts
        (PE's draws from its pilot's base) in the first run; follow-up runs
        continue from where the run ended.  A ``metric`` given here keeps a
        method's initial inverse metric only when it fits (a diagonal one for
        ``diag_e``).

    Returns
    -------
    ExtendedFit
        The method's fit (``PseudoExtendedFit``, ``ContinuousTemperingFit``, ...).

    Raises
    ------
    OptionsError
        For invalid options, options of another method, an unknown method, or
        inits that do not fit the method's program (before compiling).
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
    shown = progress.interactive() if show_progress is None else show_progress
    sampler = SamplerArgs(chains, iter_warmup, iter_sampling, seed, shown,
                          cmdstanpy_kwargs, budget).validate()
    _check_inputs(model, data)
    given = model if isinstance(model, cmdstanpy.CmdStanModel) else None
    result = spec.transform_program(read_program(model), opts)  # program errors first
    with progress.stage_lines() if sampler.show_progress is True else contextlib.nullcontext():
        return run(settle(result, data, sampler), output_dir=output_dir, client=client,
                   original_model=given)


@dataclass(frozen=True)
class RunInputs:
    """A run's inputs, settled once at the front door (:func:`settle`) and carried down.

    Attributes
    ----------
    result
        The method's transformation of the program.
    data
        The user's data, read and checked against the data block.
    sampler
        Validated NUTS arguments with the run's seed (drawn when none was given).
    """

    result: TransformResult
    data: dict[str, Any]
    sampler: SamplerArgs


def settle(result: TransformResult, data: Any, sampler: SamplerArgs) -> RunInputs:
    """Read the data, draw the seed and check the inits against the method's program:
    once per run, before anything is compiled.

    Raises
    ------
    DataError
        For data that do not match the data block.
    OptionsError
        For inits that do not fit the method's program.
    """
    values = read_data(result.program, data)
    sampler = sampler.seeded()
    check_inits(result, values, sampler.inits)
    return RunInputs(result, values, sampler)


def run(inputs: RunInputs, *, output_dir: str | os.PathLike[str] | None = None,
        client: Any = None, original_model: cmdstanpy.CmdStanModel | None = None
        ) -> ExtendedFit:
    """Run a transformed program whose method, options, program, data and sampler
    arguments are settled (:func:`settle`; :func:`sample` and the command line call it).

    Parameters
    ----------
    inputs
        The settled inputs.
    output_dir, client
        As :func:`sample`.
    original_model
        The user's compiled program, if they gave one.

    Returns
    -------
    ExtendedFit
        With ``run_seed`` set: the seed of ``inputs.sampler``.

    Raises
    ------
    OutputPathError
        If ``output_dir`` is a file, or cannot be created or written (before anything
        is compiled).
    CmdStanRunError, KeyboardInterrupt, ImportError
        As :func:`sample`.
    """
    result, sampler = inputs.result, inputs.sampler
    if output_dir is not None:  # a file given as the folder: named before any pilot/compile
        check_output_folder(output_dir)
    method_model = result.require_method().model(result, inputs.data, original_model)
    if client is not None:
        from pemc_stan.backend.chains import DaskChainRunner

        method_model.chain_runner = DaskChainRunner(client)
    collapse_cmdstanpy_messages()
    try:
        with ending_children():
            fit = run_plan(method_model, chains=sampler.chains,
                           iter_warmup=sampler.iter_warmup,
                           iter_sampling=sampler.iter_sampling, seed=sampler.seed,
                           output_dir=output_dir, show_progress=sampler.show_progress,
                           budget=Budget(float(sampler.budget)), **sampler.cmdstan_kwargs())
    except RuntimeError as exc:
        if not is_cmdstan_failure(exc):
            raise
        raise run_error(exc, "CmdStan") from exc
    fit.run_seed = sampler.seed
    return fit
