"""The method registry: the one place that knows which methods exist.

A :class:`Method` ties a name and its aliases to the method's options class,
transformation, model class and fit class.  :func:`pemc_stan.transform`,
:func:`pemc_stan.sample`, :func:`pemc_stan.evidence`, the InferenceData
converter and the command line ask the registry (:func:`get`,
:func:`for_fit`, :func:`methods`); nothing else compares method names.  The
built-in methods register themselves when :mod:`pemc_stan.methods` is
imported; a new method is added with :func:`register` and no other edit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pemc_stan.errors import OptionsError

__all__ = ["DEFAULT_METHOD", "Method", "register", "unregister", "get", "methods", "for_fit",
           "for_estimator",
           "owner_of_option"]


@dataclass(frozen=True)
class Method:
    """A sampling method pemc-stan can transform a program into.

    Attributes
    ----------
    name
        Canonical name (``"pseudo_extended"``), stored in fits and InferenceData.
    short
        Short name (``"pe"``): an alias, the output folder's suffix and the
        compiled program's name suffix.
    label
        Name for messages (``"pseudo-extended"``).
    summary
        One line for ``--help``.
    options
        The options dataclass (a :class:`~pemc_stan.methods.options.MethodOptions`).
    transform
        ``transform(prepared, options) -> result``: a
        :class:`~pemc_stan.stan.program.StanProgram` and validated options to
        a :class:`~pemc_stan.methods.base.TransformResult`.
    model
        The model class: ``model(program, data, options)`` with ``sample(...)``.
    fit
        The fit class the model's ``sample`` returns.
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
    options: type
    transform: Callable[..., Any]
    model: type
    fit: type
    aliases: tuple[str, ...] = ()
    estimators: tuple[str, ...] = ()

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


_METHODS: dict[str, Method] = {}

#: The method used when none is named (pemc_stan.sample, pemc-stan sample).
DEFAULT_METHOD = "pseudo_extended"


def register(method: Method) -> Method:
    """Add a method (replacing one of the same name).

    Raises
    ------
    ValueError
        If one of its spellings already names another method.
    """
    for other in _METHODS.values():
        if other.name == method.name:
            continue
        clash = set(other.spellings()) & set(method.spellings())
        if clash:
            raise ValueError(f"method {method.name!r}: the name(s) {sorted(clash)} already "
                             f"belong to method {other.name!r}; choose other aliases")
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
    """The method called ``method`` (any spelling, case-insensitive).

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


def for_fit(fit: object) -> Method:
    """The method whose fit class ``fit`` is an instance of.

    Raises
    ------
    TypeError
        If ``fit`` is not the fit of a registered method.
    """
    for m in _METHODS.values():
        if isinstance(fit, m.fit):
            return m
    raise TypeError(f"{type(fit).__name__} is not the fit of a registered method; expected "
                    f"one of {[m.fit.__name__ for m in _METHODS.values()]}")


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


def owner_of_option(name: str) -> list[Method]:
    """The methods that have an option called ``name``.

    Raises
    ------
    Nothing.
    """
    from pemc_stan.methods.options import field_names

    return [m for m in _METHODS.values() if name in field_names(m.options)]
