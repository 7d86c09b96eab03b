"""The wide importance checks: draws from around the modes found.

A defensive mixture of the found modes' covering Gaussian and of Gaussians fitted to the
modes' draws (:func:`wide_log_weights`, in batches by :func:`wide_sample`) weighs the
whole target, so that mass no group of modes holds shows, and
:func:`unexplained_starts` gives starts where that mass is.  The covering half with
Student-t tails (:func:`wide_draws`) estimates each parameter's mean and variance
where its weights allow, against which a tempered run is checked
(:class:`WideMomentsCheck`), and, with truncated weights that err low whatever their
tails, the spread about the run's means that the run must at least hold
(:class:`WideExcessCheck`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.errors import PemcStanError
from pemc_stan.estimators import weights as W
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.estimators.mixture import importance_error, mixture_log_z, unexplained_mass
from pemc_stan.numeric import logsumexp
from pemc_stan.output.diagnostics import ESS_MIN, Reason, point_text
from pemc_stan.output.fit_protocol import by_column
from pemc_stan.sampling.checks import variance_and_error
from pemc_stan.sampling.model import LogDensity

logger = logging.getLogger(__name__)

__all__ = ["EXCESS_Z_MAX", "MODES_OUTSIDE_MAX", "MOMENT_DF", "MOMENT_DRAWS", "MOMENT_K_MAX",
           "MOMENT_MODE_SHARE", "MOMENT_PILOT", "UncomputedCheck", "WideDrawsFailed",
           "MOMENT_Z_MAX", "UNEXPLAINED_STARTS", "WIDE_BATCHES", "WIDE_DRAWS", "WIDE_EXCESS_Z",
           "WIDE_POWER_Z", "WIDE_SEED_OFFSET", "WIDE_SE_MAX", "WIDE_SE_MIN", "WIDE_SPREADS",
           "ModeGaussians", "WideDraws", "WideExcess", "WideExcessCheck", "WideMoments",
           "importance_log_weights", "in_central_region",
           "WideMomentsCheck", "excess_of", "mixture_log_density", "mixture_sample",
           "mode_gaussians", "moments_of", "reported_log_normaliser", "search_gaussians",
           "unexplained_starts", "wide_draws", "wide_log_weights", "wide_moments",
           "wide_resolution", "wide_sample"]


#: Importance sampling around found modes (:func:`wide_log_weights`) draws from their
#: covering Gaussian, half with its standard deviations as they are (among the modes
#: found) and half doubled (beyond them) ...
WIDE_SPREADS = (1.0, 2.0)
#: ... this many draws at a time (cheap next to a run in a few dimensions).
WIDE_DRAWS = 100_000


#: A mode's Gaussian in the wide sampler's proposal (:func:`wide_log_weights`) has the
#: standard deviations of the mode's draws times this: a little wider than the mode, so
#: that its tails and the error of its fitted covariance keep the weights even.
WIDE_MODE_SPREAD = 1.25
#: With several modes found, the split's masses are checked against importance sampling
#: from around the found modes (:func:`wide_log_weights`) in
#: batches (:data:`WIDE_DRAWS` draws each) ...
#: ... until the standard error of the mass they see beyond the groups' (a share of the
#: groups') is at most the lightest group's share over ``WIDE_EXCESS_Z + WIDE_POWER_Z``
#: (a missing mode as heavy as the lightest found is seen), within these bounds, at most
#: :data:`WIDE_BATCHES` batches ...  (A fixed bound cannot see a missing mode lighter
#: than it, however many modes share the mass.)
WIDE_SE_MAX = 0.02
WIDE_SE_MIN = 0.005
WIDE_BATCHES = 8
#: ... and the split is refused when that sampler sees more mass than the groups hold
#: by more than this many standard errors.
WIDE_EXCESS_Z = 4.0
#: A missing mode as heavy as the lightest found is then expected this many standard
#: errors above the threshold (seen with probability Phi(2) = 98%, not half the time).
WIDE_POWER_Z = 2.0
#: Offset of the wide sampler's seed from the run's.
WIDE_SEED_OFFSET = 32452843

#: Gaussians fitted to the modes' draws, ``(log weight, mean, covariance)`` each in base
#: coordinates (the weights need not be normalised).
ModeGaussians = list[tuple[float, NDArray[np.float64], NDArray[np.float64]]]


def _proposal(base: BaseDensity, modes: ModeGaussians | None, df: float = math.inf,
              mode_share: float = 0.5) -> tuple[list[BaseDensity], NDArray[np.float64]]:
    """The wide sampler's mixture: its parts and their log weights.  The covering
    Gaussian with its standard deviations times each of :data:`WIDE_SPREADS` (equal
    parts); with ``modes``, ``mode_share`` of the weight goes to them instead (the fitted
    covariances times :data:`WIDE_MODE_SPREAD` squared).  With finite ``df`` the
    covering parts have Student-t tails of ``df`` degrees of freedom."""
    mean, cov = np.asarray(base.mean, dtype=float), np.asarray(base.cov, dtype=float)
    parts = [BaseDensity(mean, s**2 * cov, "dense", df=df) for s in WIDE_SPREADS]
    log_w = np.full(len(parts), -np.log(len(parts)))
    if modes:
        lm = np.array([m[0] for m in modes], dtype=float)
        parts += [BaseDensity(np.asarray(m[1], dtype=float),
                              WIDE_MODE_SPREAD**2 * np.asarray(m[2], dtype=float), "dense")
                  for m in modes]
        log_w = np.concatenate([log_w + np.log1p(-mode_share),
                                lm - logsumexp(lm) + np.log(mode_share)])
    return parts, log_w


class WideDrawsFailed(Exception):
    """Importance draws that could not be weighed: the message says why (the checks made
    of them are then a named reason, :class:`UncomputedCheck`)."""


class Part(Protocol):
    """A part of a proposal mixture in base coordinates (:class:`BaseDensity` is one)."""

    def sample_z(self, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
        """``n`` draws, shape (n, D)."""

    def log_density_z(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        """The normalised log density at ``z`` (S, D)."""


def mixture_sample(parts: Sequence[Part], log_w: NDArray[np.float64], n: int,
                   rng: np.random.Generator) -> NDArray[np.float64]:
    """``n`` draws (base coordinates) of the mixture of ``parts`` with log weights
    ``log_w`` (need not be normalised), grouped by part.

    Raises
    ------
    ValueError
        If the weights are not finite somewhere they should be.
    """
    counts = rng.multinomial(n, np.exp(log_w - logsumexp(log_w)))
    return np.concatenate([q.sample_z(int(m), rng) for q, m in zip(parts, counts, strict=True)])


def mixture_log_density(parts: Sequence[Part], log_w: NDArray[np.float64],
                        z: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log sum_k exp(log_w[k]) q_k(z)`` at draws ``z`` (S, D): the mixture's log
    density when ``log_w`` is normalised.

    Raises
    ------
    numpy.linalg.LinAlgError
        If a part's covariance is not positive definite.
    """
    return np.asarray(logsumexp([q.log_density_z(z) + w
                                 for q, w in zip(parts, log_w, strict=True)], axis=0))


