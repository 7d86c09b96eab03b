"""Every fit judges itself: forced failures are flagged, good fits are not, failed pilots show.

Compiled; small models with exact answers (``models/``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import cmdstanpy
import numpy as np
import pytest

import pemc_stan
from pemc_stan.core.base_density import BaseDensity
from pemc_stan.methods.continuous_tempering.cells import MODE_ACCEPT_RATIO
from pemc_stan.modes.pilot import BasePilot

pytestmark = pytest.mark.compiled

MODELS = Path(__file__).resolve().parents[2] / "models"
BIMODAL = MODELS / "bimodal_1d" / "bimodal_1d.stan"
BIMODAL_DATA = json.loads((MODELS / "bimodal_1d" / "bimodal_1d.data.json").read_text())
NORMAL = MODELS / "normal_normal" / "normal_normal.stan"
NORMAL_DATA = json.loads((MODELS / "normal_normal" / "data.json").read_text())


def _normal_log_z() -> float:
    y = np.asarray(NORMAL_DATA["y"], dtype=float)
    n, mu0, tau0, sigma = len(y), NORMAL_DATA["mu0"], NORMAL_DATA["tau0"], NORMAL_DATA["sigma"]
    cov = sigma**2 * np.eye(n) + tau0**2
    r = y - mu0
    return float(-0.5 * (n * math.log(2 * math.pi) + np.linalg.slogdet(cov)[1]
                         + r @ np.linalg.solve(cov, r)))


NARROW = BaseDensity(np.array([3.0]), np.array([[0.01]]))
SQUARE = Path(__file__).resolve().parents[2] / "benchmarks" / "validation_cases" / "multimodal" \
    / "square_sign"


def test_a_divergent_run_is_carried_to_an_ok_verdict_and_the_right_answer(
        cmdstan_installation: Any) -> None:
    """CT (tempering: no mode split) on square_sign (theta seen only through its square; exact
    answers by quadrature) with ``adapt_delta=0.5``: steps too long for the narrow modes, so
    the first run diverges (the first asserts check this premise); the follow-ups raise
    adapt_delta (0.8, then 0.95 if need be: a budget of 8 leaves room for both), continue
    from where the run ended, and the final run is ok and right, with the steps recorded."""
    truth = json.loads((SQUARE / "truth.json").read_text())
    fit = pemc_stan.sample(SQUARE / "model.stan", str(SQUARE / "data.json"), method="ct",
                           split_modes="never", seed=5, adapt_delta=0.5, budget=8)
    steps = fit.follow_up.steps
    assert steps, "the premise: the first run is suspect"
    assert steps[0].change == "adapt_delta 0.5 -> 0.8", fit.follow_up.describe()
    assert steps[0].because.startswith("divergences") and steps[-1].verdict == "ok"
    assert fit.check().ok, fit.check()
    negative = fit.expectation(lambda v: (v["theta"] < 0).astype(float))
    assert negative.mcse < 0.05
    assert abs(negative.mean - truth["prob"]["theta < 0"]) < 4 * negative.mcse, negative
    est = fit.log_z()
    assert est.std_error < 0.15 and abs(est.log_z - truth["log_z"]) < 4 * est.std_error, est
    info = fit.diagnostics(warn=False)
    assert info["follow_up"][0].startswith("adapt_delta 0.5 -> 0.8 after divergences")


def test_ct_with_a_narrow_base_on_one_mode_is_flagged(cmdstan_installation: Any) -> None:
    """A base 0.1 wide on the right mode cannot carry chains between the modes 12 sd apart:
    the chains that start near the left mode never reach beta = 0, and the verdict says so.
    With ``budget=1`` nothing is retried."""
    fit = pemc_stan.sample(BIMODAL, BIMODAL_DATA, method="ct", split_modes="never",
                           base=NARROW, log_zeta=0.0,
                           bootstrap_rounds=0, chains=4, iter_warmup=300, iter_sampling=500,
                           seed=7, budget=1)
    verdict = fit.check()
    # the chains stuck at beta = 1 near the left mode make no round trip (and disagree)
    assert {"beta_round_trips", "rhat"} <= set(verdict.names()), verdict
    assert fit.follow_up.steps == [] and fit.follow_up.spent == fit.follow_up.first_gradients
    assert len(fit.history) == 1 and fit.fit.num_draws_sampling == 500
    with pytest.warns(pemc_stan.errors.FitSuspectWarning):
        fit.summary()


@pytest.fixture(scope="module")
def narrow_base_budget_40(cmdstan_installation: Any) -> Any:
    """The fixed narrow base on one mode, with a budget of 40 (seed 7: CmdStan alone decides
    that the first run has chains in both modes and is suspect)."""
    return pemc_stan.sample(BIMODAL, BIMODAL_DATA, method="ct", split_modes="never",
                            base=NARROW, log_zeta=0.0,
                            bootstrap_rounds=0, chains=4, iter_warmup=300, iter_sampling=500,
                            seed=7, budget=40)


def test_the_follow_ups_stay_within_their_budget_and_each_continues_the_last(
        narrow_base_budget_40: Any) -> None:
    """The follow-ups continue from where each run ended (one more bootstrap round each,
    twice the draws) until the verdict is ok or the next step would pass the budget.  Which
    end it reaches turns on the last bits of the rounds' log zeta (it differs between BLAS
    kernels), so this asserts what holds either way: the spend stays within the budget,
    every run continued the last, and the record's last step says why it stopped.  (The
    stop at the budget itself is checked without compiling, in
    tests/sampling/test_follow_up.py.)"""
    fit = narrow_base_budget_40
    record = fit.follow_up
    ran = [s for s in record.steps if s.gradients > 0]
    assert ran, "the premise: the first run is suspect and a longer run fits the budget"
    assert all(s.verdict == "suspect" for s in ran[:-1])
    assert record.budget == 40.0 and record.spent <= 40 * record.first_gradients
    # each step continued the last: one more bootstrap round with twice the draws
    assert len(fit.history) == 1 + len(ran)
    assert fit.fit.num_draws_sampling == 500 * 2 ** len(ran)
    assert fit.diagnostics(warn=False)["follow_up"] == record.describe()
    if fit.check().ok:
        assert record.steps[-1] is ran[-1] and ran[-1].verdict == "ok"
    else:
        assert record.steps[-1].verdict.startswith(("over budget", "not run")), record


@pytest.mark.xfail(reason=(
    "a known silent failure (issue 53): with the SkylakeX OpenBLAS kernel the fourth "
    "follow-up's chains all leave the left mode (log zeta grew 0 -> 9.2 over the rounds), "
    "the verdict is ok, and P(x < 0) = 0 (exact 0.3), log Z -0.417 +- 0.032 (exact 0): "
    "nothing in the last run shows the mode the earlier runs held"), strict=False)
def test_an_ok_verdict_after_follow_ups_comes_with_the_right_answer(
        narrow_base_budget_40: Any) -> None:
    fit = narrow_base_budget_40
    if not fit.check().ok:
        return  # flagged: honest whatever its answer
    negative = fit.expectation(lambda v: (v["x"] < 0).astype(float))
    assert abs(negative.mean - 0.3) < 4 * max(negative.mcse, 1e-3), negative
    est = fit.log_z()
    assert abs(est.log_z) < 4 * est.std_error, est


def test_a_follow_up_that_cannot_fix_the_r_hat_is_not_run(cmdstan_installation: Any) -> None:
    """With a budget of twice the first run, the same run's R-hat of 1.67 could fall to
    1.31 at best, even as one over the draws squared: no longer run is started, the
    record says why and the verdict stays suspect."""
    fit = pemc_stan.sample(BIMODAL, BIMODAL_DATA, method="ct", split_modes="never",
                           base=NARROW, log_zeta=0.0,
                           bootstrap_rounds=0, chains=4, iter_warmup=300, iter_sampling=500,
                           seed=7, budget=2)
    record = fit.follow_up
    assert "rhat" in fit.check().names() and fit.worst_rhat() > 1.19
    (step,) = record.steps
    assert step.change == "iter_sampling 500 -> 1000" and step.gradients == 0
    assert step.verdict.startswith("not run: more draws cannot fix an R-hat of")
    assert record.spent == record.first_gradients and len(fit.history) == 1


@pytest.mark.parametrize("seed", [
    pytest.param(26, marks=pytest.mark.xfail(
        reason="a known silent failure: since a mode's mass is its paths' median (not their "
        "largest), log zeta moved, and on this seed no draw of the bootstrap round, as of "
        "round 0, is in the left basin: log Z = log 0.7 judged ok. Only where a chain "
        "starts can show the left mode here", strict=False)),
    3])
def test_ct_whose_pilot_missed_a_mode_is_right_or_flagged(monkeypatch: pytest.MonkeyPatch,
                                                           seed: int,
                                                           cmdstan_installation: Any) -> None:
    """Pathfinder started in the right mode's basin finds only that mode, so the base and the
    pilot's log zeta (log 0.7) miss the left one. Each round's chains start at CmdStan's
    random inits, not where the pilot looked, so a chain can start in the left basin and
    either carry its mass into the estimate or make the chains disagree. The answer is
    right (mass and log Z within 4 standard errors) or the verdict is suspect: never a
    wrong answer that looks fine. On these two seeds every chain of round 0 starts in the
    right basin and only the bootstrap round's fresh inits reach the left one (measured:
    suspect, rhat and chains_agree). Both ways of saving time that were tried and
    dropped fail here with log Z = log 0.7 and an ok verdict: inits drawn from the
    pilot's base, and ending after round 0 when it agrees with the pilot (pilot_tol).
    """
    original = cmdstanpy.CmdStanModel.pathfinder

    def one_mode(self: cmdstanpy.CmdStanModel, *args: Any, **kwargs: Any) -> Any:
        return original(self, *args, **{**kwargs, "inits": {"x": 2.5}})

    monkeypatch.setattr(cmdstanpy.CmdStanModel, "pathfinder", one_mode)
    fit = pemc_stan.sample(BIMODAL, BIMODAL_DATA, method="ct", split_modes="never",
                           chains=4, iter_warmup=1000,
                           iter_sampling=1000, seed=seed)
    assert fit.history[0]["base"] == "pathfinder" and fit.mode_centres is None  # one mode
    assert fit.history[0]["log_zeta"] == pytest.approx(math.log(0.7), abs=0.05)
    left = fit.expectation(lambda v: (v["x"] < 0).astype(float))
    est = fit.log_z()
    # "right" only with error bars that rule out the one-mode answer: 4 MCSE of the mass
    # below 0.2 and 4 SE of log Z below |log 0.7|
    right = (abs(left.mean - BIMODAL_DATA["w"]) < 4 * left.mcse and left.mcse < 0.05
             and abs(est.log_z) < 4 * est.std_error
             and est.std_error < abs(math.log(0.7)) / 4)
    verdict = fit.check()
    assert right or not verdict.ok, (left, est, verdict)


def test_a_good_ct_fit_is_ok(cmdstan_installation: Any) -> None:
    fit = pemc_stan.sample(NORMAL, NORMAL_DATA, method="ct", split_modes="never",
                           chains=4, iter_warmup=500,
                           iter_sampling=1000, seed=3)
    verdict = fit.check()
    assert verdict.ok, verdict
    assert {"rhat", "beta_round_trips", "base_moments", "log_z_chains"} <= set(verdict.checks)


@pytest.mark.parametrize("method", ["ct", "pe"])
def test_trajectories_cut_at_the_maximum_tree_depth_are_flagged_by_name(
        method: str, cmdstan_installation: Any) -> None:
    """With ``max_treedepth=1`` every NUTS transition of the extended target stops at the
    limit: the verdict names it, with the deeper tree as the remedy (``budget=1``: no
    follow-up takes it)."""
    fit = pemc_stan.sample(NORMAL, NORMAL_DATA, method=method, split_modes="never",
                           chains=2, iter_warmup=200, iter_sampling=200, seed=3, budget=1,
                           max_treedepth=1)
    verdict = fit.check()
    assert "max_treedepth" in verdict.names(), verdict
    (reason,) = [r for r in verdict.reasons if r.name == "max_treedepth"]
    assert "stopped at max_treedepth=1" in reason.message and "max_treedepth=3" in reason.remedy


HEAVY_TAIL = Path(__file__).resolve().parents[2] / "benchmarks" / "validation_cases" / \
    "multimodal" / "heavy_tail_pair_2d" / "model.stan"


@pytest.mark.parametrize("seed", [1, 2])
def test_a_narrow_mode_the_step_size_cannot_enter_is_weighed_by_its_cell(
        seed: int, cmdstan_installation: Any) -> None:
    """A normal mode of sd 0.3 beside a Student-t of scale 1.2: CT's one step size, adapted
    mostly in the wide mode and the base, is rejected in the narrow mode at high beta (the
    ratio is about 0.1-0.25 at adapt_delta 0.8, far from the bound), so the chains avoid
    it.  The cells weigh that mode by the search's part there: their log Z is right
    within 4 standard errors and the step size does not make them suspect; the run's own
    estimate, which rests on the chains' entries, is judged suspect with a smaller step."""
    fit = pemc_stan.sample(HEAVY_TAIL, None, method="ct", split_modes="never", seed=seed,
                           budget=1)
    assert fit.mode_centres is not None and fit.mode_centres.shape[0] == 2
    ratio, _ = fit.mode_acceptance()
    assert ratio < MODE_ACCEPT_RATIO
    assert fit.cell_estimate is not None
    log_z = fit.log_z()
    assert abs(log_z.log_z) < 4 * log_z.std_error, log_z  # the case's log Z is 0
    assert "mode_acceptance" not in fit.check().names()
    fit.cell_estimate = None  # the run's own estimate reported
    (reason,) = [r for r in fit.check().reasons if r.name == "mode_acceptance"]
    assert "adapt_delta" in reason.remedy


