"""The numbers of a mode split's fit against exact answers (fast: nothing is compiled).

Three groups of modes with clearly unequal masses (0.7, 0.2, 0.1; ``Z = e^2``, so
unnormalised masses are not shares) and far-apart means, sampled by unequal numbers of
chains interleaved across the run (the heaviest group has the fewest draws): uniform
weights, unnormalised masses, masses swapped between groups or weights per draw instead of
per group each give numbers these tests refuse.
"""

from __future__ import annotations

import numpy as np
import pytest
from fakes import split_fit
from scipy.special import logsumexp

from pemc_stan.modes.split_fit import ModeSplitFit

MASSES = np.array([0.7, 0.2, 0.1])
LOG_Z = 2.0  # log of the groups' summed mass
LOG_Z_SE = np.array([0.05, 0.1, 0.2])
MEANS = np.array([-4.0, 1.0, 8.0])
SDS = np.array([0.5, 0.4, 0.6])
CHAINS = [2, 0, 1, 2, 1, 2]  # each chain's group: 1, 2 and 3 chains
N_DRAWS = 2000
#: Midpoints between the groups' means: a draw below the first is group 0's, above the
#: second group 2's (the nearest boundary is 5 standard deviations from a mean).
CUTS = (-1.5, 4.5)

EXACT_MEAN = float(np.sum(MASSES * MEANS))
EXACT_VAR = float(np.sum(MASSES * (SDS**2 + (MEANS - EXACT_MEAN) ** 2)))


@pytest.fixture(scope="module")
def fit() -> ModeSplitFit:
    return split_fit(list(np.log(MASSES) + LOG_Z), list(LOG_Z_SE), list(MEANS), list(SDS),
                     CHAINS, n_draws=N_DRAWS, seed=5)


def _group_draws(fit: ModeSplitFit) -> list[np.ndarray]:
    x = fit.particles("x")[..., 0]
    groups = np.asarray(CHAINS)
    return [x[groups == g].reshape(-1) for g in range(len(MASSES))]


def test_the_mode_weights_are_the_given_masses_shares(fit: ModeSplitFit) -> None:
    assert fit.mode_weights() == pytest.approx(MASSES, rel=1e-12)
    # each draw of group g weighs p_g / n_g: the group's draws together weigh p_g
    w = np.exp(fit.particle_log_weights()[..., 0])
    groups = np.asarray(CHAINS)
    assert [float(np.sum(w[groups == g])) for g in range(3)] == pytest.approx(MASSES,
                                                                               rel=1e-12)
    assert np.ptp(w[groups == 2]) == pytest.approx(0.0, abs=1e-15)  # equal within a group
    assert fit.diagnostics(warn=False)["mode_split"]["mode_masses"] == pytest.approx(MASSES)


def test_log_z_is_the_log_of_the_summed_masses_with_the_delta_method_error(
        fit: ModeSplitFit) -> None:
    est = fit.log_z()
    assert est.method == "mode_split_bridge"
    assert est.log_z == pytest.approx(LOG_Z, abs=1e-12)  # log(e^2 (0.7 + 0.2 + 0.1))
    # the delta method: d log Z / d log Z_g = Z_g / Z = the mass's share
    assert est.std_error == pytest.approx(float(np.sqrt(np.sum((MASSES * LOG_Z_SE) ** 2))),
                                          rel=1e-12)
    # ... checked by simulation: log sum_g Z_g with each log Z_g drawn around its value
    # with its standard error.  The sample sd of n = 200000 draws errs by 1 / sqrt(2 n)
    # = 0.16% relative; the delta method's own (second-order) error is well under 0.5%.
    n = 200_000
    rng = np.random.default_rng(11)
    perturbed = np.log(MASSES) + LOG_Z + LOG_Z_SE * rng.standard_normal((n, 3))
    simulated = float(np.std(logsumexp(perturbed, axis=1), ddof=1))
    assert est.std_error == pytest.approx(simulated, rel=4 / np.sqrt(2 * n) + 0.005)
    # the weights of the draws are the shares of the Z that log Z sums
    assert fit.mode_weights() == pytest.approx(
        np.exp(np.asarray(est.diagnostics["mode_log_z"]) - est.log_z), rel=1e-12)


