"""What every method's options dataclass shares.

A method's options are one dataclass (in the style of cmdstanpy's
``cmdstan_args``): its fields are the option names, their defaults are the
defaults everywhere (Python keywords, the command line, the stored
attributes), and :meth:`MethodOptions.validate` raises
:class:`~pemc_stan.errors.OptionsError` naming the argument, the value and
what was expected.  Command-line flags are derived from the fields
(:func:`cli_fields`): ``n_pseudo`` becomes ``--n-pseudo``, with the help text,
value parser and metavar given by :func:`option`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

from pemc_stan.errors import OptionsError

__all__ = ["MethodOptions", "option", "cli_fields", "field_names", "check_int", "check_number",
           "check_choice", "REPARAMETERIZE_CHOICES", "reparameterize_option",
           "SPLIT_MODES_CHOICES", "split_modes_option", "MARGINALISE_CHOICES",
           "marginalise_option"]

#: ``reparameterize``: non-centre hierarchical normal priors (``auto``) or not (``none``).
REPARAMETERIZE_CHOICES = ("auto", "none")

def option(default: Any, help: str, *, parse: Callable[[str], Any] | None = None,
           metavar: str | None = None, choices: tuple[str, ...] | None = None,
           cli: bool = True) -> Any:
    """A dataclass field of a method's options, with what the command line needs.

    Parameters
    ----------
    default
        The default value (the only place it is written).
    help
        One line for ``--help``.
    parse
        Parser of the flag's text (default: the type of ``default``, or str).
    metavar, choices
        As in :meth:`argparse.ArgumentParser.add_argument`.
    cli
        False for options that have no command-line form (Python objects).

    Returns
    -------
    dataclasses.Field

    Raises
    ------
    Nothing.
    """
    return dataclasses.field(default=default, metadata={
        "help": help, "parse": parse, "metavar": metavar, "choices": choices, "cli": cli})


def reparameterize_option() -> Any:
    """The ``reparameterize`` field both methods share (see
    :mod:`pemc_stan.stan.reparameterize`).

    Raises
    ------
    Nothing.
    """
    return option("auto", "non-centre hierarchical normal priors by offset/multiplier in the "
                  "generated program (auto) or not (none); the model is unchanged",
                  choices=REPARAMETERIZE_CHOICES)


#: ``marginalise``: sum out a parameter used only in comparisons (``auto``) or not (``none``).
MARGINALISE_CHOICES = ("auto", "none")


def marginalise_option() -> Any:
    """The ``marginalise`` field both methods share (see
    :mod:`pemc_stan.core.marginalise`).

    Raises
    ------
    Nothing.
    """
    return option("auto", "sum a parameter the model uses only in comparisons (a change "
                  "point) out of the sampled program and draw it back in generated "
                  "quantities (auto) or sample it as written (none)",
                  choices=MARGINALISE_CHOICES)


#: ``split_modes``: sample separated modes one by one when the evidence allows (``auto``),
#: or always run the method (``never``).
SPLIT_MODES_CHOICES = ("auto", "never")


def split_modes_option() -> Any:
    """The ``split_modes`` field both methods share (see :mod:`pemc_stan.modes.split`).

    Raises
    ------
    Nothing.
    """
    return option("auto", "when the pilot's modes are separated, sample each with its own "
                  "NUTS chains and weight them by bridge-sampled masses instead of running "
                  "the method (auto), or always run the method (never)",
                  choices=SPLIT_MODES_CHOICES)


#: ``beta_marginal``: how a bootstrap round shapes the next round's beta-marginal
#: (:func:`~pemc_stan.methods.tempering.length_bias`), or not at all.
BETA_MARGINALS = ("length", "flat")


def beta_marginal_option(help: str) -> Any:
    """The ``beta_marginal`` field both methods share, with the method's own ``help``.

    Raises
    ------
    Nothing.
    """
    return option("length", help, choices=BETA_MARGINALS)


def first_round_size(asked: int, divisor: int, least: int) -> int:
    """Iterations of a short first round that only shapes the next one: ``asked // divisor``,
    at least ``least`` and at most ``asked`` (continuous tempering's bootstrap round 0,
    pseudo-extended's round that fits the bias of ``g``).

    Raises
    ------
    Nothing.
    """
    return min(asked, max(least, asked // divisor))


def field_names(options_cls: type) -> tuple[str, ...]:
    """The option names of an options dataclass, in declaration order.

    Raises
    ------
    TypeError
        If ``options_cls`` is not a dataclass.
    """
    return tuple(f.name for f in dataclasses.fields(options_cls))


def cli_fields(options_cls: type) -> Iterator[dataclasses.Field[Any]]:
    """The fields of an options dataclass that have a command-line flag.

    Raises
    ------
    TypeError
        If ``options_cls`` is not a dataclass.
    """
    for f in dataclasses.fields(options_cls):
        if f.metadata.get("cli", True):
            yield f


def check_int(name: str, value: Any, low: int, what: str = "") -> None:
    """Raise :class:`OptionsError` unless ``value`` is an int ``>= low``.

    Raises
    ------
    OptionsError
        Naming ``name``, the value and what was expected.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise OptionsError(name, value, f"an integer >= {low}{what}")


def check_number(name: str, value: Any, low: float = -math.inf, high: float = math.inf, *,
                 low_open: bool = False, high_open: bool = False, expected: str = "") -> None:
    """Raise :class:`OptionsError` unless ``value`` is a finite number in the interval.

    Raises
    ------
    OptionsError
        Naming ``name``, the value and what was expected.
    """
    ok = (not isinstance(value, bool) and isinstance(value, (int, float))
          and math.isfinite(float(value))
          and (value > low if low_open else value >= low)
          and (value < high if high_open else value <= high))
    if not ok:
        if not expected:
            lo = "(" if low_open else "["
            hi = ")" if high_open else "]"
            expected = f"a number in {lo}{low:g}, {high:g}{hi}"
        raise OptionsError(name, value, expected)


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    """Raise :class:`OptionsError` unless ``value`` is one of ``choices``.

    Raises
    ------
    OptionsError
        Naming ``name``, the value and the choices.
    """
    if not isinstance(value, str) or value not in choices:
        raise OptionsError(name, value, " or ".join(repr(c) for c in choices))


class MethodOptions:
    """Base of every method's options dataclass.

    Subclasses are dataclasses whose fields are declared with :func:`option`
    and override :meth:`validate`.
    """

    def validate(self) -> MethodOptions:
        """Check the options; return ``self``.

        Raises
        ------
        OptionsError
            For an invalid value (subclasses check their fields).
        """
        return self

    def changed(self) -> dict[str, Any]:
        """The options that differ from their defaults.

        Raises
        ------
        Nothing.
        """
        out = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if not (isinstance(value, type(f.default)) and value == f.default):
                out[f.name] = value
        return out
