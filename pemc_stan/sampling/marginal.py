"""A summed-out parameter at every particle, and estimates that average its draws.

A program rewritten by :mod:`pemc_stan.methods.marginalise` samples the other
parameters only; the summed-out one (a change point) is drawn from its conditional
given them by the program's generated quantities.  A fit draws it
:data:`MARGINAL_DRAWS` times at every particle (one standalone generated-quantities run
of CmdStan on the particles repeated) and every estimate averages ``f`` over those
draws: ``mean_m f(x, s_m)`` is an unbiased estimate of ``E[f(x, s) | x]`` (conditional
Monte Carlo), so the draws' own noise shrinks by ``MARGINAL_DRAWS`` in variance and the
per-particle values follow the other parameters' mixing.  The extra draws cost one
CmdStan run of the generated quantities on the particles repeated (0.4 s for 4,000
particles of ``changepoint_normal``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from pemc_stan.backend.console import routed_cmdstanpy_logging
from pemc_stan.backend.standalone import generated_at

if TYPE_CHECKING:
    from pemc_stan.sampling.fit import ExtendedFit

__all__ = ["MARGINAL_DRAWS", "ColumnView", "averaged", "marginal_draws", "views"]

Fit = TypeVar("Fit", bound="ExtendedFit")

#: Draws of a summed-out parameter at each particle.
MARGINAL_DRAWS = 8


class ColumnView:
    """``view["x"]`` -> the particles of original column ``x``, shape (chains, draws, K)
    (for a summed-out parameter, its draw number ``draw``)."""

    def __init__(self, fit: ExtendedFit, draw: int = 0) -> None:
        self._fit, self._draw = fit, draw

    def __getitem__(self, column: str) -> NDArray[np.float64]:
        return self._fit.particles(column, self._draw)


def views(fit: ExtendedFit) -> range:
    """The draw numbers an estimate averages over (one when nothing is summed out)."""
    return range(MARGINAL_DRAWS if fit.program.marginalised else 1)


def averaged(fit: Fit, f: Callable[[Any], Any], view: Callable[[Fit, int], Any]
             ) -> NDArray[np.float64]:
    """``f`` at every particle, averaged over the draws of the summed-out parameters;
    ``view(fit, draw)`` is what ``f`` is given."""
    return np.mean([np.asarray(f(view(fit, m)), dtype=float) for m in views(fit)], axis=0)


def marginal_draws(fit: ExtendedFit, column: str) -> NDArray[np.float64]:
    """:data:`MARGINAL_DRAWS` draws of summed-out ``column`` at every particle, shape
    (draws, chains, iterations, K), from the program's generated quantities.

    Raises
    ------
    RuntimeError
        If CmdStan's generate_quantities fails.
    """
    columns = {c: np.broadcast_to(fit._stack(k), (MARGINAL_DRAWS, *fit._stack(k).shape))
               for c, k in fit.particle_columns().items()}
    with routed_cmdstanpy_logging():
        return generated_at(fit._original(), fit.data, columns, column, fit.program.name,
                            seed=fit.seed or 1)
