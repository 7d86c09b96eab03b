"""Follow-up runs: which remedy each verdict gets, the budget, and what is recorded.

Fast: the model and fits are stand-ins that record what they were asked to run; the
compiled runs are in ``test_verdicts.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from pemc_stan.output.diagnostics import (
    RHAT_MAX,
    Reason,
    TransitionCounts,
    Verdict,
    treedepth_reason,
)
from pemc_stan.sampling.follow_up import (
    ADAPT_DELTA_STEPS,
    LONGER_REASONS,
    TRANSIENT_RATE,
    TREEDEPTH_STEPS,
    Budget,
    FollowUp,
    carries_floor,
    deeper_tree_cost,
    follow_up,
    longer_can_fix,
    plan_step,
)

DIVERGED = Reason("divergences", "138 of 1000 transitions (13.8%) diverged", "increase")
STUCK = Reason("beta_round_trips", "round trips per chain: [0, 1, 17, 0]", "run longer")
PILOT = Reason("pilot", "the Pathfinder pilot failed", "pass log_scale=")


@dataclass
class FakeFit:
    """A fit with a given verdict and cost (gradient evaluations per sampling draw)."""

    reasons: tuple[Reason, ...]
    iter_sampling: int
    per_draw: int = 10
    follow_up: Any = None
    rhat: float = float("nan")
    split_steps: tuple[Any, ...] = ()
    continuable: bool = True
    cell_estimate: Any = None
    minor_reasons: frozenset[str] = frozenset()

    def check(self) -> Verdict:
        return Verdict(self.reasons, ("divergences", "rhat", "beta_round_trips"))

    def run_gradients(self) -> int:
        return self.per_draw * (1000 + self.iter_sampling)

    def gradients(self) -> int:
        return self.run_gradients()

    def worst_rhat(self) -> float:
        return self.rhat


@dataclass
class FakeModel:
    """Returns the queued fits in turn, recording each continuation's settings."""

    queue: list[FakeFit]
    calls: list[dict[str, Any]] = field(default_factory=list)
    refits_bridge: bool = False

    def continue_from(self, fit: FakeFit, iter_warmup: int, iter_sampling: int,
                      seed: int | None, output_dir: Any = None, show_progress: bool = False,
                      **kw: Any) -> FakeFit:
        self.calls.append({"from": fit, "iter_warmup": iter_warmup,
                           "iter_sampling": iter_sampling, "seed": seed, **kw})
        return self.queue.pop(0)


def _run(first: FakeFit, queue: list[FakeFit], budget: float, refits_bridge: bool = False,
         **kw: Any) -> tuple[FakeFit, FakeModel]:
    model = FakeModel(queue, refits_bridge=refits_bridge)
    fit = follow_up(model, first, iter_warmup=1000, iter_sampling=first.iter_sampling,  # type: ignore[arg-type]
                    seed=5, budget=Budget(budget), **kw)
    return fit, model  # type: ignore[return-value]


def test_divergences_raise_adapt_delta_in_steps_and_then_have_no_remedy() -> None:
    settings = {"adapt_delta": 0.8, "iter_sampling": 1000}
    for now, then in zip(ADAPT_DELTA_STEPS, ADAPT_DELTA_STEPS[1:], strict=False):
        plan = plan_step((DIVERGED, STUCK), {**settings, "adapt_delta": now})
        assert plan is not None
        new, change, because = plan
        # divergences come first: a longer run of a biased sampler is no remedy
        assert new == {"adapt_delta": then, "iter_sampling": 1000}
        assert change == f"adapt_delta {now:g} -> {then:g}" and "13.8%" in because
    assert plan_step((DIVERGED,), {**settings, "adapt_delta": ADAPT_DELTA_STEPS[-1]}) is None


def test_mixing_reasons_double_the_draws_and_others_have_no_remedy() -> None:
    settings = {"adapt_delta": 0.8, "iter_sampling": 700}
    for name in LONGER_REASONS:
        plan = plan_step((Reason(name, "m", "r"),), settings)
        assert plan is not None and plan[0] == {"adapt_delta": 0.8, "iter_sampling": 1400}
    assert plan_step((PILOT,), settings) is None
    assert plan_step((), settings) is None


def test_an_ok_first_run_is_left_alone() -> None:
    first = FakeFit((), 1000)
    fit, model = _run(first, [], 4.0)
    assert fit is first and model.calls == []
    assert isinstance(fit.follow_up, FollowUp) and fit.follow_up.steps == []
    assert fit.follow_up.ended == "ok" and not fit.follow_up.remedy_left