def test_expectations_mix_the_groups_means_by_their_masses(fit: ModeSplitFit) -> None:
    parts = _group_draws(fit)
    est = fit.expectation("x")
    # exactly the mixture of the groups' sample means with the given weights ...
    assert est.mean == pytest.approx(float(np.sum(MASSES * [np.mean(v) for v in parts])),
                                     rel=1e-12)
    # ... and, within the sampling error of those means (i.i.d. draws), the exact mean
    sampling_se = float(np.sqrt(np.sum(MASSES**2 * SDS**2 / [v.size for v in parts])))
    assert abs(est.mean - EXACT_MEAN) <= 4 * sampling_se
    # its MCSE by the delta method: the groups' sampling errors and each log Z_g's error
    # moving the weights (d E / d log Z_g = p_g (m_g - E)).  Here the masses' errors make
    # 99.9% of the variance and the sample means are within 0.02 (1.8 sd) of the exact: 2%
    # is ample (the sampling part alone: the next test)
    delta_se = float(np.sqrt(sampling_se**2
                             + np.sum((MASSES * (MEANS - EXACT_MEAN) * LOG_Z_SE) ** 2)))
    assert np.isfinite(est.mcse) and est.mcse == pytest.approx(delta_se, rel=0.02)
    # the ESS is the mixture's variance over the squared MCSE
    assert est.ess == pytest.approx(EXACT_VAR / delta_se**2, rel=0.05)


def test_without_mass_errors_the_mcse_is_the_groups_sampling_error() -> None:
    exact_masses = split_fit(list(np.log(MASSES) + LOG_Z), [0.0, 0.0, 0.0], list(MEANS),
                             list(SDS), CHAINS, n_draws=N_DRAWS, seed=6)
    est = exact_masses.expectation("x")
    counts = np.bincount(CHAINS) * N_DRAWS
    sampling_se = float(np.sqrt(np.sum(MASSES**2 * SDS**2 / counts)))
    # each group's MCSE is sd / sqrt(ESS) with the ESS of its i.i.d. draws estimated; the
    # heaviest group's one chain of 2000 draws dominates, and its estimated ESS is off by
    # 6% (sd over 300 seeds; 0.69 to 1.11 of the draws): the MCSE by half that, 4 sd
    # and the estimate's skew allowed
    assert est.mcse == pytest.approx(sampling_se, rel=0.2)
    assert abs(est.mean - EXACT_MEAN) <= 4 * sampling_se
    # the ESS is the mixture's variance over the squared MCSE
    assert est.ess == pytest.approx(EXACT_VAR / est.mcse**2, rel=0.05)


def test_expectations_of_callables_mix_by_the_masses(fit: ModeSplitFit) -> None:
    second = fit.expectation(lambda v: v["x"] ** 2)
    exact = float(np.sum(MASSES * (MEANS**2 + SDS**2)))
    parts = _group_draws(fit)
    sampling_se = float(np.sqrt(np.sum(MASSES**2 * [np.var(v**2) / v.size for v in parts])))
    assert abs(second.mean - exact) <= 4 * sampling_se
    assert np.isfinite(second.mcse) and second.mcse > sampling_se
    # the indicator of each group: constant within every group, so its mean is that
    # group's weight exactly and its MCSE only the masses' errors moving the weights
    for g, inside in enumerate((lambda x: x < CUTS[0], lambda x: (x > CUTS[0]) & (x < CUTS[1]),
                                lambda x: x > CUTS[1])):
        share = fit.expectation(lambda v, inside=inside: inside(v["x"]).astype(float))
        assert share.mean == pytest.approx(MASSES[g], rel=1e-12)
        own = (np.arange(3) == g).astype(float)
        assert share.mcse == pytest.approx(
            float(np.sqrt(np.sum((MASSES * (own - MASSES[g]) * LOG_Z_SE) ** 2))), rel=1e-9)
        # its ESS: the Bernoulli variance p_g (1 - p_g) over the squared MCSE
        assert share.ess == pytest.approx(MASSES[g] * (1 - MASSES[g]) / share.mcse**2,
                                          rel=1e-9)


