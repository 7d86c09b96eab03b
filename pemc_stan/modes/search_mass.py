"""The search's own Gaussians weigh the mass the split's chains found.

Pathfinder fits a Gaussian at each mode it finds.  Importance sampling from those
Gaussians estimates ``Z`` without bias wherever they cover the target, and never sees
more mass than there is: so when it sees significantly more than the split's groups
hold, the chains missed mass where the search was (a narrow spike of high mass inside
a wide slab, one maximum: NUTS adapted in the slab never enters the spike, and its
bridge estimate weighs the slab alone).  Where the Gaussians fit badly their weights
are uneven and the estimate falls short, or one heavy weight carries it and its own
standard error is as large: neither raises the alarm.

The draws cost :data:`SEARCH_MASS_DRAWS` density evaluations, next to a run's
hundreds of thousands of gradients.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.search import ModeSearch
from pemc_stan.errors import PemcStanError
from pemc_stan.estimators.mixture import unexplained_mass
from pemc_stan.modes.wide import importance_log_weights, mixture_log_density

__all__ = ["SEARCH_MASS_DRAWS", "SEARCH_MASS_SEED_OFFSET", "SearchMass", "search_mass"]

logger = logging.getLogger(__name__)

#: Draws from the search's Gaussians (a density evaluation each).
SEARCH_MASS_DRAWS = 4000
#: Offset of their seed from the run's.
SEARCH_MASS_SEED_OFFSET = 49979687


@dataclass(frozen=True)
class SearchMass:
    """What importance sampling from the search's Gaussians saw beside the groups' mass.

    Attributes
    ----------
    excess, z
        The mass it sees beyond the groups', as a share of theirs, and in standard
        errors (:func:`~pemc_stan.estimators.mixture.unexplained_mass`).
    mode
        The search's mode (index into its centres) whose Gaussian's draws carry the
        most weight.
    centre
        That mode's centre in the user's parameters (constrained values by name).
    """

    excess: float
    z: float
    mode: int
    centre: Mapping[str, Any]

    def where(self, limit: int = 3) -> str:
        """The centre, a few values: ``x[1] = 0.0012, x[2] = -0.0031, ...``."""
        values: list[str] = []
        for name, value in self.centre.items():
            flat = np.asarray(value, dtype=float).reshape(-1)
            for i, v in enumerate(flat):
                values.append(f"{name}[{i + 1}] = {v:.3g}" if flat.size > 1 or np.ndim(value)
                              else f"{name} = {v:.3g}")
        more = ", ..." if len(values) > limit else ""
        return ", ".join(values[:limit]) + more


def _gaussians(search: ModeSearch) -> tuple[list[BaseDensity], NDArray[np.float64]]:
    """The search's mode Gaussians (its kept covariances, else the covering base's)
    and their log weights (the search's shares)."""
    centres = np.asarray(search.centres, dtype=float)
    cov = np.asarray(search.base.cov, dtype=float)
    kept = search.covariances
    parts = [BaseDensity(c, np.asarray(kept[k], dtype=float) if kept is not None else cov,
                         "dense") for k, c in enumerate(centres)]
    shares = np.asarray(search.major_shares, dtype=float)
    if shares.size != len(parts) or not np.all(shares > 0):
        shares = np.ones(len(parts))
    return parts, np.log(shares / np.sum(shares))


def search_mass(coords: Any, search: ModeSearch, evaluator: Any,
                data: Mapping[str, Any] | None, log_z: float, std_error: float,
                seed: int | None, n: int = SEARCH_MASS_DRAWS) -> SearchMass | None:
    """Importance sampling from the search's mode Gaussians against the groups' ``log Z``
    (``std_error`` its standard error).  None without a search Gaussian, a finite
    ``log Z``, or draws the density can be evaluated at.

    Parameters
    ----------
    coords
        The base coordinates of the parameters.
    search
        The pilot's search (its centres, covariances, shares and base).
    evaluator
        ``log_density(draws)`` of the target with every constant.
    data
        The model's data.
    log_z, std_error
        The groups' estimate.
    seed
        The run's seed.
    n
        Draws.

    Raises
    ------
    Nothing.
    """
    if search.centres is None or search.base is None or not np.isfinite(log_z) \
            or not np.isfinite(std_error):
        return None
    rng = np.random.default_rng(None if seed is None else seed + SEARCH_MASS_SEED_OFFSET)
    try:
        parts, log_w = _gaussians(search)
        counts = rng.multinomial(n, np.exp(log_w))
        z = np.concatenate([q.sample_z(int(m), rng) for q, m in zip(parts, counts, strict=True)])
        owner = np.repeat(np.arange(len(parts)), counts)
        lw = importance_log_weights(coords, evaluator, data, z,
                                    mixture_log_density(parts, log_w, z))
        if np.any(lw == np.inf):  # a density that diverges: no finite comparison
            raise ValueError(f"the density is +inf at {int(np.sum(lw == np.inf))} draw(s)")
        excess, zscore = unexplained_mass(lw, log_z, std_error)
        heaviest = int(owner[int(np.argmax(lw))])
        centre = coords.inverse(np.asarray(search.centres, dtype=float)[heaviest:heaviest + 1],
                                data)
    except (ValueError, RuntimeError, PemcStanError, np.linalg.LinAlgError) as exc:
        logger.info("importance sampling from the search's Gaussians failed: %s", exc)
        return None
    if not np.isfinite(zscore):
        return None
    return SearchMass(float(excess), float(zscore), heaviest,
                      {k: np.asarray(v)[0] for k, v in centre.items()})
