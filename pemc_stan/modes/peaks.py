"""The peak of each mode the search found, climbed to the top: a narrow spike inside it.

Pathfinder keeps, of each L-BFGS path, the Gaussian of best ELBO along it.  Inside a
wide mode (a slab) holding a narrow spike of most of the mass, the path climbs into the
spike, but its curvature history is the slab's, so the Gaussians near the top are
slab-wide, see mostly slab and lose on the ELBO: the search reports the slab alone, its
mass the slab's, and every check built on the search agrees with chains that never enter
the spike.

The mode's own numbers say when this happened.  A mode of log mass ``M`` whose draws have
covariance ``S`` has, were it Gaussian, its peak log density at

    M - D/2 log(2 pi) - 1/2 log|S|

(a Student-t or funnel-shaped mode peaks *below* that: its mass lies in its tails).  The
density at the mode's local maximum (CmdStan's L-BFGS run to convergence from the mode's
centre, with the constants Pathfinder's masses keep) standing
:data:`PEAK_GAP` nats or more above it is mass the mode's Gaussian does
not hold.  When the peak's Laplace Gaussian is also narrower than the mode's (its volume
smaller by the same factor: else it is the mode itself, its mass underrated by its
paths), it becomes a mode of the search of its own, its
mass estimated by importance sampling from that Gaussian (exact proposal density), so that
the split, the mass checks, the base and the cells all see it.  The slab's mass is
unchanged: its draws almost never enter the spike.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pemc_stan.backend.console import failure_reason
from pemc_stan.backend.pathfinder import ModeGroup, mode_centres, mode_covariances
from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.search import NEW_MODE_SHARE, SEARCH_DRAWS_MIN
from pemc_stan.numeric import logsumexp

logger = logging.getLogger(__name__)

__all__ = ["PEAK_GAP", "PEAK_PROBES", "PEAK_SEED_OFFSET", "gaussian_peak", "probe_peaks"]

#: A mode's maximum this many nats above the peak of the Gaussian of its mass and
#: covariance holds mass the mode's Gaussian does not (e^3: twenty times as much where a
#: Gaussian mode's own estimate scatters by well under a nat).
PEAK_GAP = 3.0
#: At most this many modes, the heaviest, are climbed (one L-BFGS run each).
PEAK_PROBES = 8
#: Offset of the peaks' seed from the search's.
PEAK_SEED_OFFSET = 7919


def gaussian_peak(log_mass: float, cov: NDArray[np.float64]) -> float:
    """The peak log density of a Gaussian of total mass ``exp(log_mass)`` and covariance
    ``cov``: ``log_mass - D/2 log(2 pi) - 1/2 log|cov|``; ``inf`` for a singular ``cov``.

    Raises
    ------
    Nothing.
    """
    cov = np.atleast_2d(np.asarray(cov, dtype=float))
    sign, logdet = np.linalg.slogdet(cov)
    if sign <= 0 or not np.isfinite(logdet):
        return math.inf
    return float(log_mass - 0.5 * cov.shape[0] * math.log(2 * math.pi) - 0.5 * logdet)


def probe_peaks(pilot: Any, seed: int | None, groups: list[ModeGroup], z: NDArray[np.float64],
                lw: NDArray[np.float64], labels: NDArray[np.intp], timeout: float | None
                ) -> tuple[list[ModeGroup], NDArray[np.float64], NDArray[np.float64],
                           NDArray[np.intp], int]:
    """The search's modes with a mode of its own for every peak its mode's Gaussian does
    not hold (module docstring), and its draws appended to ``z``, ``lw`` and ``labels``
    (a label of its own each, after the last); and how many peaks were added.

    ``pilot`` is the :class:`~pemc_stan.modes.pilot.BasePilot` (its model, coordinates and
    density in base coordinates); ``timeout`` bounds each CmdStan run (None: no bound).

    Raises
    ------
    Nothing: a mode whose peak cannot be climbed or sampled is left as it was (logged).
    """
    if not pilot.coordinates.blocks or not groups:
        return groups, z, lw, labels, 0
    shares = np.exp(np.array([m for _, m in groups]) - logsumexp([m for _, m in groups]))
    centres = mode_centres(z, lw, groups, labels)
    covs = mode_covariances(z, lw, groups, labels)
    heaviest = [int(k) for k in np.argsort(-shares, kind="stable")
                if shares[k] >= NEW_MODE_SHARE][:PEAK_PROBES]
    rng = np.random.default_rng(None if seed is None else seed + PEAK_SEED_OFFSET)
    added: list[tuple[NDArray[np.float64], NDArray[np.float64]]] = []
    tops, offset = _tops(pilot, centres, heaviest, seed, timeout)
    for k, (top, lp, mle) in tops.items():
        gap = lp + offset - gaussian_peak(groups[k][1], covs[k])
        logger.debug("mode %d: log mass %.2f, log|S| %.2f, top %.2f: %.1f nats above its "
                     "Gaussian's peak", k, groups[k][1],
                     np.linalg.slogdet(np.atleast_2d(covs[k]))[1], lp + offset, gap)
        if not gap > PEAK_GAP:
            continue
        try:
            drawn = _peak_draws(pilot, mle, top, covs[k], seed, timeout, rng)
        except Exception as exc:  # a Laplace run that fails: the mode stays as it was
            logger.info("mode search: the peak of mode %d was not sampled (%s)", k,
                        failure_reason(exc))
            continue
        if drawn is None:
            continue
        logger.info("mode search: mode %d peaks %.1f nats above its Gaussian's; its peak's "
                    "Laplace Gaussian is a mode of its own", k, gap)
        added.append((drawn[0], drawn[1] + offset))
    if not added:
        return groups, z, lw, labels, 0
    out = list(groups)
    next_label = int(labels.max()) + 1 if labels.size else 0
    zs, lws, labs = [z], [lw], [labels]
    at = z.shape[0]
    for j, (zk, lwk) in enumerate(added):
        idx = at + np.flatnonzero(np.isfinite(lwk))
        out.append((idx, float(logsumexp(lwk) - math.log(lwk.size))))
        zs.append(zk)
        lws.append(lwk)
        labs.append(np.full(zk.shape[0], next_label + j, dtype=np.intp))
        at += zk.shape[0]
    return (out, np.concatenate(zs), np.concatenate(lws), np.concatenate(labs), len(added))


def _tops(pilot: Any, centres: NDArray[np.float64], modes: list[int], seed: int | None,
          timeout: float | None) -> tuple[dict[int, tuple[NDArray[np.float64], float, Any]],
                                          float]:
    """Each of ``modes`` climbed from its centre (:func:`_climb`): ``{mode: (top in base
    coordinates, log density there as :meth:`BasePilot.log_density_z`, CmdStan's
    optimisation)}`` for the tops with a finite density, and what Pathfinder's ``lp__``
    adds to that density (it keeps the constants of ``~`` statements, CmdStan's
    ``log_prob`` drops them: the median difference at the search's reference draws,
    :attr:`BasePilot.lp_reference`), the tops and the reference draws evaluated in one
    run; empty when none can be."""
    climbed: dict[int, tuple[NDArray[np.float64], Any]] = {}
    for k in modes:
        try:
            climbed[k] = _climb(pilot, centres[k], seed, timeout)
        except Exception as exc:  # an optimiser that fails: the mode stays as it was
            logger.info("mode search: the peak of mode %d was not climbed (%s)", k,
                        failure_reason(exc))
    if not climbed:
        return {}, math.nan
    ref = pilot.lp_reference
    if ref is None or not np.size(ref[1]):
        return {}, math.nan
    points = np.vstack([*(top[None, :] for top, _ in climbed.values()), ref[0]])
    try:
        lp = np.asarray(pilot.log_density_z(points), dtype=float)
    except Exception as exc:  # a density that throws at a top: nothing to compare
        logger.info("mode search: the modes' tops were not evaluated (%s)",
                    failure_reason(exc))
        return {}, math.nan
    diff = np.asarray(ref[1], dtype=float) - lp[len(climbed):]
    diff = diff[np.isfinite(diff)]
    if not diff.size:
        return {}, math.nan
    tops = {k: (top, float(v), mle) for (k, (top, mle)), v in zip(
        climbed.items(), lp[:len(climbed)], strict=True) if math.isfinite(v)}
    return tops, float(np.median(diff))


def _peak_draws(pilot: Any, mle: Any, top: NDArray[np.float64], cov: NDArray[np.float64],
                seed: int | None, timeout: float | None, rng: np.random.Generator
                ) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """Draws of the Laplace Gaussian at ``top`` and their log weights (the density as
    :meth:`BasePilot.log_density_z`), when that Gaussian is narrower than the mode's
    (covariance ``cov``) by the volume factor ``e^PEAK_GAP``: else the top is the mode
    itself, its mass underrated, and None."""
    gauss = _laplace(pilot, mle, seed, timeout, top)
    narrower = 0.5 * (np.linalg.slogdet(np.atleast_2d(cov))[1] - np.linalg.slogdet(gauss.cov)[1])
    if not narrower > PEAK_GAP:
        return None
    zk = gauss.sample_z(max(SEARCH_DRAWS_MIN, pilot.draws), rng)
    lwk = pilot.log_density_z(zk) - gauss.log_density_z(zk)
    lwk = np.where(np.isfinite(lwk), lwk, -np.inf)
    return (zk, lwk) if np.any(np.isfinite(lwk)) else None


def _climb(pilot: Any, centre: NDArray[np.float64], seed: int | None, timeout: float | None
           ) -> tuple[NDArray[np.float64], Any]:
    """L-BFGS from ``centre`` (base coordinates) to the local maximum: (the maximum in
    base coordinates, CmdStan's optimisation result)."""
    owner = pilot.owner
    mle = owner.original_model().optimize(
        data=owner.data or None, inits=pilot._inits(centre[None, :])[0], seed=seed,
        jacobian=True, sig_figs=12, show_console=False, timeout=timeout)
    arr = np.asarray(mle.optimized_params_np, dtype=float)[None, :]
    top, _ = pilot.coordinates.forward(pilot.param_draws(arr, list(mle.column_names)),
                                       owner.data)
    return np.asarray(top, dtype=float)[0], mle


def _laplace(pilot: Any, mle: Any, seed: int | None, timeout: float | None,
             top: NDArray[np.float64]) -> BaseDensity:
    """The Laplace Gaussian at ``mle`` in base coordinates: centred on ``top``, with the
    covariance of CmdStan's Laplace draws mapped to base coordinates."""
    owner = pilot.owner
    d = top.size
    fit = owner.original_model().laplace_sample(
        data=owner.data or None, mode=mle, draws=max(pilot.draws, 20 * (d + 1)), seed=seed,
        jacobian=True, sig_figs=12, show_console=False, timeout=timeout)
    arr = np.asarray(fit.draws(), dtype=float)
    zl, _ = pilot.coordinates.forward(pilot.param_draws(arr, list(fit.column_names)),
                                      owner.data)
    cov = np.atleast_2d(np.cov(np.asarray(zl, dtype=float), rowvar=False))
    return BaseDensity(top, 0.5 * (cov + cov.T), "dense").validate()
