"""Pathfinder pilots on the original model: paths grouped by mode, ``log Z`` offsets.

CmdStan's Pathfinder writes ``lp__ = log gamma(x) + log|J(u)|`` at the
unconstrained point ``u`` (``~`` statements evaluated with ``propto=false``,
i.e. with every constant) and ``lp_approx__`` = the normalised log density of
the path's Gaussian approximation ``q(u)`` (both checked against closed forms:
a Gaussian target gives ``lp__ - lp_approx__ = log Z`` exactly).  With
``psis_resample=False`` every draw comes from its own path's ``q``, and each
path ``p`` gives the importance-sampling estimate ``Z_p = mean_s exp(lp___s -
lp_approx__s)`` of the mass its Gaussian covers.

:func:`group_paths` is the one grouping of paths by mode: paths whose draw
means lie within 3 standard deviations of each other (every coordinate) found
the same mode; given the target's log density (``log_density``), groups with no
valley between their centres are then one mode (:func:`without_barrier`:
Pathfinder can stop paths at different points of one long ridge, and the 3-sd
rule alone splits a unimodal regression's ridge into many "modes").  A mode
contributes the median of its converged paths' ``Z_p`` (:data:`CONVERGED_SHARE`), a
mode merged from several groups the sum over them of the median of their paths'
shares by a partition of unity (:func:`_merged_mass`); distinct modes add up::

    log Z^ = log sum_{modes m} median_{p in m} Z_p

It is only an offset: modes no path found make it too low (by the log of the
missed mass).

:func:`mode_centres` places each mode at the importance-weighted mean of its
best-converged path (the largest effective sample share of its weights): a path whose
approximation stopped wide, between modes, can join a mode's group, and its draws would
pull a centre computed from the whole group towards the other modes.  Only the
converged paths weigh a mode (:data:`CONVERGED_SHARE`).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import cmdstanpy
import numpy as np
from numpy.typing import NDArray

from pemc_stan.backend.console import failure_reason
from pemc_stan.backend.processes import usable_cores
from pemc_stan.numeric import logsumexp

logger = logging.getLogger(__name__)

__all__ = ["BARRIER_DEPTH", "SEGMENT_POINTS", "ModeGroup", "Paths", "PilotEstimate", "LogDensity",
           "group_paths", "log_importance_weights", "mass_scatter", "mode_centres",
           "mode_covariances", "path_labels", "path_threads", "run_paths",
           "mode_aware_log_z", "estimate_log_scale", "segment_points", "without_barrier"]

#: A mode found by Pathfinder: the indices of its paths' draws and its log mass.
ModeGroup = tuple[NDArray[np.intp], float]

#: ``log_density(points)``: the target's log density (up to a constant) at each row of
#: ``points`` (N, D), -inf or nan where it cannot be evaluated.
LogDensity = Callable[[NDArray[np.float64]], NDArray[np.float64]]

#: Points inside the segment between two modes' centres where the density is evaluated.
SEGMENT_POINTS = 9
#: Two centres are in one mode when the log density along the segment between them never
#: falls more than this below its value at the lower end: a valley a chain crosses once
#: in exp(2) ~ 7 tries is no separation worth a mode of its own, and a log-concave density
#: (a regression's ridge) never dips at all.
BARRIER_DEPTH = 2.0
#: The merge evaluates the segments of as many heads as fit in this many points at once
#: (one ``log_prob`` run of CmdStan each, and each run has a fixed start-up cost that
#: many groups would otherwise pay once each).
BATCH_POINTS = 20_000
#: A path counts towards its mode's mass only when the effective sample size of its
#: importance weights, as a share of its draws, is at least this share of the best
#: path's in the mode.  A path whose approximation stopped wide or degenerate (one
#: standard deviation near 0, another spanning several modes) estimates the mass of
#: everything it covers, and a few such paths in a group would outvote the converged
#: one in the median (docs/decisions.md).
CONVERGED_SHARE = 0.25


def segment_points(centre: NDArray[np.float64], others: NDArray[np.float64],
                   n: int = SEGMENT_POINTS) -> NDArray[np.float64]:
    """``n`` equally spaced points strictly inside each segment from ``centre`` (D,) to a
    row of ``others`` (M, D): shape (M, n, D).

    Raises
    ------
    Nothing.
    """
    t = np.linspace(0.0, 1.0, n + 2)[1:-1]
    c = np.asarray(centre, dtype=float)
    o = np.asarray(others, dtype=float)
    return c[None, None, :] + t[None, :, None] * (o[:, None, :] - c[None, None, :])


def without_barrier(log_centre: float, log_others: NDArray[np.float64],
                    log_inside: NDArray[np.float64], depth: float = BARRIER_DEPTH
                    ) -> NDArray[np.bool_]:
    """Whether each segment from a centre to another point crosses no valley.

    Parameters
    ----------
    log_centre
        Log density at the centre (any additive constant, the same throughout).
    log_others
        (M,) at the other ends.
    log_inside
        (M, n) at points inside each segment (:func:`segment_points`).
    depth
        The deepest dip below the lower end that is not a valley.

    Returns
    -------
    ndarray of bool, (M,)
        False where some point inside falls more than ``depth`` below the lower end, or
        where a density is not finite (nothing is merged on evidence it cannot read).

    Raises
    ------
    Nothing.
    """
    ends = np.minimum(float(log_centre), np.asarray(log_others, dtype=float))
    inside = np.asarray(log_inside, dtype=float)
    finite = np.isfinite(ends) & np.all(np.isfinite(inside), axis=1)
    with np.errstate(invalid="ignore"):
        flat = np.min(np.where(np.isfinite(inside), inside, -np.inf), axis=1) >= ends - depth
    return np.asarray(finite & flat, dtype=bool)


def path_threads(model: cmdstanpy.CmdStanModel) -> int | None:
    """``num_threads`` of a multi-path Pathfinder run of ``model``: the cores this process
    may use, when its executable was built with threads (the paths then run side by
    side; each path's draws depend on the seed and its number alone, so the draws are the
    same); None otherwise (CmdStan's default, one thread).

    Raises
    ------
    Nothing.
    """
    cores = usable_cores()
    if cores < 2 or not _threaded(str(model.exe_file)):
        return None
    return cores


def run_paths(model: cmdstanpy.CmdStanModel, data: Mapping[str, Any] | None, *,
              num_paths: int, draws: int, **kwargs: Any) -> cmdstanpy.CmdStanPathfinder:
    """Multi-path Pathfinder without PSIS resampling, ``draws`` from each path's own
    approximation (``num_paths * draws`` rows, path by path), side by side where the
    executable has threads.

    CmdStan's ``num_psis_draws`` (cmdstanpy's ``draws``) sizes only the resampled
    output; each path draws ``num_draws`` (cmdstanpy's ``num_single_draws``, 1,000 by
    default), and evaluates the density at every one of them, so that is the number set.

    Raises
    ------
    Whatever ``CmdStanModel.pathfinder`` raises.
    """
    return model.pathfinder(data=dict(data) if data else None, num_paths=int(num_paths),
                            num_single_draws=int(draws), psis_resample=False,
                            show_console=False, num_threads=path_threads(model), **kwargs)


@functools.lru_cache(maxsize=256)
def _threaded(exe_file: str) -> bool:
    """Whether the executable was built with ``STAN_THREADS`` (asked once per file)."""
    try:
        info = cmdstanpy.CmdStanModel(exe_file=exe_file).exe_info()
    except Exception:  # an executable that cannot say: one thread, as CmdStan's default
        return False
    return str(info.get("STAN_THREADS", "")).lower() == "true"


def log_importance_weights(draws: NDArray[np.float64], names: list[str]) -> NDArray[np.float64]:
    """``lp__ - lp_approx__`` of Pathfinder draws (columns named ``names``).

    Raises
    ------
    ValueError
        If either column is missing.
    """
    return draws[:, names.index("lp__")] - draws[:, names.index("lp_approx__")]


#: Paths of Pathfinder draws: their number (consecutive equal blocks of rows) or a
#: path label per draw (pilots that pool several Pathfinder runs).
Paths = int | NDArray[np.intp]


def path_labels(n: int, paths: Paths) -> NDArray[np.intp] | None:
    """A path label per draw of ``n`` draws, or None when they cannot be split by path.

    ``paths`` is a number of consecutive equal blocks (None when it does not divide
    ``n``) or the labels themselves (checked for length).

    Raises
    ------
    ValueError
        If labels are given for another number of draws.
    """
    if isinstance(paths, (int, np.integer)):
        if paths < 1 or n % int(paths):
            return None
        return np.arange(n) // (n // int(paths))
    labels = np.asarray(paths, dtype=np.intp).reshape(-1)
    if labels.size != n:
        raise ValueError(f"{labels.size} path labels for {n} draws")
    return labels


def _log_mass(lw: NDArray[np.float64]) -> float:
    """The importance-sampling estimate ``log mean exp(lw)`` of a mass from its draws'
    log weights."""
    return float(logsumexp(lw) - math.log(lw.size))


def mass_scatter(groups: list[ModeGroup], lw: NDArray[np.float64],
                 labels: NDArray[np.intp]) -> float:
    """How far apart paths' estimates of one mode's log mass fall: the widest
    interquartile range of the paths' importance-sampling estimates within any mode
    found by at least four paths (0 when none was).  ``lw`` and ``labels``: the draws'
    log weights and path labels, indexed by the groups' draws (:func:`group_paths`).

    Raises
    ------
    Nothing.
    """
    widest = 0.0
    for idx, _ in groups:
        own = labels[idx]
        estimates = [_log_mass(lw[idx[own == p]]) for p in np.unique(own)]
        estimates = [e for e in estimates if np.isfinite(e)]
        if len(estimates) >= 4:
            q1, q3 = np.quantile(estimates, [0.25, 0.75])
            widest = max(widest, float(q3 - q1))
    return widest


def group_paths(z: NDArray[np.float64], lw: NDArray[np.float64], num_paths: Paths,
                min_draws: int = 1, log_density: LogDensity | None = None
                ) -> tuple[list[ModeGroup], float]:
    """Group Pathfinder paths by mode (section 6 of Graham & Storkey, eq 25).

    Parameters
    ----------
    z
        The draws' coordinates, shape (draws, dims).
    lw
        Their log importance weights (:func:`log_importance_weights`).
    num_paths
        The paths (:data:`Paths`): their number, the rows being consecutive blocks
        of ``draws / num_paths``, or a path label per draw.
    min_draws
        Paths with fewer finite draws are left out.
    log_density
        When given, paths first group by the narrower one's spread, and the groups are
        then merged where the density between their centres (each its best-converged path's
        weighted mean) has no valley (:func:`without_barrier`): the group with the
        highest density at its centre takes in every other it reaches so, then the
        highest of the rest, and so on.

    Returns
    -------
    (list of (indices, log mass), log Z)
        One entry per mode, its mass the median of its converged paths'
        importance-sampling estimates (merged by the density test: :func:`_merged_mass`), with
        ``log Z = log sum_modes mass``.  When the
        draws cannot be split by path (or have no coordinates), one group of
        all finite draws with the pooled estimate.

    Raises
    ------
    RuntimeError
        If no draw has a finite weight (and finite coordinates).
    """
    ok = np.isfinite(lw) & np.all(np.isfinite(z), axis=1)
    if not np.any(ok):
        raise RuntimeError("Pathfinder returned no draw with a finite density")
    labels = path_labels(z.shape[0], num_paths)
    if labels is None or z.shape[1] == 0:
        idx = np.flatnonzero(ok)
        lm = _log_mass(lw[idx])
        return [(idx, lm)], lm
    paths = []
    for p in np.unique(labels):
        idx = np.flatnonzero((labels == p) & ok)
        if idx.size < max(min_draws, 1):
            continue
        lm = _log_mass(lw[idx])
        paths.append((idx, lm, z[idx].mean(axis=0), z[idx].std(axis=0), _ess_share(lw[idx])))
    # the best-converged paths first: a group is judged by its first path's spread, and a
    # degenerate first path (nearly flat across, wide along) takes in several modes
    paths.sort(key=lambda p: -p[4])
    groups: list[list[Any]] = []
    # with the density test to merge them later, paths group by the narrower one's spread:
    # a path that stopped wide between modes would otherwise take in every mode within 3
    # of its standard deviations
    spread = np.maximum if log_density is None else np.minimum
    d = z.shape[1]
    ref_mean, ref_sd = np.empty((len(paths), d)), np.empty((len(paths), d))
    for path in paths:  # the first group whose first path is within 3 sd, all at once
        k = len(groups)
        tol = 3.0 * np.maximum(spread(path[3], ref_sd[:k]), 1e-12)
        near = np.flatnonzero(np.all(np.abs(path[2] - ref_mean[:k]) <= tol, axis=1))
        if near.size:
            groups[int(near[0])].append(path)
        else:
            ref_mean[k], ref_sd[k] = path[2], path[3]
            groups.append([path])
    merged = [[g] for g in groups]
    if log_density is not None and len(groups) > 1:
        merged = _merge_without_barrier(groups, z, lw, log_density)
    out = [(np.concatenate([p[0] for g in m for p in g]), _merged_mass(m, z, lw))
           for m in merged]
    return out, float(logsumexp([m for _, m in out]))


def _ess_share(lw: NDArray[np.float64]) -> float:
    """The effective sample size of importance weights ``exp(lw)`` over their number."""
    w = np.exp(lw - logsumexp(lw))
    return float(1.0 / (np.sum(w**2) * lw.size))


def _converged(paths: list[Any]) -> list[Any]:
    """The paths whose weights' effective sample share is at least
    :data:`CONVERGED_SHARE` times the best one's."""
    best = max(p[4] for p in paths)
    return [p for p in paths if p[4] >= CONVERGED_SHARE * best]


