"""Pilot fits on the original model: a Gaussian base density and an estimate of ``log Z``.

Continuous tempering needs a normalised base density ``b`` and ``log zeta``
(Graham & Storkey 2017, section 6); pseudo-extended sampling tempered towards a
base needs the same two things (its offset ``log Z^``).  :class:`BasePilot`
fits them with fallbacks, so that a pilot never stops a model NUTS can run:

1. multi-path Pathfinder (no PSIS resampling), run from initial points spread over
   growing radii (:data:`~pemc_stan.core.search.SEARCH_RADII`: CmdStan draws each
   path's start uniformly in ``(-R, R)`` on the unconstrained scale, ``R = 2`` by
   default, and a path finds only a mode whose basin reaches its start) until the share
   of starts that would find a mode not yet seen is small
   (:func:`~pemc_stan.core.search.unseen_share`;
   :class:`~pemc_stan.core.search.ModeSearch` records how far it went); paths are
   grouped by mode
   (:func:`pemc_stan.backend.pathfinder.group_paths`), each mode's draws
   moment-matched and the modes combined as the moment-matched mixture of
   eq 25, weighted by their importance-sampling masses; ``log Z`` is the sum of
   the modes' importance-sampling masses;
2. when it fails (or another first method is asked for), ADVI (mean-field),
   Laplace at the mode, then a short plain-NUTS run (which works wherever
   NUTS does) give the base; ``log Z`` is then estimated by importance
   sampling from the base with every constant of the density (CmdStan's
   ``log_p__`` of these methods drops them).

Every failure is recorded in :attr:`BasePilot.notes` as ``(name, message,
remedy)``, which the fits show in their diagnostics.
"""

from __future__ import annotations

import logging
import math
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pemc_stan.backend.console import (
    condense,
    failure_reason,
    is_cmdstan_failure,
    message_shapes,
    run_error,
)
from pemc_stan.backend.pathfinder import (
    LogDensity,
    ModeGroup,
    group_paths,
    log_importance_weights,
    mass_scatter,
    mode_centres,
    mode_covariances,
    path_labels,
    run_paths,
)
from pemc_stan.backend.progress import stage
from pemc_stan.core.base_density import BaseDensity, moment_match
from pemc_stan.core.coordinates import BaseCoordinates, coordinate_draws
from pemc_stan.core.search import (
    DENSITY_SPLITS,
    MAX_PATHS_FACTOR,
    MIN_ROUND_SECONDS,
    NEW_MODE_SHARE,
    RESTART_DRAWS,
    RESTART_ESS_FACTOR,
    RESTART_PATHS,
    RESTART_ROUNDS,
    RESTART_SEED_OFFSET,
    RESTART_SPREADS,
    RESTART_VALUES,
    ROUND_TIME_FACTOR,
    SEARCH_RADII,
    UNSEEN_SHARE_MAX,
    ModeSearch,
    unseen_share,
)
from pemc_stan.errors import CmdStanRunError, UnevaluableDensityError
from pemc_stan.modes.peaks import probe_peaks
from pemc_stan.modes.screen import SCREEN_SEED_OFFSET, screen_starts
from pemc_stan.numeric import logsumexp
from pemc_stan.stan.inputs import non_finite_entries

logger = logging.getLogger(__name__)

__all__ = ["APPROXIMATIONS", "BasePilot", "log_z_from_importance_weights"]

#: The approximations tried, in order, after Pathfinder.
APPROXIMATIONS = ("advi", "laplace", "nuts")
#: Draws of the search whose ``lp__`` is kept (:attr:`BasePilot.lp_reference`).
LP_REFERENCE_DRAWS = 8
#: The share of the pilot's base spread evenly over the modes holding
#: :data:`NEW_MODE_SHARE` of the mass (:func:`defensive_groups`).
DEFENSIVE_SHARE = 0.5


def _round_timeout(per_path: float, n_paths: int) -> float:
    """Seconds a later round of ``n_paths`` paths may take: :data:`ROUND_TIME_FACTOR`
    times the first round's time per path ``per_path`` for each of its paths, at least
    :data:`MIN_ROUND_SECONDS`.

    Raises
    ------
    Nothing.
    """
    return max(MIN_ROUND_SECONDS, ROUND_TIME_FACTOR * per_path * n_paths)


def _shares(groups: list[ModeGroup]) -> NDArray[np.float64]:
    """Each mode's share of the mass of all (from their log masses)."""
    lm = np.array([m for _, m in groups], dtype=float)
    return np.asarray(np.exp(lm - logsumexp(lm)), dtype=float)


