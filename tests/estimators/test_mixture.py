"""Known-answer tests for pemc_stan.estimators.mixture (pure NumPy, fast)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from pemc_stan.estimators.mixture import (
    mixture_log_z,
    mixture_mean,
    mixture_weights,
    unexplained_mass,
)


def test_weights_are_the_normalised_masses() -> None:
    np.testing.assert_allclose(mixture_weights([0.0, np.log(3.0)]), [0.25, 0.75], rtol=1e-14)
    np.testing.assert_allclose(mixture_weights([-1000.0, -1000.0 + np.log(3.0)]),
                               [0.25, 0.75], rtol=1e-12)


def test_one_part_weighs_one_whatever_its_mass() -> None:
    """A split's single group: its draws are the posterior's even where its bridge gave
    no mass (nan) or an error bar (the AR(1) Gaussian in 1,000 dimensions): a NaN
    weight made every estimate NaN."""
    for lz, se in ((np.nan, np.nan), (np.inf, 0.1), (-3.0, np.nan)):
        np.testing.assert_array_equal(mixture_weights([lz]), [1.0])
        assert mixture_mean([lz], [se], [2.5], [0.1]) == (2.5, 0.1)
    np.testing.assert_array_equal(mixture_weights([0.0, np.nan]), [np.nan, np.nan])


def test_empty_or_mismatched_parts_raise() -> None:
    with pytest.raises(ValueError, match="at least one part"):
        mixture_weights([])
    with pytest.raises(ValueError, match="standard errors"):
        mixture_log_z([0.0, 1.0], [0.1])
    with pytest.raises(ValueError, match="one entry per part"):
        mixture_mean([0.0, 1.0], [0.1, 0.1], [1.0], [0.1, 0.1])


def test_log_z_is_the_log_of_the_summed_masses_with_weighted_errors() -> None:
    log_z, se = mixture_log_z([np.log(1.0), np.log(3.0)], [0.2, 0.1])
    assert log_z == pytest.approx(np.log(4.0), rel=1e-14)
    assert se == pytest.approx(np.hypot(0.25 * 0.2, 0.75 * 0.1), rel=1e-14)
    assert mixture_log_z([-2.5], [0.3]) == pytest.approx((-2.5, 0.3))


def test_mean_of_two_parts_has_the_closed_form_error() -> None:
    # d E / d log Z_1 = p1 p2 (m1 - m2) = -d E / d log Z_2
    lz, lz_se, m, s = [0.0, np.log(3.0)], [0.1, 0.2], [-10.0, 15.0], [0.05, 0.04]
    est, se = mixture_mean(lz, lz_se, m, s)
    assert est == pytest.approx(0.25 * -10.0 + 0.75 * 15.0, rel=1e-14)
    p1, p2 = 0.25, 0.75
    expected = np.sqrt((p1 * 0.05) ** 2 + (p2 * 0.04) ** 2
                       + (p1 * p2 * 25.0) ** 2 * (0.1**2 + 0.2**2))
    assert se == pytest.approx(expected, rel=1e-12)


def test_mean_error_matches_the_spread_of_simulated_estimates() -> None:
    # small errors, so the delta method is exact to first order: the simulated sd of the
    # mixture mean agrees with the formula within its own Monte-Carlo error (~1%)
    rng = np.random.default_rng(7)
    lz, lz_se = np.array([0.3, -1.2, 2.0]), np.array([0.02, 0.05, 0.01])
    m, s = np.array([4.0, -3.0, 1.0]), np.array([0.03, 0.02, 0.01])
    _, se = mixture_mean(lz, lz_se, m, s)
    n = 20_000
    lz_draws = lz + lz_se * rng.standard_normal((n, 3))
    m_draws = m + s * rng.standard_normal((n, 3))
    p = np.exp(lz_draws - logsumexp(lz_draws, axis=1, keepdims=True))
    sims = np.sum(p * m_draws, axis=1)
    assert np.std(sims) == pytest.approx(se, rel=0.03)
    assert np.mean(sims) == pytest.approx(mixture_mean(lz, lz_se, m, s)[0], abs=4 * se / 100)


def test_unexplained_mass_sees_a_missing_part_and_not_a_complete_mixture() -> None:
    """Two unit-mass normals at -3 and 3 (Z = 2) under a N(0, 4^2) proposal: a mixture
    that holds both parts explains the sampler's mass; one that holds only the first
    (log Z = 0) misses half of it, tens of standard errors away."""
    from scipy.stats import norm

    rng = np.random.default_rng(5)
    x = rng.normal(0.0, 4.0, 200_000)
    lw = np.logaddexp(norm.logpdf(x, -3, 1), norm.logpdf(x, 3, 1)) - norm.logpdf(x, 0, 4)
    excess, z = unexplained_mass(lw, np.log(2.0), 0.01)
    assert abs(excess) < 0.02 and abs(z) < 4
    excess, z = unexplained_mass(lw, 0.0, 0.01)
    assert excess == pytest.approx(1.0, abs=0.02) and z > 20
    # one heavy weight alone is about one standard error
    one = np.full(10_000, -np.inf)
    one[7] = np.log(10_000.0 * 3)
    # (excess 2, sd(w) / sqrt(n) = sqrt(9e8 / 1e4 - 9) / 100 = 3)
    assert unexplained_mass(one, 0.0, 0.0)[1] == pytest.approx(2 / 3, rel=1e-3)
    with pytest.raises(ValueError, match="finite log Z"):
        unexplained_mass(lw, float("nan"), 0.1)


def test_region_shares_of_importance_draws_on_a_known_answer() -> None:
    """Draws from N(0, 2^2) weighed to N(0, 1): the share of x < -0.2 is Phi(-0.2) =
    0.4207, within three of its own standard errors, which match the shares' scatter
    over repetitions (an error without the share's own term would be 1.4 times it)."""
    from scipy import stats

    from pemc_stan.estimators.mixture import region_shares

    rng = np.random.default_rng(3)
    found = []
    for _ in range(200):
        x = rng.normal(0.0, 2.0, 2000)
        lw = stats.norm.logpdf(x) - stats.norm.logpdf(x, scale=2.0)
        shares, ses = region_shares(lw, (x >= -0.2).astype(int), 2)  # region 0: x < -0.2
        found.append((shares[0], ses[0]))
    share, se = np.array(found).T
    exact = stats.norm.cdf(-0.2)
    assert abs(share.mean() - exact) < 3 * share.std() / np.sqrt(share.size)
    assert np.median(se) == pytest.approx(share.std(), rel=0.15)
    assert np.all(np.abs(share - exact) < 5 * se)
    s, e = region_shares([0.0, np.nan, -np.inf, 0.0], [0, 1, 1, 1], 2)
    assert s.tolist() == [0.5, 0.5] and np.all(e > 0)
    assert np.all(np.isnan(region_shares([-np.inf, np.nan], [0, 1], 2)[0]))
    with pytest.raises(ValueError, match="label"):
        region_shares([0.0, 0.0], [0, 2], 2)


def test_importance_moments_are_in_range_until_the_second_leaves_floating_point() -> None:
    from pemc_stan.estimators.mixture import importance_in_range

    lw = np.zeros(1000)
    assert importance_in_range(lw, 0.0)
    # log of the mean of (w / Z)^2: 2 * 340 - log 1000 < 700 in range, 2 * 360 - log 1000 not
    assert importance_in_range(np.append(lw[:-1], 340.0), 0.0)
    assert not importance_in_range(np.append(lw[:-1], 360.0), 0.0)
    assert not importance_in_range(np.append(lw[:-1], np.inf), 0.0)
    assert importance_in_range(np.append(lw[:-1], -np.inf), 0.0)  # no mass: fine
    assert not importance_in_range(lw, float("nan"))