def _median_mass(paths: list[Any]) -> float:
    """A mode's log mass: the median of its converged paths' estimates (:func:`_converged`).
    One path's importance weights can have a draw far in its approximation's tail, which
    makes its mass an outlier that a mean would follow."""
    return float(np.median([p[1] for p in _converged(paths)]))


def _merged_mass(parts: list[list[Any]], z: NDArray[np.float64],
                 lw: NDArray[np.float64]) -> float:
    """The log mass of a mode merged from ``parts`` (groups of paths within 3 sd).

    The parts of one mode can cover different bumps of it (valleys shallower than
    :data:`BARRIER_DEPTH`) or one stretch of a ridge many times over.  One part's
    median alone leaves the other bumps out, and the sum of the parts' medians counts a
    ridge once per part.  A partition of unity
    does neither: with ``a_s(u) = n_s g_s(u) / sum_t n_t g_t(u)`` (``g_s`` the Gaussian
    with the mean and standard deviations of part ``s``'s ``n_s`` draws), every path
    ``p`` of part ``s`` estimates ``int gamma a_s`` by
    ``mean_i a_s(u_i) gamma(u_i) / q_p(u_i)``, without bias for any fixed ``g_s`` (here
    fitted to the same draws: a bias of order one over their number), and the mode's mass
    is the sum over parts of the median of their paths' estimates (one part: its
    median, as before).  The parts are weighed by their draws, not by their masses: by
    mass, a lone path's outlying estimate would claim the other parts' draws too.
    """
    if len(parts) == 1:
        return _median_mass(parts[0])
    parts = [_converged(part) for part in parts]
    idx = [np.concatenate([p[0] for p in part]) for part in parts]
    mean = np.array([z[i].mean(axis=0) for i in idx])
    sd = np.array([np.maximum(z[i].std(axis=0), 1e-9) for i in idx])
    w = np.log([i.size for i in idx])

    def log_share(s: int, u: NDArray[np.float64]) -> NDArray[np.float64]:
        lg = w[:, None] - np.sum(np.log(sd), axis=1)[:, None] - 0.5 * np.sum(
            ((u[None, :, :] - mean[:, None, :]) / sd[:, None, :]) ** 2, axis=2)
        return np.asarray(lg[s] - logsumexp(lg, axis=0), dtype=float)

    masses = [float(np.median([logsumexp(lw[p[0]] + log_share(s, z[p[0]])) - math.log(p[0].size)
                               for p in part])) for s, part in enumerate(parts)]
    return float(logsumexp(masses))


