"""ContinuousTemperingFit on exact draws of the CT joint (fast; nothing compiles).

Target ``gamma(x) = Z N(x; M, S^2)`` and base ``b = N(0, 1)`` (x unconstrained,
so the base coordinate is x itself): the joint of eq 16 is sampled exactly
(``beta`` by inverse CDF of its marginal, eq 19, then ``x | beta`` Gaussian)
and handed to the fit object through a stand-in for cmdstanpy's fit.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from fakes import LOG_Z, M, S, exact_ct_fit
from scipy.special import logit

from pemc_stan.errors import ContinuousTemperingDiagnosticWarning
from pemc_stan.methods.continuous_tempering.fit import ContinuousTemperingFit


def _fit(log_zeta: float, n: int = 8000, chains: int = 4, seed: int = 1,
         history: list[dict[str, object]] | None = None, round: int | None = None
         ) -> ContinuousTemperingFit:
    return exact_ct_fit(log_zeta, n, chains, seed, history=history, round=round)


@pytest.mark.parametrize("offset", [-1.0, 0.0, 1.0])
def test_log_z_and_expectations_on_exact_draws(offset: float) -> None:
    fit = _fit(LOG_Z + offset)
    assert fit.method == "continuous_tempering"
    assert fit.beta().shape == (4, 2000) and fit.delta().shape == (4, 2000)
    est = fit.log_z()
    assert 0 < est.std_error < 0.1
    assert abs(est.log_z - LOG_Z) < 4 * est.std_error
    e = fit.expectation("x")
    assert abs(e.mean - M) < 4 * e.mcse and e.mcse < 0.05
    e2 = fit.expectation(lambda v: v["x"] ** 2)
    assert abs(e2.mean - (M**2 + S**2)) < 4 * e2.mcse
    be = fit.base_expectations()
    assert list(be.index) == ["z_x"]
    assert abs(be["mean_z"].iloc[0]) < 4 and abs(be["var_z"].iloc[0]) < 4
    summary = fit.summary()
    assert summary.loc["x", "mean"] == pytest.approx(e.mean)


def test_an_earlier_bootstrap_round_far_off_is_named_but_not_suspect_alone() -> None:
    """Two independent exact runs as bootstrap rounds 0 and 1: log Z is the final round's
    own eq-20 estimate, the rounds agree and the check passes; a round 0 7 combined SEs away
    is named among the reasons of a run that fails another check, but a run whose only
    flaw it is stays ok (#36: its own checks passed); a round that failed its own log-Z
    checks is no evidence either way."""
    first = _fit(LOG_Z - 0.5, n=4000, seed=11).log_z()
    earlier = {"round": 0, "log_z": first.log_z, "std_error": first.std_error,
               "log_z_problems": []}
    fit = _fit(LOG_Z, seed=12, history=[earlier])
    own = _fit(LOG_Z, seed=12).log_z()
    assert fit.round == 1 and fit.log_z() == own
    verdict = fit.check()
    assert "log_z_rounds" in verdict.checks and "log_z_rounds" not in verdict.names()
    off = {**earlier, "log_z": own.log_z + 7 * own.std_error * math.sqrt(2),
           "std_error": own.std_error}
    bad = _fit(LOG_Z, seed=12, history=[off])
    assert bad.check().ok and "log_z_rounds" in bad.check().checks
    assert "log_z_rounds" in [name for name, r in bad.method_checks() if r is not None]
    worse = exact_ct_fit(LOG_Z, 8000, 4, 12, base_mean=1.0, history=[off])
    assert {"log_z_rounds", "base_moments"} <= set(worse.check().names())
    assert "round 0" in str(worse.check().reasons)
    sick = _fit(LOG_Z, seed=12, history=[{**off, "log_z_problems": ["beta_ends"]}])
    assert "log_z_rounds" not in sick.check().checks
    info = fit.diagnostics(warn=False)
    # a fit is complete when constructed: its history ends with its own round
    assert info["bootstrap_log_z"] == [first.log_z, own.log_z] and info["log_z"] == own.log_z
    assert _fit(LOG_Z, seed=12, history=[earlier], round=0).round == 0
    assert fit.round_log_z_problems() == []


def test_wrong_target_would_fail() -> None:
    """Guard: the eq-21 estimate is not just the plain mean of x over the joint."""
    fit = _fit(LOG_Z)
    e = fit.expectation("x")
    plain = float(np.mean(fit._column("x")))
    assert abs(plain - M) > 10 * e.mcse


def test_resampled_parameters_keep_chains_and_follow_w1() -> None:
    fit = _fit(LOG_Z)
    res = fit.resampled_parameters_pd()
    assert list(res.columns) == ["chain__", "iter__", "draw__", "x"]
    assert list(res["chain__"].unique()) == [1, 2, 3, 4] and len(res) == 8000
    for c in range(4):  # systematic resampling keeps the draw order within a chain
        assert np.all(np.diff(fit.resample_index()[c]) >= 0)
    assert abs(res["x"].mean() - M) < 5 * S / math.sqrt(1000)
    assert abs(res["x"].std() - S) < 0.05


def test_diagnostics_count_transitions_at_max_treedepth() -> None:
    fit = _fit(LOG_Z)
    fit.fit.metadata = SimpleNamespace(cmdstan_config={"max_depth": 10})
    assert fit.diagnostics(warn=False)["max_treedepth_hits"] == 0
    fit._draws[:200, :, fit._col["treedepth__"]] = 10  # 800 of 8000 transitions
    with pytest.warns(ContinuousTemperingDiagnosticWarning, match="800 of 8000 transitions"):
        info = fit.diagnostics(warn=True)
    assert info["max_treedepth_hits"] == 800
    assert any("max_treedepth=12" in m for m in info["messages"])


def test_round_trips() -> None:
    fit = _fit(LOG_Z, n=8, chains=1)
    seq = np.array([0.01, 0.5, 0.99, 0.6, 0.02, 0.97, 0.5, 0.01])
    fit._draws[:, 0, fit._col["pemc_u"]] = logit(seq)
    assert fit.round_trips() == 2  # 0 -> 1 -> 0 -> 1 -> 0: four crossings


def test_diagnostics_clean_and_with_advice() -> None:
    info = _fit(LOG_Z).diagnostics(warn=False)
    assert info["messages"] == [] and info["round_trips"] > 0
    assert 0.02 < info["share_near_0"] < 0.2 and 0.02 < info["share_near_1"] < 0.2
    # log zeta far above log Z: beta stays near 0, the target is rarely visited
    bad = _fit(LOG_Z + 12.0, seed=3)
    with pytest.warns(ContinuousTemperingDiagnosticWarning, match="bootstrap_rounds"):
        info = bad.diagnostics(warn=True)
    assert info["share_near_1"] < 0.01
    assert any("log_zeta" in m for m in info["messages"])


def test_cells_crossed_at_high_beta_are_one_mode() -> None:
    """Cells 0 and 1 are crossed often at beta > 0.5 (one mode split by the pilot), cell 2 only
    near the base (a separate mode), cell 3 holds 10 draws: 0+1 join, 3 joins the cell it
    steps into, 2 stays."""
    from pemc_stan.methods.continuous_tempering.cells import join_crossed_cells

    rng = np.random.default_rng(0)
    labels = np.zeros((2, 600), dtype=np.intp)
    beta = np.full((2, 600), 0.9)
    labels[0, :300] = rng.integers(0, 2, 300)  # 0 <-> 1 at beta 0.9
    labels[0, 300:] = 2
    beta[0, 295:305] = 0.01  # the step to cell 2 happens near the base
    labels[1, :590] = 2
    labels[1, 590:] = 3
    out, mass = join_crossed_cells(labels, np.array([0.3, 0.2, 0.4, 0.1]), beta)
    assert mass.tolist() == pytest.approx([0.5, 0.5])  # {0, 1} and {2, 3}
    assert np.all(out[0, :300] == 0) and np.all(out[0, 300:] == 1) and np.all(out[1] == 1)
    # without crossings and with enough draws, nothing is joined
    same, m = join_crossed_cells(np.repeat([[0], [1]], 100, axis=1), np.array([0.5, 0.5]),
                                  np.full((2, 100), 0.9))
    assert m.size == 2 and np.array_equal(same[:, 0], [0, 1])


def test_modes_crossed_rarely_at_high_beta_stay_apart() -> None:
    """Two modes whose barrier is low enough to be crossed a few times at beta > 0.5 in
    8000 draws (bimodal_1d: 0-6 times) are not one mode: independent draws would step
    between them about 2 * 8000 * 0.3 * 0.7 = 3360 times.  One mode split in two is
    crossed at a share of that of order one over its autocorrelation time."""
    from pemc_stan.methods.continuous_tempering.cells import join_crossed_cells

    rng = np.random.default_rng(1)
    n = 2000
    beta = np.full((4, n), 0.9)
    # each chain stays in a mode for hundreds of draws, then changes mode: 6 of the
    # changes happen at beta 0.9, the others near the base
    labels = np.zeros((4, n), dtype=np.intp)
    for c in range(4):
        cuts = np.sort(rng.choice(np.arange(1, n), 5, replace=False))
        for k, cut in enumerate(cuts):
            labels[c, cut:] = (k + 1) % 2
            if 5 * c + k >= 6:  # all but 6 of the 20 changes go through the base
                beta[c, cut - 1:cut + 1] = 0.02
    steps = (labels[:, 1:] != labels[:, :-1]) & (beta[:, 1:] > 0.5) & (beta[:, :-1] > 0.5)
    assert steps.sum() == 6
    kept, m = join_crossed_cells(labels, np.array([0.3, 0.7]), beta)
    assert m.size == 2 and np.array_equal(kept, labels)
    # the same cells of one mode, crossed at a tenth of the independent rate, join
    flips = rng.random((4, n)) < 0.1 * 0.42
    one = np.cumsum(flips, axis=1) % 2
    joined, m = join_crossed_cells(one.astype(np.intp), np.array([0.3, 0.7]), np.full((4, n), 0.9))
    assert m.tolist() == pytest.approx([1.0])


def test_a_cell_never_near_the_base_joins_a_neighbour() -> None:
    """A cell entered only near beta = 1 (its w_0 all tiny, one draw dominating) cannot give
    E[w_0 1_k], the denominator of its share of Z: it joins the cell it is crossed into."""
    from pemc_stan.methods.continuous_tempering.cells import join_crossed_cells

    labels = np.repeat([[0] * 300 + [1] * 300], 2, axis=0).astype(np.intp)
    beta = np.full(labels.shape, 0.3)
    log_w0 = np.zeros(labels.shape)
    log_w0[:, 300:] = -60.0
    log_w0[0, 450] = -1.0  # one draw of cell 1 carries its base-end weight
    mass = np.array([0.7, 0.3])
    kept, m = join_crossed_cells(labels, mass, beta)
    assert m.size == 2  # enough draws, no crossings at beta > 0.5
    joined, m = join_crossed_cells(labels, mass, beta, log_w0)
    assert m.tolist() == pytest.approx([1.0]) and np.all(joined == 0)


def _two_cell_fit(low: float, cell_two: float):  # type: ignore[no-untyped-def]
    """Exact draws, the pilot's centres at -1 and ``cell_two``, the acceptance statistic
    ``low`` at beta > 0.5 where x > 0.5 and 0.9 elsewhere."""
    from fakes import exact_ct_frame

    frame = exact_ct_frame(LOG_Z)
    hot_two = (frame["pemc_beta"] > 0.5) & (frame["x"] > 0.5)
    frame["accept_stat__"] = np.where(hot_two, low, 0.9)
    return exact_ct_fit(LOG_Z, frame=frame, mode_centres=np.array([[-1.0], [cell_two]]))


def test_a_mode_whose_transitions_are_rejected_at_high_beta_is_named_with_its_remedy() -> None:
    fit = _two_cell_fit(0.3, 2.0)
    ratio, cell = fit.mode_acceptance()
    assert cell == 1 and ratio == pytest.approx(0.3 / 0.9)
    reasons = {r.name: r for r in fit.check().reasons}
    assert "mode 2 of the pilot's is 0.33 times" in reasons["mode_acceptance"].message
    assert "adapt_delta" in reasons["mode_acceptance"].remedy


def test_acceptance_alike_across_modes_or_one_mode_found_raises_nothing() -> None:
    from pemc_stan.methods.continuous_tempering.cells import MODE_ACCEPT_RATIO

    fit = _two_cell_fit(0.9 * MODE_ACCEPT_RATIO + 0.01, 2.0)  # just above the bound
    assert fit.mode_acceptance()[0] >= MODE_ACCEPT_RATIO
    assert "mode_acceptance" not in fit.check().names()
    assert exact_ct_fit(LOG_Z).mode_acceptance() is None  # no centres: nothing to compare


def test_the_weighted_estimate_measures_its_terms_tail() -> None:
    # eq. 21's weights are bounded (a probability of beta = 1): Gaussian draws stay light
    est = exact_ct_fit(LOG_Z).expectation("x")
    assert 0 < est["khat_max"] <= 0.7 and est.khat < 0.4 and est.tail_reliable