@pytest.mark.parametrize("method", ["ct", "pe"])
def test_a_tempered_run_after_a_search_that_may_have_missed_modes_says_so(
        method: str, cmdstan_installation: Any) -> None:
    """A tempered run reaches beyond the modes its base covers, and its own checks judge
    what it reached: with several modes found and the search stopped while one more path
    had a 20% chance of another, the verdict notes it (``mode_search``) and stays ok when
    the run's checks pass; with 2% it says nothing."""
    import dataclasses

    fit = pemc_stan.sample(BIMODAL, BIMODAL_DATA, method=method, split_modes="never",
                           chains=4, iter_warmup=500, iter_sampling=1000, seed=3, budget=1)
    assert fit.search is not None and fit.search.major_modes == 2
    fit.search = dataclasses.replace(fit.search, unseen=0.02)
    before = fit.check()
    assert "mode_search" not in [r.name for r in (*before.reasons, *before.notes)]
    fit.search = dataclasses.replace(fit.search, unseen=0.2, stopped="path limit")
    verdict = fit.check()
    assert verdict.names() == before.names(), verdict
    assert "mode_search" in [r.name for r in verdict.notes], verdict
    assert "20% chance" in str(verdict) and "num_paths" in str(verdict)


def test_ct_base_falls_back_when_pathfinder_fails(monkeypatch: pytest.MonkeyPatch,
                                                  cmdstan_installation: Any) -> None:
    """Without Pathfinder the base comes from the next approximation and log zeta from
    importance sampling with the density program; log Z stays right."""
    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("Pathfinder is broken for this test")

    monkeypatch.setattr(cmdstanpy.CmdStanModel, "pathfinder", broken)
    fit = pemc_stan.sample(NORMAL, NORMAL_DATA, method="ct", split_modes="never",
                           chains=4, iter_warmup=500,
                           iter_sampling=1000, seed=5)
    assert [n for n, _, _ in fit.pilot_notes] == ["pathfinder_failed"]
    assert fit.history[0]["base"] == "advi" and fit.history[-1]["base"] == "bootstrap"
    est = fit.log_z()
    assert 0 < est.std_error < math.log(2) / 4  # log Z off by log 2 cannot pass
    assert abs(est.log_z - _normal_log_z()) < 4 * est.std_error, est
    assert any("pathfinder fit of the base failed" in m
               for m in fit.diagnostics(warn=False)["messages"])


