"""Runs that follow their own advice: mechanical remedies within a budget.

After a method's run, :func:`follow_up` reads the fit's verdict and, while the
verdict names a problem with a mechanical remedy and the budget allows, runs
again *from where the last run ended* (the method's
:meth:`~pemc_stan.sampling.model.MethodModel.continue_from`: continuous tempering
takes one more bootstrap round from the last round's draws; every chain starts at
its last draw).  It never re-rolls a run with another seed to pass a check:
each step changes what the verdict says is wrong, and the final run is judged.

The remedies, in order (one per step):

1. ``divergences`` or ``mode_acceptance`` → the next target acceptance of :data:`ADAPT_DELTA_STEPS`
   (a smaller step size; the warm-up runs again);
2. ``max_treedepth`` → the next tree depth of :data:`TREEDEPTH_STEPS` (its cost is
   predicted with the cut transitions' share taking up to four times as long);
3. ``beta_ends`` under a method whose next run re-fits the bridge
   (:attr:`~pemc_stan.sampling.model.MethodModel.refits_bridge`: continuous tempering's
   bootstrap round) → one more round of the same length: the chains stayed at one end
   because ``log zeta`` or the beta bias was off, and the round's draws re-fit both, so
   the R-hat of the run that had them says nothing of the next (not twice in a row:
   a bridge still one-ended after its re-fit takes the remedies below);
4. a reason of :data:`LONGER_REASONS` (chains that disagree or mix slowly, an sd known
   too roughly, too few round trips of beta, rounds that disagree, modes the run did not
   visit) → twice the sampling iterations of the last run, unless the run's R-hat is
   one that the budget's draws cannot bring under the verdict's bound
   (:func:`longer_can_fix`: before the first longer run at :data:`TRANSIENT_RATE`, the
   fall a chain's fading start allows, after it at the law of stationary chains): then
   no step is run, and the record says why.

The budget is in gradient evaluations (leapfrog steps) of the first attempt: the
first run (:meth:`~pemc_stan.sampling.fit.ExtendedFit.gradients`, an accepted mode
split's earlier runs included, its pilots' Pathfinder paths not counted) and a mode
split refused before it, unless refused for divergences (``refused_gradients``, from
:func:`~pemc_stan.run.conductor.run_plan`): ``budget=4`` lets all runs together take four times
the first attempt's; a step whose predicted cost (:data:`PREDICTION_MARGIN`) would pass it is not
started (a run's cost is known only once it ran, so the margin makes passing it
unlikely, not impossible).  ``budget=1`` makes no
follow-up.  Each step is recorded (:class:`FollowUpStep`) in the fit's
:attr:`~pemc_stan.sampling.fit.ExtendedFit.follow_up`, shown by the summary,
``estimates.json`` and the InferenceData's attributes.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pemc_stan.backend.progress import stage
from pemc_stan.output.cost import cost_line
from pemc_stan.output.diagnostics import RHAT_MAX, Reason
from pemc_stan.sampling.checks import (
    RUN_ESTIMATE_REASONS,
    carried_variance_floor,
    minor_reasons,
)
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.sampling.model import MethodModel

logger = logging.getLogger(__name__)

__all__ = ["ADAPT_DELTA_STEPS", "SMALLER_STEP_REASONS", "TREEDEPTH_STEPS", "Budget",
           "DEFAULT_BUDGET", "LONGER_REASONS", "REMEDY_LEFT", "FollowUp", "FollowUpStep",
           "carries_floor",
           "deeper_tree_cost", "follow_up", "next_adapt_delta", "longer_can_fix", "plan_step",
           "MAX_BUDGET",
           "TRANSIENT_RATE"]

#: The default budget: all runs together take at most this many times the first attempt's
#: gradient evaluations.
DEFAULT_BUDGET = 4.0
#: Target acceptance rates tried in turn after divergent transitions (CmdStan's default
#: first).
ADAPT_DELTA_STEPS = (0.8, 0.95, 0.99)
#: Reasons whose remedy is a smaller step size (the next of :data:`ADAPT_DELTA_STEPS`):
#: divergent transitions, and a mode whose acceptance shows the step too large for it.
SMALLER_STEP_REASONS = ("divergences", "mode_acceptance")
#: Maximum tree depths tried in turn after trajectories were cut (CmdStan's default first).
TREEDEPTH_STEPS = (10, 12, 14)
#: A step's cost is predicted as the last run's gradients per iteration times its
#: iterations, times this margin: a new round's base and step size change the cost per
#: iteration (docs/decisions.md).
PREDICTION_MARGIN = 1.5
#: The fastest fall of ``R-hat^2 - 1`` with the draws ``n``: as ``n**-2`` while the chains'
#: starts still set their means (a start's pull on a chain's mean fades as one over its
#: length), as ``n**-1`` once the chains are stationary, not at all while they sit in
#: different modes.  The first longer run is allowed this fall (the chains' starts are
#: strongest in the first run); later ones the stationary fall, as one over the draws.
#: The fall measured between two runs of four chains is too noisy to judge by
#: (docs/decisions.md).
TRANSIENT_RATE = 2.0
#: Reasons that more draws from where the last run ended can fix.
LONGER_REASONS = ("rhat", "ess", "sd_precision", "chains_agree", "beta_round_trips", "beta_ends",
                  "log_z_chains", "log_z_rounds", "weight_ess", "base_moments",
                  "unvisited_modes")


@dataclass(frozen=True)
class Budget:
    """A run's budget: all its runs together take at most ``factor`` times the first
    attempt's gradient evaluations.  The mode split's further runs and the follow-ups
    draw from it.

    Attributes
    ----------
    factor
        The budget, in multiples of the first attempt's gradient evaluations (1: nothing
        more).
    """

    factor: float = DEFAULT_BUDGET

    def allows(self, scale: float, spent: float = 0.0,
               margin: float = PREDICTION_MARGIN) -> bool:
        """Whether, after the first run and ``spent`` more of its cost, one more run of
        ``scale`` times its cost fits, predicted at ``margin`` times that (a run whose
        prediction already carries its margin passes 1).

        Raises
        ------
        Nothing.
        """
        return 1.0 + spent + margin * scale <= self.factor


#: Why the follow-ups stopped, where a larger budget is a remedy left (:class:`FollowUp`).
REMEDY_LEFT = frozenset({"over_budget", "no_budget", "split_budget"})
#: The largest budget advised: each larger budget advised doubles the last (4, 8, 16), and
#: a run still suspect after its follow-ups took this many times the first attempt's
#: gradients has its answer; more is the user's choice, not a remedy (the ladder ends).
MAX_BUDGET = 16.0


@dataclass(frozen=True)
class FollowUpStep:
    """One follow-up run, or why none was started.

    Attributes
    ----------
    change
        What changed (``"adapt_delta 0.8 -> 0.95"``, ``"iter_sampling 1000 -> 2000"``),
        or ``""`` when the step was not run.
    because
        The verdict's reason(s) that called for it, with their numbers.
    gradients
        Gradient evaluations of the run it started (0 when not run).
    verdict
        The verdict of that run (``"ok"``, ``"suspect"``), or why it was not run
        (``"over budget"``).
    """

    change: str
    because: str
    gradients: int = 0
    verdict: str = ""

    def __str__(self) -> str:
        if not self.change:
            return f"no follow-up: {self.verdict} ({self.because})"
        return f"{self.change} after {self.because} -> {self.verdict}"


@dataclass
class FollowUp:
    """The follow-up record of a fit: its budget and the steps taken.

    Attributes
    ----------
    budget
        The budget, in multiples of the first attempt's gradient evaluations.
    first_gradients
        The first attempt's gradient evaluations (a refused mode split's included).
    spent
        All runs' gradient evaluations together.
    steps
        The steps, in order.
    refused_gradients
        Of ``first_gradients``, those of a mode split refused before the method ran.
    seconds
        Wall seconds of the run's stages (:func:`~pemc_stan.run.conductor.run_plan`): ``search``,
        ``split`` (accepted) or ``refused_split``, ``method`` (the method's own run),
        ``estimate`` (a tempered run's cells and wide checks), ``follow_ups`` (with the
        verdicts read, whose checks of the refused split's chains compute when first
        read).  Kept out of :meth:`as_dict` (what a run's results are depends on its seed,
        not on its machine's load): :meth:`cost` has them.
    stage_gradients
        Gradient evaluations (leapfrog steps) of the stages that run NUTS.
    ended
        Why the follow-ups stopped: ``"ok"``; ``"over_budget"`` (the next step would pass
        the budget), ``"no_budget"`` (a budget of 1, with a remedy the verdict names) or
        ``"split_budget"`` (the mode split ran as long as the budget allowed): a larger
        budget is a remedy left; ``"no_remedy"`` (no mechanical remedy for the reasons
        that stand) or ``"beyond_draws"`` (no number of draws the budget could pay for
        fixes the R-hat): none is.
    """

    budget: float
    first_gradients: int
    spent: int
    steps: list[FollowUpStep] = field(default_factory=list)
    refused_gradients: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    stage_gradients: dict[str, int] = field(default_factory=dict)
    ended: str = ""

    def stop(self, ended: str, step: FollowUpStep) -> None:
        """Record why the follow-ups stopped (:attr:`ended`) and the step not run."""
        self.steps.append(step)
        self.ended = ended

    @property
    def remedy_left(self) -> bool:
        """Whether following the advice can still change the verdict: a larger budget
        (:meth:`next_budget`), up to :data:`MAX_BUDGET`."""
        return self.ended in REMEDY_LEFT and self.budget < MAX_BUDGET

    def next_budget(self) -> float | None:
        """The budget to run with next, twice this one's up to :data:`MAX_BUDGET` (at least
        :data:`DEFAULT_BUDGET`), or None when no remedy is left."""
        if not self.remedy_left:
            return None
        return min(max(2.0 * self.budget, DEFAULT_BUDGET), MAX_BUDGET)

    def final_statement(self) -> str:
        """Why no remedy is left, for a suspect fit (empty while one is)."""
        if self.remedy_left:
            return ""
        if self.ended in REMEDY_LEFT:
            return (f"no remedy left: the follow-ups ran to a budget of {self.budget:g} times "
                    f"the first attempt (the largest advised is {MAX_BUDGET:g}); the verdict "
                    "stands")
        last = str(self.steps[-1]) if self.steps else "no mechanical remedy"
        return (f"no remedy left: {last}; the verdict stands, and running again with more "
                "draws or a larger budget will not change it")

    def cost(self) -> dict[str, Any]:
        """Where the run's time went: wall seconds and gradients by stage, and in all (a split
        refused for divergences included, which the budget does not count)."""
        total = sum(self.stage_gradients.values()) if self.stage_gradients else self.spent
        return {"seconds": round(sum(self.seconds.values()), 3), "stage_seconds": self.seconds,
                "stage_gradients": self.stage_gradients, "gradients": total}

    def cost_line(self) -> str:
        """The cost in one line (:func:`~pemc_stan.output.cost.cost_line`)."""
        return cost_line(self.seconds)

    def describe(self) -> list[str]:
        """One line per step (empty when nothing was done)."""
        return [str(s) for s in self.steps]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"budget": self.budget, "first_gradients": self.first_gradients,
                "refused_split_gradients": self.refused_gradients,
                "spent_gradients": self.spent, "steps": [asdict(s) for s in self.steps],
                "ended": self.ended, "next_budget": self.next_budget()}


def longer_can_fix(rhat: float, factor: float, rate: float = 1.0) -> bool:
    """Whether ``factor`` times the draws can bring an R-hat under
    :data:`~pemc_stan.output.diagnostics.RHAT_MAX` when ``R-hat^2 - 1`` (the spread of
    the chain means against the draws') falls as the draws to the power ``-rate``: 1 for
    stationary chains that mix, up to :data:`TRANSIENT_RATE` while their starts fade.
    True for a NaN R-hat (the run is suspect for other reasons).

    Raises
    ------
    Nothing.
    """
    return not rhat**2 - 1.0 > factor**rate * (RHAT_MAX**2 - 1.0)


def next_adapt_delta(delta: float) -> float | None:
    """The step of :data:`ADAPT_DELTA_STEPS` after ``delta`` (None past the last).

    Raises
    ------
    Nothing.
    """
    higher = [d for d in ADAPT_DELTA_STEPS if d > delta + 1e-9]
    return higher[0] if higher else None


def deeper_tree_cost(fit: ExtendedFit, levels: int) -> float:
    """The predicted cost per iteration, relative to the last run's, of ``levels`` more
    tree depth: the transitions cut at the old depth may take ``2**levels`` times as
    long, the others are unchanged.

    Raises
    ------
    Nothing.
    """
    if levels <= 0:
        return 1.0
    nuts = fit.nuts_counts()
    share = nuts.max_treedepth_hits / max(nuts.transitions, 1)
    return 1.0 + share * (2.0**levels - 1.0)


def plan_step(reasons: tuple[Reason, ...], settings: dict[str, Any],
              refits_bridge: bool = False) -> tuple[dict[str, Any], str, str] | None:
    """The next step's settings for a suspect verdict, or None without a mechanical remedy.

    Parameters
    ----------
    reasons
        The verdict's reasons.
    settings
        The last run's ``adapt_delta``, ``max_treedepth`` and ``iter_sampling``.
    refits_bridge
        Whether the method's next run re-fits ``log zeta`` and the beta bias.

    Returns
    -------
    (new settings, change, because) or None

    Raises
    ------
    Nothing.
    """
    by_name = {r.name: r for r in reasons}
    smaller_step = [by_name[n] for n in SMALLER_STEP_REASONS if n in by_name]
    if smaller_step:
        delta = float(settings["adapt_delta"])
        higher = next_adapt_delta(delta)
        if higher is None:
            return None
        new = {**settings, "adapt_delta": higher}
        return (new, f"adapt_delta {delta:g} -> {higher:g}",
                "; ".join(f"{r.name} ({r.message})" for r in smaller_step))
    if "max_treedepth" in by_name:
        depth = int(settings["max_treedepth"])
        deeper = [d for d in TREEDEPTH_STEPS if d > depth]
        if deeper:
            return ({**settings, "max_treedepth": deeper[0]},
                    f"max_treedepth {depth} -> {deeper[0]}",
                    f"max_treedepth ({by_name['max_treedepth'].message})")
    if refits_bridge and "beta_ends" in by_name:
        return (dict(settings), "one more bootstrap round (log zeta and the beta bias "
                "re-fitted)", f"beta_ends ({by_name['beta_ends'].message})")
    longer = [by_name[n] for n in LONGER_REASONS if n in by_name]
    if not longer:
        return None
    n = int(settings["iter_sampling"])
    new = {**settings, "iter_sampling": 2 * n}
    because = "; ".join(f"{r.name} ({r.message})" for r in longer[:2])
    return new, f"iter_sampling {n} -> {2 * n}", because


def carries_floor(settings: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a step from ``settings`` to ``new`` carries the variance errors of the run
    before it as floors (:func:`~pemc_stan.sampling.checks.carried_variance_floor`).

    Only a longer run with the same step-size target and tree depth does: the run before
    it was judged sound and short, so its error is what the longer run must at least
    show.  A step that changes ``adapt_delta`` or ``max_treedepth`` answers a run whose
    exploration the verdict found faulty (divergences, a mode's acceptance, cut
    trajectories), and that run's error, swollen by the fault, is no yardstick.

    Raises
    ------
    KeyError
        If either mapping lacks ``iter_sampling``, ``adapt_delta`` or ``max_treedepth``.
    """
    same_kernel = all(new[k] == settings[k] for k in ("adapt_delta", "max_treedepth"))
    return same_kernel and new["iter_sampling"] > settings["iter_sampling"]


def _estimate_could_end(verdict: Any, fit: ExtendedFit) -> bool:
    """Whether the reported estimate could make every reason of ``verdict`` minor."""
    return all(r.name in RUN_ESTIMATE_REASONS or r.name in minor_reasons(fit)
               for r in verdict.reasons)


def _beyond_draws(change: str, because: str, rhat: float, reach: float, rate: float,
                  doubled: bool) -> FollowUpStep:
    """The record of a longer run not made: no draws within the budget fix the R-hat."""
    law = ("as one over the draws, as for stationary chains" if doubled else
           "even as one over the draws squared, as a chain's start fades")
    logger.info("follow-up %s not run: R-hat %.3f is beyond what %.3g times the draws can "
                "fix", change, rhat, reach)
    return FollowUpStep(change, because, 0, (
        f"not run: more draws cannot fix an R-hat of {rhat:.3f} (within the budget's "
        f"{reach:.3g} times the draws it could fall to "
        f"{math.sqrt(1 + (rhat**2 - 1) / reach**rate):.3f} at best, {law})"))


def follow_up(model: MethodModel, fit: ExtendedFit, *, iter_warmup: int, iter_sampling: int,
              seed: int | None, budget: Budget,
              output_dir: str | os.PathLike[str] | None = None, show_progress: bool = False,
              refused_gradients: int = 0,
              judge: Callable[[ExtendedFit], ExtendedFit] | None = None,
              estimate: Callable[[ExtendedFit], ExtendedFit] | None = None,
              **cmdstanpy_kwargs: Any) -> ExtendedFit:
    """Apply the verdict's mechanical remedies to ``fit`` within ``budget`` (module docstring).

    Parameters
    ----------
    model
        The method's model that made ``fit``.
    fit
        The first run's fit.
    iter_warmup, iter_sampling, seed, output_dir, show_progress, **cmdstanpy_kwargs
        The first run's settings (follow-up ``k`` writes to ``output_dir/follow_up_k``
        and uses ``seed + 1000 k``).
    budget
        The run's budget: all runs' gradient evaluations together, in multiples of the
        first attempt's (a factor of 1: no follow-up).
    refused_gradients
        Gradient evaluations of a mode split refused before ``fit``'s run: part of the
        first attempt, as an accepted split's runs are.
    judge
        What makes a new run's fit as ``fit`` was made (the conductor's checks beside the
        run) before its verdict is read; None: nothing.
    estimate
        What gives a fit the estimate it will report (a tempered run's cells): costly, so
        made once where it could end the follow-ups (every reason one it could make
        minor) and on the fit returned; None: nothing.

    Returns
    -------
    ExtendedFit
        The last run's fit, with :attr:`~pemc_stan.sampling.fit.ExtendedFit.follow_up`
        set.

    Raises
    ------
    RuntimeError
        If CmdStan fails in a follow-up run.
    """
    own = max(fit.gradients(), 1)
    first = own + max(refused_gradients, 0)
    factor = budget.factor
    draws_factor = factor * first / own  # the budget in multiples of this run's draws
    # steps the method took within its run (the mode split run longer) come first
    record = FollowUp(factor, first, first, list(fit.split_steps), refused_gradients=max(
        refused_gradients, 0))
    settings: dict[str, Any] = {
        "adapt_delta": cmdstanpy_kwargs.pop("adapt_delta", None) or ADAPT_DELTA_STEPS[0],
        "max_treedepth": cmdstanpy_kwargs.pop("max_treedepth", None) or TREEDEPTH_STEPS[0],
        "iter_sampling": iter_sampling}
    last_cost = own
    k = 0
    bridged = False  # the last step was a bootstrap round for beta_ends: no second in a row
    doubled = False  # a longer run was made: its start has faded, R-hat falls as 1/n
    estimated = tried = False  # the fit has its estimate; one was made within the loop
    while factor > 1:
        verdict = fit.check()
        if not verdict.ok and estimate is not None and not tried \
                and _estimate_could_end(verdict, fit):
            fit, estimated, tried = estimate(fit), True, True
            verdict = fit.check()
        if verdict.ok:
            record.ended = "ok"
            break
        if not fit.continuable:  # the mode split's longer runs are its own
            record.stop("split_budget", FollowUpStep("", "; ".join(verdict.names()), verdict=(
                "no mechanical remedy: the mode split ran as long as the budget allowed")))
            break
        # only reasons that judge the reported estimate call for a run (not minor ones)
        standing = tuple(r for r in verdict.reasons if r.name not in minor_reasons(fit))
        plan = plan_step(standing, settings, model.refits_bridge and not bridged)
        if plan is None:
            record.stop("no_remedy", FollowUpStep("", "; ".join(verdict.names()),
                                                  verdict="no mechanical remedy"))
            break
        new, change, because = plan
        bridged = change.startswith("one more bootstrap round")
        rhat = fit.worst_rhat() if "rhat" in verdict.names() else float("nan")
        reach = draws_factor * iter_sampling / settings["iter_sampling"]  # of this run's draws
        rate = 1.0 if doubled else TRANSIENT_RATE
        if new["iter_sampling"] != settings["iter_sampling"] and not longer_can_fix(
                rhat, reach, rate):
            record.stop("beyond_draws", _beyond_draws(change, because, rhat, reach, rate,
                                                      doubled))
            break
        if record.spent + _predicted(fit, last_cost, iter_warmup, settings, new) > factor * first:
            record.stop("over_budget", FollowUpStep(change, because, 0, "over budget: not run"))
            logger.info("follow-up %s not run: it would take the run past its budget "
                        "(%g times the first attempt's gradient evaluations)", change, factor)
            break
        k += 1
        logger.info("follow-up %d: %s after %s", k, change, because)
        before = fit
        with stage(f"follow-up {k}: {change}", bar=f"follow-up {k}", announce=False):
            fit = model.continue_from(
                fit, iter_warmup, new["iter_sampling"],
                None if seed is None else seed + 1000 * k,
                None if output_dir is None else Path(output_dir) / f"follow_up_{k}",
                show_progress, adapt_delta=new["adapt_delta"],
                max_treedepth=new["max_treedepth"], **cmdstanpy_kwargs)
        estimated = False
        if judge is not None:
            fit = judge(fit)
        if "sd_precision" in verdict.names() and carries_floor(settings, new):
            fit.variance_se_floor = carried_variance_floor(before, fit)  # a tail seen once
        doubled = doubled or new["iter_sampling"] > settings["iter_sampling"]
        last_cost = max(fit.run_gradients(), 1)  # this run's own, not its rounds'
        record.spent += last_cost
        record.steps.append(FollowUpStep(change, because, last_cost, fit.check().status))
        settings = new
    if estimate is not None and not estimated:
        fit = estimate(fit)  # its checks judge the run again: an "ok" is weighed anew
        record.ended = "" if record.ended == "ok" else record.ended
    record.ended = record.ended or _ended_unweighed(fit, settings, model.refits_bridge)
    fit.follow_up = record
    return fit


def _predicted(fit: ExtendedFit, last_cost: int, iter_warmup: int, settings: dict[str, Any],
               new: dict[str, Any]) -> int:
    """The predicted gradients of a step from ``settings`` to ``new`` after a run that took
    ``last_cost`` (longer sampling, a deeper tree; :data:`PREDICTION_MARGIN`)."""
    scale = (iter_warmup + new["iter_sampling"]) / (iter_warmup + settings["iter_sampling"])
    scale *= deeper_tree_cost(fit, new["max_treedepth"] - settings["max_treedepth"])
    return int(PREDICTION_MARGIN * last_cost * scale)


def _ended_unweighed(fit: ExtendedFit, settings: dict[str, Any], refits_bridge: bool) -> str:
    """Why follow-ups that weighed no step for ``fit``'s verdict stopped: ``"ok"``, or a
    remedy they did not run (``"no_budget"``), or none (``"no_remedy"``)."""
    verdict = fit.check()
    if verdict.ok:
        return "ok"
    standing = tuple(r for r in verdict.reasons if r.name not in minor_reasons(fit))
    return "no_budget" if plan_step(standing, settings, refits_bridge) is not None \
        else "no_remedy"

