"""The order of a run, in one place.

1. The method's pilot searches for modes.
2. When the method wants it and the modes are separated, each group of modes is sampled
   by its own NUTS chains (the mode split); otherwise the method runs as itself
   (tempering), told why the split was refused.
3. Every run is judged also by what was learned beside it (a refused split's chains: a
   scout in a mode the search missed).
4. The follow-ups apply the verdict's mechanical remedies, acting only on the reasons
   that judge the estimate that will be reported; the split's longer run and the
   follow-ups draw from one budget.
5. A tempered run's estimate is weighed cell by cell around the search's modes where
   each cell's weights allow (:func:`_cells`), with the wide checks of that estimate:
   made once where it could end the follow-ups, and on the run returned.  Its verdict
   then judges that estimate (the run's own precision alone is not suspect,
   :data:`~pemc_stan.sampling.checks.RUN_ESTIMATE_REASONS`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Any

import numpy as np

from pemc_stan.backend.progress import stage
from pemc_stan.errors import PemcStanError
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.modes.bridge import resampled_bridge
from pemc_stan.modes.cells import CellDraws, cell_count, cell_draws, cover_part
from pemc_stan.modes.density import DensityEvaluator
from pemc_stan.modes.scouts import ScoutsCheck, SplitDraws, SpreadCheck
from pemc_stan.modes.search_mass import SearchMassCheck, search_draws
from pemc_stan.modes.split import split_modes
from pemc_stan.modes.wide import (
    MOMENT_DRAWS,
    MOMENT_PILOT,
    UncomputedCheck,
    WideDraws,
    WideDrawsFailed,
    WideExcessCheck,
    WideMomentsCheck,
    excess_of,
    moments_of,
    reported_log_normaliser,
    search_gaussians,
    wide_draws,
)
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.sampling.follow_up import Budget, follow_up
from pemc_stan.sampling.model import Found, LogDensity, MethodModel

__all__ = ["run_plan"]

logger = logging.getLogger(__name__)


def run_plan(model: MethodModel, *, chains: int, iter_warmup: int, iter_sampling: int,
             seed: int | None, output_dir: str | os.PathLike[str] | None,
             show_progress: bool, budget: Budget, **cmdstanpy_kwargs: Any) -> ExtendedFit:
    """Search, then split or run the method, then follow up (module docstring).

    Parameters
    ----------
    model
        The method's model.
    chains, iter_warmup, iter_sampling, seed, output_dir, show_progress
        The first run's settings (as ``CmdStanModel.sample``).
    budget
        The run's budget.
    **cmdstanpy_kwargs
        Further NUTS arguments; ``inits`` start the first run only (a follow-up continues
        from where the last run ended).

    Returns
    -------
    ExtendedFit
        The judged run's fit, with its follow-up record.

    Raises
    ------
    RuntimeError
        If CmdStan or the pilot fails.
    """
    first: dict[str, Any] = dict(chains=chains, iter_warmup=iter_warmup,
                                 iter_sampling=iter_sampling, seed=seed, output_dir=output_dir,
                                 show_progress=show_progress)
    seconds: dict[str, float] = {}  # wall time of each stage, for the record
    gradients: dict[str, int] = {}  # gradient evaluations of the stages that run NUTS
    began = time.monotonic()

    def lap(stage: str) -> None:
        nonlocal began
        now = time.monotonic()
        seconds[stage] = round(now - began, 3)
        began = now

    found = model.search_modes(seed)
    lap("search")
    fit: ExtendedFit | None = None
    refused: SplitDraws | None = None
    refused_gradients = 0  # a refused split's runs: part of the first attempt
    diverged = False  # the split was refused for divergences: no more tempered draws
    tempered = False  # the method ran as itself, not as the split
    if model.wants_split():
        outcome = split_modes(model, found.search, budget=budget, **first, **cmdstanpy_kwargs)
        fit, refused = outcome.fit, outcome.draws
        # A split refused for divergences buys no more tempered draws: tempering meets
        # the regions NUTS could not enter, and more draws there only make a wrong
        # estimate look precise (docs/decisions.md).
        diverged = fit is None and "divergences" in outcome.names
        if fit is None and not diverged:
            refused_gradients = outcome.gradients
        if fit is None and outcome.tried:
            logger.info("mode split refused, the method tempers: %s", outcome.why)
        found = found.noted(outcome.note())
        if outcome.tried or fit is not None:
            lap("split" if fit is not None else "refused_split")
            gradients["split" if fit is not None else "refused_split"] = (
                fit.gradients() if fit is not None else outcome.gradients)
    if fit is None:
        if refused is not None and found.base is not None:  # the base: what the chains saw
            found = _widened(found, refused)
        fit = model.sample(found=found, **first, **cmdstanpy_kwargs)
        tempered = True
        lap("method")
        gradients["method"] = fit.gradients()

    def judged(run: ExtendedFit) -> ExtendedFit:
        """``run`` with the checks learned beside it: the refused split's chains (every run
        gets them before its verdict is read)."""
        if refused is not None:  # the refused split's chains judge the tempered run too
            run.later_checks = (*run.later_checks, ScoutsCheck(refused, seed),
                                SpreadCheck(refused))
        return run

    estimating = 0.0  # seconds spent on the estimate, inside the follow-ups' loop

    def estimated(run: ExtendedFit) -> ExtendedFit:
        """A tempered ``run`` with the estimate it reports (its cells', where their weights
        allow) and the wide checks of that estimate (importance draws need no chain to
        reach a region)."""
        nonlocal estimating
        start = time.monotonic()
        run.cell_estimate, run.cell_note = _cells(model, found, seed, run)
        # the wide draws may cost what the follow-ups they can end would have spent
        allowance = int(budget.factor * (gradients.get("method", 0) + refused_gradients))
        run.later_checks = (*run.later_checks,
                            *_wide_checks(model, found, seed, run, allowance),
                            *_search_check(model, found, seed, run))
        estimating += time.monotonic() - start
        return run

    fit = judged(fit)
    later = {k: v for k, v in cmdstanpy_kwargs.items() if k != "inits"}
    fit = follow_up(model, fit, iter_warmup=iter_warmup, iter_sampling=iter_sampling,
                    seed=seed, budget=budget, output_dir=output_dir,
                    show_progress=show_progress, refused_gradients=refused_gradients,
                    judge=judged, estimate=estimated if tempered else None, **later)
    lap("follow_ups")
    following = seconds.pop("follow_ups")
    seconds["estimate"] = round(estimating, 3)
    seconds["follow_ups"] = round(following - estimating, 3)
    record = getattr(fit, "follow_up", None)
    if record is not None:
        record.seconds = seconds
        gradients["follow_ups"] = record.spent - record.first_gradients
        record.stage_gradients = gradients
        logger.debug("cost: %s", record.cost_line())
    return fit


def _wide_checks(model: MethodModel, found: Found, seed: int | None, fit: ExtendedFit,
                 allowance: int = 0
                 ) -> tuple[WideMomentsCheck | WideExcessCheck | UncomputedCheck, ...]:
    """A tempered run's checks against importance draws from around the search's modes
    (:func:`~pemc_stan.modes.wide.wide_draws`) of the estimate it reports (its cells', or
    its own): its moments where the draws' weights allow
    (:class:`~pemc_stan.modes.wide.WideMomentsCheck`), and the spread about its means
    that it must at least hold (:class:`~pemc_stan.modes.wide.WideExcessCheck`).
    None without draws (:func:`_wide_draws`, ``allowance`` as there); draws that could not
    be weighed are a reason of their own
    (:class:`~pemc_stan.modes.wide.UncomputedCheck`)."""
    try:
        draws = _wide_draws(model, found, seed, fit, allowance)
    except WideDrawsFailed as exc:
        logger.info("wide checks: %s", exc)
        return (UncomputedCheck("wide_checks", "the wide checks (wide_moments, wide_excess)",
                                str(exc)),)
    if draws is None:
        return ()
    checks: list[WideMomentsCheck | WideExcessCheck] = []
    moments = moments_of(draws)
    if moments is not None:
        checks.append(WideMomentsCheck(moments))
    centres = {}
    for column in draws.values:
        try:
            centres[column] = float(fit.expectation(column).mean)
        except (KeyError, ValueError):  # a column the fit does not estimate
            continue
    checks.append(WideExcessCheck(excess_of(draws, centres)))
    return tuple(checks)


def _wide_draws(model: MethodModel, found: Found, seed: int | None, fit: ExtendedFit,
                allowance: int = 0) -> WideDraws | None:
    """Importance draws from around the search's modes, as many as ``fit``'s run took
    gradients, or ``allowance`` when more (the gradients of the follow-ups the estimate
    may end), up to :data:`~pemc_stan.modes.wide.MOMENT_DRAWS` (a density costs less than
    a gradient, so they cost at most about the sampling they check or replace; an ODE
    model's run is not doubled by them), or None without a search base, base coordinates
    or a density the evaluator can compute, or for a run of fewer gradients than
    :data:`~pemc_stan.modes.wide.MOMENT_PILOT` (:class:`~pemc_stan.modes.wide.WideDrawsFailed`
    when drawn and not weighed).  ``log gamma`` comes from the method's
    own program where it computes it (:meth:`~pemc_stan.sampling.model.MethodModel.own_density`:
    CT's), else from the density program (a compile of its own)."""
    search = found.search
    if search is None or search.base is None:
        return None
    coords = getattr(model.result, "coordinates", None)
    if coords is None:
        return None
    n = min(MOMENT_DRAWS, max(fit.gradients(), allowance))
    if n < MOMENT_PILOT:
        logger.info("no wide draws: a run of %d gradients", fit.gradients())
        return None
    with stage("importance draws around the modes found (checking the spread)"):
        evaluator = _evaluator(model, fit)
        if evaluator is None:
            return None
        z = fit.particle_coordinates()
        modes = search_gaussians(search, z, None if z is None else fit.target_weights())
        return wide_draws(coords, search.base, evaluator, model.data, seed, n, modes=modes)


def _search_check(model: MethodModel, found: Found, seed: int | None, fit: ExtendedFit
                  ) -> tuple[SearchMassCheck | UncomputedCheck, ...]:
    """A tempered run's check against importance draws from the search's own mode
    Gaussians (:class:`~pemc_stan.modes.search_mass.SearchMassCheck`): none without the
    search's modes, base coordinates or a density; a named reason when the draws could
    not be weighed."""
    search = found.search
    if search is None or search.centres is None:
        return ()
    coords = getattr(model.result, "coordinates", None)
    if coords is None:
        return ()
    with stage("importance draws from the search's Gaussians (checking the mass)"):
        evaluator = _evaluator(model, fit)
        if evaluator is None:
            return ()
        try:
            drawn = search_draws(coords, search, evaluator, model.data, seed)
        except WideDrawsFailed as exc:
            logger.info("search mass check: %s", exc)
            return (UncomputedCheck("search_mass", "the search's mass check", str(exc)),)
        if drawn is None:
            return ()
        own = reported_log_normaliser(fit) is not None
        return (SearchMassCheck(drawn, None if own
                                else _draws_normaliser(model, fit, evaluator, seed)),)


def _draws_normaliser(model: MethodModel, fit: ExtendedFit, evaluator: LogDensity,
                      seed: int | None) -> EvidenceEstimate | None:
    """The normaliser of what a run without one of its own (PE's) drew: bridge sampling on
    its resampled draws (:func:`~pemc_stan.modes.bridge.resampled_bridge`), for
    the search's mass check to compare against; None when it does not converge."""
    if not isinstance(evaluator, DensityEvaluator):
        return None
    try:
        est = resampled_bridge(fit, model.data, seed=seed, evaluator=evaluator)
    except (ValueError, KeyError, PemcStanError) as exc:  # draws it cannot map or weigh
        logger.info("no bridge estimate of the run's draws for the mass check: %s", exc)
        return None
    if not (est.diagnostics.get("converged", True) and np.isfinite(est.log_z)
            and np.isfinite(est.std_error)):
        logger.info("no bridge estimate of the run's draws for the mass check: it did not "
                    "converge")
        return None
    return est


def _evaluator(model: MethodModel, fit: ExtendedFit) -> LogDensity | None:
    """``log gamma`` at constrained draws: from the method's own program where it computes
    it (:meth:`~pemc_stan.sampling.model.MethodModel.own_density`: CT's), else from the
    density program (a compile of its own); None when neither can (logged)."""
    evaluator: LogDensity | None = model.own_density(fit)
    if evaluator is None:
        try:
            evaluator = DensityEvaluator(model.program, model.data, model.program.name)
        except PemcStanError as exc:
            logger.info("no density evaluator: %s", exc)
            return None
    return evaluator


def _cells(model: MethodModel, found: Found, seed: int | None, fit: ExtendedFit
           ) -> tuple[CellDraws | None, str]:
    """The tempered run's estimate weighed cell by cell (:mod:`pemc_stan.modes.cells`):
    the search's modes cut the base coordinates into cells, each weighed by importance
    draws from its own proposal (the run's particles in it, the search's mode, and a
    covering part for arms beyond both), :func:`cell_count` a cell; and why not, when the
    run's own estimate stands: without the search's modes, base coordinates or a density,
    for a program with summed-out parameters (their draws come from the run), or when a
    cell's Pareto k exceeds its bound (:meth:`~pemc_stan.modes.cells.CellDraws.cell_k_bound`:
    its weights do not bound its error)."""
    search = found.search
    if search is None or search.base is None or search.centres is None:
        return None, "no modes from the search"
    if model.program.marginalised:
        return None, "the model has summed-out parameters"
    coords = getattr(model.result, "coordinates", None)
    z = None if coords is None else fit.particle_coordinates()
    if z is None:
        return None, "no base coordinates of the parameters"
    with np.errstate(divide="ignore"):
        log_w = np.log(fit.target_weights()).reshape(-1)
    n = cell_count(fit.gradients(), len(search.centres))
    with stage(f"importance draws in each of {len(search.centres)} modes' cells (the estimate)"):
        evaluator = _evaluator(model, fit)
        if evaluator is None:
            return None, "no density evaluator"
        draws = cell_draws(coords, evaluator, model.data, search.base, search.centres,
                           search.covariances, z, log_w, seed, n,
                           cover=cover_part(search.base))
    if draws is None:
        return None, "the cells' draws could not be evaluated"
    uneven = draws.uneven_cells()
    if uneven:
        j = uneven[0]
        note = (f"cell {j + 1}'s weights have a Pareto k of {draws.cell_k()[j]:.2f} (> "
                f"{draws.cell_k_bound()[j]:.2f}, the bound at its draws)")
        logger.info("the run's own estimate stands: %s", note)
        return None, note
    return draws, ""


def _widened(found: Found, refused: SplitDraws) -> Found:
    """``found`` with its base widened to the refused split's chains
    (:meth:`~pemc_stan.modes.scouts.SplitDraws.base`), or as it was when they cannot be
    compared (logged: the run goes on from the search's base)."""
    try:
        return dataclasses.replace(found, base=refused.base(found.base), widened=True)
    except ValueError as exc:
        logger.warning("the refused split's chains could not widen the base (%s); the "
                       "tempered run starts from the search's base", exc)
        return found