def defensive_groups(groups: list[ModeGroup], share: float = DEFENSIVE_SHARE,
                     scatter: float = 0.0) -> list[ModeGroup]:
    """The modes with masses ``(1 - share) p_k + share / K`` over the ``K`` modes that
    may hold :data:`NEW_MODE_SHARE` of the mass: those whose log mass, raised by
    ``scatter`` (:func:`mass_scatter`), reaches it.

    A mode's mass comes from importance sampling with its own local approximation,
    which can be off by orders of magnitude between modes.  A base moment-matched to
    those masses
    stays near the overrated modes, and a tempered chain, which changes mode through
    the base, never reaches the others; with half the weight spread evenly (defensive
    importance sampling) the base covers every major mode whatever its estimate.  A
    mode found by few paths can be rated far below its mass, as paths' estimates of
    one mode scatter by many nats, so it counts while that scatter could lift it to the
    share.  The other modes keep ``(1 - share) p_k``.

    Raises
    ------
    Nothing.
    """
    p = _shares(groups)
    with np.errstate(divide="ignore"):
        major = np.log(p) + max(scatter, 0.0) >= np.log(NEW_MODE_SHARE)
    q = (1.0 - share) * p + share * major / max(int(np.sum(major)), 1)
    with np.errstate(divide="ignore"):
        return [(idx, float(np.log(qk))) for (idx, _), qk in zip(groups, q, strict=True)]


#: A grouping of the search's rounds by mode: (modes, log Z, the number of rounds grouped).
Grouping = tuple[list[ModeGroup], float, int]


def _group(zs: list[NDArray[np.float64]], lws: list[NDArray[np.float64]],
           labels: list[NDArray[np.intp]], log_density: LogDensity | None
           ) -> tuple[list[ModeGroup], float]:
    """The search's rounds grouped by mode (:func:`group_paths`)."""
    return group_paths(np.concatenate(zs), np.concatenate(lws), np.concatenate(labels),
                       min_draws=2, log_density=log_density)


def _paths_per_major_mode(groups: list[ModeGroup], labels: NDArray[np.intp]) -> list[int]:
    """How many paths found each mode holding :data:`NEW_MODE_SHARE` of the mass."""
    shares = _shares(groups)
    return [int(np.unique(labels[idx]).size) for (idx, _), share in zip(groups, shares,
                                                                        strict=True)
            if share >= NEW_MODE_SHARE]


def restart_counts(groups: list[ModeGroup], major: NDArray[np.bool_],
                   labels: NDArray[np.intp], first: int) -> list[int]:
    """Restart paths (labels from ``first``) that reached each major mode the radius
    rounds (labels below ``first``) did not find, for the restarts' unseen share.

    A mode the radius rounds found is not unseen, however few restarts reached it: the
    restarts go to the modes in proportion to their mass, so a small mode's single
    restart says that it is small, not that more modes are missing (counting such
    singletons would mark a run whose every mode was found as suspect).

    Raises
    ------
    Nothing.
    """
    paths = [labels[idx] for (idx, _), m in zip(groups, major, strict=True) if m]
    return [int(np.unique(p).size) for p in paths if p.size and np.all(p >= first)]


def log_z_from_importance_weights(log_weights: np.ndarray) -> float:
    """``log mean exp(log_weights)`` over the finite weights (``-inf`` weights count as 0).

    Raises
    ------
    ValueError
        If no weight is finite.
    """
    lw = np.asarray(log_weights, dtype=float).reshape(-1)
    lw = np.where(np.isnan(lw), -np.inf, lw)
    if not np.isfinite(lw).any():
        raise ValueError("no finite importance weight: the approximation puts no mass where "
                         "the density is positive")
    return float(logsumexp(lw) - np.log(lw.size))


#: CmdStan's words for a run that could not start: every initial value was rejected.
_AT_START_RE = re.compile(r"initial value|Initialization (between|failed)", re.IGNORECASE)


def _at_start(text: str, console: Path | None) -> bool:
    """Whether a failed CmdStan run failed where it started (its reason or its console
    output says every initial value was rejected)."""
    if _AT_START_RE.search(text):
        return True
    try:
        return console is not None and _AT_START_RE.search(
            console.read_text(errors="replace")) is not None
    except OSError:
        return False