def test_a_failed_pe_pilot_falls_back_and_is_in_the_verdict_when_all_fail(
        monkeypatch: pytest.MonkeyPatch, cmdstan_installation: Any) -> None:
    """Under likelihood tempering (whose offset is the only thing the pilot gives) without
    Pathfinder the offset log_scale comes from importance sampling with a
    Gaussian fitted to ADVI's draws (within 0.1 of the exact log Z here, where 0 would be
    5 nats off); when every approximation fails, 0 is used and the verdict names it."""
    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("Pathfinder is broken for this test")

    monkeypatch.setattr(cmdstanpy.CmdStanModel, "pathfinder", broken)
    fit = pemc_stan.sample(NORMAL, NORMAL_DATA, method="pe", split_modes="never",
                           temper="likelihood", chains=2, iter_warmup=300,
                           iter_sampling=300, seed=5)
    assert fit.result.temper == "likelihood"
    assert abs(_normal_log_z()) > 5 and abs(fit.log_scale - _normal_log_z()) < 0.1
    assert "pilot" not in fit.check().names()
    assert any("ADVI" in m or "advi" in m for m in fit.diagnostics(warn=False)["messages"])

    def nothing(*_a: object, **_k: object) -> None:
        raise RuntimeError("no approximation works in this test")

    monkeypatch.setattr(BasePilot, "fit", nothing)
    fit = pemc_stan.sample(NORMAL, NORMAL_DATA, method="pe", split_modes="never",
                           temper="likelihood", chains=2, iter_warmup=300,
                           iter_sampling=300, seed=5)
    assert fit.log_scale == 0.0
    verdict = fit.check()
    assert "pilot" in verdict.names()
    assert "Pathfinder is broken for this test" in str(verdict)