def test_budget_one_retries_nothing() -> None:
    first = FakeFit((DIVERGED,), 1000)
    fit, model = _run(first, [FakeFit((), 1000)], 1.0)
    assert fit is first and model.calls == [] and fit.follow_up.steps == []
    # a remedy the budget did not allow is left: a larger budget
    assert fit.follow_up.ended == "no_budget" and fit.follow_up.remedy_left
    odd, _ = _run(FakeFit((Reason("pilot", "none", "nothing"),), 1000), [], 1.0)
    assert odd.follow_up.ended == "no_remedy" and not odd.follow_up.remedy_left


def test_a_fit_no_follow_up_can_continue_is_left_with_its_reasons_recorded() -> None:
    # the mode split runs longer within the budget itself; the method's model would run
    # the method, not the split's chains
    first = FakeFit((Reason("sd_precision", "33%", "run longer"),), 1000, continuable=False)
    fit, model = _run(first, [FakeFit((), 2000)], 4.0)
    assert fit is first and model.calls == []
    (step,) = fit.follow_up.steps
    assert step.gradients == 0 and "sd_precision" in step.because
    assert "mode split ran as long as the budget allowed" in step.verdict
    assert fit.follow_up.ended == "split_budget" and fit.follow_up.remedy_left


def test_divergent_run_is_carried_to_ok_and_the_step_recorded() -> None:
    first = FakeFit((DIVERGED,), 1000)
    fixed = FakeFit((), 1000)
    fit, model = _run(first, [fixed], 4.0, max_treedepth=12)
    assert fit is fixed
    (call,) = model.calls
    assert call["from"] is first and call["adapt_delta"] == 0.95
    assert call["iter_sampling"] == 1000 and call["max_treedepth"] == 12
    assert call["seed"] == 5 + 1000  # a new stream for the new run, not a re-roll of seeds
    (step,) = fit.follow_up.steps
    assert step.change == "adapt_delta 0.8 -> 0.95" and step.verdict == "ok"
    assert "13.8%" in step.because and step.gradients == fixed.run_gradients()
    assert fit.follow_up.spent == first.gradients() + fixed.run_gradients()
    assert str(step).startswith("adapt_delta 0.8 -> 0.95 after divergences")


def test_the_follow_up_stops_at_its_budget_and_stays_suspect() -> None:
    first = FakeFit((STUCK,), 1000)
    still = [FakeFit((STUCK,), 2000), FakeFit((STUCK,), 4000), FakeFit((STUCK,), 8000)]
    fit, model = _run(first, list(still), 4.0)
    # first: 20,000 gradients; 2000 draws: 30,000 (50,000 spent); 4000 draws would take
    # about 50,000 more: past 4 x 20,000
    assert [c["iter_sampling"] for c in model.calls] == [2000]
    assert not fit.check().ok and fit is still[0]
    record = fit.follow_up
    assert record.spent == 50_000 <= 4 * record.first_gradients
    assert [s.change for s in record.steps] == ["iter_sampling 1000 -> 2000",
                                                 "iter_sampling 2000 -> 4000"]
    assert record.steps[-1].verdict.startswith("over budget") and record.steps[-1].gradients == 0
    assert record.as_dict()["steps"][0]["verdict"] == "suspect"
    assert record.ended == "over_budget" and record.remedy_left
    assert record.as_dict()["ended"] == "over_budget"


def test_a_user_adapt_delta_is_where_the_steps_start() -> None:
    first = FakeFit((DIVERGED,), 1000)
    fit, model = _run(first, [FakeFit((DIVERGED,), 1000)], 10.0, adapt_delta=0.95)
    assert [c["adapt_delta"] for c in model.calls] == [0.99]
    assert fit.follow_up.steps[-1].verdict == "no mechanical remedy"
    assert fit.follow_up.ended == "no_remedy" and not fit.follow_up.remedy_left


@pytest.mark.parametrize("budget", [0.5, float("nan")])
def test_sample_refuses_a_budget_below_one(budget: float) -> None:
    import pemc_stan
    from pemc_stan.errors import OptionsError

    with pytest.raises(OptionsError, match="budget"):
        pemc_stan.sample("parameters { real x; } model { x ~ normal(0, 1); }",
                         method="ct", budget=budget)


