"""The pilot's search for modes: its stopping rule, its record and the covering base.

Fast; the search on compiled models is in ``test_mode_search.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pemc_stan.methods.base_density import BaseDensity, covering, mixture_base
from pemc_stan.methods.pilot import NEW_MODE_SHARE, UNSEEN_SHARE_MAX, ModeSearch, unseen_share


def test_unseen_share_is_good_turing_with_one_more_singleton() -> None:
    # one mode or two, each found by several paths: the added singleton keeps the search
    # going until about 1 / UNSEEN_SHARE_MAX paths have run
    assert unseen_share([24], 24) == pytest.approx(1 / 24)
    assert unseen_share([20, 4], 24) == pytest.approx(1 / 24)
    assert unseen_share([40, 10], 50) == pytest.approx(1 / 50)
    assert unseen_share([40, 10], 50) <= UNSEEN_SHARE_MAX < unseen_share([40, 10], 49)
    # modes found once: f1 of them
    assert unseen_share([10, 1, 1, 12], 24) == pytest.approx(3 / 24)
    assert unseen_share([], 0) == 1.0


def test_unseen_share_estimates_the_missed_basin_share() -> None:
    """Simulated searches over basins of known shares: the Good-Turing estimate (without
    the extra singleton) is on average the share of the basins not hit."""
    rng = np.random.default_rng(3)
    q = np.array([0.6, 0.2, 0.1, 0.05, 0.03, 0.02])
    est, missed = [], []
    for _ in range(4000):
        hits = np.bincount(rng.choice(q.size, size=40, p=q), minlength=q.size)
        f1 = int(np.sum(hits == 1))
        est.append(f1 / 40)
        missed.append(float(q[hits == 0].sum()))
    assert np.mean(est) == pytest.approx(np.mean(missed), abs=0.005)


def test_mode_search_record() -> None:
    search = ModeSearch((2.0, 8.0, 32.0), 4, 3, 56, "unseen share 0.018 <= 0.02",
                        (0.5, 0.3, 0.2, 1e-6), np.zeros((3, 2)), (0.5, 0.3, 0.2))
    assert search.radius == 32.0
    text = search.describe()
    assert "4 mode(s) found (3 with >=" in text and "56 Pathfinder paths" in text
    assert "radius 32" in text and f"{100 * NEW_MODE_SHARE:g}%" in text
    fields = json.loads(json.dumps(search.as_dict()))
    assert fields["search_radius"] == 32.0 and fields["major_modes_found"] == 3
    assert fields["mode_shares"][3] == 1e-6


def test_covering_base_has_the_equal_mixtures_moments() -> None:
    a = BaseDensity(np.array([0.0, 1.0]), np.array([[1.0, 0.3], [0.3, 2.0]]), "dense")
    b = BaseDensity(np.array([4.0, -1.0]), np.array([[0.5, 0.0], [0.0, 0.25]]), "dense")
    c = covering(a, b)
    rng = np.random.default_rng(0)
    z = np.concatenate([a.sample_z(200_000, rng), b.sample_z(200_000, rng)])
    assert np.allclose(c.mean, z.mean(axis=0), atol=0.02)
    assert np.allclose(c.cov, np.cov(z.T), atol=0.03)
    d = covering(BaseDensity(np.zeros(2), np.eye(2)), b)
    assert d.covariance == "diag" and d.cov[0, 1] == 0.0
    with pytest.raises(ValueError, match="dimensions 2 and 1"):
        covering(a, BaseDensity(np.zeros(1), np.eye(1)))


def test_mixture_base_density_sampling_and_moments() -> None:
    """The mixture base: normalised (integrates to 1 on a grid), its draws have its
    moments, its Stan data list the components, one centre is the plain Gaussian."""
    cov = np.array([[1.0, 0.4], [0.4, 2.0]])
    mix = mixture_base([[-4.0, 0.0], [5.0, 3.0]], np.log([0.3, 0.7]), cov, "dense")
    grid = np.linspace(-15, 15, 601)
    gx, gy = np.meshgrid(grid, grid, indexing="ij")
    dens = np.exp(mix.log_density_z(np.column_stack([gx.ravel(), gy.ravel()])))
    assert dens.sum() * (grid[1] - grid[0]) ** 2 == pytest.approx(1.0, abs=1e-4)
    # the density is the weighted sum of the two Gaussians
    a, b = BaseDensity(np.array([-4.0, 0.0]), cov, "dense"), BaseDensity(np.array([5.0, 3.0]),
                                                                         cov, "dense")
    point = np.array([[0.5, 1.0]])
    expected = 0.3 * np.exp(a.log_density_z(point)) + 0.7 * np.exp(b.log_density_z(point))
    assert np.exp(mix.log_density_z(point)) == pytest.approx(expected, rel=1e-12)
    mean, full = mix.moments()
    assert mean == pytest.approx([2.3, 2.1]) and mix.mean == pytest.approx(mean)
    z = mix.sample_z(400_000, np.random.default_rng(1))
    assert np.allclose(z.mean(axis=0), mean, atol=0.03)
    assert np.allclose(np.cov(z.T), full, atol=0.1)
    masses = mix.centre_masses(np.array([[-4.0, 0.0], [5.0, 3.0]]), 200_000,
                               np.random.default_rng(2))
    assert masses == pytest.approx([0.3, 0.7], abs=0.01)
    data = mix.mixture_stan_data()
    assert data["pemc_K"] == 2 and np.allclose(np.exp(data["pemc_base_log_w"]), [0.3, 0.7])
    one = mixture_base([[1.0, 2.0]], [5.0], cov, "dense")
    assert one.centres is None and one.mean == pytest.approx([1.0, 2.0])
    with pytest.raises(ValueError, match="mixture base"):
        BaseDensity(np.zeros(2), cov, "dense", centres=np.zeros((2, 3)),
                    log_weights=np.zeros(2)).validate()
