"""Where a method's NUTS warm-up starts: its initial inverse metric.

CmdStan's warm-up starts with the unit metric.  When the posterior's scales in
the unconstrained coordinates differ by orders of magnitude, the first
adaptation window (75 + 25 iterations) runs with tiny step sizes and trees of
hundreds of leapfrog steps until the first metric estimate arrives, and that
window can cost a large share of a run's gradients.  The pilot's base density
(a Gaussian in base coordinates fitted to the posterior,
:mod:`pemc_stan.core.base_density`) knows these scales before NUTS starts:
it has the marginal variance of every base coordinate, and the base
coordinates of every supported type have the same number of entries, in the
same order, as Stan's unconstrained coordinates (identical maps for the
elementwise, affine and ordered types; Cholesky factors and row-stochastic
matrices are put in Stan's order (:func:`_stan_order`); for a simplex, a
sum-to-zero vector and a stochastic matrix the base's additive log-ratios are
a different parametrisation of the same number of coordinates, of comparable
scales).

Pseudo-extended MCMC uses it (its copies also start at draws of the base, and
its tempered copies are what finds a mode the pilot missed).  Continuous
tempering does not: with the base's metric its chains, which start at CmdStan's
random inits, stalled more often where the density is numerically explosive and
diverged more (docs/decisions.md); and its chains must keep CmdStan's random
inits, so that one can start in a mode the pilot missed.

:class:`WarmStart` carries the metric; :meth:`WarmStart.kwargs` adds it to
the ``CmdStanModel.sample`` arguments where the user set none, and
:meth:`~pemc_stan.sampling.model.MethodModel.run_nuts` falls back to CmdStan's
own start when CmdStan rejects it.  Warm-up still runs in full (every
adaptation window), so the draws' distribution is unchanged; only the start of
the warm-up is cheaper.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.coordinates import BaseCoordinates

logger = logging.getLogger(__name__)

__all__ = ["LOGIT_UNIFORM_VARIANCE", "WarmStart", "base_metric", "base_variances"]

#: Variance of ``logit(beta)`` for ``beta`` uniform on (0, 1) (the logistic
#: distribution's ``pi^2 / 3``): the unconstrained scale of an inverse temperature
#: whose marginal is flat, as continuous tempering's is when ``zeta = Z`` (eq 23).
LOGIT_UNIFORM_VARIANCE = math.pi**2 / 3

#: The metric types a diagonal inverse metric can be given with.
_DIAGONAL = (None, "diag", "diag_e")
_DENSE = ("dense", "dense_e")


def _stan_order(kind: str, el: tuple[int, ...]) -> NDArray[np.intp] | None:
    """Where each of Stan's unconstrained coordinates of one element sits in the base's.

    None when the orders agree.  The base lays Cholesky factors out column by column
    from the diagonal down (log of the diagonal first) and keeps each row of a
    row-stochastic matrix together; Stan reads a Cholesky factor (also the one of a
    ``cov_matrix``) row by row, each row's diagonal last, and the free matrix of a
    row-stochastic one column-major.
    """
    if kind in ("cholesky_factor_cov", "cov_matrix"):
        rows, cols = (el[0], el[0]) if kind == "cov_matrix" else el
        base = [(i, j) for j in range(cols) for i in range(j, rows)]
        stan = [(m, n) for m in range(rows) for n in range(min(m + 1, cols))]
        return np.array([base.index(p) for p in stan], dtype=np.intp)
    if kind == "row_stochastic":
        rows, cols = el
        return np.array([i * (cols - 1) + k for k in range(cols - 1) for i in range(rows)],
                        dtype=np.intp)
    return None


def base_variances(base: BaseDensity, coords: BaseCoordinates,
                   data: Mapping[str, Any] | None) -> list[NDArray[np.float64]]:
    """The base's marginal variances, one array per parameter, each in Stan's order.

    Array elements are contiguous in both; within an element the base's order is
    changed to Stan's where they differ (:func:`_stan_order`).

    Parameters
    ----------
    base
        The fitted base density (its covariance is in base coordinates).
    coords
        The parameters' base coordinates.
    data
        The model's data (for the parameters' sizes).

    Returns
    -------
    list of ndarray
        The variances of each parameter's base coordinates.

    Raises
    ------
    ValueError
        If the base's dimension is not the parameters' number of base coordinates.
    UnsupportedBaseError
        If a size cannot be evaluated from the data.
    """
    env = coords.env(data)
    sizes = [b.dim(env) for b in coords.blocks]
    if sum(sizes) != base.dim:
        raise ValueError(f"the base has {base.dim} coordinates but the parameters have "
                         f"{sum(sizes)}")
    variances = np.diag(np.asarray(base.cov, dtype=float)).copy()
    out = []
    for block, v in zip(coords.blocks, np.split(variances, np.cumsum(sizes)[:-1]), strict=True):
        _, el = block.shape(env)
        order = _stan_order(block.kind, el)
        if order is not None:
            v = v.reshape(-1, order.size)[:, order].reshape(-1)
        out.append(v)
    return out


def base_metric(base: BaseDensity, coords: BaseCoordinates, data: Mapping[str, Any] | None,
                copies: int = 1, temperatures: int = 0) -> NDArray[np.float64]:
    """A diagonal inverse metric for a method's program from the base's variances.

    The program declares the model's parameters in their order, each as
    ``copies`` consecutive copies (an array over pseudo-samples, or one), then
    ``temperatures`` unconstrained inverse temperatures (logit scale, given
    :data:`LOGIT_UNIFORM_VARIANCE`).

    Returns
    -------
    ndarray
        The diagonal, in Stan's order of the program's unconstrained coordinates.

    Raises
    ------
    ValueError, UnsupportedBaseError
        As :func:`base_variances`.
    """
    parts = [np.tile(v, copies) for v in base_variances(base, coords, data)]
    parts.append(np.full(temperatures, LOGIT_UNIFORM_VARIANCE))
    return np.concatenate(parts)


@dataclass(frozen=True)
class WarmStart:
    """An initial inverse metric for NUTS's warm-up.

    Attributes
    ----------
    inv_metric
        The initial inverse metric: one diagonal vector for every chain, or a
        list with one (diagonal or dense) per chain, or None.
    source
        What the start comes from (for the log).
    """

    inv_metric: NDArray[np.float64] | list[NDArray[np.float64]] | None = None
    source: str = ""

    def kwargs(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The ``CmdStanModel.sample`` arguments ``given``, with this start where they set none.

        A metric is added only when it fits the ``metric`` the user asked for
        (diagonal for the default ``diag_e``, a matrix for ``dense_e``, none for
        ``unit_e``).  Inits are never added.

        Returns
        -------
        dict
            A new dict; ``given`` is not changed.
        """
        out = dict(given)
        if self.inv_metric is not None and out.get("inv_metric") is None:
            first = self.inv_metric[0] if isinstance(self.inv_metric, list) else self.inv_metric
            ndim = np.ndim(first)
            wanted = out.get("metric")
            named = wanted is None or isinstance(wanted, str)  # not a (deprecated) array
            if named and ((ndim == 1 and wanted in _DIAGONAL) or (ndim == 2 and wanted in _DENSE)):
                out["inv_metric"] = self.inv_metric
        return out

    @property
    def empty(self) -> bool:
        """Whether there is nothing to start from."""
        return self.inv_metric is None