def test_a_longer_run_can_fix_an_r_hat_only_by_the_law_of_its_draws() -> None:
    """``R-hat^2 - 1`` falls as one over the draws for chains that mix: twice the draws
    bring 1.087 under 1.05, not 1.11; the default budget's four times, 1.12 (the mixture
    on R^2, seed 1), not 3.2 (chains in different modes of the Boltzmann relaxation)."""
    assert longer_can_fix(1.087, 2.0) and longer_can_fix(1.0, 2.0)
    assert not longer_can_fix(1.11, 2.0) and not longer_can_fix(3.2, 2.0)
    assert longer_can_fix(1.12, 4.0) and not longer_can_fix(3.2, 4.0)
    assert longer_can_fix(float("nan"), 2.0)  # refused for something else
    edge = math.sqrt(1 + 2 * (RHAT_MAX**2 - 1))
    assert longer_can_fix(edge - 1e-9, 2.0) and not longer_can_fix(edge + 1e-9, 2.0)


def test_a_fading_start_lets_the_r_hat_fall_as_the_draws_squared() -> None:
    """While the chains' starts still pull their means, ``R-hat^2 - 1`` can fall as one
    over the draws squared: four times the draws can then fix 1.445 (the tempered
    Boltzmann relaxation, seed 1), not 3.2."""
    edge = math.sqrt(1 + 4.0**TRANSIENT_RATE * (RHAT_MAX**2 - 1))
    assert longer_can_fix(1.445, 4.0, TRANSIENT_RATE) and not longer_can_fix(1.445, 4.0)
    assert longer_can_fix(edge - 1e-9, 4.0, 2.0) and not longer_can_fix(edge + 1e-9, 4.0, 2.0)
    assert not longer_can_fix(3.2, 4.0, TRANSIENT_RATE)


def _disagree(rhat: float) -> Reason:
    return Reason("rhat", f"R-hat of the resampled draws of x is {rhat:.3f} (> 1.05)", "run")


def test_an_r_hat_beyond_what_the_budget_can_fix_runs_nothing_more() -> None:
    """Chains in different modes (R-hat 3.2): even falling as the draws squared, four
    times the draws leave 1.32 at best. No step is run, and the record says why."""
    first = FakeFit((_disagree(3.2), STUCK), 1000, rhat=3.2)
    fit, model = _run(first, [FakeFit((_disagree(3.1),), 2000, rhat=3.1)], 4.0)
    assert fit is first and model.calls == []
    (step,) = fit.follow_up.steps
    assert step.change == "iter_sampling 1000 -> 2000" and step.gradients == 0
    assert step.verdict.startswith("not run: more draws cannot fix an R-hat of 3.200")
    assert step.verdict.endswith(f"{math.sqrt(1 + (3.2**2 - 1) / 16):.3f} at best, even as "
                                 "one over the draws squared, as a chain's start fades)")
    assert fit.follow_up.spent == first.gradients()
    assert fit.follow_up.ended == "beyond_draws" and not fit.follow_up.remedy_left


def test_after_one_longer_run_r_hat_is_judged_by_the_stationary_law() -> None:
    """The tempered Boltzmann relaxation (continuous tempering, seed 1): R-hat 1.445 after
    the first run could fall under the bound if the chains' starts still set it, so twice
    the draws are run. They left 1.307; the budget now reaches twice those draws, and at
    the stationary fall, as one over the draws, they leave 1.16: nothing more is run."""
    first = FakeFit((_disagree(1.445), STUCK), 1000, rhat=1.445)
    second = FakeFit((_disagree(1.307),), 2000, rhat=1.307)
    fit, model = _run(first, [second, FakeFit((), 4000)], 4.0)
    assert fit is second and [c["iter_sampling"] for c in model.calls] == [2000]
    ran, stopped = fit.follow_up.steps
    assert ran.change == "iter_sampling 1000 -> 2000" and ran.gradients > 0
    assert stopped.change == "iter_sampling 2000 -> 4000" and stopped.gradients == 0
    assert stopped.verdict == (
        "not run: more draws cannot fix an R-hat of 1.307 (within the budget's 2 times the "
        f"draws it could fall to {math.sqrt(1 + (1.307**2 - 1) / 2):.3f} at best, as one over "
        "the draws, as for stationary chains)")


