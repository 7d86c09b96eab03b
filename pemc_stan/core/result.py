"""A method's transformation of the user's program: the generated code and what is
needed to run and post-process it (:class:`TransformResult`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pemc_stan.stan.inputs import StanProgram
from pemc_stan.stan.line_map import LineMap
from pemc_stan.stan.reparameterize import NonCentred

logger = logging.getLogger(__name__)

__all__ = ["MethodEntry", "TransformResult"]


class MethodEntry(Protocol):
    """What a result's method tells the model and the fit built from it (the registry's
    ``Method`` is one): its names, its estimators, and the classes that run and read it."""

    @property
    def name(self) -> str: ...

    @property
    def short(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def estimators(self) -> tuple[str, ...]: ...

    @property
    def model(self) -> Any: ...

    @property
    def fit(self) -> Any: ...


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
    method: MethodEntry | None = None
    line_map: LineMap | None = None

    def require_method(self) -> MethodEntry:
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