def test_evidence_on_nuts_draws_of_a_bimodal_model_is_suspect(cmdstan_installation: Any
                                                              ) -> None:
    """Bridge sampling on plain NUTS draws of the 0.3 / 0.7 mixture sees one mode (log Z near
    log 0.7 or log 0.3, not 0): multi-path Pathfinder finds both modes, so the estimate is
    marked suspect instead of printed as if it were right."""
    with pytest.warns(pemc_stan.errors.FitSuspectWarning, match="modes"):
        est = pemc_stan.evidence(BIMODAL, BIMODAL_DATA, estimator="bridge", chains=2,
                                 iter_sampling=500, seed=1)
    assert est.diagnostics["verdict"] == "suspect"
    assert any(r.startswith("modes:") for r in est.diagnostics["reasons"])


def test_a_scout_in_a_mode_the_search_missed_refuses_the_split(
        monkeypatch: pytest.MonkeyPatch, cmdstan_installation: Any) -> None:
    """Forced: the search sees only the right mode and one scout starts in the left one;
    its draws disagree with the right mode's chains, so the split is refused (named in
    the diagnostics) and the run tempers."""
    from pemc_stan.modes import split, split_fit

    original = cmdstanpy.CmdStanModel.pathfinder

    def one_mode(self: cmdstanpy.CmdStanModel, *args: Any, **kwargs: Any) -> Any:
        return original(self, *args, **{**kwargs, "inits": {"x": 2.5}})

    def one_scout_left(model: Any, coords: Any, centres: Any, chains: int,
                       seed: int | None) -> list[Any]:
        inits = split.scout_inits(model, coords, chains, seed)
        return [{"x": BIMODAL_DATA["mu1"]}, *inits[1:]]

    monkeypatch.setattr(cmdstanpy.CmdStanModel, "pathfinder", one_mode)
    monkeypatch.setattr(split, "run_inits", one_scout_left)
    fit = pemc_stan.sample(BIMODAL, BIMODAL_DATA, chains=4, iter_sampling=500, seed=5,
                           budget=1)
    assert not isinstance(fit, split_fit.ModeSplitFit)
    notes = [m for m in fit.diagnostics(warn=False)["messages"] if "modes were not split" in m]
    assert notes and ("chains_agree" in notes[0] or "rhat" in notes[0]), notes