def test_resampled_draws_hold_the_groups_in_their_masses_shares(fit: ModeSplitFit) -> None:
    n = len(CHAINS) * N_DRAWS
    # binomial standard errors of the shares (systematic resampling varies less)
    tolerance = 4 * np.sqrt(MASSES * (1 - MASSES) / n)
    # enough draws that uniform weights (1/3 each) or equal weights per draw (the groups'
    # shares of the draws) would fail
    draw_shares = np.bincount(CHAINS) / len(CHAINS)
    assert np.all(tolerance < np.abs(MASSES - 1 / 3))
    assert np.all(tolerance < np.abs(MASSES - draw_shares))

    kept = np.asarray(CHAINS)[fit.resample_index() // N_DRAWS]  # the group of each kept draw
    assert kept.shape == (len(CHAINS), N_DRAWS)
    assert np.all(np.abs(np.bincount(kept.reshape(-1), minlength=3) / n - MASSES) <= tolerance)

    frame = fit.resampled_parameters_pd()
    assert len(frame) == n and frame["chain__"].nunique() == len(CHAINS)
    x = frame["x"].to_numpy()
    shares = np.array([np.mean(x < CUTS[0]), np.mean((x > CUTS[0]) & (x < CUTS[1])),
                       np.mean(x > CUTS[1])])
    assert np.all(np.abs(shares - MASSES) <= tolerance)
    # shuffled across chains: every resampled chain is a draw of the whole mixture
    heavy = frame.groupby("chain__")["x"].apply(lambda c: float(np.mean(c < CUTS[0])))
    assert np.all(np.abs(heavy.to_numpy() - MASSES[0])
                  <= 4 * np.sqrt(MASSES[0] * (1 - MASSES[0]) / N_DRAWS))


def test_one_divergent_transition_makes_a_split_suspect() -> None:
    """The split runs plain NUTS on the user's model, where Stan warns at any divergence:
    a divergence marks a region of a mode its chains could not enter (a tempered fit is
    judged by a share of them, ``tests/sampling/test_verdict_reasons.py``)."""
    args = ([0.0, 0.0], [0.01, 0.01], [-3.0, 3.0], [1.0, 1.0], [0, 0, 1, 1])
    clean = split_fit(*args)
    assert "divergences" not in clean.check().names()
    reasons = {r.name: r for r in split_fit(*args, divergent=1).check().reasons}
    assert "1 of 8000 transitions" in reasons["divergences"].message
    assert "adapt_delta" in reasons["divergences"].remedy


def test_cut_trajectories_alone_leave_a_split_ok_and_are_named_beside_other_reasons() -> None:
    """Plain NUTS whose trajectories stop at the maximum tree depth is slow, not biased (as
    Stan says): with 90% of the transitions cut and nothing else wrong the split is ok (its
    diagnostics still advise the deeper tree); beside another reason it is named too."""
    args = ([0.0, 0.0], [0.01, 0.01], [-3.0, 3.0], [1.0, 1.0], [0, 0, 1, 1])
    cut = split_fit(*args, cut=7200)
    assert cut.check().ok, cut.check()
    assert any("max_treedepth" in m for m in cut.diagnostics(warn=False)["messages"])
    both = split_fit(*args, cut=7200, divergent=1).check()
    assert {"divergences", "max_treedepth"} <= set(both.names())


def test_the_mixed_estimate_measures_its_terms_tail(fit: ModeSplitFit) -> None:
    # Gaussian groups weighed by their masses: light tails, no note
    est = fit.expectation("x")
    assert est.khat < 0.4 and est.tail_reliable
    assert fit.check().notes == ()


def test_the_diagnostics_say_why_more_chains_ran_than_were_asked(fit: ModeSplitFit) -> None:
    # six chains over three modes: none asked beyond the two at each mode
    assert fit.diagnostics(warn=False)["chains"].startswith(
        "6: 0 started where CmdStan starts them, as asked, and 2 at each of the 3 modes")


def test_one_group_whose_bridge_fails_keeps_its_draws_and_doubts_only_log_z() -> None:
    """With one group its mass weighs nothing: a bridge that did not converge (in many
    dimensions, its Gaussian fitted to a few thousand draws) leaves the split accepted
    with ``log_z_bridge`` named; with two groups the masses weigh the draws, and the same
    failure refuses the split (``mode_masses``)."""
    from dataclasses import replace

    from pemc_stan.modes.split import _accepts

    one = split_fit([0.0], [0.01], [0.0], [1.0], [0, 0, 0, 0])
    one.mode_log_z = [replace(one.mode_log_z[0], diagnostics={"converged": False})]
    verdict = one.check()
    assert "log_z_bridge" in verdict.names() and "mode_masses" not in verdict.names()
    assert "posterior draws are not affected" in str(verdict)
    assert _accepts(verdict)
    two = split_fit([0.0, 0.0], [0.01, 0.01], [-3.0, 3.0], [1.0, 1.0], [0, 0, 1, 1])
    two.mode_log_z = [two.mode_log_z[0],
                      replace(two.mode_log_z[1], diagnostics={"converged": False})]
    verdict = two.check()
    assert "mode_masses" in verdict.names() and "log_z_bridge" not in verdict.names()
    assert not _accepts(verdict)


def test_a_missed_mode_is_claimed_only_from_weights_that_could_be_weighed() -> None:
    """The wide importance sampler's excess mass refuses a split as a missed mode only when
    its weights compare finitely with the groups' mass; draws that could not be weighed
    (an infinite density) or weights that are not finite are named as such, never as a
    mode the search missed."""
    args = ([0.0, 0.0], [0.01, 0.01], [-3.0, 3.0], [1.0, 1.0], [0, 0, 1, 1])
    log_z = float(np.log(2.0))
    fit = split_fit(*args)
    rng = np.random.default_rng(3)
    fit.wide_log_weights = log_z + 0.1 * rng.standard_normal(4000)  # sees the groups' mass
    assert "mode_wide_mass" not in fit.check().names()
    fit.wide_log_weights = fit.wide_log_weights + np.log(2.0)  # twice the groups' mass
    missed = {r.name: r for r in fit.check().reasons}["mode_wide_mass"].message
    assert "the search missed a mode" in missed  # a finite comparison: a real claim
    fit.wide_log_weights = np.concatenate([fit.wide_log_weights, [np.inf]])
    infinite = {r.name: r for r in fit.check().reasons}["mode_wide_mass"].message
    assert "not finite" in infinite and "standard errors): the search missed" not in infinite
    # one finite weight whose square leaves floating point: its error would come out 0
    fit.wide_log_weights = np.concatenate([fit.wide_log_weights[:-1], [log_z + 400.0]])
    heavy = {r.name: r for r in fit.check().reasons}["mode_wide_mass"].message
    assert "not finite" in heavy and "standard errors): the search missed" not in heavy
    fit.wide_log_weights, fit.wide_failure = None, "the density is infinite at 2 of 2000 points"
    failed = {r.name: r for r in fit.check().reasons}["mode_wide_mass"].message
    assert "could not weigh them: the density is infinite" in failed
    assert "standard errors): the search missed" not in failed
