"""Stratified importance sampling against a two-component mixture with exact answers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pemc_stan.estimators.stratified import (
    stratified_log_z,
    stratified_mean,
    stratum_log_masses,
    stratum_log_weights,
)

LOG_C = 1.7  # gamma = exp(LOG_C) * (0.3 N(-2, 1) + 0.7 N(3, 0.5)): log Z = LOG_C
CUT = 0.5  # stratum 0: x < CUT; stratum 1: x >= CUT
MEAN = 0.3 * -2 + 0.7 * 3
SECOND = 0.3 * (1 + 4) + 0.7 * (0.25 + 9)
PROPOSALS = (stats.norm(-1.5, 1.5), stats.norm(2.8, 0.8))


def log_gamma(x: np.ndarray) -> np.ndarray:
    return LOG_C + np.logaddexp(np.log(0.3) + stats.norm(-2, 1).logpdf(x),
                                np.log(0.7) + stats.norm(3, 0.5).logpdf(x))


def exact_log_masses() -> np.ndarray:
    low = 0.3 * stats.norm(-2, 1).cdf(CUT) + 0.7 * stats.norm(3, 0.5).cdf(CUT)
    return LOG_C + np.log([low, 1 - low])


def draws(rng: np.random.Generator, counts: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """Each stratum's proposal draws, their strata and log weights."""
    y = np.concatenate([q.rvs(m, random_state=rng) for q, m in zip(PROPOSALS, counts, strict=True)])
    lab = np.repeat([0, 1], counts)
    lq = np.where(lab == 0, PROPOSALS[0].logpdf(y), PROPOSALS[1].logpdf(y))
    inside = (y >= CUT) == (lab == 1)
    return y, lab, stratum_log_weights(log_gamma(y), lq, inside, lab)


def test_estimates_lie_within_their_errors_of_the_exact_values() -> None:
    y, lab, lu = draws(np.random.default_rng(1), (3000, 20000))  # unequal draws per stratum
    log_z, se = stratified_log_z(lu, lab)
    assert abs(log_z - LOG_C) < 4 * se < 0.05
    est = stratified_mean(np.stack([y, y**2], axis=1), lu, lab)
    assert np.all(np.abs(est.mean - [MEAN, SECOND]) < 4 * est.std_error)
    assert np.all(est.std_error < [0.05, 0.2])
    masses = stratum_log_masses(lu, lab)
    assert np.allclose(masses, exact_log_masses(), atol=0.05)


def test_standard_errors_match_the_scatter_of_repeated_estimates() -> None:
    rng = np.random.default_rng(7)
    runs = []
    for _ in range(300):
        y, lab, lu = draws(rng, (100, 400))
        log_z, log_z_se = stratified_log_z(lu, lab)
        est = stratified_mean(y, lu, lab)
        runs.append((log_z, log_z_se, float(est.mean), float(est.std_error)))
    a = np.array(runs)
    # each reported error within 20% of the observed scatter (a formula that ignored the
    # strata's draw counts, or their independence, is off by far more here)
    assert a[:, 1].mean() == pytest.approx(a[:, 0].std(), rel=0.2)
    assert a[:, 3].mean() == pytest.approx(a[:, 2].std(), rel=0.2)
    z = (a[:, 2] - MEAN) / a[:, 3]
    assert abs(z.mean()) < 0.3
    assert abs(a[:, 0].mean() - LOG_C) < 3 * a[:, 0].std() / np.sqrt(len(a))


def test_draws_outside_their_stratum_or_without_a_density_weigh_nothing() -> None:
    lu = stratum_log_weights([0.0, 0.0, np.nan, 0.0], [0.0, 0.0, 0.0, 0.0],
                             [True, False, True, True], [0, 0, 1, 1])
    assert lu[0] == pytest.approx(-np.log(2))
    assert lu[1] == -np.inf and lu[2] == -np.inf
    assert lu[3] == pytest.approx(-np.log(2))


def test_a_stratum_whose_draws_all_missed_it_has_no_mass() -> None:
    masses = stratum_log_masses([0.0, -np.inf], [0, 1])
    assert masses[0] == 0.0 and masses[1] == -np.inf


def test_weights_that_are_all_zero_are_an_error_that_says_why() -> None:
    with pytest.raises(ValueError, match="no stratum's proposal reached"):
        stratified_log_z([-np.inf, -np.inf], [0, 1])


def test_mismatched_shapes_are_errors() -> None:
    with pytest.raises(ValueError, match="same length"):
        stratified_log_z([0.0, 0.0], [0])
    with pytest.raises(ValueError, match="one length"):
        stratum_log_weights([0.0], [0.0, 0.0], [True], [0])
    with pytest.raises(ValueError, match="leading entries"):
        stratified_mean([1.0, 2.0, 3.0], [0.0, 0.0], [0, 1])
