"""What a refused split's chains tell the tempered run that follows it.

The mode split runs NUTS on the user's unchanged model from Stan's own starting points
(the scouts) and at every mode the search found.  When it is refused, the run tempers
from a base that covers the modes found, and a scout that stayed in a mode the search
missed is the only evidence left of that mode.  Without it a tempered run that never
reaches the mode can be judged ok with its estimates far off.

:func:`missed_regions` measures the tempered draws' weight in each split chain's
region (the points nearer its draws than any other chain's), and for a chain whose
region holds no effective tempered draw estimates the region's mass by bridge sampling
on the chain's own draws inside it.  A material share of the mass is a reason of the
tempered fit's verdict (:class:`ScoutsCheck`).

:func:`narrower_than_every_chain` looks at spread: each chain samples the target
restricted to where it went, and by the law of total variance the target's variance of a
parameter is at least the smallest of those restricted variances (the chains started
at every mode the search found).  A tempered run whose variance is far below every
chain's missed a wide part of the target, such as the prior's slab under a peak that
the data make (:class:`SpreadCheck`).

The chains also widen the tempered run's base (:meth:`SplitDraws.base`), so that the
tempered run can reach such parts at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pemc_stan.backend.console import failure_reason
from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.coordinates import coordinate_draws
from pemc_stan.errors import PemcStanError
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.modes.bridge import bridge_from_draws
from pemc_stan.modes.grouping import DrawCells, draw_partition
from pemc_stan.numeric import logsumexp
from pemc_stan.output.diagnostics import (
    UNVISITED_EXPECTED_MIN,
    UNVISITED_SHARE_MIN,
    VARIANCE_SE_MAX,
    Reason,
)
from pemc_stan.output.fit_protocol import by_column
from pemc_stan.sampling.checks import variance_and_error

__all__ = ["MASS_Z", "REGION_ESS_MIN", "SPREAD_RATIO_MAX", "ScoutsCheck",
           "SplitDraws", "SpreadCheck", "missed_regions", "narrower_than_every_chain",
           "region_weights"]

logger = logging.getLogger(__name__)

#: At most this many chains' masses are estimated, those of least tempered weight first
#: (each bridge costs seconds).
MAX_BRIDGES = 4
#: A region's mass is judged this many of its bridge's standard errors low: in many
#: dimensions one chain's bridge is imprecise, and its point estimate alone would flag
#: regions a right run weighed rightly.
MASS_Z = 2.0
#: A region's bridge needs at least this many effective draws inside it, so that its
#: standard error, which :data:`MASS_Z` scales, is known to ``VARIANCE_SE_MAX`` (an
#: error from ``n`` effective draws is itself off by about ``1 / sqrt(2 n)``): a bridge on
#: a handful of effective draws can put more than the whole mass in a region.
REGION_ESS_MIN = 1.0 / (2.0 * VARIANCE_SE_MAX**2)
#: A tempered variance this many times below every split chain's own (an sd half as
#: wide) is a miss: a chain's variance of 1,000 draws is off by a factor of 4 only far
#: out in its sampling error, and the law of total variance allows none below the
#: smallest (module docstring).
SPREAD_RATIO_MAX = 4.0


@dataclass(frozen=True)
class SplitDraws:
    """A refused split's chains, for the tempered run's verdict.

    Attributes
    ----------
    z
        Their draws in base coordinates, (chains, draws, D).
    mean, cov
        The metric: the search's Gaussian.
    draws
        The chains' parameter draws per name, ``(chains, draws, *shape)``.
    program, data
        The user's program and data (for bridge sampling).
    coords
        The base coordinates (:class:`~pemc_stan.core.coordinates.BaseCoordinates`).
    """

    z: NDArray[np.float64]
    mean: NDArray[np.float64]
    cov: NDArray[np.float64]
    draws: Mapping[str, NDArray[np.float64]]
    program: Any
    data: Mapping[str, Any] | None
    coords: Any

    def partition(self) -> DrawCells:
        """The points nearer each chain's thinned draws than any other chain's, labelled
        by chain (:func:`~pemc_stan.modes.grouping.draw_partition`).

        Raises
        ------
        ValueError
            If the metric's covariance is not positive definite.
        """
        return draw_partition(self.z, np.arange(self.z.shape[0]), self.mean, self.cov)

    def base(self, like: BaseDensity) -> BaseDensity:
        """``like`` (the search's base) widened, coordinate by coordinate, to the spread
        these chains saw within themselves: each marginal scale grows to the median over
        the chains of a chain's own variance where that is wider; the location and the
        correlations stay.

        The search's base sits on the modes it found; a chain also wanders through what
        no mode shows, such as the prior's slab under a change point's peak, which a
        tempered run from the search's base never reaches.  Within-chain spread, not the
        pooled draws: a chain stuck far away in a region of no mass would otherwise pull
        much of the base there.

        Raises
        ------
        ValueError
            If the chains' draws and ``like`` differ in dimension.
        """
        if self.z.shape[-1] != like.dim:
            raise ValueError(f"the chains have {self.z.shape[-1]} base coordinates and the "
                             f"base {like.dim}")
        cov = np.asarray(like.cov, dtype=float)
        within = np.median(np.var(self.z, axis=1), axis=0)  # (D,)
        scale = np.sqrt(np.maximum(1.0, within / np.diag(cov)))
        info = {**like.info, "widened": "the refused split's chains"}
        return replace(like, cov=cov * np.outer(scale, scale), info=info).validate()


def region_weights(partition: DrawCells, particles: NDArray[np.float64],
                   weights: NDArray[np.float64], n_chains: int) -> NDArray[np.float64]:
    """The total weight of the ``particles`` (P, D) in each chain's region of the
    ``partition`` (labelled by chain).

    Raises
    ------
    ValueError
        If ``particles`` and ``weights`` do not match.
    """
    if particles.shape[0] != weights.size:
        raise ValueError(f"{weights.size} weights for {particles.shape[0]} particles")
    return np.asarray(np.bincount(partition.labels(particles), weights=weights,
                                  minlength=n_chains), dtype=float)


def missed_regions(split: SplitDraws, particles: NDArray[np.float64],
                   weights: NDArray[np.float64], ess: float, log_z: float,
                   seed: int | None = None) -> list[tuple[int, float]]:
    """The split's chains whose regions (the points nearer their draws than any other
    chain's) the tempered run missed: under one effective draw of its weight where
    the region's mass, by bridge sampling on the chain's own draws in it and taken
    :data:`MASS_Z` of its standard errors low, is at least :data:`UNVISITED_SHARE_MIN`
    of the whole and should have drawn :data:`UNVISITED_EXPECTED_MIN` effective draws.
    ``(chain, share)`` pairs, the share at the bridge's estimate.

    Chains are judged one by one, not grouped by mode: a chain that crosses between
    two modes would join them.  Where several chains share a mode, each region is a
    part of it, and so is its tempered weight.

    Parameters
    ----------
    split
        The refused split's chains.
    particles, weights
        The tempered fit's particles in base coordinates (P, D) and their target
        weights.
    ess
        The tempered estimates' effective sample size.
    log_z
        The tempered run's ``log Z`` (of the mass it saw).
    seed
        Seed of the bridge's proposal draws.

    Raises
    ------
    Nothing: a region whose mass cannot be estimated is left out.
    """
    ok = np.isfinite(weights) & np.all(np.isfinite(particles), axis=1)
    w = np.where(ok, weights, 0.0)
    if not np.sum(w) > 0 or split.z.shape[0] < 2 or not np.isfinite(log_z):
        return []
    try:
        partition = split.partition()
    except ValueError:  # a metric that is not positive definite: nothing to weigh by
        return []
    held = region_weights(partition, particles[ok], w[ok] / np.sum(w), split.z.shape[0])
    n = float(ess) if np.isfinite(ess) and ess > 0 else 1.0 / float(np.sum((w / np.sum(w)) ** 2))
    out = []
    for c in [int(c) for c in np.argsort(held) if held[c] * n < 1.0][:MAX_BRIDGES]:
        est = _region_log_mass(split, partition, c, seed)
        if est is None or not np.isfinite(est.std_error):
            continue
        share = float(np.exp(est.log_z - logsumexp([est.log_z, log_z])))
        low_mass = est.log_z - MASS_Z * est.std_error
        low = float(np.exp(low_mass - logsumexp([low_mass, log_z])))
        if low >= UNVISITED_SHARE_MIN and low * n >= UNVISITED_EXPECTED_MIN:
            out.append((c, share))
    return out


def _region_log_mass(split: SplitDraws, partition: DrawCells, c: int, seed: int | None
                     ) -> EvidenceEstimate | None:
    """The mass of chain ``c``'s region of the ``partition``, by bridge sampling on its
    draws inside the region (None when it fails).

    Only the draws inside: those of a chain that samples the target are, restricted to
    the region, draws of the target restricted to it, which is what the bridge needs.
    Where other chains share the chain's mode its region is a slice of the mode, and
    with every draw the bridge would weigh the whole mode, and a right tempered run
    would be judged to have missed a thin slice.  A bridge whose
    error is not finite, or that rests on fewer than :data:`REGION_ESS_MIN` effective
    draws, counts as failed."""
    def region(values: Mapping[str, NDArray[np.float64]]) -> NDArray[np.bool_]:
        zg, _ = split.coords.forward(values, split.data)
        return np.asarray(partition.labels(zg) == c)

    inside = np.asarray(partition.labels(split.z[c]) == c)
    try:
        est = bridge_from_draws(split.program, split.data,
                                {k: np.asarray(v)[[c]][:, inside] for k, v in split.draws.items()},
                                name=getattr(split.program, "name", "model"), seed=seed,
                                region=region)
    except (ValueError, RuntimeError, PemcStanError) as exc:
        logger.info("the mass of a refused split's chain %d could not be estimated (%s)",
                    c + 1, failure_reason(exc))
        return None
    n_eff = float(est.diagnostics.get("n1_eff", np.inf))
    if n_eff < REGION_ESS_MIN:
        logger.info("the mass of a refused split's chain %d is not judged: its bridge rests "
                    "on %.1f effective draws (< %g)", c + 1, n_eff, REGION_ESS_MIN)
        return None
    return est if np.isfinite(est.log_z) else None


class ScoutsCheck:
    """The ``split_chains`` check of a tempered fit (an
    :attr:`~pemc_stan.sampling.fit.ExtendedFit.later_checks` entry) run after a split
    that was refused: :func:`missed_regions` of the draws of the estimate it reports
    (its cells' importance draws, else its particles: :func:`_reported_points`), their
    weights, ESS and ``log Z`` (the particles': the run's own, else its pilot's offset).
    It looks only when every other check passed: it is there to catch a wrong run that
    looks fine, and a suspect run is already flagged (with few effective draws, many
    chains' regions would need their masses estimated).  A class, not a closure, so that
    a fit still pickles.

    Parameters
    ----------
    split
        The refused split's chains.
    seed
        Seed of the bridges' proposal draws.
    """

    def __init__(self, split: SplitDraws, seed: int | None = None) -> None:
        self.split, self.seed = split, seed

    def __call__(self, fit: Any) -> tuple[str, Reason | None]:
        """``("split_chains", reason or None)`` for ``fit`` (computed once per fit)."""
        return _once(fit, "split_chains", lambda: self._reason(fit))

    def _reason(self, fit: Any) -> Reason | None:
        reported = _reported_points(fit)
        if reported is None:
            return None
        z, weights, ess, log_z = reported
        if z.ndim != 2 or z.shape[1] != self.split.z.shape[2]:
            return None
        found = missed_regions(self.split, z, weights, ess, log_z, self.seed)
        if not found:
            return None
        said = ", ".join(f"chain {c + 1} ({100 * share:.0f}% of the mass)"
                         for c, share in found)
        return Reason(
            "split_chains", "NUTS chains of the refused mode split stayed where the "
            f"tempered draws never went: {said}, by bridge sampling on the chain's "
            "draws; a mode the search missed is missing from these estimates",
            "search longer (raise num_paths), or start chains there (inits)")


def _reported_points(fit: Any) -> tuple[NDArray[np.float64], NDArray[np.float64], float,
                                         float] | None:
    """The draws of the estimate ``fit`` reports, in base coordinates, with their weights
    (summing to one), effective sample size and ``log Z``: its cells' importance draws
    when it reports them (their proposals reach where the search found mass, whether or
    not the chains went), else its particles; None without base coordinates."""
    from pemc_stan.sampling.checks import estimates_ess

    cells = getattr(fit, "cell_estimate", None)
    coords = None if cells is None else getattr(fit.result, "coordinates", None)
    if cells is not None and coords is not None and coords.blocks:
        columns = fit.parameter_columns()
        try:
            values = np.stack([np.asarray(cells.values[c], dtype=float) for c in columns],
                              axis=-1)
            z, _ = coords.forward(coordinate_draws(coords, values, columns, fit.data),
                                  fit.data)
            lu = np.asarray(cells.log_u, dtype=float)
            w = np.exp(lu - logsumexp(lu))
            return (np.asarray(z, dtype=float), w, float(1.0 / np.sum(w**2)),
                    float(cells.evidence().log_z))
        except (KeyError, ValueError) as exc:  # the run's particles judge instead
            logger.info("the cells' draws could not be placed (%s)", exc)
    z = fit.particle_coordinates()
    if z is None:
        return None
    return z, fit.target_weights().reshape(-1), estimates_ess(fit), _log_z(fit)


def _once(fit: Any, name: str, find: Callable[[], Reason | None]) -> tuple[str, Reason | None]:
    """``(name, reason or None)`` of a later check, computed once per fit and estimate
    (kept on it as ``_<name>`` with the cells' estimate it judged: the cells come after
    the run's first verdict) and only when every other check passed: these checks are
    there to catch a wrong run that looks fine (while ``find`` runs, the fit's own
    verdict sees this one as passed)."""
    attr = f"_{name}"
    judged = id(getattr(fit, "cell_estimate", None))
    kept = getattr(fit, attr, None)
    if kept is not None and kept[0] == judged:
        return kept[1]
    setattr(fit, attr, (judged, (name, None)))
    out = (name, find() if fit.check().ok else None)
    setattr(fit, attr, (judged, out))
    return out


def _log_z(fit: Any) -> float:
    """The tempered fit's ``log Z``: its own estimate, else its pilot's offset."""
    try:
        est = fit.run_log_z()
    except Exception:  # an estimator that cannot run here: fall back to the offset
        est = None
    if est is not None and np.isfinite(est.log_z):
        return float(est.log_z)
    for name in ("log_zeta", "log_scale"):
        value = getattr(fit, name, None)
        if value is not None and np.isfinite(value):
            return float(value)
    return float("nan")


def narrower_than_every_chain(split: SplitDraws, fit: Any) -> list[tuple[str, float, float]]:
    """The columns whose tempered variance (``fit``'s weighted estimate) is at least
    :data:`SPREAD_RATIO_MAX` times below every split chain's own: ``(column, tempered
    variance, smallest chain variance)``.

    Raises
    ------
    Nothing: a column the fit does not estimate is left out.
    """
    out = []
    for column, x in by_column(split.draws).items():
        if x.shape[0] < 2 or x.shape[1] < 2:
            continue
        smallest = float(np.min(np.var(x, axis=1)))
        try:
            var = variance_and_error(fit, column, float(fit.run_expectation(column).mean))[0]
        except (KeyError, ValueError):
            continue
        if np.isfinite(var) and smallest > SPREAD_RATIO_MAX * max(var, 0.0):
            out.append((column, var, smallest))
    return out


class SpreadCheck:
    """The ``split_spread`` check of a tempered fit run after a refused split
    (:func:`narrower_than_every_chain`), only when every other check passed, as
    :class:`ScoutsCheck`.  A class, not a closure, so that a fit still pickles.

    Parameters
    ----------
    split
        The refused split's chains.
    """

    def __init__(self, split: SplitDraws) -> None:
        self.split = split

    def __call__(self, fit: Any) -> tuple[str, Reason | None]:
        """``("split_spread", reason or None)`` for ``fit`` (computed once per fit)."""
        return _once(fit, "split_spread", lambda: self._reason(fit))

    def _reason(self, fit: Any) -> Reason | None:
        found = narrower_than_every_chain(self.split, fit)
        if not found:
            return None
        said = ", ".join(f"{c} (variance {v:.3g}; every chain at least {w:.3g})"
                         for c, v, w in found[:3])
        return Reason(
            "split_spread", "the tempered draws spread far less than each NUTS chain of the "
            f"refused mode split: {said}; the tempered run missed a wide part of the target "
            "(a slab under a peak, a heavy tail)",
            "run the mode split longer (iter_sampling, budget) so that it is accepted, or "
            "reparameterise; the tempered estimates leave that part out")