def test_every_surface_describes_the_run_the_follow_up_ended_with(
        cmdstan_installation: Any, tmp_path: Path) -> None:
    """The command line, on the divergent run of the first test: the follow-up's run, the
    one the verdict judged, is alone at cmdstan/ and the earlier runs in their own
    folders; estimates.json, the report's header and the InferenceData's attributes give
    the judged run."""
    import arviz as az

    from pemc_stan.cli import main

    out = tmp_path / "run"
    code = main(["sample", str(SQUARE / "model.stan"), "--data", str(SQUARE / "data.json"),
                 "--method", "ct", "--split-modes", "never", "--seed", "5",
                 "--adapt-delta", "0.5", "--budget", "8", "--output-dir", str(out)])
    assert code in (0, 8)
    estimates = json.loads((out / "estimates.json").read_text())
    assert estimates["follow_up"]["steps"], "the premise: the first run is suspect"
    judged, asked = estimates["sampler"], estimates["requested"]
    assert asked["adapt_delta"] == 0.5 and judged["adapt_delta"] > 0.5
    # the judged run alone at cmdstan/ (#76), the earlier ones in their named folders
    assert judged["csv_folder"] == "cmdstan/"
    stems = {p.name.rsplit("_", 1)[0] for p in (out / "cmdstan").glob("*.csv")}
    assert len(stems) == 1 and len(list((out / "cmdstan").glob("*.csv"))) == judged["chains"]
    assert estimates["earlier_runs"] and judged["csv_folder"] not in estimates["earlier_runs"]
    assert all(run.startswith("cmdstan/") and run != "cmdstan/"
               for run in estimates["earlier_runs"])
    page = (out / "report.html").read_text()
    assert f"in {judged['csv_folder']}" in page and "earlier runs:" in page
    attrs = az.from_netcdf(str(out / "model.nc")).posterior.attrs
    recorded = json.loads(attrs["pemc_judged_run"])
    assert {k: recorded[k] for k in ("chains", "iter_sampling", "adapt_delta")} == {
        k: judged[k] for k in ("chains", "iter_sampling", "adapt_delta")}