def test_chains_in_different_modes_get_one_longer_run_and_no_more() -> None:
    """PE on ``boltzmann_20``, seed 1: copies that never change mode, R-hat 2.239 and then
    2.100. The refused split made the budget 33 times the tempered run's draws, so a
    fading start could explain the first; the stationary law cannot fix the second."""
    first = FakeFit((_disagree(2.239),), 1000, rhat=2.239)
    second = FakeFit((_disagree(2.100),), 2000, rhat=2.100)
    fit, model = _run(first, [second, FakeFit((), 4000)], 4.0,
                      refused_gradients=int(7.25 * first.gradients()))
    assert fit is second and [c["iter_sampling"] for c in model.calls] == [2000]
    assert fit.follow_up.steps[-1].verdict.startswith(
        "not run: more draws cannot fix an R-hat of 2.100")


def test_an_r_hat_that_grew_with_the_draws_still_gets_its_next_doubling() -> None:
    """PE on the same relaxation, seed 2: R-hat 1.088, then 1.107 with twice the draws,
    then ok with twice those. The R-hat of four chains is too noisy for one pair of runs
    to show how it falls, so the next doubling is judged by the fading-start law alone."""
    first = FakeFit((_disagree(1.088),), 1000, rhat=1.088)
    second = FakeFit((_disagree(1.107),), 2000, rhat=1.107)
    third = FakeFit((), 4000, rhat=1.02)
    fit, model = _run(first, [second, third], 12.0)
    assert fit is third and [c["iter_sampling"] for c in model.calls] == [2000, 4000]


def test_an_r_hat_that_falls_fast_keeps_its_longer_runs() -> None:
    """Seed 5 of the same relaxation: 1.513 (beyond the law of one over the draws for 11
    times the draws) fell to 1.111 with twice the draws, and the next doubling is run."""
    first = FakeFit((_disagree(1.513), STUCK), 1000, rhat=1.513)
    second = FakeFit((_disagree(1.111),), 2000, rhat=1.111)
    third = FakeFit((), 4000, rhat=1.03)
    fit, model = _run(first, [second, third], 12.0)
    assert fit is third and [c["iter_sampling"] for c in model.calls] == [2000, 4000]


def test_a_refused_split_s_runs_count_in_the_first_attempt() -> None:
    """The R-hat of 1.445 above, after a refused split that took three times the tempered
    run's gradients: the budget is four times both together, sixteen times the tempered
    run's draws, and by the law they can bring it under the bound."""
    first = FakeFit((_disagree(1.445), STUCK), 1000, rhat=1.445)
    later = FakeFit((), 2000, rhat=1.04)
    fit, model = _run(first, [later], 4.0, refused_gradients=3 * first.gradients())
    assert fit is later and [c["iter_sampling"] for c in model.calls] == [2000]
    record = fit.follow_up
    assert record.first_gradients == 4 * first.gradients()
    assert record.as_dict()["refused_split_gradients"] == 3 * first.gradients()
    assert record.spent == record.first_gradients + later.run_gradients()


def test_an_r_hat_the_budget_can_fix_gets_its_longer_run() -> None:
    first = FakeFit((_disagree(1.12),), 1000, rhat=1.12)
    fixed = FakeFit((), 2000, rhat=1.03)
    fit, model = _run(first, [fixed], 4.0)
    assert fit is fixed and [c["iter_sampling"] for c in model.calls] == [2000]
    assert fit.follow_up.steps[0].verdict == "ok"


def test_divergences_are_remedied_whatever_the_r_hat() -> None:
    """A biased sampler's R-hat says nothing of what more draws can do: the target
    acceptance is raised first."""
    first = FakeFit((DIVERGED, _disagree(2.5)), 1000, rhat=2.5)
    fit, model = _run(first, [FakeFit((), 1000)], 4.0)
    assert [c["adapt_delta"] for c in model.calls] == [0.95] and fit.check().ok


CUT = Reason("max_treedepth", "300 of 1000 transitions (30%) stopped at max_treedepth=10",
             "pass max_treedepth=12")


