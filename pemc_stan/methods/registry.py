"""The method registry: the one place that knows which methods exist.

A :class:`Method` ties a name and its aliases to the method's options class,
transformation, model class and fit class.  The front doors
(:func:`pemc_stan.transform`, :func:`pemc_stan.sample`,
:func:`pemc_stan.evidence`, the command line and a batch task's resolution) look a
method up once (:func:`get`), build its validated options once
(:meth:`Method.build_options`) and transform the program read once
(:meth:`Method.transform_program`); the result carries its :class:`Method`
down to the model (``method.model(result, data)``) and the fit
(``fit.result.method``), so nothing looks it up again.  Every package under
``pemc_stan/methods/`` that defines a ``METHOD`` is imported and registered by
:mod:`pemc_stan.methods`: a new method is one such folder plus its template
(``stan_templates/<name>.stan.jinja``); to ship in the wheel, its package is also
listed in ``pyproject.toml``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pemc_stan.core.marginalise import marginalise
from pemc_stan.core.options import MethodOptions, field_names
from pemc_stan.core.result import TransformResult
from pemc_stan.errors import OptionsError, UnsupportedConstructError
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.sampling.model import MethodModel

if TYPE_CHECKING:
    from pemc_stan.stan.inputs import StanProgram

__all__ = ["DEFAULT_METHOD", "Method", "register", "unregister", "get", "methods",
           "for_estimator"]


@dataclass(frozen=True)
class Method:
    """A sampling method pemc-stan can transform a program into.

    Attributes
    ----------
    name
        Canonical name (``"pseudo_extended"``), stored in fits and InferenceData;
        also the name of its folder under ``pemc_stan/methods/`` and of its
        template, ``stan_templates/<name>.stan.jinja`` (:attr:`template`).
    short
        Short name (``"pe"``): an alias, the output folder's suffix and the
        compiled program's name suffix.
    label
        Name for messages (``"pseudo-extended"``).
    summary
        One line for ``--help``.
    options
        The options dataclass (a :class:`~pemc_stan.core.options.MethodOptions`).
    transform
        ``transform(program, options) -> result``: a
        :class:`~pemc_stan.stan.inputs.StanProgram` read once and options validated
        once (:meth:`build_options`) to a
        :class:`~pemc_stan.core.result.TransformResult`; it neither parses nor
        validates again.
    model
        The model class, built as ``model(result, data)``; the default runs the
        transformed program once (a method without pilots needs no class).
    fit
        The fit class the model's ``sample`` returns; the default has one
        unweighted particle per draw.
    aliases
        Further accepted spellings (``-`` and ``_`` are interchangeable).
    estimators
        Evidence estimators that need this method's fit (``("ct", "ti")``):
        :func:`pemc_stan.evidence` runs the method for them.
    """

    name: str
    short: str
    label: str
    summary: str
    options: type[MethodOptions]
    transform: Callable[..., Any]
    model: type[MethodModel] = MethodModel
    fit: type[ExtendedFit] = ExtendedFit
    aliases: tuple[str, ...] = ()
    estimators: tuple[str, ...] = ()

    @property
    def template(self) -> str:
        """The file name of the method's Jinja template in ``stan_templates/``."""
        return f"{self.name}.stan.jinja"

    def spellings(self) -> tuple[str, ...]:
        """Every accepted spelling of the method's name.

        Raises
        ------
        Nothing.
        """
        names = (self.name, self.short, self.label, *self.aliases)
        out: list[str] = []
        for n in names:
            for v in (n, n.replace("_", "-"), n.replace("-", "_")):
                if v not in out:
                    out.append(v)
        return tuple(out)

    def build_options(self, options: Any = None, **kwargs: Any) -> Any:
        """The method's validated options, from an options object and/or keywords.

        The one builder of options: keywords override fields of ``options``,
        and the result is validated once.  A keyword that is an option of
        another method, or of no method, is an :class:`OptionsError` with one
        message for every front door (Python, command line, batch files).

        Raises
        ------
        OptionsError
            For an options object of another method, options of another
            method, unknown keywords or invalid values.
        """
        if options is not None and not isinstance(options, self.options):
            raise OptionsError("options", options, f"a {self.options.__name__} for "
                               f"method={self.short!r}")
        mine = field_names(self.options)
        foreign = [k for k in kwargs if k not in mine]
        if foreign:
            raise self.foreign_option(foreign[0], kwargs[foreign[0]])
        built: Any = options
        if built is None:
            built = self.options(**kwargs)
        elif kwargs:
            built = dataclasses.replace(built, **kwargs)
        return built.validate()

    def foreign_option(self, name: str, value: Any) -> OptionsError:
        """The error for an option ``name`` that this method does not have.

        Raises
        ------
        Nothing (returns the error).
        """
        owners = [m for m in _METHODS.values() if m.name != self.name
                  and name in field_names(m.options)]
        if owners:
            return OptionsError(
                name, value, f"an option of method={self.short!r}",
                message=f"{name} (--{name.replace('_', '-')}) is not an option of method "
                        f"{self.label!r}: it is a {owners[0].label} option; remove it or use "
                        f"method={owners[0].short!r}")
        return OptionsError(name, value, f"an option of method={self.short!r}: one of "
                            f"{', '.join(sorted(field_names(self.options)))}")

    def transform_program(self, program: StanProgram, options: Any) -> TransformResult:
        """The method's result for a program read once and options validated once.

        The result carries this method (``result.method``) to the model and the fit.

        Raises
        ------
        UnsupportedConstructError
            If the program is nested too deeply for the (recursive) analysis,
            transformation or printer, naming its most deeply nested line.
        OptionsError, StanProgramError
            As the method's transformation.
        """
        try:
            if getattr(options, "marginalise", "none") == "auto":
                program = marginalise(program)
            result: TransformResult = self.transform(program, options)
        except RecursionError:
            from pemc_stan.stan.parser import nesting_error

            filename = program.path.name if program.path is not None else program.name
            error: UnsupportedConstructError = nesting_error(filename, program.tree)
            raise error from None
        return dataclasses.replace(result, method=self)


