"""Where a method's NUTS run starts: initial values, inverse metric and step sizes.

CmdStan's warm-up starts from Stan's random inits with the unit metric.  When
the posterior's scales in the unconstrained coordinates differ by orders of
magnitude, the first adaptation window (75 + 25 iterations) runs with tiny
step sizes and trees of hundreds of leapfrog steps until the first metric
estimate arrives.  On posteriordb's ``kidiq`` (variances 37 and 0.001) that
window took 47% of the gradients of a pseudo-extended run and 36% of a
continuous-tempering round (measured with ``save_warmup``).  The methods
already know these scales before NUTS starts:

* the pilot's base density (a Gaussian in base coordinates fitted to the
  posterior, :mod:`pemc_stan.methods.base_density`) has the marginal variances
  of every base coordinate, and the base coordinates of every supported type
  have the same number of entries, in the same order, as Stan's unconstrained
  coordinates (identical maps for the elementwise, affine and ordered types;
  the additive log-ratios of a simplex and the column-wise Cholesky entries
  are the same scales in a different parametrisation or order);
* a later bootstrap round of continuous tempering runs the same program as the
  round before it, with a refitted base: that round's adapted metric, step
  sizes and last draws are where the next round's chains should start.

:class:`WarmStart` carries them; :meth:`WarmStart.kwargs` adds them to the
``CmdStanModel.sample`` arguments where the user set none, and
:meth:`~pemc_stan.methods.base.MethodModel.run_nuts` falls back to CmdStan's
own start when CmdStan rejects one.  Warm-up still runs in full (every
adaptation window), so the draws' distribution is unchanged; only the start
of the warm-up is cheaper.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cmdstanpy
import numpy as np
from numpy.typing import NDArray

from pemc_stan.methods.base_density import BaseCoordinates, BaseDensity

logger = logging.getLogger(__name__)

__all__ = ["LOGIT_UNIFORM_VARIANCE", "WarmStart", "base_inits", "base_metric", "base_variances",
           "from_fit"]

#: Variance of ``logit(beta)`` for ``beta`` uniform on (0, 1) (the logistic
#: distribution's ``pi^2 / 3``): the unconstrained scale of an inverse temperature
#: whose marginal is flat, as continuous tempering's is when ``zeta = Z`` (eq 23).
LOGIT_UNIFORM_VARIANCE = math.pi**2 / 3

#: The metric types a diagonal inverse metric can be given with.
_DIAGONAL = (None, "diag", "diag_e")
_DENSE = ("dense", "dense_e")


def base_variances(base: BaseDensity, coords: BaseCoordinates,
                   data: Mapping[str, Any] | None) -> list[NDArray[np.float64]]:
    """The base's marginal variances, one array per parameter in declaration order.

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
    return list(np.split(variances, np.cumsum(sizes)[:-1]))


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


def base_inits(base: BaseDensity, coords: BaseCoordinates, data: Mapping[str, Any] | None,
               chains: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """One draw of the base per chain, as cmdstanpy inits of the model's parameters.

    Raises
    ------
    ValueError, UnsupportedBaseError
        When the base cannot be sampled in the parameters' space.
    """
    draws = base.sample(coords, chains, rng, data)
    return [{name: np.asarray(v)[c].tolist() for name, v in draws.items()}
            for c in range(chains)]


@dataclass(frozen=True)
class WarmStart:
    """A start for NUTS: per-chain inits, an inverse metric and step sizes.

    Attributes
    ----------
    inits
        One dict of initial values per chain (parameters left out are
        initialised by Stan), or None.
    inv_metric
        The initial inverse metric: one diagonal vector for every chain, or a
        list with one (diagonal or dense) per chain, or None.
    step_size
        The initial step size of every chain, or None (one number: CmdStan
        running several chains in one process takes only one).
    source
        What the start comes from (for the log).
    """

    inits: list[dict[str, Any]] | None = None
    inv_metric: NDArray[np.float64] | list[NDArray[np.float64]] | None = None
    step_size: float | None = None
    source: str = ""

    def kwargs(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The ``CmdStanModel.sample`` arguments ``given``, with this start where they set none.

        A metric is added only when it fits the ``metric`` the user asked for
        (diagonal for the default ``diag_e``, a matrix for ``dense_e``, none for
        ``unit_e``).

        Returns
        -------
        dict
            A new dict; ``given`` is not changed.
        """
        out = dict(given)
        if self.inits is not None and out.get("inits") is None:
            out["inits"] = self.inits
        if self.inv_metric is not None and out.get("inv_metric") is None:
            first = self.inv_metric[0] if isinstance(self.inv_metric, list) else self.inv_metric
            ndim = np.ndim(first) if isinstance(self.inv_metric, list) else np.ndim(
                self.inv_metric)
            wanted = out.get("metric")
            if (ndim == 1 and wanted in _DIAGONAL) or (ndim == 2 and wanted in _DENSE):
                out["inv_metric"] = self.inv_metric
        if self.step_size is not None and out.get("step_size") is None:
            out["step_size"] = self.step_size
        return out

    @property
    def empty(self) -> bool:
        """Whether there is nothing to start from."""
        return self.inits is None and self.inv_metric is None and self.step_size is None


def from_fit(fit: cmdstanpy.CmdStanMCMC, parameters: Sequence[str], source: str = ""
             ) -> WarmStart:
    """Start the next run of the same program where ``fit`` ended.

    Parameters
    ----------
    fit
        A finished run.
    parameters
        The program's parameters (the names of its ``parameters`` block): each
        chain's last draw of them becomes that chain's inits.
    source
        What the start comes from (for the log).

    Returns
    -------
    WarmStart
        Inits and the adapted inverse metric of each chain and the median of
        the chains' step sizes; a part that cannot be read (no draws, no
        adaptation, a tuple parameter) is None.
    """
    inits: list[dict[str, Any]] | None = None
    try:
        last = fit.draws(concat_chains=False)[-1]  # (chains, columns)
        stan_vars = fit.metadata.stan_vars
        values = {name: np.asarray(stan_vars[name].extract_reshape(last), dtype=float)
                  for name in parameters}
        if all(np.all(np.isfinite(v)) for v in values.values()):
            inits = [{name: v[c].tolist() for name, v in values.items()}
                     for c in range(last.shape[0])]
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        logger.info("no inits from the previous run (%s)", exc)
    metric: list[NDArray[np.float64]] | None = None
    step: float | None = None
    try:
        if fit.inv_metric is not None and fit.step_size is not None:
            metric = [np.asarray(m, dtype=float) for m in fit.inv_metric]
            step = float(np.median(np.asarray(fit.step_size, dtype=float)))
            if not all(np.all(np.isfinite(m)) and np.all(np.diag(m) > 0 if m.ndim == 2 else m > 0)
                       for m in metric) or not (math.isfinite(step) and step > 0):
                metric, step = None, None
    except (AttributeError, ValueError) as exc:
        logger.info("no metric from the previous run (%s)", exc)
    return WarmStart(inits, metric, step, source)