def _merge_without_barrier(groups: list[list[Any]], z: NDArray[np.float64],
                           lw: NDArray[np.float64], log_density: LogDensity
                           ) -> list[list[list[Any]]]:
    """Merge groups whose centres see no valley between them, highest centre first: the
    groups of each mode (the highest centre's first).

    The head is the highest centre left, not the heaviest group: a group whose paths all
    stopped wide has its centre low between modes, every mode is uphill of it, and as a
    head it would take in several modes.  Taken in by a higher centre, it
    joins one mode only.  The density is evaluated at the centres, then on the segments
    of the next heads in batches (:func:`_batch_segments`).
    """
    centres = np.array([_centre(z, lw, [p[0] for p in g]) for g in groups])  # once each
    top = np.asarray(log_density(centres), dtype=float)
    top = np.where(np.isfinite(top), top, -np.inf)
    rest = [int(k) for k in np.argsort(-top, kind="stable")]
    merged: list[list[list[Any]]] = []
    judged: dict[int, dict[int, bool]] = {}
    while rest:
        head, rest = rest[0], rest[1:]
        mode = [groups[head]]
        if rest and np.isfinite(top[head]):
            if head not in judged:
                judged.update(_batch_segments([head, *rest], centres, top, log_density))
            joined = [judged[head][k] for k in rest]
            mode += [groups[k] for k, j in zip(rest, joined, strict=True) if j]
            rest = [k for k, j in zip(rest, joined, strict=True) if not j]
        merged.append(mode)
    return merged


