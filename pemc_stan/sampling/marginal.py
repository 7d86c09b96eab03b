"""A summed-out parameter at every particle, and estimates that average its draws.

A program rewritten by :mod:`pemc_stan.core.marginalise` samples the other
parameters only; the summed-out one (a change point) is drawn from its conditional
given them by the program's generated quantities.  A fit draws it
:data:`MARGINAL_DRAWS` times at every particle (one standalone generated-quantities run
of CmdStan on the particles repeated) and every estimate averages ``f`` over those
draws: ``mean_m f(x, s_m)`` is an unbiased estimate of ``E[f(x, s) | x]`` (conditional
Monte Carlo), so the draws' own noise shrinks by ``MARGINAL_DRAWS`` in variance and the
per-particle values follow the other parameters' mixing.  The extra draws cost one
CmdStan run of the generated quantities on the particles repeated, small next to the
sampling.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from pemc_stan.backend.console import routed_cmdstanpy_logging
from pemc_stan.backend.standalone import generated_at
from pemc_stan.sampling.views import NamedView

__all__ = ["MARGINAL_DRAWS", "ColumnView", "Particles", "averaged", "marginal_draws", "views"]


class _Program(Protocol):
    @property
    def marginalised(self) -> Collection[str]: ...


class Particles(Protocol):
    """What these estimates read of a fit: its program and its particles by column."""

    @property
    def program(self) -> _Program: ...

    def particles(self, column: str, draw: int = 0) -> NDArray[np.float64]: ...

    def particle_columns(self) -> Mapping[str, Any]: ...


Fit = TypeVar("Fit", bound=Particles)

#: Draws of a summed-out parameter at each particle.
MARGINAL_DRAWS = 8


class ColumnView(NamedView):
    """``view["x"]`` -> the particles of original column ``x``, shape (chains, draws, K)
    (for a summed-out parameter, its draw number ``draw``); ``view["omega"]``, a whole
    parameter, shape (chains, draws, K, *its shape)."""

    def __init__(self, fit: Particles, draw: int = 0) -> None:
        super().__init__(lambda column: fit.particles(column, draw),
                         [*fit.particle_columns(), *fit.program.marginalised])


def views(fit: Particles) -> range:
    """The draw numbers an estimate averages over (one when nothing is summed out)."""
    return range(MARGINAL_DRAWS if fit.program.marginalised else 1)


def averaged(fit: Fit, f: Callable[[Any], Any], view: Callable[[Fit, int], Any]
             ) -> NDArray[np.float64]:
    """``f`` at every particle, averaged over the draws of the summed-out parameters;
    ``view(fit, draw)`` is what ``f`` is given."""
    return np.mean([np.asarray(f(view(fit, m)), dtype=float) for m in views(fit)], axis=0)


def marginal_draws(model: Any, data: Mapping[str, Any] | None,
                   particles: Mapping[str, NDArray[np.float64]], column: str, name: str,
                   seed: int | None) -> NDArray[np.float64]:
    """:data:`MARGINAL_DRAWS` draws of summed-out ``column`` at every particle, shape
    (draws, chains, iterations, K), from the generated quantities of ``model`` (the
    original program, compiled) given ``particles`` (each parameter column's values,
    shape (chains, iterations, K)).

    Raises
    ------
    RuntimeError
        If CmdStan's generate_quantities fails.
    """
    columns = {c: np.broadcast_to(v, (MARGINAL_DRAWS, *v.shape)) for c, v in particles.items()}
    with routed_cmdstanpy_logging():
        return generated_at(model, data, columns, column, name, seed=seed or 1)
