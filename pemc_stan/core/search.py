"""The search for modes: its rules (the constants below), its stopping rule
(:func:`unseen_share`) and its record (:class:`ModeSearch`).

The pilot (:class:`~pemc_stan.modes.pilot.BasePilot`) runs the search; the verdict, the
mode split and the reports read its record.  Nothing here imports the rest of the package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["DENSITY_SPLITS", "MAX_PATHS_FACTOR", "MIN_ROUND_SECONDS", "NEW_MODE_SHARE",
           "RESTART_DRAWS", "RESTART_ESS_FACTOR", "RESTART_PATHS", "RESTART_ROUNDS",
           "RESTART_SEED_OFFSET", "RESTART_SPREADS", "RESTART_VALUES", "ROUND_TIME_FACTOR",
           "SEARCH_DRAWS_MIN", "SEARCH_RADII", "UNSEEN_SHARE_MAX", "ModeSearch",
           "unseen_share"]

#: Radii of the pilot's search for modes, in turn: each round starts its Pathfinder
#: paths uniformly in ``(-R, R)`` on the unconstrained scale (CmdStan's ``init=R``;
#: 2 is where Stan starts its chains).  Each radius multiplies the last by 4, so
#: the rounds' starting boxes differ in scale and not only in luck.  After one round
#: at each radius the cycle repeats, widest first, with twice the paths per round while
#: the search may still be missing modes (:func:`unseen_share`).
SEARCH_RADII = (2.0, 8.0, 32.0)
#: A mode counts in the search (for its stopping rule and the verdict) when it holds at
#: least this share of the mass found: the far local optima of a light-tailed density,
#: with mass exp(-50) next to the modes, do not keep the search going.
NEW_MODE_SHARE = 1e-3
#: The search stops once the estimated share of starts that would lead to a mode not yet
#: seen (:func:`unseen_share`) is at most this.
UNSEEN_SHARE_MAX = 0.02
#: ... or once it has run this many times ``num_paths`` paths,
MAX_PATHS_FACTOR = 16
#: ... or once a round's paths each take more than this many times the first round's
#: wall time per path (a round is given at least :data:`MIN_ROUND_SECONDS`): starts
#: far out can put an ODE solver where the model is slow.  Per round and per path, never
#: on the total, so that what is found does not depend on the machine
#: (docs/decisions.md).
ROUND_TIME_FACTOR = 8.0
MIN_ROUND_SECONDS = 5.0
#: The fewest draws of a Gaussian that weighs a peak beyond its mode's Gaussian
#: (:mod:`pemc_stan.modes.peaks`).  Every Pathfinder round draws ``draws`` a path: the
#: later rounds drawing a tenth of them cut the search by a third, and changed a
#: connected pair of modes (a banana beside a Student-t) from right to wrong with an ok
#: verdict (docs/decisions.md).
SEARCH_DRAWS_MIN = 50
#: A density evaluation that fails (CmdStan's ``log_prob`` fails the whole call for one
#: bad point) is retried on halves, this many times deep, so that only the points near
#: the failure are left unevaluated (at most ``2**(DENSITY_SPLITS + 1) - 1`` calls).
DENSITY_SPLITS = 4
#: Restarts near the modes found (:meth:`~pemc_stan.modes.pilot.BasePilot._restarts`):
#: this many paths in the first round, doubled each round ...
RESTART_PATHS = 16
#: ... for at most this many rounds (240 restarts: with many modes of similar mass,
#: fewer restarts often still see one of them only once).
RESTART_ROUNDS = 4
#: The restarts start from the found modes' covering Gaussian with its standard
#: deviations multiplied by these in turn: 1 puts starts among the modes found (where a
#: mode between them has its small basin), 2 beyond them.
RESTART_SPREADS = (1.0, 2.0)
#: Offset of the restarts' seed from the search's.
RESTART_SEED_OFFSET = 2718281
#: The restarts' starts are resampled, by their importance weights, from this many draws
#: of the covering Gaussians (at most :data:`RESTART_VALUES` numbers in all) ...
RESTART_DRAWS = 20_000
RESTART_VALUES = 2_000_000
#: ... when those weights have an effective sample size of at least this many times the
#: first round's restarts (else the raw draws are the starts).
RESTART_ESS_FACTOR = 4


def unseen_share(paths_per_mode: NDArray[np.intp] | list[int], paths: int) -> float:
    """Estimated chance that one more path would find a mode not yet seen.

    The Good-Turing estimate ``f1 / n`` (``f1``: modes found by exactly one of the
    ``n`` paths; a basin of start-space share ``q`` is hit by a path with probability
    ``q``), with one more singleton counted: a search must see every mode at least
    twice *and* have run about ``1 / UNSEEN_SHARE_MAX`` paths before it stops (72: two
    cycles of radii).  (With
    f1 alone, a round whose paths all ended at one mode would stop the search, though
    L-BFGS from far out can overshoot into a wide mode's basin past another mode.)

    Raises
    ------
    Nothing.
    """
    counts = np.asarray(paths_per_mode, dtype=int)
    if paths <= 0:
        return 1.0
    return min(1.0, (int(np.sum(counts == 1)) + 1) / paths)


@dataclass(frozen=True)
class ModeSearch:
    """How widely the pilot searched for modes, and what it found.

    Attributes
    ----------
    radii
        The radii whose rounds ran (each round's paths start uniformly in ``(-R, R)``
        on the unconstrained scale).
    modes
        Distinct modes found (paths merged within 3 standard deviations).
    major_modes
        Modes holding at least :data:`NEW_MODE_SHARE` of the mass found.
    paths
        Pathfinder paths run, over all rounds.
    stopped
        Why the search stopped: the unseen share reached, the path or time limit,
        or the failure of a round.
    mode_shares
        Each mode's share of the mass found (the importance-sampling masses).
    centres
        (K, D) centres in base coordinates of the modes holding at least
        :data:`NEW_MODE_SHARE` of the mass (raw parameter columns without base
        coordinates), in the order of ``major_shares``.
    major_shares
        Those modes' shares of the mass found.
    base
        The Gaussian moment-matched to the modes found (eq 25), whose metric decides
        which found mode a point is nearest (None without base coordinates).
    unseen
        The estimated chance that one more path would have found a mode not yet seen
        (:func:`unseen_share`) when the search stopped.
    seconds_per_path
        The first round's wall time per path, which bounds later rounds' time
        (:func:`~pemc_stan.modes.pilot._round_timeout`; NaN when unknown).
    mass_scatter
        How far paths' estimates of one mode's log mass fall apart
        (:func:`~pemc_stan.backend.pathfinder.mass_scatter`): how much a mode's share may
        be underrated (:func:`~pemc_stan.modes.pilot.defensive_groups`).
    covariances
        (K, D, D) covariances of the modes in ``centres``, from the path each centre comes
        from (:func:`~pemc_stan.backend.pathfinder.mode_covariances`); None where the
        search did not keep them.  Not part of :meth:`as_dict`.
    """

    radii: tuple[float, ...]
    modes: int
    major_modes: int
    paths: int
    stopped: str
    mode_shares: tuple[float, ...] = ()
    centres: Any = field(default=None, compare=False, repr=False)
    major_shares: tuple[float, ...] = ()
    base: Any = field(default=None, compare=False, repr=False)
    unseen: float = float("nan")
    seconds_per_path: float = field(default=float("nan"), compare=False)
    mass_scatter: float = field(default=0.0, compare=False)
    covariances: Any = field(default=None, compare=False, repr=False)

    @property
    def radius(self) -> float:
        """The largest radius searched."""
        return max(self.radii) if self.radii else float("nan")

    def describe(self) -> str:
        """One line for a summary: the modes found and how widely the pilot searched."""
        return (f"{self.modes} mode(s) found ({self.major_modes} with >= "
                f"{100 * NEW_MODE_SHARE:g}% of the mass) by {self.paths} Pathfinder paths "
                f"started within radius {self.radius:g} of the origin (unconstrained); "
                f"search stopped: {self.stopped}")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (for diagnostics, ``estimates.json`` and InferenceData)."""
        return {"search_radius": self.radius, "search_radii": list(self.radii),
                "modes_found": self.modes, "major_modes_found": self.major_modes,
                "search_paths": self.paths, "search_stopped": self.stopped,
                "mode_shares": list(self.mode_shares), "search_unseen_share": self.unseen}