def _batch_segments(order: list[int], centres: NDArray[np.float64], top: NDArray[np.float64],
                    log_density: LogDensity) -> dict[int, dict[int, bool]]:
    """For the first heads of ``order`` whose segments to the later entries fit in
    :data:`BATCH_POINTS` points (always the first, however many its segments need:
    over 2,200 groups), :func:`without_barrier` on each segment: ``{head: {other:
    joined}}``.  The density is evaluated at the segments' midpoints first, then at all
    their points where the midpoint shows no valley: the same judgement as on all
    points (a valley anywhere keeps the pair apart), and most pairs of separated modes
    are decided by one point (with many groups most segment points would lie between
    modes a valley already keeps apart)."""
    heads: list[tuple[int, list[int]]] = []
    points = 0
    for i, h in enumerate(order[:-1]):
        size = (len(order) - i - 1) * SEGMENT_POINTS
        if heads and points + size > BATCH_POINTS:
            break
        if np.isfinite(top[h]):
            heads.append((h, order[i + 1:]))
            points += size
    d = centres.shape[1]
    inside = np.concatenate([segment_points(centres[h], centres[later]) for h, later in heads])
    lower = np.concatenate([np.minimum(top[h], top[later]) for h, later in heads])
    middle = np.asarray(log_density(inside[:, SEGMENT_POINTS // 2]), dtype=float)
    with np.errstate(invalid="ignore"):
        open_ = np.isfinite(middle) & np.isfinite(lower) & (middle >= lower - BARRIER_DEPTH)
    f = np.full(inside.shape[:2], -np.inf)
    if np.any(open_):
        f[open_] = np.asarray(log_density(inside[open_].reshape(-1, d)),
                              dtype=float).reshape(-1, SEGMENT_POINTS)
    out, at = {}, 0
    for h, later in heads:
        m = len(later)
        out[h] = dict(zip(later, (bool(j) for j in without_barrier(top[h], top[later],
                                                                   f[at:at + m])),
                          strict=True))
        at += m
    return out


def _best_path(lw: NDArray[np.float64], paths: list[NDArray[np.intp]]) -> NDArray[np.intp]:
    """The best-converged of ``paths`` (draw indices each): the largest effective sample
    share of its weights (:func:`_ess_share`) among those with at least half as many
    draws as the fullest.  The narrowest (least sum of the log standard deviations) is
    fooled by degenerate paths, flat in one direction and wide in another, that can
    place a centre between two modes."""
    most = max(i.size for i in paths)
    paths = [i for i in paths if 2 * i.size >= most]
    return paths[int(np.argmax([_ess_share(lw[i]) for i in paths]))]


def _centre(z: NDArray[np.float64], lw: NDArray[np.float64],
            paths: list[NDArray[np.intp]]) -> NDArray[np.float64]:
    """The importance-weighted mean of the best-converged of ``paths`` (:func:`_best_path`)."""
    best = _best_path(lw, paths)
    return np.asarray(np.exp(lw[best] - logsumexp(lw[best])) @ z[best], dtype=float)


def _covariance(z: NDArray[np.float64], lw: NDArray[np.float64],
                paths: list[NDArray[np.intp]]) -> NDArray[np.float64]:
    """The importance-weighted covariance of the best-converged of ``paths`` about its
    weighted mean; the unweighted covariance of its draws (the path's own Gaussian
    approximation) when its weights hold fewer than ``D + 1`` effective draws."""
    best = _best_path(lw, paths)
    zb = z[best]
    w = np.exp(lw[best] - logsumexp(lw[best]))
    if not 1.0 / float(np.sum(w**2)) >= zb.shape[1] + 1:
        w = np.full(zb.shape[0], 1.0 / zb.shape[0])
    d = zb - w @ zb
    return np.asarray((d.T * w) @ d, dtype=float)


def _paths_by_group(n: int, groups: list[ModeGroup], num_paths: Paths
                    ) -> list[list[NDArray[np.intp]]]:
    """Each group's draws split by path (the whole group as one path when the draws
    cannot be split)."""
    labels = path_labels(n, num_paths)
    if labels is None:
        labels = np.zeros(n, dtype=np.intp)
    return [_split_by(idx, labels[idx]) for idx, _ in groups]


def _split_by(idx: NDArray[np.intp], labels: NDArray[np.intp]) -> list[NDArray[np.intp]]:
    """``idx`` split by its ``labels``: a part per label, in label order, each in the
    order of ``idx`` (one sort, not a pass over ``idx`` per label)."""
    order = np.argsort(labels, kind="stable")
    cuts = np.flatnonzero(np.diff(labels[order])) + 1
    return np.split(idx[order], cuts) if idx.size else []


def mode_centres(z: NDArray[np.float64], lw: NDArray[np.float64], groups: list[ModeGroup],
                 num_paths: Paths) -> NDArray[np.float64]:
    """Each mode's centre: the importance-weighted mean of its best-converged path's draws.

    Parameters
    ----------
    z, lw, num_paths
        As :func:`group_paths`.
    groups
        Its modes.

    Returns
    -------
    ndarray
        (modes, dims).  The best-converged path has the largest effective sample
        share of its weights among the group's paths with at least half as many
        finite draws as its fullest; when the draws cannot be split by path,
        the mean of the whole group.

    Raises
    ------
    Nothing.
    """
    return np.array([_centre(z, lw, paths)
                     for paths in _paths_by_group(z.shape[0], groups, num_paths)])


def mode_covariances(z: NDArray[np.float64], lw: NDArray[np.float64],
                     groups: list[ModeGroup], num_paths: Paths) -> NDArray[np.float64]:
    """Each mode's (dims, dims) covariance, from the path its centre comes from
    (:func:`mode_centres`, whose parameters these are): the importance-weighted
    covariance of that path's draws, or their plain covariance when the weights hold
    fewer than ``D + 1`` effective draws.  Raises nothing."""
    return np.array([_covariance(z, lw, paths)
                     for paths in _paths_by_group(z.shape[0], groups, num_paths)])


def mode_aware_log_z(draws: NDArray[np.float64], names: list[str], num_paths: int) -> float:
    """``log Z^`` of Pathfinder draws, grouping paths by mode in the parameter columns.

    Raises
    ------
    RuntimeError
        If no draw has a finite ``lp__ - lp_approx__``.
    """
    lw = log_importance_weights(draws, names)
    params = draws[:, [i for i, n in enumerate(names) if not n.endswith("__")]]
    return group_paths(params, lw, num_paths)[1]


class PilotEstimate(NamedTuple):
    """A pilot's ``log Z`` and, when it failed (and 0 was used), why."""

    log_z: float
    failure: str | None = None


def estimate_log_scale(model: cmdstanpy.CmdStanModel, data: Mapping[str, Any] | None,
                       seed: int | None = None, num_paths: int = 4, draws: int = 1000
                       ) -> PilotEstimate:
    """Pilot estimate of ``log Z`` by Pathfinder importance sampling (see the module docstring).

    Parameters
    ----------
    model
        The compiled ORIGINAL model.
    data
        Its data.
    seed
        Pathfinder seed.
    num_paths, draws
        Pathfinder settings (``draws`` per path, no PSIS resampling).

    Returns
    -------
    PilotEstimate
        The estimate, or 0.0 with the reason when Pathfinder failed (a warning
        is logged; the fit's verdict names it).

    Raises
    ------
    Nothing.
    """
    try:
        pf = run_paths(model, data, num_paths=num_paths, draws=draws, seed=seed)
        names = list(pf.column_names)
        arr = np.asarray(pf.draws(), dtype=float)
        est = mode_aware_log_z(arr, names, num_paths)
        logger.info("pilot log-scale (Pathfinder IS estimate of log Z): %.4g", est)
        return PilotEstimate(est)
    except Exception as exc:
        reason = failure_reason(exc, 300)
        logger.warning("Pathfinder pilot failed (%s); using log_scale = 0. Pass log_scale= "
                       "to set it.", reason)
        return PilotEstimate(0.0, reason)
