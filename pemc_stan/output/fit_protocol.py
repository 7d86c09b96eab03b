"""What the output reads of a fit: the fit protocol, declared once.

Output comes before the methods (it never imports them), so it names here what it takes
from a fit; every method's fit (``pemc_stan.sampling.fit.ExtendedFit`` and its
subclasses) has each of these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["RunFit", "fit_seed"]


class RunFit(Protocol):
    """A fit as the output sees it.

    Attributes
    ----------
    result
        The method's transform result (program, options, coordinates, method).
    method
        The method's short name.
    data
        The user's data.
    seed
        This run's own seed.
    run_seed
        The seed of the whole call (given or drawn; None when the fit was made outside
        :func:`pemc_stan.sample`).
    follow_up
        The follow-up record (``as_dict()``), or None.
    search
        The search for modes (``centres``, ``major_shares``, ``major_modes``, ``radius``,
        ``as_dict()``), or None.
    split_steps
        Steps the run took before its follow-ups.
    """

    result: Any
    data: dict[str, Any]
    seed: int | None
    run_seed: int | None
    follow_up: Any
    search: Any
    split_steps: Sequence[Any]

    @property
    def method(self) -> str: ...

    @property
    def program(self) -> Any: ...

    def parameter_columns(self) -> list[str]: ...

    def title(self) -> str:
        """What the run was, for titles (``continuous-tempering``, or the mode split's name)."""
        ...


def fit_seed(fit: RunFit) -> int | None:
    """The seed that repeats the call that made ``fit``: ``fit.run_seed`` (given or drawn by
    :func:`pemc_stan.sample`), else the fit's own ``seed``.  The one place the output
    decides it.

    Raises
    ------
    Nothing.
    """
    seed = fit.run_seed if fit.run_seed is not None else fit.seed
    return None if seed is None else int(seed)
