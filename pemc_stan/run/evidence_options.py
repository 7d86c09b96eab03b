"""The options of :func:`pemc_stan.run.evidence.evidence`, and the estimators it knows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pemc_stan.errors import OptionsError
from pemc_stan.methods import registry

__all__ = ["OWN_ESTIMATORS", "EvidenceOptions", "canonical_estimator", "estimators"]


#: The estimators of this module; methods add their own (registry entries' ``estimators``).
OWN_ESTIMATORS = ("bridge", "is")
_ALIASES = {"bridge_sampling": "bridge", "psis": "is", "importance_sampling": "is",
            "thermodynamic_integration": "ti"}


def estimators() -> tuple[str, ...]:
    """Every estimator :func:`evidence` accepts: its own and the registered methods'.

    Raises
    ------
    Nothing.
    """
    return (*OWN_ESTIMATORS, *(e for m in registry.methods() for e in m.estimators))


def canonical_estimator(name: str) -> str | None:
    """The estimator called ``name``: an estimator, an alias, or a method name (its first
    estimator); None when there is none.

    Raises
    ------
    Nothing.
    """
    if not isinstance(name, str):
        return None
    key = _ALIASES.get(name.lower(), name.lower())
    if key in estimators():
        return key
    try:
        method = registry.get(key)
    except ValueError:
        return None
    return method.estimators[0] if method.estimators else None


def _check_integer(name: str, value: Any, low: int, expected: str) -> None:
    """Raise :class:`OptionsError` unless ``value`` is an integer (``int`` or NumPy, not
    ``bool``) ``>= low``.

    Raises
    ------
    OptionsError
        Naming ``name``, the value and ``expected``.
    """
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
        raise OptionsError(name, value, expected, message=f"{name}={value!r}; expected {expected}")


@dataclass(frozen=True)
class EvidenceOptions:
    """Options of :func:`evidence` (names mirror cmdstanpy where they overlap).

    Attributes
    ----------
    estimator : str
        ``"bridge"``, ``"is"``, ``"ct"`` or ``"ti"`` (or an alias, or a method's name).
    chains, iter_warmup, iter_sampling : int
        NUTS settings (bridge on a model; CT runs).
    seed : int or None
        Seed of every run and of the bridge proposal draws.
    n_proposal : int or None
        Bridge proposal draws (default: as many as bridge draws).
    is_draws : int
        Proposal draws for ``"is"``.
    is_proposal : str
        ``"pathfinder"`` or ``"student_t"``.
    ti_grid : int
        Grid points in ``beta`` for ``"ti"``.
    warp : bool
        Warp-3 bridge sampling.
    """

    estimator: str = "bridge"
    chains: int = 4
    iter_warmup: int = 1000
    iter_sampling: int = 1000
    seed: int | None = None
    n_proposal: int | None = None
    is_draws: int = 4000
    is_proposal: str = "pathfinder"
    ti_grid: int = 101
    warp: bool = False

    def validate(self) -> None:
        """Check every option.

        Raises
        ------
        OptionsError
            Naming the argument, its value and what was expected (a ``ValueError``).
        """
        if canonical_estimator(self.estimator) is None:
            expected = f"one of {', '.join(estimators())}"
            raise OptionsError("estimator", self.estimator, expected,
                               message=f"estimator={self.estimator!r}; expected {expected}")
        for name, low in (("chains", 1), ("iter_warmup", 0), ("iter_sampling", 8),
                          ("is_draws", 10), ("ti_grid", 3)):
            _check_integer(name, getattr(self, name), low, f"an integer >= {low}")
        if self.is_proposal not in ("pathfinder", "student_t"):
            expected = "'pathfinder' or 'student_t'"
            raise OptionsError("is_proposal", self.is_proposal, expected,
                               message=f"is_proposal={self.is_proposal!r}; expected {expected}")
        if self.n_proposal is not None and (not isinstance(self.n_proposal, (int, np.integer))
                                            or self.n_proposal < 2):
            expected = "None or an integer >= 2"
            raise OptionsError("n_proposal", self.n_proposal, expected,
                               message=f"n_proposal={self.n_proposal!r}; expected {expected}")
        if self.seed is not None and (not isinstance(self.seed, (int, np.integer))
                                      or self.seed < 0):
            expected = "None or a non-negative integer"
            raise OptionsError("seed", self.seed, expected,
                               message=f"seed={self.seed!r}; expected {expected}")
