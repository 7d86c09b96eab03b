"""The searched box screened for mass the search's modes do not explain.

The radius rounds start L-BFGS uniformly in boxes, so a mode is found as often as its
basin's share of the starts, whatever its mass.  A narrow mode far from wide ones has a
small basin (far out, the wide modes' quadratics fall off slowest and every path goes to
them): 72 paths miss a basin of 5% of the starts three times in a hundred, and the unseen
share, which counts starts, cannot tell.  Uniform draws over the widest box reach a mode
in proportion to its volume, and the density there says its mass: a draw where the
target stands :data:`~pemc_stan.modes.wide.UNEXPLAINED_RATIO` times above what the found
modes' Gaussians predict starts a Pathfinder path, the heavier draws first, so a missed
mode gets starts in proportion to its mass.

The draws are sized so that the central 99% of the most compact found mode's Gaussian
(widened as in the prediction) would hold :data:`SCREEN_HITS` of them; where that takes
more than :data:`SCREEN_DRAWS_MAX` (many dimensions, or a posterior far narrower than the
box) uniform draws could not find a mode like the found ones, and the box is not
screened.
"""

from __future__ import annotations

import logging
import math

import numpy as np
from numpy.typing import NDArray
from scipy import special, stats

from pemc_stan.backend.pathfinder import LogDensity, ModeGroup, mode_centres, mode_covariances
from pemc_stan.core.search import NEW_MODE_SHARE, SEARCH_RADII
from pemc_stan.modes.wide import UNEXPLAINED_RATIO, UNEXPLAINED_STARTS, WIDE_MODE_SPREAD
from pemc_stan.numeric import logsumexp

logger = logging.getLogger(__name__)

__all__ = ["SCREEN_DRAWS_MAX", "SCREEN_HITS", "SCREEN_SEED_OFFSET", "screen_draws",
           "screen_starts"]

#: Uniform draws the most compact found mode's central 99% should hold ...
SCREEN_HITS = 20
#: ... within at most this many draws (one density evaluation each).
SCREEN_DRAWS_MAX = 20_000
#: Offset of the screen's seed from the search's.
SCREEN_SEED_OFFSET = 6700417


def screen_draws(covs: NDArray[np.float64], radius: float) -> int:
    """Uniform draws over ``(-radius, radius)^D`` that put :data:`SCREEN_HITS` in the
    central 99% of the most compact Gaussian of covariances ``covs`` (k, D, D); 0 when
    that takes more than :data:`SCREEN_DRAWS_MAX` or a covariance is singular.

    Raises
    ------
    Nothing.
    """
    covs = np.asarray(covs, dtype=float)
    if covs.ndim != 3 or covs.shape[0] == 0:
        return 0
    d = covs.shape[1]
    sign, logdet = np.linalg.slogdet(covs)
    if np.any(sign <= 0) or not np.all(np.isfinite(logdet)):
        return 0
    # the 99% ellipsoid: the unit ball's volume times r^D sqrt|S|, r^2 the chi-square quantile
    log_ball = 0.5 * d * math.log(math.pi) - float(special.gammaln(0.5 * d + 1.0))
    log_vol = log_ball + 0.5 * d * math.log(float(stats.chi2.ppf(0.99, d))) + 0.5 * logdet
    log_n = math.log(SCREEN_HITS) + d * math.log(2.0 * radius) - float(np.min(log_vol))
    if not log_n <= math.log(SCREEN_DRAWS_MAX):
        return 0
    return max(SCREEN_HITS, math.ceil(math.exp(log_n)))


def screen_starts(groups: list[ModeGroup], z: NDArray[np.float64], lw: NDArray[np.float64],
                  labels: NDArray[np.intp], log_density: LogDensity, seed: int | None,
                  radius: float = SEARCH_RADII[-1]) -> tuple[NDArray[np.float64], int]:
    """Starts (base coordinates, at most :data:`~pemc_stan.modes.wide.UNEXPLAINED_STARTS`,
    drawn without replacement in proportion to their density) among uniform draws over
    ``(-radius, radius)^D`` where the target (``log_density``, nan where it cannot be
    evaluated) exceeds the found modes' prediction: at each major mode's centre its own
    density, falling off as its Gaussian (covariance widened by
    :data:`~pemc_stan.modes.wide.WIDE_MODE_SPREAD`, as the wide draws' mode parts); and
    the number of draws (0: not screened).  ``groups``, ``z``, ``lw`` and ``labels`` are
    the search's, as :func:`~pemc_stan.backend.pathfinder.group_paths`.

    Raises
    ------
    Nothing: a density that cannot be evaluated leaves no starts.
    """
    empty = np.empty((0, z.shape[1]))
    if not groups:
        return empty, 0
    masses = np.array([m for _, m in groups], dtype=float)
    major = np.exp(masses - logsumexp(masses)) >= NEW_MODE_SHARE
    covs = WIDE_MODE_SPREAD**2 * mode_covariances(z, lw, groups, labels)[major]
    n = screen_draws(covs, radius)
    if n == 0:
        return empty, 0
    centres = mode_centres(z, lw, groups, labels)[major]
    rng = np.random.default_rng(None if seed is None else seed + SCREEN_SEED_OFFSET)
    u = rng.uniform(-radius, radius, size=(n, z.shape[1]))
    try:
        values = np.asarray(log_density(np.vstack([u, centres])), dtype=float)
        inverse = np.linalg.inv(covs)
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        logger.info("mode search: the box was not screened (%s)", exc)
        return empty, n
    at_u, at_centres = values[:n], values[n:]
    predicted = np.full(n, -np.inf)
    for centre, inv, peak in zip(centres, inverse, at_centres, strict=True):
        if np.isfinite(peak):
            diff = u - centre
            predicted = np.logaddexp(predicted, peak - 0.5 * np.einsum("ni,ij,nj->n", diff,
                                                                       inv, diff))
    with np.errstate(invalid="ignore"):
        unexplained = np.isfinite(at_u) & (at_u - predicted > math.log(UNEXPLAINED_RATIO))
    cand = np.flatnonzero(unexplained)
    if cand.size == 0:
        return empty, n
    p = np.exp(at_u[cand] - logsumexp(at_u[cand]))
    pick = rng.choice(cand.size, size=min(UNEXPLAINED_STARTS, int(np.count_nonzero(p))),
                      replace=False, p=p)
    logger.debug("mode search: %d of %d uniform draws unexplained by the %d mode(s) found",
                 cand.size, n, int(np.sum(major)))
    return np.asarray(u[cand[pick]], dtype=float), n
