"""The checks every method's fit is judged by: divergences, trajectories cut at the maximum
tree depth, R-hat, ESS, the precision of each sd, the chains' agreement, the modes the
search found and whether it stopped too soon."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from pemc_stan.core.marginalise import refusal
from pemc_stan.core.search import UNSEEN_SHARE_MAX
from pemc_stan.output.diagnostics import (
    CHAIN_Z_MAX,
    DIVERGENT_SHARE_MAX,
    ESS_MIN,
    RHAT_MAX,
    UNVISITED_EXPECTED_MIN,
    UNVISITED_SHARE_MIN,
    VARIANCE_SE_MAX,
    Reason,
    chains_disagree,
    point_text,
    treedepth_reason,
)
from pemc_stan.stan.analysis import compared_only_parameters

logger = logging.getLogger(__name__)

__all__ = ["RUN_ESTIMATE_REASONS", "estimates_ess", "shared_checks", "unvisited_modes",
           "unvisited_reason", "search_incomplete", "variance_error", "variance_and_error",
           "carried_variance_floor", "minor_reasons"]

#: Reasons that judge how well the run's own estimate is known: its chains' mixing and
#: agreement, its effective draws, its temperatures and its modes' entries (CT's
#: ``mode_acceptance``: a found mode whose steps are rejected, which the chains enter too
#: rarely; its cell has the search's part there).  Where the fit reports its cells'
#: estimate instead (``ExtendedFit.cell_estimate``: independent importance draws with
#: their own errors), these alone do not make it suspect; the reasons that say the run
#: missed a region (divergences, cut trajectories, the search, the refused split's
#: chains, the wide checks of the reported estimate) still do.
RUN_ESTIMATE_REASONS = frozenset({
    "rhat", "ess", "sd_precision", "chains_agree", "unvisited_modes", "weight_ess",
    "beta_round_trips", "beta_ends", "base_moments", "log_z_chains", "log_z_rounds",
    "copies_collapsed", "copies_agree", "mode_acceptance"})


class ExtendedFit(Protocol):
    """What the checks read of a fit (:class:`~pemc_stan.sampling.fit.ExtendedFit` is one,
    with every method's fit): its draws' mixing, its weighted estimates, its search, and
    the checks and estimate its run's plan gave it."""

    search: Any
    variance_se_floor: Mapping[str, float]
    later_checks: tuple[Callable[[Any], tuple[str, Reason | None]], ...]
    cell_estimate: Any

    @property
    def minor_reasons(self) -> frozenset[str]: ...

    @property
    def any_divergence(self) -> bool: ...

    @property
    def reaches_unsearched(self) -> bool: ...

    @property
    def chains(self) -> int: ...

    @property
    def iterations(self) -> int: ...

    def expectation(self, f: Any, **kwargs: Any) -> Any: ...

    def run_expectation(self, f: Any) -> Any: ...

    def parameter_columns(self) -> list[str]: ...

    def target_weights(self) -> NDArray[np.float64]: ...

    def particle_coordinates(self) -> NDArray[np.float64] | None: ...

    def nuts_counts(self) -> Any: ...

    def convergence(self) -> pd.DataFrame: ...

    def chain_groups(self) -> NDArray[np.intp]: ...

    def chain_expectations(self, column: str) -> Any: ...


def minor_reasons(fit: ExtendedFit) -> frozenset[str]:
    """The reasons that alone do not make ``fit`` suspect: its class's, and
    :data:`RUN_ESTIMATE_REASONS` when it reports its cells' estimate.

    Raises
    ------
    Nothing.
    """
    cells = fit.cell_estimate is not None
    return fit.minor_reasons | (RUN_ESTIMATE_REASONS if cells else frozenset())


def unvisited_modes(fit: ExtendedFit, ess: float | None = None) -> list[tuple[int, float]]:
    """The pilot's modes (holding at least ``UNVISITED_SHARE_MIN`` of the mass it found)
    to which the target estimates give less than one effective draw's weight, as
    ``(index, pilot share)``.

    A mode's cell is the region nearer, in the metric of the search's Gaussian, to the
    mode's centre than to any other found mode's; its weight is the sum of the
    :meth:`~pemc_stan.sampling.fit.ExtendedFit.target_weights` of the particles in it
    (continuous tempering's eq-21 weights reach the draws at every beta, not only those
    near 1).  With ``ess`` effective draws, a cell whose weight is under ``1 / ess``
    holds no effective draw; it is named only when the pilot's share says it should
    hold ``UNVISITED_EXPECTED_MIN`` of them (a small mode can lack a draw by chance in a
    sound run).  ``ess``: the smallest ESS
    of the weighted estimates of the parameters (:func:`estimates_ess`, the slowest
    column being the one that moves between modes); computed when not given.  Empty
    without a search, with fewer than two modes found, or without base coordinates.

    Raises
    ------
    Nothing.
    """
    search = fit.search
    centres = None if search is None else search.centres
    if (centres is None or search.base is None or len(search.major_shares) < 2
            or np.shape(centres)[1] != search.base.dim):
        return []
    z = fit.particle_coordinates()
    w = fit.target_weights().reshape(-1)
    if z is None or z.ndim != 2 or z.shape[1] != search.base.dim or z.shape[0] != w.size:
        return []
    ok = np.isfinite(w) & np.all(np.isfinite(z), axis=1)
    w = np.where(ok, w, 0.0)
    total = float(np.sum(w))
    if not total > 0:
        return []
    w = w / total
    n = float(estimates_ess(fit) if ess is None else ess)
    if not np.isfinite(n):
        n = 1.0 / float(np.sum(w**2))
    weight = np.bincount(search.base.nearest_centre(z[ok], centres), weights=w[ok],
                         minlength=len(centres))
    return [(k, float(p)) for k, p in enumerate(search.major_shares)
            if p >= UNVISITED_SHARE_MIN and weight[k] * n < 1.0
            and p * n >= UNVISITED_EXPECTED_MIN]


def estimates_ess(fit: ExtendedFit) -> float:
    """The smallest ESS of the weighted estimates of the parameters' means (NaN: none).

    Raises
    ------
    Nothing.
    """
    values = [float(fit.run_expectation(c).ess) for c in fit.parameter_columns()]
    finite = [v for v in values if np.isfinite(v)]
    return min(finite) if finite else float("nan")


#: A mode's share of the mass is confirmed when the importance draws from the search's
#: Gaussians put it at least this many standard errors above ``UNVISITED_SHARE_MIN``.
CONFIRM_Z = 2.0


def confirmed_shares(fit: ExtendedFit) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """Each search mode's share of the mass by an estimate with its own error (a later
    check's ``mode_shares``: the importance draws from the search's Gaussians), with the
    standard errors; None when the run has none."""
    for check in fit.later_checks:
        shares = getattr(check, "mode_shares", None)
        found = shares(fit) if callable(shares) else None
        if found is not None:
            return found
    return None


def unvisited_reason(fit: ExtendedFit, ess: float | None = None) -> Reason | None:
    """The pilot's modes the target estimates leave out (:func:`unvisited_modes`): a reason
    for those whose mass an estimate with its own error confirms (:func:`confirmed_shares`,
    at least :data:`CONFIRM_Z` standard errors above ``UNVISITED_SHARE_MIN``), else a
    note (the Pathfinder share alone is a guess: a path's importance weights can put a
    mode of no mass at half of it); None when every mode is reached."""
    missed = unvisited_modes(fit, ess)
    if not missed:
        return None
    checked = confirmed_shares(fit)
    sure = [] if checked is None else [
        (k, p) for k, p in missed
        if checked[0][k] - CONFIRM_Z * checked[1][k] >= UNVISITED_SHARE_MIN]
    if sure and checked is not None:
        listed = "; ".join(
            f"mode {k + 1} at {mode_where(fit, k)}, {100 * checked[0][k]:.1f}% +- "
            f"{100 * checked[1][k]:.1f}% of the mass found (importance draws from the "
            f"search's Gaussians; Pathfinder's estimate {100 * p:.0f}%)" for k, p in sure)
        return Reason(
            "unvisited_modes", f"the weighted draws hardly reach {listed}: under one "
            "effective draw's weight where they should hold several, so the estimates "
            "leave it out", "run longer (iter_sampling)")
    spread = float(getattr(fit.search, "mass_scatter", 0.0))
    listed = "; ".join(f"mode {k + 1} at {mode_where(fit, k)}, {100 * p:.0f}% of the mass "
                       "found" for k, p in missed)
    seen = ("no importance draws checked it" if checked is None else "importance draws "
            "from the search's Gaussians put " + ", ".join(
                f"{100 * checked[0][k]:.1f}% +- {100 * checked[1][k]:.1f}%"
                for k, _ in missed) + " there")
    return Reason(
        "unvisited_modes", f"the search's Pathfinder estimate puts {listed}, which the "
        f"weighted draws hardly reach; {seen}" + (
            f" (its paths' log masses spread over {spread:.2g})" if spread > 0 else "")
        + ": a guess nothing confirms, so the fit is not judged by it",
        "if that mode matters, run longer (iter_sampling) and see whether the draws reach "
        "it", note=True)


def mode_where(fit: ExtendedFit, k: int, limit: int = 3) -> str:
    """Where the search's mode ``k`` is, in the user's parameters (a few values:
    ``mu = 3.1, sigma = 0.52, ...``), or in base coordinates when they cannot be mapped.

    Raises
    ------
    Nothing.
    """
    centre = np.asarray(fit.search.centres, dtype=float)[k]
    coords = getattr(getattr(fit, "result", None), "coordinates", None)
    try:
        if coords is None:
            raise ValueError("no base coordinates")
        named = coords.inverse(centre[None, :], getattr(fit, "data", {}))
        return point_text({name: np.asarray(v)[0] for name, v in named.items()}, limit)
    except Exception:  # no coordinates, or data they need: the base coordinates say it
        return point_text({"z": centre}, limit)


def search_incomplete(fit: ExtendedFit) -> Reason | None:
    """The search found several modes and stopped while one more path had more than
    :data:`~pemc_stan.core.search.UNSEEN_SHARE_MAX` chance of finding another.

    A mode split samples only the modes found, so a mode missed is missing from every
    estimate with nothing in the draws to show it: a reason.  Tempered chains reach
    beyond the modes found (``reaches_unsearched``), and what they reached is judged by
    the run's own checks (the cells' weights, the wide and search-mass checks, R-hat):
    a note that says what was not searched, as a ridge of maxima (a shell, a curved
    valley) keeps a search finding new points on it however long it runs.
    """
    search = fit.search
    unseen = float(getattr(search, "unseen", float("nan")))
    if search is None or search.major_modes < 2 or not unseen > UNSEEN_SHARE_MAX:
        return None
    tempered = fit.reaches_unsearched
    return Reason(
        "mode_search", f"the search for modes stopped ({search.stopped}) after finding "
        f"{search.major_modes} modes, with an estimated {100 * unseen:.0f}% chance that one "
        "more path would find a mode not yet seen: " + (
            "a mode neither the search nor the tempered chains reached would be missing "
            "from these estimates (the run's own checks judge what the chains reached)"
            if tempered else "a mode it missed is missing from these estimates"),
        "search longer: with method='ct', raise num_paths (the search runs up to 16 x "
        "num_paths paths); the modes found are in the diagnostics (pilot_modes)",
        note=tempered)


def variance_error(fit: ExtendedFit, column: str, mean: float) -> float:
    """The Monte-Carlo standard error of the fit's weighted estimate of the variance of
    ``column`` (about ``mean``, its estimated mean), relative to that estimate; NaN for a
    column that does not vary.

    The error is at least the fit's ``variance_se_floor`` for the column: a run that
    continued one short of this precision and drew the tails less often reports a smaller
    variance with a smaller error.

    Raises
    ------
    KeyError
        For an unknown column.
    """
    variance, error = variance_and_error(fit, column, mean)
    error = max(error, fit.variance_se_floor.get(column, 0.0))
    return error / variance if variance > 0 and np.isfinite(error) else float("nan")


def variance_and_error(fit: ExtendedFit, column: str, mean: float, reported: bool = False
                       ) -> tuple[float, float]:
    """The run's own weighted estimate of the variance of ``column`` about ``mean`` (with
    ``reported``, the fit's reported one: its cells' where it has them) and its
    Monte-Carlo standard error (no floor).

    Raises
    ------
    KeyError
        For an unknown column.
    """
    estimate = (fit.expectation if reported else fit.run_expectation)(
        lambda view: (view[column] - mean) ** 2)
    return float(estimate.mean), float(estimate.mcse)


def carried_variance_floor(before: ExtendedFit, after: ExtendedFit) -> dict[str, float]:
    """The floors on ``after``'s variance errors when it continued ``before`` for
    ``sd_precision``: each column's error in ``before`` (or its floor, if larger), scaled
    by the square root of the ratio of the two runs' draws per chain.

    Raises
    ------
    Nothing.
    """
    shrink = np.sqrt(before.iterations / max(after.iterations, 1))
    floor = {}
    for column in before.parameter_columns():
        mean = float(before.run_expectation(column).mean)
        error = max(variance_and_error(before, column, mean)[1],
                    before.variance_se_floor.get(column, 0.0))
        if np.isfinite(error):
            floor[column] = float(error * shrink)
    return floor


def shared_checks(fit: ExtendedFit) -> Iterator[tuple[str, Reason | None]]:
    """The ``(check name, Reason or None)`` pairs every method's fit is judged by."""
    nuts = fit.nuts_counts()
    share = nuts.divergences / max(nuts.transitions, 1)
    yield "divergences", None if share <= (0.0 if fit.any_divergence else DIVERGENT_SHARE_MAX) \
        else Reason("divergences", f"{nuts.divergences} of {nuts.transitions} transitions "
                    f"({100 * share:.2g}%) diverged: " + (
                        "NUTS could not enter part of the model (a narrow or curved "
                        "region of a mode), so the draws may miss it" if fit.any_divergence
                        else "the extended target was not explored faithfully"),
                    "increase adapt_delta (e.g. 0.95), or reparameterise the model")
    tree = getattr(getattr(getattr(fit, "result", None), "program", None), "tree", None)
    flat = [] if tree is None else compared_only_parameters(tree)
    kept = (refusal(tree) or "marginalise='none' was given") if tree is not None and flat \
        else ""
    yield "max_treedepth", treedepth_reason(nuts, flat, kept)
    for later in fit.later_checks:  # evidence from outside the fit (the run's plan)
        yield later(fit)
    worst_rhat = (float("nan"), "")
    worst_ess: tuple[float, str, str] = (float("inf"), "", "")
    worst_chain = (0.0, "")
    worst_spread = (0.0, "")
    own_ess: list[float] = []
    n_chains = fit.chains
    groups = fit.chain_groups()
    mixing = fit.convergence()
    for column in fit.parameter_columns():
        rhat, ess = (float(v) for v in mixing.loc[column, ["r_hat", "ess_bulk"]])
        if np.isfinite(rhat) and not rhat <= worst_rhat[0]:
            worst_rhat = (rhat, column)
        if np.isfinite(ess) and ess < worst_ess[0]:
            worst_ess = (ess, column, "bulk ESS of the resampled draws")
        # the ESS behind the error bar reported with the estimate (the weighted
        # estimator's): resampling adds independent noise, which can hide how slowly
        # the weighted estimate itself mixes
        estimate = fit.run_expectation(column)
        own = float(estimate.ess)
        own_ess.append(own)
        if np.isfinite(own) and own < worst_ess[0]:
            worst_ess = (own, column, "ESS of the weighted estimate")
        spread = variance_error(fit, column, float(estimate.mean))
        if spread > worst_spread[0]:
            worst_spread = (spread, column)
        if n_chains > 1:
            means, ses = fit.chain_expectations(column)
            for g in np.unique(groups):
                z = chains_disagree(means[groups == g], ses[groups == g])
                if np.isfinite(z) and z > worst_chain[0]:
                    worst_chain = (z, column)
    yield "rhat", None if not worst_rhat[0] > RHAT_MAX else Reason(
        "rhat", f"R-hat of the resampled draws of {worst_rhat[1]} is {worst_rhat[0]:.3f} "
        f"(> {RHAT_MAX}): the chains disagree", "run longer (iter_sampling) or more "
        "chains, and check whether the chains sit in different modes")
    yield "ess", None if not worst_ess[0] < ESS_MIN else Reason(
        "ess", f"the {worst_ess[2]} of {worst_ess[1]} is {worst_ess[0]:.0f} "
        f"(< {ESS_MIN:.0f})", "run longer (iter_sampling)")
    yield "sd_precision", None if not worst_spread[0] > VARIANCE_SE_MAX else Reason(
        "sd_precision", f"the Monte-Carlo error of the variance of {worst_spread[1]} is "
        f"{100 * worst_spread[0]:.0f}% of it (> {100 * VARIANCE_SE_MAX:.0f}%): its sd is known "
        f"only to about {50 * worst_spread[0]:.0f}%, as its tails were seldom drawn",
        "run longer (iter_sampling)")
    if fit.search is not None:
        finite = [e for e in own_ess if np.isfinite(e)]
        yield "unvisited_modes", unvisited_reason(fit, min(finite) if finite
                                                  else float("nan"))
        yield "mode_search", search_incomplete(fit)
    if n_chains > 1:
        yield "chains_agree", None if worst_chain[0] <= CHAIN_Z_MAX else Reason(
            "chains_agree", f"one chain's weighted mean of {worst_chain[1]} is "
            f"{worst_chain[0]:.1f} standard errors from the other chains': the chains saw "
            "different distributions (modes)", "run longer, or change the method's "
            "options so that it moves between modes (see the diagnostics' advice)")


#: Columns a ``tails`` note names before it says how many more there are.
TAIL_NOTE_COLUMNS = 3


def tail_notes(fit: ExtendedFit) -> tuple[Reason, ...]:
    """The ``tails`` note: the reported means and sds whose terms' tails are too heavy
    for their error bars (:mod:`pemc_stan.estimators.tails`), worst first; none when
    every error bar stands.

    Raises
    ------
    Nothing beyond the fit's own errors.
    """
    heavy: list[tuple[float, str, float]] = []
    for column in fit.parameter_columns():
        try:
            mean = fit.expectation(column)
            centre = float(mean.mean)
            spread = fit.expectation(lambda view, c=column, m=centre: (view[c] - m) ** 2)
        except (ValueError, KeyError) as exc:  # an estimate the other checks judge
            logger.debug("no tail measured for %s: %s", column, exc)
            continue
        for est, what in ((mean, f"the mean of {column}"), (spread, f"the sd of {column}")):
            if not est.tail_reliable:
                heavy.append((est.khat, what, float(est.get("khat_max", float("nan")))))
                break
    if not heavy:
        return ()
    heavy.sort(reverse=True)
    named = "; ".join(f"{what} (tail k {k:.2f} > {bound:.2f})"
                      for k, what, bound in heavy[:TAIL_NOTE_COLUMNS])
    more = len(heavy) - TAIL_NOTE_COLUMNS
    return (Reason(
        "tails", named + (f"; and {more} more" if more > 0 else "") + ": the draws' tails "
        "are so heavy that the variance behind each error bar is infinite or unresolved "
        "at this sample size, so those error bars are not reliable (the estimates "
        "themselves may still be)", "read those quantities' medians and intervals rather "
        "than mean +/- error; more draws raise the bound only slowly"),)