def test_cut_trajectories_deepen_the_tree_in_steps_after_divergences() -> None:
    settings = {"adapt_delta": 0.8, "max_treedepth": 10, "iter_sampling": 1000}
    plan = plan_step((DIVERGED, CUT), settings)
    assert plan is not None and plan[1] == "adapt_delta 0.8 -> 0.95"
    for now, then in zip(TREEDEPTH_STEPS, TREEDEPTH_STEPS[1:], strict=False):
        plan = plan_step((CUT, STUCK), {**settings, "max_treedepth": now})
        assert plan is not None
        assert plan[0] == {**settings, "max_treedepth": then}
        assert plan[1] == f"max_treedepth {now} -> {then}" and "30%" in plan[2]
    deepest = {**settings, "max_treedepth": TREEDEPTH_STEPS[-1]}
    assert plan_step((CUT,), deepest) is None
    # at the deepest tree, the other reasons' remedy is still taken
    longer = plan_step((CUT, STUCK), deepest)
    assert longer is not None and longer[1] == "iter_sampling 1000 -> 2000"


@dataclass
class CutFit(FakeFit):
    """A fit whose given share of transitions stopped at the maximum tree depth."""

    cut_share: float = 0.0

    def nuts_counts(self) -> TransitionCounts:
        n = 4 * self.iter_sampling
        return TransitionCounts(n, 0, 10, int(round(self.cut_share * n)))


def test_a_deeper_tree_is_run_when_its_predicted_cost_fits_the_budget() -> None:
    first = CutFit((CUT,), 1000, cut_share=0.3)
    fixed = CutFit((), 1000)
    fit, model = _run(first, [fixed], 4.0)
    assert fit is fixed and [c["max_treedepth"] for c in model.calls] == [12]
    assert fit.follow_up.steps[0].change == "max_treedepth 10 -> 12"
    # the prediction: 1 + 0.3 x (4 - 1) times the last run's cost per iteration
    assert deeper_tree_cost(first, 2) == pytest.approx(1.9)
    assert deeper_tree_cost(first, 0) == 1.0


def test_a_deeper_tree_past_the_budget_is_not_run() -> None:
    # every transition cut: up to 4 times the cost, 1.5 x 4 = 6 more first runs > 3 left
    first = CutFit((CUT,), 1000, cut_share=1.0)
    fit, model = _run(first, [CutFit((), 1000)], 4.0)
    assert fit is first and model.calls == []
    (step,) = fit.follow_up.steps
    assert step.change == "max_treedepth 10 -> 12" and step.verdict.startswith("over budget")


@pytest.mark.parametrize(("hits", "flagged"), [(0, False), (100, False), (101, True),
                                               (520, True)])
def test_the_verdict_names_cut_trajectories_past_a_tenth(hits: int, flagged: bool) -> None:
    reason = treedepth_reason(TransitionCounts(1000, 0, 10, hits))
    assert (reason is not None) == flagged
    if reason is not None:
        assert reason.name == "max_treedepth"
        assert f"{hits} of 1000" in reason.message and "max_treedepth=12" in reason.remedy
    assert treedepth_reason(TransitionCounts(1000, 0, None, 0)) is None


def test_cut_trajectories_name_a_parameter_used_only_in_comparisons_and_its_remedy() -> None:
    """changepoint_normal: ``s`` enters only through ``t < s`` (line 17); trajectories run to
    the depth limit because nothing turns them along ``s``, and the remedy that helps is
    to marginalise it; the deeper tree stays the mechanical one."""
    reason = treedepth_reason(TransitionCounts(4000, 0, 10, 4000), [("s", 17)])
    assert reason is not None
    assert "uses s (line 17) only in comparisons" in reason.message
    assert reason.remedy.startswith("marginalise it out") and "max_treedepth=12" in reason.remedy
    plain = treedepth_reason(TransitionCounts(4000, 0, 10, 4000))
    assert plain is not None and "comparisons" not in plain.message
    kept = treedepth_reason(TransitionCounts(4000, 0, 10, 4000), [("s", 17)],
                            "a while loop uses it")
    assert kept is not None and "does this itself when it can, but not here: a while loop " \
        "uses it" in kept.remedy


def test_a_mode_sampled_with_too_large_a_step_gets_a_smaller_step_before_longer_runs() -> None:
    cramped = Reason("mode_acceptance", "mode 2 accepts 0.25 times as often", "raise adapt_delta")
    plan = plan_step((STUCK, cramped), {"adapt_delta": 0.8, "iter_sampling": 1000})
    assert plan is not None
    new, change, because = plan
    assert new == {"adapt_delta": 0.95, "iter_sampling": 1000}
    assert change == "adapt_delta 0.8 -> 0.95" and because.startswith("mode_acceptance (")
    both = plan_step((DIVERGED, cramped), {"adapt_delta": 0.95, "iter_sampling": 1000})
    assert both is not None and "divergences (" in both[2] and "mode_acceptance (" in both[2]