_METHODS: dict[str, Method] = {}

#: The method used when none is named (pemc_stan.sample, pemc-stan sample, batch tasks).
#: Continuous tempering: it was right on more multimodal targets than pseudo-extended
#: MCMC, at lower cost, and it estimates log Z (docs/decisions.md).
DEFAULT_METHOD = "continuous_tempering"


def register(method: Method) -> Method:
    """Add a method (replacing one of the same name).

    Raises
    ------
    OptionsError
        If one of its spellings already names another method.
    """
    for other in _METHODS.values():
        if other.name == method.name:
            continue
        clash = set(other.spellings()) & set(method.spellings())
        if clash:
            raise OptionsError("method", method.name, "names of its own", message=(
                f"method {method.name!r}: the name(s) {sorted(clash)} already belong to "
                f"method {other.name!r}; choose other aliases"))
    _METHODS[method.name] = method
    return method


def unregister(name: str) -> None:
    """Remove a method (no error when it is not registered).

    Raises
    ------
    Nothing.
    """
    _METHODS.pop(name, None)


def methods() -> Iterator[Method]:
    """The registered methods, in registration order.

    Raises
    ------
    Nothing.
    """
    return iter(list(_METHODS.values()))


def get(method: str | Method) -> Method:
    """The method called ``method`` (any spelling, case-insensitive); a Method as is.

    Raises
    ------
    OptionsError
        For an unknown name, listing the known ones.
    """
    if isinstance(method, Method):
        return method
    if isinstance(method, str):
        key = method.strip().lower()
        for m in _METHODS.values():
            if key in m.spellings():
                return m
    known = sorted({s for m in _METHODS.values() for s in (m.name, m.short)})
    raise OptionsError("method", method, f"one of {known}")


def for_estimator(estimator: str) -> Method | None:
    """The method whose fits supply the evidence estimator ``estimator``, if any.

    Raises
    ------
    Nothing.
    """
    for m in _METHODS.values():
        if estimator in m.estimators:
            return m
    return None
