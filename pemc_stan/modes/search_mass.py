"""The search's own Gaussians weigh the mass the split's chains found.

Pathfinder fits a Gaussian at each mode it finds.  Importance sampling from those
Gaussians estimates ``Z`` without bias wherever they cover the target, and never sees
more mass than there is: so when it sees significantly more than the split's groups
hold, the chains missed mass where the search was (a narrow spike of high mass inside
a wide slab, one maximum: NUTS adapted in the slab never enters the spike, and its
bridge estimate weighs the slab alone).  Where the Gaussians fit badly their weights
are uneven and the estimate falls short, or one heavy weight carries it and its own
standard error is as large: neither raises the alarm.

A spike holding no more than the slab leaves the whole mass unremarkable (the chains
found the slab's half, the search's Gaussian sees the spike's), so the mass is also
compared region by region: the share of ``Z`` the importance draws put in the central
:data:`REGION_SHARE` of each mode's Gaussian against the share of the chains' weighted
draws there.

The draws cost :data:`SEARCH_MASS_DRAWS` density evaluations, next to a run's
hundreds of thousands of gradients.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.search import ModeSearch
from pemc_stan.errors import PemcStanError
from pemc_stan.estimators.convergence import ess_bulk
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.estimators.mixture import importance_error, region_shares, unexplained_mass
from pemc_stan.modes.wide import (
    WIDE_EXCESS_Z,
    WideDrawsFailed,
    importance_log_weights,
    in_central_region,
    mixture_log_density,
    reported_log_normaliser,
)
from pemc_stan.output.diagnostics import Reason, point_text

__all__ = ["REGION_SHARE", "REGION_SHORT_MIN", "SEARCH_MASS_DRAWS", "SEARCH_MASS_SEED_OFFSET",
           "SHRINKAGES", "SearchDraws", "SearchMass", "SearchMassCheck", "compare_mass",
           "positive_definite", "search_draws", "search_mass"]

logger = logging.getLogger(__name__)

#: Draws from the search's Gaussians (a density evaluation each).
SEARCH_MASS_DRAWS = 4000
#: Offset of their seed from the run's.
SEARCH_MASS_SEED_OFFSET = 49979687
#: A mode's region: the central share of its Gaussian (a ball of its Mahalanobis distance).
REGION_SHARE = 0.99
#: The chains' share of ``Z`` in a region may fall short of the importance draws' by less
#: than this (beside the standard errors): the bridge masses' own bias, a few percent,
#: must not read as a missed spike.
REGION_SHORT_MIN = 0.1


@dataclass(frozen=True)
class SearchMass:
    """What importance sampling from the search's Gaussians saw beside the groups' mass.

    Attributes
    ----------
    excess, z
        The mass it sees beyond the groups', as a share of theirs, and in standard
        errors (:func:`~pemc_stan.estimators.mixture.unexplained_mass`).
    mode
        The search's mode (index into its centres) whose region the chains fall shortest
        of, else the one whose Gaussian's draws carry the most weight.
    centre
        That mode's centre in the user's parameters (constrained values by name).
    region_seen, region_chains, region_z
        The share of ``Z`` in that mode's region by the importance draws and by the
        chains' weighted draws, and the first's excess in standard errors.
    """

    excess: float
    z: float
    mode: int
    centre: Mapping[str, Any]
    region_seen: float = float("nan")
    region_chains: float = float("nan")
    region_z: float = float("nan")

    def missed(self, z_max: float) -> str:
        """``"whole"`` when the whole mass exceeds the groups' by more than ``z_max``
        standard errors, ``"region"`` when the mode's region holds :data:`REGION_SHORT_MIN`
        more of ``Z`` than the chains gave it and ``z_max`` standard errors more, else
        ``""``."""
        if self.z > z_max:
            return "whole"
        if self.region_z > z_max and self.region_seen - self.region_chains > REGION_SHORT_MIN:
            return "region"
        return ""

    def where(self, limit: int = 3) -> str:
        """The centre, a few values: ``x[1] = 0.0012, x[2] = -0.0031, ...``."""
        return point_text(self.centre, limit)


def _gaussians(search: ModeSearch) -> tuple[list[BaseDensity], NDArray[np.float64]]:
    """The search's mode Gaussians (its kept covariances, else the covering base's: a
    search widened by the split's own re-search has centres without them) and their log
    weights (the search's shares)."""
    centres = np.asarray(search.centres, dtype=float)
    cov = np.asarray(search.base.cov, dtype=float)
    kept = [] if search.covariances is None else list(search.covariances)
    parts = [BaseDensity(c, positive_definite(np.asarray(kept[k], dtype=float)
                                              if k < len(kept) else cov), "dense")
             for k, c in enumerate(centres)]
    shares = np.asarray(search.major_shares, dtype=float)
    if shares.size != len(parts) or not np.all(shares > 0):
        shares = np.ones(len(parts))
    return parts, np.log(shares / np.sum(shares))


#: Shrinkages towards its diagonal tried, in turn, on a covariance that is not positive
#: definite (:func:`positive_definite`).
SHRINKAGES = (0.01, 0.1, 0.5, 1.0)


def positive_definite(cov: NDArray[np.float64]) -> NDArray[np.float64]:
    """``cov``, or where its Cholesky factor fails ``(1 - s) cov + s diag(cov)`` for the
    first shrinkage ``s`` of :data:`SHRINKAGES` that has one.  A mode's covariance from
    one path's draws is singular when the path drew no more draws than the model has
    dimensions (1,000 in 1,000); its Gaussian must still be drawn from.

    Raises
    ------
    Nothing: a covariance no shrinkage repairs (a zero variance) is returned diagonal.
    """
    cov = np.atleast_2d(np.asarray(cov, dtype=float))
    diagonal = np.diag(np.diag(cov))
    candidate = cov
    for s in (0.0, *SHRINKAGES):
        candidate = (1.0 - s) * cov + s * diagonal
        try:
            np.linalg.cholesky(candidate)
        except np.linalg.LinAlgError:
            continue
        return candidate
    return candidate


def _regions(parts: list[BaseDensity], z: NDArray[np.float64],
             lw: NDArray[np.float64], log_z: float, std_error: float,
             chains: NDArray[np.float64], weights: NDArray[np.float64]
             ) -> list[tuple[float, float, float]]:
    """Each mode's ``(share of Z in its region by the importance draws, by the chains'
    draws, the first's excess in standard errors)``; ``chains`` (chains, draws, D) with
    ``weights`` (chains, draws) summing to one."""
    out = []
    for q in parts:
        inside = in_central_region(q.mean, q.cov, z, REGION_SHARE)
        seen, own = importance_error(np.where(inside, lw, -np.inf), log_z)
        flat = chains.reshape(-1, chains.shape[-1])
        hit = in_central_region(q.mean, q.cov, flat, REGION_SHARE).reshape(
            weights.shape).astype(float)
        share = float(np.sum(weights * hit))
        se = float(np.sqrt(own**2 + (seen * std_error) ** 2 + _share_variance(hit, weights)))
        out.append((seen, share, (seen - share) / se if se > 0 else float("inf")))
    return out


def _share_variance(hit: NDArray[np.float64], weights: NDArray[np.float64]) -> float:
    """The variance of the weighted share of draws in a region: each chain's indicator
    by its effective draws (a region no draw entered counts as one draw's share)."""
    total = 0.0
    for c in range(hit.shape[0]):
        h, w = hit[c], float(np.sum(weights[c]))
        share = max(float(np.mean(h)), 1.0 / h.size)
        ess = h.size
        if np.ptp(h) > 0:
            ess = max(ess_bulk(h[None, :]), 1.0)
        total += w * w * share * (1.0 - share) / ess
    return total


@dataclass(frozen=True, eq=False)
class SearchDraws:
    """Importance draws from the search's mode Gaussians (:func:`search_draws`): the
    Gaussians, the draws in base coordinates, their log weights to the target, the
    Gaussian each came from, and each mode's centre in the user's parameters."""

    parts: list[BaseDensity]
    z: NDArray[np.float64]
    lw: NDArray[np.float64]
    owner: NDArray[np.intp]
    centres: Sequence[Mapping[str, Any]]


def search_draws(coords: Any, search: ModeSearch, evaluator: Any,
                 data: Mapping[str, Any] | None, seed: int | None,
                 n: int = SEARCH_MASS_DRAWS) -> SearchDraws | None:
    """``n`` draws from the search's mode Gaussians, weighed by the target (``evaluator``:
    ``log_density(draws)`` with every constant); None without a search Gaussian.

    Raises
    ------
    WideDrawsFailed
        When the density cannot be evaluated or diverges at a draw (no finite comparison).
    """
    if search.centres is None or search.base is None:
        return None
    rng = np.random.default_rng(None if seed is None else seed + SEARCH_MASS_SEED_OFFSET)
    try:
        parts, log_w = _gaussians(search)
        counts = rng.multinomial(n, np.exp(log_w))
        z = np.concatenate([q.sample_z(int(m), rng) for q, m in zip(parts, counts, strict=True)])
        lw = importance_log_weights(coords, evaluator, data, z,
                                    mixture_log_density(parts, log_w, z))
        values = coords.inverse(np.asarray(search.centres, dtype=float), data)
    except (ValueError, RuntimeError, PemcStanError, np.linalg.LinAlgError) as exc:
        raise WideDrawsFailed(f"the density could not be evaluated at them ({exc})") from exc
    if np.any(lw == np.inf):  # a density that diverges: no finite comparison
        raise WideDrawsFailed(f"the density is +inf at {int(np.sum(lw == np.inf))} of {n} "
                              "points inside its support")
    centres = [{k: np.asarray(v)[i] for k, v in values.items()} for i in range(len(parts))]
    return SearchDraws(parts, z, lw, np.repeat(np.arange(len(parts)), counts), centres)


def compare_mass(draws: SearchDraws, log_z: float, std_error: float,
                 chains: NDArray[np.float64] | None = None,
                 weights: NDArray[np.float64] | None = None) -> SearchMass | None:
    """The search's importance draws against an estimate ``log Z`` (``std_error`` its
    standard error) and, with ``chains`` (chains, draws, D; base coordinates) and their
    ``weights`` (chains, draws; summing to one), region by region; None without a finite
    ``log Z`` or comparison.

    Raises
    ------
    Nothing.
    """
    if not (np.isfinite(log_z) and np.isfinite(std_error)):
        return None
    try:
        excess, zscore = unexplained_mass(draws.lw, log_z, std_error)
        mode = int(draws.owner[int(np.argmax(draws.lw))])
        regions = [] if chains is None or weights is None else _regions(
            draws.parts, draws.z, draws.lw, log_z, std_error, chains, weights)
    except (ValueError, np.linalg.LinAlgError) as exc:
        logger.info("the search's importance draws could not be compared: %s", exc)
        return None
    short = [k for k, (seen, share, _) in enumerate(regions) if seen - share > REGION_SHORT_MIN]
    if short:
        mode = max(short, key=lambda k: regions[k][2])
    if not np.isfinite(zscore):
        return None
    region = regions[mode] if regions else (float("nan"),) * 3
    return SearchMass(float(excess), float(zscore), mode, draws.centres[mode], *region)


def search_mass(coords: Any, search: ModeSearch, evaluator: Any,
                data: Mapping[str, Any] | None, log_z: float, std_error: float,
                seed: int | None, n: int = SEARCH_MASS_DRAWS,
                chains: NDArray[np.float64] | None = None,
                weights: NDArray[np.float64] | None = None) -> SearchMass | None:
    """Importance sampling from the search's mode Gaussians (:func:`search_draws`) against
    the groups' ``log Z`` (:func:`compare_mass`).  None without a search Gaussian or a
    finite ``log Z``.

    Raises
    ------
    WideDrawsFailed
        As :func:`search_draws`.
    """
    if not (np.isfinite(log_z) and np.isfinite(std_error)):
        return None
    drawn = search_draws(coords, search, evaluator, data, seed, n)
    return None if drawn is None else compare_mass(drawn, log_z, std_error, chains, weights)


class SearchMassCheck:
    """The ``search_mass`` reason of a tempered fit whose own estimate stands (its cells'
    proposals hold the search's Gaussians, so their estimate is not judged here): the
    search's importance draws see more mass than the run reports, in all or in one mode's
    region (:meth:`SearchMass.missed`).  A tempered run whose base sits on a spike can
    leave the spike at small beta and report the slab's draws with the spike's mass: no
    check of the run against itself sees it.  It needs the run's log normaliser: its own
    (CT's), else ``log_normaliser``, one made for it (PE's: bridge sampling on its
    resampled draws, which weighs what the draws hold).  A class holding the draws, not
    the density, so that a fit still pickles.
    """

    def __init__(self, draws: SearchDraws,
                 log_normaliser: EvidenceEstimate | None = None) -> None:
        self.draws = draws
        self.log_normaliser = log_normaliser

    def mode_shares(self, fit: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
        """Each of ``fit``'s search modes' share of the mass these draws see in its cell
        (the nearest centre in the search's metric, the cells ``unvisited_modes`` weighs
        the run's draws in) and its standard error
        (:func:`~pemc_stan.estimators.mixture.region_shares`): the check of the search's
        Pathfinder shares.  None without the search's centres."""
        search = getattr(fit, "search", None)
        if search is None or search.centres is None or search.base is None:
            return None
        centres = np.asarray(search.centres, dtype=float)
        labels = search.base.nearest_centre(self.draws.z, centres)
        return region_shares(self.draws.lw, labels, len(centres))

    def __call__(self, fit: Any) -> tuple[str, Reason | None]:
        """``("search_mass", reason or None)``."""
        if getattr(fit, "cell_estimate", None) is not None:
            return "search_mass", None
        run = reported_log_normaliser(fit) or self.log_normaliser
        z = fit.particle_coordinates()
        if run is None or z is None:
            return "search_mass", None
        w = np.asarray(fit.target_weights(), dtype=float)
        chains = np.asarray(z, dtype=float).reshape(w.shape[0], -1, z.shape[-1])
        seen = compare_mass(self.draws, run.log_z, run.std_error, chains,
                            w.reshape(w.shape[0], -1))
        how = "" if seen is None else seen.missed(WIDE_EXCESS_Z)
        if seen is None or not how:
            return "search_mass", None
        if how == "whole":
            what = (f"sees {1 + seen.excess:.3g} times the mass the run reports ({seen.z:.1f} "
                    "standard errors more)")
        else:
            what = (f"puts {100 * seen.region_seen:.0f}% of the run's mass in its central "
                    f"region, where the run's weighted draws hold "
                    f"{100 * seen.region_chains:.1f}% ({seen.region_z:.1f} standard errors "
                    "less)")
        return "search_mass", Reason(
            "search_mass", f"importance sampling from the search's Gaussian at mode "
            f"{seen.mode + 1} ({seen.where()}) {what}: the tempered chains did not weigh "
            "that region (a narrow region of high mass beside a wide one: a phase "
            "transition)", "nothing mechanical: the draws and log Z leave that region out "
            "or misweigh it; report the two regions apart (a narrower prior, or a model "
            "of each) or run longer chains (iter_sampling) to see whether the weights settle")