#: Three independent bimodal factors (the kind of the shared suite's product_bimodal_5):
#: 8 modes, each factor w_i N(a_i, s_a_i^2) + (1 - w_i) N(b_i, s_b_i^2); normalised.
PRODUCT = """
data {
  int<lower=1> d;
  vector<lower=0, upper=1>[d] w;
  vector[d] a;
  vector<lower=0>[d] s_a;
  vector[d] b;
  vector<lower=0>[d] s_b;
}
parameters {
  vector[d] x;
}
model {
  for (i in 1:d)
    target += log_mix(w[i], normal_lpdf(x[i] | a[i], s_a[i]), normal_lpdf(x[i] | b[i], s_b[i]));
}
"""
PRODUCT_DATA = {"d": 3, "w": [0.3, 0.6, 0.45], "a": [-3.0, -2.5, -3.5], "s_a": [0.7, 0.5, 0.6],
                "b": [3.0, 2.5, 2.0], "s_b": [0.5, 0.8, 0.7]}


def test_tempering_alone_on_a_product_of_bimodal_factors_is_right_and_ok(
        cmdstan_installation: Any) -> None:
    """Continuous tempering with the defaults and no split on 8 modes: every mean, every
    mode mass P(x_i < 0) and log Z within 4 of their standard errors, and judged ok."""
    from scipy.stats import norm

    w, a, s_a, b, s_b = (np.asarray(PRODUCT_DATA[k], dtype=float)
                         for k in ("w", "a", "s_a", "b", "s_b"))
    fit = pemc_stan.sample(PRODUCT, PRODUCT_DATA, method="ct", split_modes="never", seed=1)
    assert fit.check().ok, fit.check()
    for i in range(3):
        mean = fit.expectation(f"x[{i + 1}]")
        assert abs(mean.mean - (w[i] * a[i] + (1 - w[i]) * b[i])) < 4 * mean.mcse, (i, mean)
        neg = fit.expectation(lambda v, i=i: (v[f"x[{i + 1}]"] < 0).astype(float))
        exact = w[i] * norm.cdf(-a[i] / s_a[i]) + (1 - w[i]) * norm.cdf(-b[i] / s_b[i])
        assert abs(neg.mean - exact) < 4 * neg.mcse and neg.mcse < 0.05, (i, neg, exact)
    log_z = fit.log_z()
    assert log_z is not None and abs(log_z.log_z) < 4 * log_z.std_error < 0.6, log_z