#: A draw of the wide sampler is unexplained by the modes found where the target's
#: density is more than this many times ``Z`` times their fitted mixture's ...
UNEXPLAINED_RATIO = 100.0
#: ... and this many of them, resampled by weight, start Pathfinder again
#: (:func:`unexplained_starts`) ...
UNEXPLAINED_STARTS = 16
#: ... chosen among this many of the heaviest draws.
UNEXPLAINED_CANDIDATES = 5_000


def unexplained_starts(z: NDArray[np.float64], log_weights: NDArray[np.float64], log_z: float,
                       base: BaseDensity, modes: ModeGaussians, rng: np.random.Generator,
                       n: int = UNEXPLAINED_STARTS) -> NDArray[np.float64]:
    """Up to ``n`` of the wide sampler's draws ``z`` (log weights ``log gamma - log q``,
    proposal :func:`_proposal` of ``base`` and ``modes``) where ``gamma`` exceeds ``Z``
    times the modes' normalised mixture by :data:`UNEXPLAINED_RATIO`, drawn without
    replacement in proportion to their weights, so that each mode the search missed
    gets starts in proportion to its mass.  Shape (0, D) when there are none.

    Raises
    ------
    Nothing.
    """
    empty = np.empty((0, z.shape[1]))
    finite = np.flatnonzero(np.isfinite(log_weights))
    if not modes or finite.size == 0 or not np.isfinite(log_z):
        return empty
    top = finite[np.argsort(-log_weights[finite], kind="stable")[:UNEXPLAINED_CANDIDATES]]
    parts, log_pi = _proposal(base, modes)
    try:
        dens = np.array([q.log_density_z(z[top]) for q in parts]) + log_pi[:, None]
    except np.linalg.LinAlgError:
        return empty
    k = len(WIDE_SPREADS)
    log_m = logsumexp(dens[k:], axis=0) + np.log(2.0)  # the modes' half, normalised
    log_rho = log_weights[top] + logsumexp(dens, axis=0) - log_z - log_m
    cand = top[log_rho > np.log(UNEXPLAINED_RATIO)]
    if cand.size == 0:
        return empty
    p = np.exp(log_weights[cand] - logsumexp(log_weights[cand]))
    pick = rng.choice(cand.size, size=min(n, int(np.count_nonzero(p))), replace=False, p=p)
    return np.asarray(z[cand[pick]], dtype=float)