class BasePilot:
    """Base density and ``log Z`` from approximations of the original model.

    Parameters
    ----------
    owner
        The method's model (:class:`~pemc_stan.sampling.model.MethodModel`): its
        ``original_model()``, ``data``, ``program`` and ``name`` are used.
    coordinates
        The base coordinate map of the parameters (empty: group Pathfinder's
        paths by the raw parameter columns; no base can be fitted).
    num_paths, draws
        Pathfinder paths, and draws per path (in total for ADVI and Laplace).
    covariance
        ``"dense"`` or ``"diag"``: the base's covariance form.
    """

    def __init__(self, owner: Any, coordinates: BaseCoordinates, *, num_paths: int,
                 draws: int, covariance: str) -> None:
        self.owner = owner
        self.coordinates = coordinates
        self.num_paths = int(num_paths)
        self.draws = int(draws)
        self.covariance = covariance
        #: ``(name, message, remedy)`` of the pilots that failed in the last :meth:`fit`.
        self.notes: list[tuple[str, str, str]] = []
        #: Means (K, D) in base coordinates of the distinct modes Pathfinder found
        #: (None for fewer than two, or when the base did not come from Pathfinder).
        self.mode_centres: Any = None
        #: The last search for modes (None before, or when Pathfinder failed).
        self.search: ModeSearch | None = None
        #: A few of the search's first draws (base coordinates) and their ``lp__``, which
        #: Pathfinder writes with every constant of ``~`` statements and the ``log_prob``
        #: method without (:meth:`log_density_z`): the offset between the two (None
        #: before a round ran).
        self.lp_reference: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None

    # ------------------------------------------------------------------ approximations

    def param_draws(self, values: np.ndarray, columns: list[str]) -> dict[str, np.ndarray]:
        """The parameters' draws by name, shaped as declared, from CmdStan columns."""
        return coordinate_draws(self.coordinates, values, columns, self.owner.data)

    def _pathfinder_round(self, seed: int | None, radius: float, num_paths: int,
                          timeout: float | None, draws: int | None = None,
                          starts: list[dict[str, Any]] | None = None,
                          where: str = "restarted near the modes found"
                          ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """One multi-path Pathfinder run from starts within ``radius`` (or one path from
        each of ``starts``, constrained values), ``draws`` per path (default
        ``self.draws``): (draws in base coordinates, or raw parameter columns without
        coordinates; log weights)."""
        owner = self.owner
        kw: dict[str, Any] = {} if radius == SEARCH_RADII[0] else {"inits": radius}
        if starts is None:
            where = f"from radius {radius:g}"
        else:
            kw = {"inits": starts}
        model = owner.original_model()
        with stage(f"pilot: mode search, Pathfinder with {num_paths} paths {where}"):
            pf = run_paths(model, owner.data, num_paths=num_paths,
                           draws=self.draws if draws is None else draws, seed=seed,
                           timeout=timeout, **kw)
        cols = list(pf.column_names)
        arr = np.asarray(pf.draws(), dtype=float)
        lw = log_importance_weights(arr, cols)
        if self.coordinates.blocks:
            z, _ = self.coordinates.forward(self.param_draws(arr, cols), owner.data)
        else:  # group by the raw parameter columns
            z = arr[:, [i for i, c in enumerate(cols) if not c.endswith("__")]]
        z = np.asarray(z, dtype=float)
        if self.lp_reference is None:
            lp = arr[:, cols.index("lp__")]
            keep = np.flatnonzero(np.isfinite(lp) & np.all(np.isfinite(z), axis=1))
            self.lp_reference = (z[keep[:LP_REFERENCE_DRAWS]], lp[keep[:LP_REFERENCE_DRAWS]])
        return z, lw

    def log_density_z(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        """The target's log density in base coordinates at rows of ``z``, up to a constant:
        ``log gamma(x(z)) - log|dz/dx|`` (the original model's ``log_prob``).

        Raises
        ------
        RuntimeError, ValueError
            If CmdStan cannot evaluate the density at the points.
        """
        from pemc_stan.modes.density import model_log_density

        data = self.owner.data
        x = self.coordinates.inverse(z, data)
        _, log_dz_dx = self.coordinates.forward(x, data)
        return model_log_density(self.owner.original_model(), data, x) - log_dz_dx

    def log_density(self) -> LogDensity | None:
        """:meth:`log_density_z` for the density test of
        :func:`~pemc_stan.backend.pathfinder.group_paths`, nan where CmdStan cannot
        evaluate the points (a failed call is retried on halves,
        :data:`DENSITY_SPLITS` deep; segments through nan are not merged); None
        without base coordinates.  It remembers every point it evaluated: the search
        groups its rounds again after each, and the segments between centres that did
        not move are the same points (writing them for CmdStan again can be much of the
        search's time); a point left nan with others of a
        failed chunk is not remembered, so a later call evaluates it again."""
        if not self.coordinates.blocks:
            return None
        known: dict[bytes, float] = {}

        def remembered(z: NDArray[np.float64]) -> NDArray[np.float64]:
            z = np.ascontiguousarray(z, dtype=float)
            keys = [row.tobytes() for row in z]
            new = [i for i, k in enumerate(keys) if k not in known]
            fresh: dict[bytes, float] = {}
            if new:
                values, settled = at(z[new])
                for i, v, ok in zip(new, values.tolist(), settled.tolist(), strict=True):
                    fresh[keys[i]] = v
                    if ok:  # not a point left nan only by a bad neighbour in its chunk
                        known[keys[i]] = v
            return np.array([known[k] if k in known else fresh[k] for k in keys],
                            dtype=float).reshape(z.shape[0])

        def at(z: NDArray[np.float64], depth: int = 0
               ) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
            try:
                return self.log_density_z(z), np.ones(z.shape[0], dtype=bool)
            except Exception as exc:  # a density that throws between modes: keep them apart
                if depth == 0:
                    logger.info("density between modes not evaluated at some points (%s); "
                                "their segments are not merged",
                                failure_reason(exc))
                if depth < DENSITY_SPLITS and z.shape[0] > 1:  # only where it fails
                    h = z.shape[0] // 2
                    (a, sa), (b, sb) = at(z[:h], depth + 1), at(z[h:], depth + 1)
                    return np.concatenate([a, b]), np.concatenate([sa, sb])
                return np.full(z.shape[0], np.nan), np.full(z.shape[0], z.shape[0] == 1)

        return remembered

    def pathfinder(self, seed: int | None) -> tuple[list[ModeGroup], float, Any, Any]:
        """Multi-path Pathfinder on the original model from starts over growing radii.

        One round at each radius of :data:`SEARCH_RADII`, then rounds cycling the radii
        (widest first) with twice the paths each cycle, until at the end of a cycle
        :func:`unseen_share` of the modes holding :data:`NEW_MODE_SHARE` of the mass is
        at most :data:`UNSEEN_SHARE_MAX`, within :data:`MAX_PATHS_FACTOR` times
        ``num_paths`` paths, each later round within :data:`ROUND_TIME_FACTOR` times the
        first round's time per path (:func:`_round_timeout`).
        A later round that times out ends the search; one that fails otherwise is
        recorded (in ``stopped``) and the search goes on.  The draws of all rounds
        are grouped by mode together (each round's paths labelled apart), so a mode
        found from several starts counts once, with the median of its paths' masses;
        groups with no valley of the density between their centres are one mode
        (:meth:`log_density`).  When the radius rounds found several modes,
        :meth:`_restarts` look for more among and around them.
        :attr:`search` records how far it went.

        Returns
        -------
        (modes, log Z, draws, centres)
            Draws in base coordinates (raw parameter columns without coordinates)
            and the modes' centres in the same coordinates (:func:`mode_centres`).

        Raises
        ------
        Exception
            Whatever the first round's Pathfinder run raises.
        """
        zs: list[NDArray[np.float64]] = []
        lws: list[NDArray[np.float64]] = []
        labels: list[NDArray[np.intp]] = []
        radii: list[float] = []
        stopped, per_path, paths = "path limit", 0.0, 0
        tried = 0  # paths run, with those of failed rounds (the path limit counts them)
        same, failed = self.log_density(), []
        grouped: Grouping | None = None
        for k in range(10 * len(SEARCH_RADII)):
            cycle = SEARCH_RADII if k < len(SEARCH_RADII) else SEARCH_RADII[::-1]
            radius = cycle[k % len(SEARCH_RADII)]
            n_paths = self.num_paths * 2 ** (k // len(SEARCH_RADII))
            if tried + n_paths > MAX_PATHS_FACTOR * self.num_paths:
                break
            tried += n_paths
            began = time.monotonic()
            try:
                z, lw = self._pathfinder_round(
                    None if seed is None else seed + 104729 * k, radius, n_paths,
                    None if k == 0 else _round_timeout(per_path, n_paths))
            except Exception as exc:
                if k == 0:
                    raise
                reason = failure_reason(exc)
                logger.info("mode search: the round at radius %g failed (%s)", radius, reason)
                if isinstance(exc, TimeoutError):
                    stopped = "time limit"
                    break
                # one failed round (far starts where the model cannot be evaluated) does
                # not end the search
                failed.append(f"radius {radius:g}: {reason}")
            else:
                if k == 0:
                    per_path = (time.monotonic() - began) / n_paths
                own = path_labels(z.shape[0], n_paths)
                labels.append(paths + (np.zeros(z.shape[0], dtype=np.intp) if own is None
                                       else own))
                zs.append(z)
                lws.append(lw)
                radii.append(radius)
                paths += n_paths
            # a cycle ends before the search may stop: in high dimensions only the small
            # radius reaches a narrow mode's basin
            if (k + 1) % len(SEARCH_RADII):
                continue
            grouped = (*_group(zs, lws, labels, same), len(zs))
            unseen = unseen_share(_paths_per_major_mode(grouped[0], np.concatenate(labels)),
                                  paths)
            logger.debug("mode search at radius %g: %d mode(s) after %d paths; unseen share "
                         "%.3f", radius, len(grouped[0]), paths, unseen)
            if unseen <= UNSEEN_SHARE_MAX:
                stopped = f"unseen share {unseen:.3f} <= {UNSEEN_SHARE_MAX}"
                break
        if failed:
            stopped += f"; {len(failed)} round(s) failed (first at {failed[0]})"
        restarted: tuple[int, float, str] = (0, 0.0, "")
        if not stopped.startswith("time limit") and same is not None:
            ran, said, grouped = self._screen(seed, (zs, lws, labels), grouped, per_path,
                                              paths, same)
            paths += ran
            stopped += f"; {said}" if said else ""
            ran, share, said, grouped = self._restarts(seed, (zs, lws, labels), grouped,
                                                       per_path, paths, same)
            restarted = (ran, share, said)
            paths += restarted[0]
            stopped += f"; {restarted[2]}" if restarted[2] else ""
        z_all, lw_all, lab = np.concatenate(zs), np.concatenate(lws), np.concatenate(labels)
        if grouped is None or grouped[2] != len(zs):  # rounds since the last grouping
            grouped = (*_group(zs, lws, labels, same), len(zs))
        groups, log_z = grouped[0], grouped[1]
        unseen = max(unseen_share(_paths_per_major_mode(groups, lab), paths), restarted[1])
        if same is not None:  # a spike inside a mode: a mode of its own (modes/peaks.py)
            groups, z_all, lw_all, lab, peaks = probe_peaks(
                self, seed, groups, z_all, lw_all, lab,
                _round_timeout(per_path, 1) if per_path > 0 else None)
            if peaks:
                log_z = float(logsumexp([m for _, m in groups]))
                stopped += f"; {peaks} peak(s) beyond their modes' Gaussians"
        shares = _shares(groups)
        centres = mode_centres(z_all, lw_all, groups, lab)
        major = shares >= NEW_MODE_SHARE
        self.search = ModeSearch(tuple(radii), len(groups), int(np.sum(major)), paths, stopped,
                                 tuple(float(x) for x in shares), centres[major],
                                 tuple(float(x) for x in shares[major]),
                                 self._metric(z_all, groups), unseen, per_path,
                                 mass_scatter(groups, lw_all, lab),
                                 mode_covariances(z_all, lw_all, groups, lab)[major])
        logger.info("mode search: %s", self.search.describe())
        return groups, log_z, z_all, centres

    def _inits(self, z: NDArray[np.float64]) -> list[dict[str, Any]]:
        """Constrained initial values, one dict per row of base coordinates ``z``."""
        x0 = self.coordinates.inverse(np.asarray(z, dtype=float), self.owner.data)
        return [{k: np.asarray(v)[i].tolist() for k, v in x0.items()}
                for i in range(np.asarray(z).shape[0])]

    def modes_from(self, starts: NDArray[np.float64], seed: int | None,
                   seconds_per_path: float = float("nan")
                   ) -> tuple[list[ModeGroup], NDArray[np.float64]]:
        """One Pathfinder path from each of ``starts`` (base coordinates), as the
        restarts' (``draws`` per path, as every round), grouped by
        mode with the density test: (modes, their centres in base coordinates).

        ``seconds_per_path`` is the search's first round's time per path
        (:attr:`ModeSearch.seconds_per_path`): the paths then get the time of a later
        round of the search (:func:`_round_timeout`); NaN runs them without a limit.

        Raises
        ------
        TimeoutError
            When the paths take longer than that.
        Exception
            Whatever Pathfinder or the density raise.
        """
        n = int(np.asarray(starts).shape[0])
        timeout = (_round_timeout(seconds_per_path, n) if math.isfinite(seconds_per_path)
                   else None)
        z, lw = self._pathfinder_round(seed, SEARCH_RADII[0], n, timeout,
                                       starts=self._inits(starts))
        groups, _ = group_paths(z, lw, n, log_density=self.log_density())
        return groups, mode_centres(z, lw, groups, n)

    def _metric(self, z: NDArray[np.float64], groups: list[ModeGroup]) -> BaseDensity | None:
        """The Gaussian moment-matched to the modes found (None without base coordinates
        or when it cannot be fitted)."""
        if not self.coordinates.blocks:
            return None
        try:
            return moment_match(z, None, groups, self.covariance)
        except ValueError:
            return None

    def _screen(self, seed: int | None, rounds: tuple[list[NDArray[np.float64]],
                                                      list[NDArray[np.float64]],
                                                      list[NDArray[np.intp]]],
                grouped: Grouping | None, per_path: float, first: int,
                log_density: LogDensity) -> tuple[int, str, Grouping | None]:
        """One Pathfinder round from the uniform draws over the widest box that the modes
        found do not explain (:mod:`pemc_stan.modes.screen`), its draws appended to
        ``rounds`` (path labels from ``first``) when they found another mode: (paths kept,
        what happened, the last grouping).

        Raises
        ------
        Nothing: a round that fails leaves the search as it was.
        """
        zs, lws, labels = rounds
        if grouped is None or grouped[2] != len(zs):  # rounds since the last grouping
            grouped = (*_group(zs, lws, labels, log_density), len(zs))
        starts, _ = screen_starts(grouped[0], np.concatenate(zs), np.concatenate(lws),
                                  np.concatenate(labels), log_density, seed)
        n = int(starts.shape[0])
        if n == 0:
            return 0, "", grouped
        try:
            z, lw = self._pathfinder_round(
                None if seed is None else seed + SCREEN_SEED_OFFSET, SEARCH_RADII[0], n,
                _round_timeout(per_path, n), starts=self._inits(starts),
                where="from draws the modes found do not explain")
        except Exception as exc:  # starts where the model cannot be run
            logger.info("mode search: paths from the box's unexplained draws failed (%s)",
                        failure_reason(exc))
            late = isinstance(exc, TimeoutError)
            return 0, ("paths from uniform draws the modes found did not explain: time limit"
                       if late else ""), grouped
        own = path_labels(z.shape[0], n)
        said = f"{n} paths from uniform draws the modes found did not explain"
        before = int(np.sum(_shares(grouped[0]) >= NEW_MODE_SHARE))
        path = first + (np.zeros(z.shape[0], dtype=np.intp) if own is None else own)
        regrouped = _group([*zs, z], [*lws, lw], [*labels, path], log_density)
        more = int(np.sum(_shares(regrouped[0]) >= NEW_MODE_SHARE)) - before
        if more <= 0:
            # paths that climbed back into found modes (a banana's arms, a Student-t's
            # tails, which the modes' Gaussians underrate) are left out: they would only
            # move the found modes' centres and masses, which the search already has
            return 0, f"{said}: no other mode", grouped
        labels.append(path)
        zs.append(z)
        lws.append(lw)
        return n, f"{said}: {more} more mode(s)", (*regrouped, len(zs))

    def _restarts(self, seed: int | None, rounds: tuple[list[NDArray[np.float64]],
                                                        list[NDArray[np.float64]],
                                                        list[NDArray[np.intp]]],
                  grouped: Grouping | None, per_path: float, first: int,
                  log_density: LogDensity) -> tuple[int, float, str, Grouping | None]:
        """Restarts from where the modes are, once the radius rounds found several.

        The radius rounds start around the origin: a mode among the others (the interior
        of a grid of narrow modes) has a basin too small from there for the unseen share
        to notice, however much mass it holds.  Each round runs
        :data:`RESTART_PATHS` Pathfinder paths, doubled each round, from the next of the
        starts :meth:`_restart_starts` draws once for all rounds around the modes the
        radius rounds found (drawing them again each round, around the modes found so
        far, costs time for nothing; the starts resampled by
        importance weight already go to the modes not yet found in proportion to their
        mass), until the restarts' own unseen share (every mode that only they found
        seen twice, :func:`restart_counts`, and about ``1 / UNSEEN_SHARE_MAX`` restarts
        run) is at most
        :data:`UNSEEN_SHARE_MAX`, for at most :data:`RESTART_ROUNDS` rounds, each within
        :func:`_round_timeout` of the first radius round's time ``per_path``.
        Appends the rounds' draws, log weights and path labels (from ``first``) to
        ``rounds``; ``grouped`` is the last grouping of them (None: none).

        Returns
        -------
        (paths run, the restarts' unseen share, what happened: "" when none ran,
        the last grouping)

        Raises
        ------
        Nothing: a round that fails is skipped (a timeout ends the restarts).
        """
        zs, lws, labels = rounds
        rng = np.random.default_rng(None if seed is None else seed + RESTART_SEED_OFFSET)
        ran, share, said = 0, 0.0, ""
        pool: NDArray[np.float64] | None = None
        for r in range(RESTART_ROUNDS + 1):
            lab = np.concatenate(labels)
            if grouped is None or grouped[2] != len(zs):  # rounds since the last grouping
                grouped = (*_group(zs, lws, labels, log_density), len(zs))
            groups = grouped[0]
            major = _shares(groups) >= NEW_MODE_SHARE
            if r == 0 and int(np.sum(major)) < 2:
                break
            if r > 0:
                # no restart ran (every round failed): no evidence either way
                share = unseen_share(restart_counts(groups, major, lab, first),
                                     ran) if ran else 0.0
                said = (f"{ran} restarts near the modes found: {int(np.sum(major))} modes, "
                        f"unseen share {share:.3f}")
                logger.debug("mode search: %s", said)
                if share <= UNSEEN_SHARE_MAX or r == RESTART_ROUNDS:
                    break
            if pool is None:  # every round's starts, drawn once
                cover = self._metric(np.concatenate(zs), groups)
                pool = None if cover is None else self._restart_starts(
                    cover, rng, RESTART_PATHS * (2**RESTART_ROUNDS - 1))
            if pool is None:
                break
            n = RESTART_PATHS * 2**r
            starts = self._inits(pool[RESTART_PATHS * (2**r - 1):][:n])
            try:
                z, lw = self._pathfinder_round(
                    None if seed is None else seed + RESTART_SEED_OFFSET + r, SEARCH_RADII[0],
                    n, _round_timeout(per_path, n), starts=starts)
            except Exception as exc:  # starts where the model cannot be evaluated
                logger.info("mode search: restarts near the modes failed (%s)",
                            failure_reason(exc))
                if isinstance(exc, TimeoutError):
                    said += "; time limit" if said else ""
                    break
                continue
            own = path_labels(z.shape[0], n)
            labels.append(first + ran + (np.zeros(z.shape[0], dtype=np.intp) if own is None
                                         else own))
            zs.append(z)
            lws.append(lw)
            ran += n
        return ran, share, said, grouped

    def _restart_starts(self, cover: BaseDensity, rng: np.random.Generator, n: int
                        ) -> NDArray[np.float64]:
        """``n`` starts where the mass is, in the order drawn (each restart round takes
        the next; drawn without replacement, the first follow the weights and the later
        ones, once the heavy draws are taken, come from what is left): resampled by
        importance weight from draws of
        the covering Gaussian with its standard deviations times each of
        :data:`RESTART_SPREADS` (equal parts), so that a mode gets starts in proportion
        to its mass and the restarts' unseen share estimates the mass not yet seen.  A
        start drawn from the covering Gaussian alone lies between narrow modes, and
        L-BFGS from there reaches some modes far more often than others, leaving modes
        unseen while the unseen share looks small.  When the weights are too uneven to
        resample from (many dimensions)
        or cannot be evaluated, the raw draws are the starts.

        Raises
        ------
        Nothing.
        """
        d = cover.mean.size
        m = int(max(n, min(RESTART_DRAWS, RESTART_VALUES // max(d, 1))))
        parts = [BaseDensity(cover.mean, s**2 * np.asarray(cover.cov), "dense")
                 for s in RESTART_SPREADS]
        z = np.concatenate([q.sample_z(k, rng) for q, k in zip(
            parts, np.diff(np.linspace(0, m, len(parts) + 1).astype(int)), strict=True)])
        raw = z[rng.permutation(m)[:n]]
        try:
            log_q = logsumexp([q.log_density_z(z) for q in parts], axis=0) - np.log(len(parts))
            lw = self.log_density_z(z) - log_q
        except Exception as exc:  # the density cannot be evaluated at some draws
            logger.debug("restart starts not resampled: %s", exc)
            return raw
        lw = np.where(np.isfinite(lw), lw, -np.inf)
        if not np.any(np.isfinite(lw)):
            return raw
        w = np.exp(lw - logsumexp(lw))
        if 1.0 / float(np.sum(w**2)) < RESTART_ESS_FACTOR * RESTART_PATHS \
                or np.count_nonzero(w) < n:
            return raw
        # without replacement: L-BFGS from two copies of one start reaches one mode twice,
        # and the unseen share would count it as seen twice
        return z[rng.choice(m, size=n, replace=False, p=w)]

    def approximation(self, how: str, seed: int | None) -> Any:
        """Draws in base coordinates of an approximation of the posterior (``how``:
        ``"advi"``, ``"laplace"`` or ``"nuts"``, a short plain-NUTS pilot)."""
        model, data = self.owner.original_model(), self.owner.data or None
        fit: Any
        if how == "advi":
            fit = model.variational(data=data, seed=seed, draws=self.draws,
                                    algorithm="meanfield", show_console=False,
                                    require_converged=False)
            arr = np.asarray(fit.variational_sample, dtype=float)
        elif how == "laplace":
            # the mode is written with 12 significant digits: CmdStan re-reads it and
            # checks simplexes / correlation matrices to 1e-8
            mode = model.optimize(data=data, seed=seed, jacobian=True, sig_figs=12,
                                  show_console=False)
            fit = model.laplace_sample(data=data, mode=mode, seed=seed, draws=self.draws,
                                       sig_figs=12)
            arr = np.asarray(fit.draws(), dtype=float)
        else:
            fit = model.sample(data=data, seed=seed, chains=2, iter_warmup=500,
                               iter_sampling=max(self.draws // 2, 100), show_progress=False,
                               show_console=False)
            arr = np.asarray(fit.draws(concat_chains=True), dtype=float)
        z, _ = self.coordinates.forward(self.param_draws(arr, list(fit.column_names)),
                                        self.owner.data)
        return z

    def importance_log_z(self, base: BaseDensity, seed: int | None, n: int = 2000) -> float:
        """``log Z`` by importance sampling from the base, ``log gamma`` evaluated with every
        constant by the density program."""
        from pemc_stan.modes.density import DensityEvaluator

        coords, data = self.coordinates, self.owner.data
        z = base.sample_z(n, np.random.default_rng(seed))
        draws = coords.inverse(z, data)
        log_b = base.log_density(coords, draws, data)
        log_gamma = DensityEvaluator(self.owner.program, data, self.owner.name).log_density(draws)
        return log_z_from_importance_weights(np.where(np.isnan(log_gamma), -np.inf,
                                                      log_gamma) - log_b)

    # ------------------------------------------------------------------ the pilot

    def fit(self, seed: int | None, *, want_base: bool, first: str = "pathfinder",
            base: BaseDensity | None = None, log_z: float | None = None,
            pathfinder: bool = True) -> tuple[BaseDensity | None, float | None]:
        """Fit what is missing: the base (when ``want_base``) and ``log Z`` (when None).

        Parameters
        ----------
        seed
            Seed of every pilot.
        want_base
            Fit a base density (else keep ``base``, which may be None).
        first
            The first approximation of the base: ``"pathfinder"``, ``"advi"``,
            ``"laplace"`` or ``"nuts"``; the others follow on failure.
        base, log_z
            Given values (kept).
        pathfinder
            False when Pathfinder is known to fail (it is not tried again).

        Returns
        -------
        (BaseDensity or None, float or None)
            ``log Z`` is None only when no base exists and Pathfinder failed.

        Raises
        ------
        RuntimeError
            If a base is wanted and every approximation fails (then NUTS itself
            cannot run the model).
        """
        self.notes = []
        #: (approximation, CmdStan's reason, whether it failed where it started)
        self.failures: list[tuple[str, str, bool]] = []
        self.mode_centres = None
        self.search = None
        self.lp_reference = None
        if first == "pathfinder" and not pathfinder:
            first = APPROXIMATIONS[0]
        if pathfinder and (log_z is None or (want_base and first == "pathfinder")):
            try:
                groups, pf_log_z, z, centres = self.pathfinder(seed)
                if log_z is None:
                    log_z = pf_log_z
                if want_base and first == "pathfinder":
                    scatter = self.search.mass_scatter if self.search is not None else 0.0
                    weights = defensive_groups(groups, scatter=scatter)
                    base = moment_match(z, None, weights, self.covariance)
                    base.info.update({"method": "pathfinder", "modes": len(groups)})
                    major = _shares(groups) >= NEW_MODE_SHARE
                    if int(np.sum(major)) > 1:
                        self.mode_centres = centres[major]
            except Exception as exc:
                self._note("pathfinder", exc)
        if want_base and base is None:
            order = [first] if first != "pathfinder" else []
            order += [m for m in APPROXIMATIONS if m not in order]
            for how in order:
                try:
                    with stage(f"pilot: {how} approximation of the base"):
                        z = self.approximation(how, seed)
                    base = moment_match(z, None, None, self.covariance)
                    base.info.update({"method": how})
                    break
                except Exception as exc:
                    self._note(how, exc, final=how == order[-1])
            if base is None:
                raise RuntimeError(
                    f"no base density could be fitted for {self.owner.name}: "
                    + "; ".join(n[1] for n in self.notes)
                    + "; pass a BaseDensity as base=")
        if log_z is None and base is not None:
            log_z = self.importance_log_z(base, seed)
        return base, (None if log_z is None else float(log_z))

    def _note(self, how: str, exc: BaseException, final: bool = False) -> None:
        """Record a failed approximation and warn, or raise when no other can work.

        Raises
        ------
        UnevaluableDensityError
            See :meth:`_unless_unevaluable`.
        """
        if isinstance(exc, RuntimeError) and is_cmdstan_failure(exc):
            exc = run_error(exc, how)  # CmdStan's reason, not cmdstanpy's command line
        text = exc.reason if isinstance(exc, CmdStanRunError) else str(exc)
        console = exc.console if isinstance(exc, CmdStanRunError) else None
        reason = "; ".join(condense(ln.strip() for ln in text.splitlines() if ln.strip()))
        reason = reason[:240] or type(exc).__name__
        self.notes.append((f"{how}_failed", f"the {how} fit of the base failed ({reason})",
                           "nothing to do when the next approximation worked"))
        self.failures.append((how, text, _at_start(text, console)))
        self._unless_unevaluable(final)
        logger.warning("the %s fit of the base density failed (%s)%s", how, reason,
                       "" if final else "; trying the next one")

    def _unless_unevaluable(self, final: bool) -> None:
        """Stop the approximations when the model's density cannot be evaluated: two
        failed alike at their start (the same Stan message, and CmdStan's "Rejecting
        initial value" or "Initialization failed"), or, while the data hold NaN or
        infinite values, two (or the last) failed over a NaN.

        Raises
        ------
        UnevaluableDensityError
            Naming Stan's message and, when the data hold NaN or infinite values, them.
        """
        shared = [set(message_shapes(text)) for _, text, start in self.failures if start]
        common = set.intersection(*shared) if len(shared) > 1 else set()
        odd = non_finite_entries(self.owner.data)
        last = self.failures[-1][1]  # called after each failure is recorded
        over_nan = [re.search(r"\b(nan|inf)\b", text, re.IGNORECASE) is not None
                    for _, text, _ in self.failures]
        about_nan = bool(odd) and over_nan[-1]
        if not common and not (about_nan and (final or sum(over_nan) >= 2)):
            return
        lines = [ln.strip() for ln in last.splitlines() if ln.strip()]
        stan = [ln for ln in lines if message_shapes(ln)]
        said = next((ln for ln in stan if message_shapes(ln)[0] in common),
                    stan[0] if stan else lines[0] if lines else "no message")
        said = re.sub(r"^.*?Exception:\s*|\s*\[(repeated|and) \d+ .*\]$", "", said)
        tried = ", ".join(how for how, _, _ in self.failures)
        message = (f"the log density of {self.owner.name} cannot be evaluated where CmdStan "
                   f"starts ({tried} failed alike): {said}")
        if about_nan:
            shown = ", ".join(odd[:3]) + (f" and {len(odd) - 3} more" if len(odd) > 3 else "")
            raise UnevaluableDensityError(
                f"{message}; the data hold {shown}", said,
                "replace or leave out the NaN and infinite values in the data (Stan has no "
                "missing-value code: declare missing values as parameters)", data_problem=True)
        raise UnevaluableDensityError(
            message, said, "fix the statement the message names, or give inits= where the "
            "density is finite")