ONE_ENDED = Reason("beta_ends", "61.7% of the draws have beta < 0.05 and 0.0% beta > 0.95",
                   "run more bootstrap rounds")


def test_a_one_ended_bridge_gets_a_round_of_the_same_length_whatever_the_r_hat() -> None:
    """boltzmann_20, continuous tempering, seed 2: a round whose log zeta and beta bias
    left every draw near beta = 0 had R-hat 1.54; a longer run of it is beyond the
    budget's law, but the next bootstrap round re-fits what kept the chains at one end
    (it ended with R-hat 1.15 and log Z within one standard error)."""
    first = FakeFit((_disagree(1.543), ONE_ENDED), 1000, rhat=1.543)
    refitted = FakeFit((), 1000, rhat=1.02)
    fit, model = _run(first, [refitted], 4.0, refits_bridge=True)
    assert fit is refitted and [c["iter_sampling"] for c in model.calls] == [1000]
    (step,) = fit.follow_up.steps
    assert step.change.startswith("one more bootstrap round") and "61.7%" in step.because
    # a method whose next run re-fits nothing has no such remedy: the R-hat rule holds,
    # and the chains' starts may still set 1.543, so twice the draws are run
    fit, model = _run(first, [refitted], 4.0, refits_bridge=False)
    assert fit is refitted and [c["iter_sampling"] for c in model.calls] == [2000]


def test_a_bridge_still_one_ended_after_its_round_takes_the_other_remedies() -> None:
    """The bootstrap round for beta_ends is not taken twice in a row: a bridge that its
    re-fit did not open is not a log-zeta problem, and the R-hat rule decides again."""
    first = FakeFit((ONE_ENDED,), 1000)
    again = FakeFit((_disagree(3.2), ONE_ENDED), 1000, rhat=3.2)
    fit, model = _run(first, [again, FakeFit((), 1000)], 8.0, refits_bridge=True)
    assert fit is again and [c["iter_sampling"] for c in model.calls] == [1000]
    first_step, second_step = fit.follow_up.steps
    assert first_step.change.startswith("one more bootstrap round")
    assert second_step.verdict.startswith("not run: more draws cannot fix")


IMPRECISE = Reason("sd_precision", "the Monte-Carlo error of the variance of mu is 31% of it",
                   "run longer (iter_sampling)")


def test_only_a_longer_run_of_the_same_kernel_carries_the_variance_floor() -> None:
    base = {"adapt_delta": 0.8, "max_treedepth": 10, "iter_sampling": 1000}
    assert carries_floor(base, {**base, "iter_sampling": 2000})
    assert not carries_floor(base, {**base, "adapt_delta": 0.95})  # after a faulty run
    assert not carries_floor(base, {**base, "max_treedepth": 12})
    assert not carries_floor(base, dict(base))  # one more bootstrap round, same length


@pytest.mark.parametrize(("reasons", "carried"), [((IMPRECISE,), True),
                                                  ((DIVERGED, IMPRECISE), False)])
def test_a_faulty_run_s_variance_error_is_not_the_next_run_s_floor(
        monkeypatch: pytest.MonkeyPatch, reasons: tuple[Reason, ...], carried: bool) -> None:
    """An imprecise sd alone gets a longer run that keeps the error as a floor; with
    divergences the smaller step comes first, and the diverging run's error is not kept
    (a frequency's side lobes: its own error 11%, the carried one 23%)."""
    import pemc_stan.sampling.follow_up as fu

    seen: list[tuple[Any, Any]] = []
    monkeypatch.setattr(fu, "carried_variance_floor",
                        lambda before, after: seen.append((before, after)) or {"mu": 1.0})
    first = FakeFit(reasons, 1000)
    second = FakeFit((), 2000 if carried else 1000)
    fit, model = _run(first, [second], budget=4.0)
    assert len(model.calls) == 1 and fit is second
    assert seen == ([(first, second)] if carried else [])
    assert getattr(second, "variance_se_floor", None) == ({"mu": 1.0} if carried else None)


RHAT = Reason("rhat", "R-hat 1.08 > 1.01 (x)", "run longer")
WIDE = Reason("wide_moments", "the mean of x is 6 standard errors from importance draws",
              "reparameterise")