def wide_log_weights(coords: Any, base: BaseDensity, evaluator: LogDensity,
                     data: Mapping[str, Any] | None, seed: int | None, n: int = WIDE_DRAWS,
                     modes: ModeGaussians | None = None, df: float = math.inf,
                     mode_share: float = 0.5
                     ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``log gamma(x(z)) + log|dx/dz| - log q(z)`` of ``n`` draws ``z`` of ``q`` (base
    coordinates), and the draws: ``q`` is the equal mixture of the Gaussian ``base``
    with its standard deviations times each of :data:`WIDE_SPREADS`, and with
    ``modes`` (Gaussians fitted to the found modes' draws) the defensive mixture of
    that and of them, half each.  Its estimate of ``Z`` is unbiased either way; when
    the modes hold all the mass, their half keeps the weights nearly even (far more
    precise than the covering Gaussians alone), and a mode missing from them is still
    reached by the covering half.  ``df``: the covering parts' Student-t tails;
    ``mode_share``: the modes' part of the mixture (:func:`_proposal`).
    ``-inf`` where the density is not finite.

    Raises
    ------
    WideDrawsFailed
        When the draws cannot be evaluated, or the density is infinite at one.
    """
    rng = np.random.default_rng(seed)
    try:
        parts, log_w = _proposal(base, modes, df, mode_share)
        z = mixture_sample(parts, log_w, n, rng)
        lw = importance_log_weights(coords, evaluator, data, z,
                                    mixture_log_density(parts, log_w, z))
    except (ValueError, RuntimeError, PemcStanError, np.linalg.LinAlgError) as exc:
        raise WideDrawsFailed(f"the density could not be evaluated at them ({exc})") from exc
    if np.any(np.isposinf(lw)):  # nothing to weigh by
        try:
            first = by_column(coords.inverse(z[np.isposinf(lw)][:1], data), lead=1)
            at = f" (the first: {point_text({k: v[0] for k, v in first.items()})})"
        except (ValueError, IndexError, PemcStanError):
            at = ""
        raise WideDrawsFailed(f"the density is infinite at {int(np.sum(np.isposinf(lw)))} "
                              f"of {n} points inside its support{at}")
    return lw, z


def importance_log_weights(coords: Any, evaluator: LogDensity,
                           data: Mapping[str, Any] | None, z: NDArray[np.float64],
                           log_q: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log gamma(x(z)) + log|dx/dz| - log q(z)`` of draws ``z`` (base coordinates) of a
    proposal of log density ``log_q``; ``-inf`` where ``x(z)`` is not finite or lies on
    an edge of its support in floating point (a simplex component that underflows to 0:
    ``log|dz/dx|`` is then infinite; such a draw weighs nothing) or the density is NaN.

    Raises
    ------
    ValueError, RuntimeError
        As the coordinates and the evaluator raise.
    """
    n = z.shape[0]
    x = coords.inverse(z, data)
    ok = np.ones(n, dtype=bool)
    for v in x.values():
        ok &= np.all(np.isfinite(np.asarray(v, dtype=float).reshape(n, -1)), axis=1)
    lw = np.full(n, -np.inf)
    if np.any(ok):
        with np.errstate(divide="ignore", invalid="ignore"):
            _, log_dz_dx = coords.forward({k: np.asarray(v)[ok] for k, v in x.items()}, data)
        inside = np.flatnonzero(ok)[np.isfinite(log_dz_dx)]
        if inside.size:
            kept = {k: np.asarray(v)[inside] for k, v in x.items()}
            lw[inside] = (evaluator.log_density(kept) - log_dz_dx[np.isfinite(log_dz_dx)]
                          - log_q[inside])
    return np.where(np.isnan(lw), -np.inf, lw)


def wide_resolution(log_masses: list[float]) -> float:
    """The standard error the wide sampler's unexplained mass must reach: the lightest
    group's share of the groups' mass over ``WIDE_EXCESS_Z + WIDE_POWER_Z``, within
    [:data:`WIDE_SE_MIN`, :data:`WIDE_SE_MAX`].

    Raises
    ------
    Nothing.
    """
    lm = np.asarray(log_masses, dtype=float)
    lm = lm[np.isfinite(lm)]
    if lm.size == 0:
        return WIDE_SE_MAX
    lightest = float(np.exp(np.min(lm) - logsumexp(lm)))
    return float(np.clip(lightest / (WIDE_EXCESS_Z + WIDE_POWER_Z), WIDE_SE_MIN, WIDE_SE_MAX))


def in_central_region(mean: NDArray[np.float64], cov: NDArray[np.float64],
                      z: NDArray[np.float64], share: float = 0.99) -> NDArray[np.bool_]:
    """Whether each row of ``z`` lies in the central ``share`` of the Gaussian of ``mean``
    and ``cov`` (a ball of its Mahalanobis distance: the chi-square quantile).

    Raises
    ------
    numpy.linalg.LinAlgError
        If ``cov`` is not positive definite.
    """
    from scipy.stats import chi2

    z = np.atleast_2d(np.asarray(z, dtype=float))
    u = np.linalg.solve(np.linalg.cholesky(np.asarray(cov, dtype=float)),
                        (z - np.asarray(mean, dtype=float)).T)
    return np.asarray(np.sum(u * u, axis=0) <= float(chi2.ppf(share, z.shape[1])))


def search_gaussians(search: Any, particles: NDArray[np.float64] | None = None,
                     weights: NDArray[np.float64] | None = None) -> ModeGaussians:
    """The search's modes as :data:`ModeGaussians` (log share, centre and covariance of
    each), and with a run's ``particles`` (base coordinates, (M, D)) that put more than
    :data:`MODES_OUTSIDE_MAX` of their ``weights`` outside every mode's central 99%, the
    Gaussian of that weight too (:func:`_outside_gaussian`), at its share up to a half:
    the run found regions the search did not, and a proposal of the search's modes alone
    would draw nothing there (nor one of the run's regions alone in a mode the run
    left).  None without the search's covariances, or when the weight outside is too
    thin to fit a Gaussian to (the covering part alone is then the proposal: a proposal
    of the search's modes would weigh the target towards them with weights that look
    healthy).

    Raises
    ------
    Nothing.
    """
    if search is None or search.centres is None or search.covariances is None:
        return []
    shares = np.asarray(search.major_shares, dtype=float)
    modes = [(float(np.log(q)), np.asarray(c, dtype=float), np.asarray(v, dtype=float))
             for q, c, v in zip(shares, search.centres, search.covariances, strict=True)
             if q > 0]
    if particles is None or weights is None or not modes:
        return modes
    z = np.asarray(particles, dtype=float)
    w = np.asarray(weights, dtype=float).reshape(-1)
    inside = np.zeros(z.shape[0], dtype=bool)
    beyond = np.ones(z.shape[0], dtype=bool)  # beyond every mode's tail too: fitted
    try:
        for _, centre, cov in modes:
            inside |= in_central_region(centre, cov, z)
            beyond &= ~in_central_region(centre, cov, z, OUTSIDE_FIT_SHARE)
    except np.linalg.LinAlgError:
        return []
    outside = float(np.sum(w[~inside]) / max(float(np.sum(w)), 1e-300))
    if outside <= MODES_OUTSIDE_MAX:
        return modes
    own = _outside_gaussian(z[beyond], w[beyond])
    if own is None:
        return []
    total = logsumexp(np.array([m[0] for m in modes]))
    share = min(outside, 0.5)  # a mode the search found and the run left is still drawn
    return [(lq - total + math.log1p(-share), c, v) for lq, c, v in modes] + [
        (math.log(share), *own)]


def _outside_gaussian(z: NDArray[np.float64], w: NDArray[np.float64]
                      ) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """The weighted mean and covariance of a run's particles ``z`` outside the search's
    modes, or None when their weights ``w`` hold fewer than ``2 (D + 1)`` effective draws
    or the covariance is not positive definite."""
    if not np.any(w > 0):
        return None
    with np.errstate(divide="ignore"):
        log_w = np.log(w)
    if W.ess(log_w) < 2 * (z.shape[1] + 1):
        return None
    mean, cov = W.weighted_moments(z, log_w)
    try:
        np.linalg.cholesky(np.atleast_2d(cov))
    except np.linalg.LinAlgError:
        return None
    return mean, np.atleast_2d(cov)


def mode_gaussians(z: NDArray[np.float64], cells: NDArray[np.intp], groups: NDArray[np.intp],
                    members: list[list[int]], masses: list[EvidenceEstimate]) -> ModeGaussians:
    """The Gaussian of each cell's draws (its group's chains' draws in it) in base
    coordinates, weighted by its group's mass times the cell's share of the group's
    draws; cells with too few draws for a covariance, or in a group of no finite mass,
    are left out."""
    dim = z.shape[2]
    out: ModeGaussians = []
    for g, cells_g in enumerate(members):
        zg, cg = z[groups == g].reshape(-1, dim), cells[groups == g].reshape(-1)
        if not np.isfinite(masses[g].log_z) or zg.shape[0] == 0:
            continue
        for k in cells_g:
            zk = zg[cg == k]
            if zk.shape[0] > 2 * (dim + 1):
                out.append((masses[g].log_z + float(np.log(zk.shape[0] / zg.shape[0])),
                            zk.mean(axis=0), np.atleast_2d(np.cov(zk, rowvar=False))))
    return out


def wide_sample(coords: Any, base: BaseDensity, evaluator: LogDensity,
                 data: Mapping[str, Any] | None, seed: int | None,
                 masses: list[EvidenceEstimate], modes: ModeGaussians | None = None
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """Batches of :func:`wide_log_weights` until the excess mass they see is
    :data:`WIDE_EXCESS_Z` standard errors above 0, or the sampler's own standard error
    (:func:`~pemc_stan.estimators.mixture.importance_error`) is at most
    :func:`wide_resolution` or the masses' own (more draws add nothing then), or could
    not see the missing mass it is meant to see (``WIDE_EXCESS_Z + WIDE_POWER_Z`` times
    its resolution) at even one standard error after :data:`WIDE_BATCHES` batches (the
    error falls as one over the square root of the draws: in many dimensions the
    weights are so uneven that it never gets anywhere, and every batch would be spent
    for nothing).  Returns the log weights and
    their draws (base coordinates).

    Raises
    ------
    WideDrawsFailed
        As :func:`wide_log_weights`.
    """
    log_z, se = mixture_log_z([e.log_z for e in masses], [e.std_error for e in masses])
    if not np.isfinite(log_z):
        return None
    resolution = wide_resolution([e.log_z for e in masses])
    goal = max(resolution, se)
    batches: list[NDArray[np.float64]] = []
    points: list[NDArray[np.float64]] = []
    for b in range(WIDE_BATCHES):
        drawn_b = wide_log_weights(coords, base, evaluator, data,
                                   None if seed is None else seed + WIDE_SEED_OFFSET + 104729 * b,
                                   modes=modes)
        batches.append(drawn_b[0])
        points.append(drawn_b[1])
        drawn = np.concatenate(batches)
        _, z = unexplained_mass(drawn, log_z, se)
        own = importance_error(drawn, log_z)[1]
        blind = (own * np.sqrt((b + 1) / WIDE_BATCHES)
                 > (WIDE_EXCESS_Z + WIDE_POWER_Z) * resolution)
        if z > WIDE_EXCESS_Z or own <= goal or blind:
            break
    return (np.concatenate(batches), np.concatenate(points)) if batches else None


# --------------------------------------------------------------------------- a run's moments

#: The wide check of a tempered run's moments (:func:`wide_moments`) draws from the
#: covering half of the wide sampler with Student-t tails of this many degrees of
#: freedom (a Student-t mode's tails, or a banana's arms, reach beyond a Gaussian's) ...
MOMENT_DF = 3.0
#: ... first this many draws, and only when they hold :data:`~pemc_stan.output.diagnostics.ESS_MIN`
#: effective draws or more (fewer, and the whole batch could not check anything: in many
#: dimensions the weights are too uneven) ...
MOMENT_PILOT = 10_000
#: ... the rest of this many, whose Pareto-smoothed weights must then have a k of at
#: most :data:`MOMENT_K_MAX`, where PSIS estimates and their errors hold (Vehtari et al.
#: 2024).  The pilot alone cannot judge k: on a curved mode's far arm k from the pilot's
#: draws is far above its value from the whole batch.
MOMENT_DRAWS = 100_000
MOMENT_K_MAX = 0.7
#: The search's mode Gaussians' share of those draws: enough for a needle's region (ten
#: thousand draws of 100,000), small enough to leave the covering part's weights in a
#: curved mode's arms nearly as even as without them (half would double them there).
MOMENT_MODE_SHARE = 0.1
#: ... and, where the run puts more than this share of its weight outside the search's
#: modes, the Gaussian of that weight too (:func:`search_gaussians`).
MODES_OUTSIDE_MAX = 0.05
#: That Gaussian is fitted to the particles beyond every mode's central share this large
#: (a mode's own tail, a percent of its draws beyond its central 99%, would pull it in).
OUTSIDE_FIT_SHARE = 0.9999
#: A run's mean or variance this many combined standard errors from the importance
#: estimate is suspect (the benchmark's bound, 4 of the run's own errors).
MOMENT_Z_MAX = 4.0


@dataclass(frozen=True, eq=False)
class WideMoments:
    """Importance-sampling estimates of each parameter column's mean and variance, with
    their standard errors, from the draws of :func:`wide_moments` (nan where a value with
    weight is not finite); the weights' Pareto k and the number of draws."""

    columns: tuple[str, ...]
    mean: NDArray[np.float64]
    mean_se: NDArray[np.float64]
    var: NDArray[np.float64]
    var_se: NDArray[np.float64]
    pareto_k: float
    draws: int


def _moment(values: NDArray[np.float64], log_w: NDArray[np.float64]) -> tuple[float, float]:
    """``(estimate, standard error)`` of ``E[values]`` under ``log_w``; nan when a value
    with weight is not finite (a bound's exp overflowed far out in the tails; values of
    draws whose weight underflows to 0 do not count).

    The function's own Pareto k (``w |f - E f|``) is not asked: on heavy-tailed targets
    it exceeds the bound for runs that are right, so it would withhold the check while
    telling nothing.
    """
    try:
        with np.errstate(all="ignore"):
            est = W.weighted_mean(values, log_w)
    except ValueError:  # a value with weight is not finite
        return float("nan"), float("nan")
    return float(est.mean), float(est.std_error)


@dataclass(frozen=True, eq=False)
class WideDraws:
    """Draws from around the modes found for a tempered run's checks (:func:`wide_draws`):
    their log importance weights (``-inf`` where the density is not finite) and each
    parameter column's values."""

    log_w: NDArray[np.float64]
    values: dict[str, NDArray[np.float64]]

    @property
    def size(self) -> int:
        """The number of draws."""
        return int(self.log_w.size)


def wide_draws(coords: Any, base: BaseDensity, evaluator: LogDensity,
               data: Mapping[str, Any] | None, seed: int | None, n: int = MOMENT_DRAWS,
               modes: ModeGaussians | None = None) -> WideDraws:
    """Draws of :func:`wide_log_weights` whose covering part has Student-t tails of
    :data:`MOMENT_DF`, :data:`MOMENT_MODE_SHARE` of them from ``modes`` (the search's
    Gaussians, when given: a narrow mode inside the covering Gaussian, a needle holding
    half the mass, gets no draw from it, and its weights would look healthy without it):
    first
    :data:`MOMENT_PILOT`, then, only when those hold
    :data:`~pemc_stan.output.diagnostics.ESS_MIN` effective draws, the rest up to ``n``.

    Raises
    ------
    WideDrawsFailed
        When the draws cannot be evaluated or mapped back, a density is infinite, or no
        draw has a finite weight.
    """
    seed = None if seed is None else seed + 2 * WIDE_SEED_OFFSET
    batches = []
    for size in (MOMENT_PILOT, n - MOMENT_PILOT):
        if size <= 0:
            break
        drawn = wide_log_weights(coords, base, evaluator, data, seed, n=size, modes=modes,
                                 df=MOMENT_DF, mode_share=MOMENT_MODE_SHARE)
        seed = None if seed is None else seed + 1
        if not np.any(np.isfinite(drawn[0])):
            raise WideDrawsFailed(f"none of {size} draws has a finite density")
        batches.append(drawn)
        if len(batches) == 1 and not W.ess(drawn[0]) >= ESS_MIN:
            logger.info("wide draws: %.0f effective of %d draws: no more drawn",
                        W.ess(drawn[0]), size)
            break
    z = np.concatenate([b[1] for b in batches])
    try:
        values = by_column(coords.inverse(z, data), lead=1)
    except (ValueError, PemcStanError) as exc:
        raise WideDrawsFailed(f"the draws could not be mapped back ({exc})") from exc
    return WideDraws(np.concatenate([b[0] for b in batches]),
                     {c: np.asarray(v, dtype=float) for c, v in values.items()})


def wide_moments(coords: Any, base: BaseDensity, evaluator: LogDensity,
                 data: Mapping[str, Any] | None, seed: int | None) -> WideMoments | None:
    """Each column's mean and variance by importance sampling from around the search's
    modes (:func:`wide_draws`): an estimate that needs no chain to reach a region,
    against which a tempered run's own estimates are checked
    (:class:`WideMomentsCheck`).  None as :func:`moments_of`, or when the draws cannot
    be weighed (:class:`WideDrawsFailed`, logged).

    Raises
    ------
    Nothing.
    """
    try:
        return moments_of(wide_draws(coords, base, evaluator, data, seed))
    except WideDrawsFailed as exc:
        logger.info("wide moments: %s", exc)
        return None


def moments_of(draws: WideDraws | None) -> WideMoments | None:
    """Each column's mean and variance from ``draws``; None without all
    :data:`MOMENT_DRAWS` of them (the first :data:`MOMENT_PILOT` held too few effective
    draws, or fewer were asked) or when their weights' Pareto k is over
    :data:`MOMENT_K_MAX`.

    Raises
    ------
    Nothing.
    """
    if draws is None or draws.size < MOMENT_DRAWS:
        return None
    log_w, k = W.pareto_smooth(draws.log_w)
    if not k <= MOMENT_K_MAX:
        logger.info("wide moments: Pareto k %.2f of %d draws: no check", k, log_w.size)
        return None
    cols, out = [], []
    for column, f in draws.values.items():
        f = np.where(np.isfinite(log_w), f, 0.0)
        m, m_se = _moment(f, log_w)
        with np.errstate(all="ignore"):
            v, v_se = _moment((f - m) ** 2, log_w)
        cols.append(column)
        out.append((m, m_se, v, v_se))
    a = np.array(out, dtype=float).reshape(-1, 4)
    return WideMoments(tuple(cols), a[:, 0], a[:, 1], a[:, 2], a[:, 3], k, int(log_w.size))


class WideMomentsCheck:
    """The ``wide_moments`` reason of a tempered fit: a parameter's mean or variance
    :data:`MOMENT_Z_MAX` combined standard errors from the wide importance estimate
    (:func:`wide_moments`).  Tempered chains that rarely reach part of a mode (a
    banana's arms, a Student-t mode's tails) give estimates whose error bars are too
    small, with every chain agreeing (docs/decisions.md); importance draws reach those
    regions without a chain.  It judges the estimate the fit reports: its cells' where
    it has them (:attr:`~pemc_stan.sampling.fit.ExtendedFit.cell_estimate`, whose parts
    may miss such regions too).  A class, not a closure, so that a fit still pickles.
    """

    def __init__(self, moments: WideMoments) -> None:
        self.moments = moments

    def worst(self, fit: Any) -> tuple[float, str, str, float, float, float, float]:
        """``(|z|, "mean" or "variance", column, run's estimate and error, importance
        estimate and error)`` of the farthest quantity (``|z|`` 0 when none compares)."""
        mo = self.moments
        worst: tuple[float, str, str, float, float, float, float] = (
            0.0, "", "", 0.0, 0.0, 0.0, 0.0)
        for j, column in enumerate(mo.columns):
            try:
                run = fit.expectation(column)  # the reported estimate: the cells' or the run's
                spread = variance_and_error(fit, column, float(run.mean), reported=True)
            except (KeyError, ValueError):
                continue
            for what, (est, est_se), ref, ref_se in (
                    ("mean", (float(run.mean), float(run.mcse)), mo.mean[j], mo.mean_se[j]),
                    ("variance", spread, mo.var[j], mo.var_se[j])):
                z = abs(est - ref) / float(np.hypot(est_se, ref_se))
                if np.isfinite(z) and z > worst[0]:
                    worst = (z, what, column, est, est_se, ref, ref_se)
        return worst

    def __call__(self, fit: Any) -> tuple[str, Reason | None]:
        """``("wide_moments", reason or None)``."""
        z, what, column, run, run_se, ref, ref_se = self.worst(fit)
        if not z > MOMENT_Z_MAX:
            return "wide_moments", None
        return "wide_moments", Reason(
            "wide_moments", f"the {what} of {column} is {run:.4g} +- {run_se:.2g} in these "
            f"draws but {ref:.4g} +- {ref_se:.2g} by importance sampling from around the "
            f"modes found ({self.moments.draws} independent draws, Pareto k "
            f"{self.moments.pareto_k:.2f}), {z:.1f} standard errors apart: the chains "
            "rarely reach part of the target (a curved mode's arms, a heavy tail), and "
            "their error bars do not show it", "reparameterise where the model is curved "
            "or heavy-tailed; the importance estimates are a cross-check in low "
            "dimensions (pemc_stan.modes.wide.wide_moments)")


class UncomputedCheck:
    """The reason of a tempered fit whose check's importance draws could not be weighed
    (:class:`WideDrawsFailed`): ``name`` (``wide_checks`` for the wide moments and spread,
    ``search_mass`` for the search's mass check) says which check is not made, instead of
    leaving it out of the verdict.  A class, not a closure, so that a fit still pickles."""

    def __init__(self, name: str, what: str, why: str) -> None:
        self.name, self.what, self.why = name, what, why

    def __call__(self, fit: Any) -> tuple[str, Reason | None]:
        """``(name, reason)``."""
        return self.name, Reason(
            self.name, f"{self.what} could not be computed: its importance draws could not "
            f"be weighed ({self.why}); the estimate is not checked against draws that need "
            "no chain", "where the density is infinite or cannot be evaluated inside its "
            "support, write it so that it is finite there (a bound, a reparameterisation), "
            "or judge the run by its other checks alone")


# ------------------------------------------------------------- mass beyond a run's spread

#: A run's second moment about its own mean of a column, times its evidence, this many
#: combined standard errors below the truncated importance estimate of the same product
#: (:class:`WideExcessCheck`) is a miss.  One-sided: that estimate errs low, never high.
EXCESS_Z_MAX = 4.0


@dataclass(frozen=True, eq=False)
class WideExcess:
    """Truncated importance estimates of ``Z E[(x - m)^2]`` for each column ``x`` about
    the run's own mean ``m``, from draws around the modes found (:func:`excess_of`).

    Attributes
    ----------
    columns
        The parameter columns.
    centres
        The run's means ``m``, about which the second moments are taken.
    log_estimate
        ``log`` of each estimate (``-inf`` where no draw has weight).
    rel_se
        Each estimate's standard error over the estimate.
    draws
        How many draws the estimates use.
    """

    columns: tuple[str, ...]
    centres: NDArray[np.float64]
    log_estimate: NDArray[np.float64]
    rel_se: NDArray[np.float64]
    draws: int


def excess_of(draws: WideDraws, centres: Mapping[str, float]) -> WideExcess:
    """Truncated importance estimates of ``Z E[(x - m)^2]`` about the given centres.

    ``Z E[f] = E_q[w f]`` with ``w = gamma / q`` is unbiased.  Each product ``w f >= 0``
    is truncated at its mean times ``sqrt(n)`` (Ionides 2008), which bounds its variance
    and can only lower the estimate: with heavy-tailed weights (a Pareto k over 0.7,
    where the moments of :func:`moments_of` are withheld) the estimate still errs low,
    so it can show mass the run lacks but not invent it.

    Raises
    ------
    Nothing.
    """
    finite = np.isfinite(draws.log_w)
    top = float(np.max(draws.log_w[finite]))
    w = np.where(finite, np.exp(draws.log_w - top), 0.0)
    n = draws.size
    cols, centre, log_est, rel = [], [], [], []
    for column, x in draws.values.items():
        m = centres.get(column)
        if m is None or not np.isfinite(m):
            continue
        with np.errstate(all="ignore"):
            s = np.where(w > 0, w * (x - m) ** 2, 0.0)
        if not np.all(np.isfinite(s)):
            continue
        s = np.minimum(s, float(np.mean(s)) * math.sqrt(n))
        mean = float(np.mean(s))
        cols.append(column)
        centre.append(float(m))
        log_est.append(math.log(mean) + top if mean > 0 else -math.inf)
        rel.append(float(np.std(s)) / math.sqrt(n) / mean if mean > 0 else math.inf)
    return WideExcess(tuple(cols), np.array(centre), np.array(log_est), np.array(rel), n)


def reported_log_normaliser(fit: Any) -> EvidenceEstimate | None:
    """The reported log normaliser of the density as written: the cells' where the fit
    reports them, else the run's (CT's even for an improper prior); None when the fit
    has none."""
    try:
        cells = getattr(fit, "cell_estimate", None)
        own = getattr(fit, "log_normaliser", None)
        est = cells.evidence() if cells is not None else own() if callable(own) \
            else fit.run_log_z()
    except (PemcStanError, ValueError, AttributeError):
        return None
    return est if est is not None and np.isfinite(est.log_z) else None


class WideExcessCheck:
    """The ``wide_excess`` reason of a tempered fit: for some column, the run's evidence
    times its second moment about its own mean falls :data:`EXCESS_Z_MAX` combined
    standard errors short of the truncated importance estimate (:func:`excess_of`).  A
    slab under a peak that the base does not reach (a change point's early-time mean)
    is missed by every chain alike, and the run's own error bars cannot show it; its
    importance weights are too heavy-tailed for :class:`WideMomentsCheck`, but a low
    estimate that still exceeds the run's is evidence.  It judges the estimate the fit
    reports (its cells' where it has them), and only a fit with a log normaliser of its
    own (its cells', or CT's; PE's log Z needs bridge sampling).  A class, not a
    closure, so that a fit still pickles.
    """

    def __init__(self, excess: WideExcess) -> None:
        self.excess = excess

    def worst(self, fit: Any) -> tuple[float, str, float]:
        """``(z, column, run's share of the importance estimate)`` of the column farthest
        below (``z`` 0 when none compares)."""
        ex = self.excess
        run = reported_log_normaliser(fit)
        worst: tuple[float, str, float] = (0.0, "", 1.0)
        if run is None:
            return worst
        for column, m, log_est, rel_is in zip(ex.columns, ex.centres, ex.log_estimate,
                                             ex.rel_se, strict=True):
            try:
                second, second_se = variance_and_error(fit, column, float(m), reported=True)
            except (KeyError, ValueError):
                continue
            if not (second > 0 and np.isfinite(log_est)):
                continue
            ratio = math.exp(log_est - run.log_z - math.log(second))
            rel_run = math.hypot(float(run.std_error), second_se / second)
            z = (ratio - 1.0) / math.hypot(ratio * rel_is, rel_run)
            if np.isfinite(z) and z > worst[0]:
                worst = (z, column, 1.0 / ratio)
        return worst

    def __call__(self, fit: Any) -> tuple[str, Reason | None]:
        """``("wide_excess", reason or None)``."""
        z, column, share = self.worst(fit)
        if not z > EXCESS_Z_MAX:
            return "wide_excess", None
        return "wide_excess", Reason(
            "wide_excess", f"the spread of {column} about its mean, weighed by the run's "
            f"evidence, is {share:.2g} of what {self.excess.draws} independent draws from "
            f"around the modes found put there, {z:.1f} standard errors short (that "
            "estimate is truncated and errs low, never high): the chains missed a wide "
            "part of the target (a slab under a peak, a heavy tail)", "let the mode split "
            "run (split_modes='auto'), whose plain NUTS chains reach such parts, or "
            "reparameterise; the tempered estimates leave that part out")