def test_a_follow_up_acts_only_on_reasons_that_judge_the_reported_estimate() -> None:
    """With cells reported, R-hat (the run's own mixing) is minor: beside a reason with no
    remedy it buys no longer run; divergences still get theirs."""
    demoted = frozenset({"rhat"})
    first = FakeFit((RHAT, WIDE), 1000, cell_estimate=object(), minor_reasons=demoted)
    fit, model = _run(first, [FakeFit((RHAT, WIDE), 2000)], budget=4)
    assert model.calls == [] and fit.follow_up.steps[-1].verdict == "no mechanical remedy"
    first = FakeFit((RHAT, DIVERGED), 1000, cell_estimate=object(), minor_reasons=demoted)
    fit, model = _run(first, [FakeFit((), 1000)], budget=4)
    assert [c["adapt_delta"] for c in model.calls] == [ADAPT_DELTA_STEPS[1]]
    # without the demotion the same R-hat is remedied by a longer run
    fit, model = _run(FakeFit((RHAT, WIDE), 1000), [FakeFit((), 2000)], budget=4)
    assert [c["iter_sampling"] for c in model.calls] == [2000]


def test_every_new_run_is_judged_before_its_verdict_is_read() -> None:
    """The conductor's judge (its checks, the cells' estimate) reaches each new run: here it
    reports cells, so the new run's minor R-hat ends the follow-ups."""
    judged: list[FakeFit] = []

    def judge(fit: FakeFit) -> FakeFit:
        judged.append(fit)
        fit.cell_estimate, fit.minor_reasons = object(), frozenset({"rhat"})
        return fit

    second = FakeFit((RHAT,), 1000)
    fit, model = _run(FakeFit((DIVERGED,), 1000), [second, FakeFit((), 2000)], budget=8,
                      judge=judge)
    assert judged == [second] and fit is second and len(model.calls) == 1


def test_the_estimate_is_made_where_it_can_end_the_follow_ups_and_on_the_last_run() -> None:
    """The reported estimate costs draws of its own: made once within the loop, on the
    first run whose reasons it could all make minor (here after divergences were remedied),
    and on the run returned; never for a run whose divergences it cannot excuse."""
    made: list[FakeFit] = []

    def estimate(fit: FakeFit) -> FakeFit:
        made.append(fit)  # the first estimate is refused (its weights), the last stands
        fit.cell_estimate = object() if len(made) > 1 else None
        return fit

    first = FakeFit((DIVERGED,), 1000)
    second = FakeFit((RHAT,), 1000)  # the estimate is tried here, refused: the run goes on
    third = FakeFit((), 2000)  # the longer run passes on its own: its estimate is made once
    fit, model = _run(first, [second, third], budget=8, estimate=estimate)
    assert made == [second, third] and fit is third and len(model.calls) == 2
    # an ok first run gets its estimate too, and nothing more runs
    ok = FakeFit((), 1000)
    made.clear()
    fit, model = _run(ok, [], budget=4, estimate=estimate)
    assert made == [ok] and model.calls == []


def test_a_refused_estimate_is_not_made_again_until_the_last_run() -> None:
    made: list[FakeFit] = []

    def estimate(fit: FakeFit) -> FakeFit:
        made.append(fit)  # refused every time: the run's own estimate stands
        return fit

    first, second, third = FakeFit((RHAT,), 1000), FakeFit((RHAT,), 2000), FakeFit((), 4000)
    fit, model = _run(first, [second, third], budget=16, estimate=estimate)
    assert made == [first, third] and fit is third and len(model.calls) == 2


def test_a_run_made_suspect_by_its_last_estimate_is_not_said_to_end_ok() -> None:
    """The estimate made after the loop brings its own checks (the wide draws): a run ok
    before it and suspect after it ends with what is left for that verdict."""
    wide = Reason("wide_moments", "the mean of x is 5 SE from the wide draws'", "reparameterise")

    def estimate(fit: FakeFit) -> FakeFit:
        fit.reasons = (*fit.reasons, wide)
        return fit

    fit, model = _run(FakeFit((), 1000), [], budget=4, estimate=estimate)
    assert model.calls == [] and not fit.check().ok
    assert fit.follow_up.ended == "no_remedy" and not fit.follow_up.remedy_left

    def longer(fit: FakeFit) -> FakeFit:
        fit.reasons = (*fit.reasons, STUCK)  # a reason a longer run would answer
        return fit

    fit, _ = _run(FakeFit((), 1000), [], budget=4, estimate=longer)
    assert fit.follow_up.ended == "no_budget" and fit.follow_up.remedy_left
