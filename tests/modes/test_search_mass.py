"""The search's Gaussians against the mass the split's chains found
(:mod:`pemc_stan.modes.search_mass`; fast: the target is NumPy's, nothing compiles).

A spike (sd 0.01, mass 100) inside a slab (sd 0.1, mass 1) in 4-D, one maximum: chains
adapted in the slab report its mass alone; the search's Gaussian sits on the spike.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fakes import split_fit
from scipy.stats import multivariate_normal

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.search import ModeSearch
from pemc_stan.modes.search_mass import SearchMass, search_mass

D = 4
SPIKE, SLAB = (100.0, 0.01), (1.0, 0.1)  # (mass, sd)


class Identity:
    """Base coordinates that are the parameter ``x`` itself."""

    def inverse(self, z: np.ndarray, data: Any) -> dict[str, np.ndarray]:
        return {"x": np.asarray(z, dtype=float)}

    def forward(self, x: dict[str, np.ndarray], data: Any) -> tuple[np.ndarray, np.ndarray]:
        z = np.asarray(x["x"], dtype=float)
        return z, np.zeros(z.shape[0])


class SpikeInSlab:
    """``log gamma`` with every constant, and how often it was asked."""

    calls = 0

    def log_density(self, x: dict[str, np.ndarray]) -> np.ndarray:
        self.calls += 1
        z = x["x"]
        return np.logaddexp(*(np.log(m) + multivariate_normal(np.zeros(D), s**2).logpdf(z)
                              for m, s in (SPIKE, SLAB)))


def _search(sd: float, centre: float = 0.0) -> ModeSearch:
    cov = sd**2 * np.eye(D)
    return ModeSearch((2.0,), 1, 1, 8, "a test's search", (1.0,), np.full((1, D), centre),
                      (1.0,), BaseDensity(np.full(D, centre), cov, "dense"),
                      covariances=cov[None])


def test_a_spike_the_chains_never_entered_is_seen() -> None:
    slab_only = float(np.log(SLAB[0]))
    seen = search_mass(Identity(), _search(SPIKE[1]), SpikeInSlab(), None, slab_only, 0.01,
                       seed=1)
    assert isinstance(seen, SearchMass)
    assert abs(seen.excess - SPIKE[0] / SLAB[0]) < 5.0  # 100 times more mass, nearly
    assert seen.z > 100 and seen.mode == 0
    assert seen.where().startswith("x[1] = ")


def test_the_whole_mass_found_raises_nothing() -> None:
    whole = float(np.log(SPIKE[0] + SLAB[0]))
    for seed in range(5):
        seen = search_mass(Identity(), _search(SPIKE[1]), SpikeInSlab(), None, whole, 0.01,
                           seed=seed)
        assert seen is not None and abs(seen.z) < 4


def test_a_gaussian_too_narrow_or_off_centre_cannot_raise_it() -> None:
    """Uneven weights make the estimate fall short, or carry it on one weight whose
    standard error is as large: never a significant excess."""
    whole = float(np.log(SPIKE[0] + SLAB[0]))
    for search in (_search(0.002), _search(0.01, centre=0.05), _search(0.3)):
        for seed in range(5):
            seen = search_mass(Identity(), search, SpikeInSlab(), None, whole, 0.01, seed=seed)
            assert seen is None or seen.z < 4, (search.base.mean, seed, seen)


def test_a_density_that_diverges_gives_no_comparison_but_a_named_failure() -> None:
    """No mass is compared against an infinite weight; the failure is raised for the
    verdict to name (the split's ``mode_search_mass``, a tempered run's ``search_mass``)."""
    from pemc_stan.modes.split_fit import ModeSplitFit
    from pemc_stan.modes.wide import UncomputedCheck, WideDrawsFailed

    class Diverging(SpikeInSlab):
        def log_density(self, x: dict[str, np.ndarray]) -> np.ndarray:
            out = super().log_density(x)
            out[0] = np.inf
            return out

    with pytest.raises(WideDrawsFailed, match=r"\+inf at 1 of"):
        search_mass(Identity(), _search(SPIKE[1]), Diverging(), None, 0.0, 0.01, 1)
    name, reason = UncomputedCheck("search_mass", "the search's mass check", "+inf")(None)
    assert name == "search_mass" and reason is not None
    assert "the search's mass check could not be computed" in reason.message
    split = ModeSplitFit.__new__(ModeSplitFit)
    split.search_failure, split.search_mass = "the density is +inf at 1 of 8000 points", None
    said = split._search_mass()
    assert said is not None and "could not weigh them: the density is +inf" in said.message


def test_the_split_names_the_mode_and_refuses_only_a_significant_excess() -> None:
    fit = split_fit([0.0], [0.01], [0.0], [1.0], [0, 0, 0, 0], n_draws=500)
    assert "mode_search_mass" not in fit.check().names()
    fit.search_mass = SearchMass(99.0, 3.9, 0, {"x": np.array([0.001])})
    assert "mode_search_mass" not in fit.check().names()
    fit.search_mass = SearchMass(99.0, 250.0, 0, {"x": np.array([0.001])})
    reason = next(r for r in fit.check().reasons if r.name == "mode_search_mass")
    assert "mode 1 (x[1] = 0.001)" in str(reason) and "100 times" in str(reason)
    assert "split_modes" in reason.remedy
    fit.search_mass = SearchMass(0.0, 0.3, 0, {"x": np.array([0.001])}, 0.98, 0.0, 50.0)
    reason = next(r for r in fit.check().reasons if r.name == "mode_search_mass")
    assert "puts 98% of the mass in its central region" in str(reason)
    fit.search_mass = SearchMass(0.0, 0.3, 0, {"x": np.array([0.001])}, 0.55, 0.5, 50.0)
    assert "mode_search_mass" not in fit.check().names()  # short by less than a tenth


def _needle_chains(spike_share: float, seed: int, n: int = 4000) -> np.ndarray:
    """Four chains of draws of the spike-and-slab with the spike holding
    ``spike_share`` of the draws (0: chains that never entered it), shape (4, n/4, D)."""
    rng = np.random.default_rng(seed)
    in_spike = rng.uniform(size=n) < spike_share
    sd = np.where(in_spike, SPIKE[1], SLAB[1])[:, None]
    return (rng.normal(size=(n, D)) * sd).reshape(4, n // 4, D)


def test_a_spike_no_heavier_than_the_slab_is_seen_in_its_region() -> None:
    """Half the mass in each: the slab's chains find half of Z, the spike's Gaussian
    sees the other half, so the whole masses agree; the spike's region does not."""
    needle = SpikeInSlab()
    spike_slab = [(0.5, SPIKE[1]), (0.5, SLAB[1])]
    needle.log_density = lambda x: np.logaddexp(*(  # type: ignore[method-assign]
        np.log(m) + multivariate_normal(np.zeros(D), s**2).logpdf(x["x"])
        for m, s in spike_slab))
    weights = np.full((4, 1000), 1 / 4000)
    slab_only = search_mass(Identity(), _search(SPIKE[1]), needle, None, np.log(0.5), 0.01,
                            seed=1, chains=_needle_chains(0.0, 1), weights=weights)
    assert slab_only is not None and abs(slab_only.z) < 4  # the whole masses agree
    assert slab_only.missed(4.0) == "region"
    assert slab_only.region_seen > 0.9 and slab_only.region_chains < 0.01
    for seed in range(5):  # chains that visit both in proportion: nothing
        right = search_mass(Identity(), _search(SPIKE[1]), needle, None, 0.0, 0.01,
                            seed=seed, chains=_needle_chains(0.5, seed), weights=weights)
        assert right is not None and right.missed(4.0) == "", right
        assert abs(right.region_seen - right.region_chains) < 0.05


def test_centres_beyond_the_kept_covariances_take_the_covering_one() -> None:
    """A search widened by the split's own re-search has more centres than covariances."""
    import dataclasses

    search = _search(SPIKE[1])
    wider = dataclasses.replace(search, centres=np.vstack([search.centres, np.ones((1, D))]),
                                major_shares=(0.9, 0.1))
    seen = search_mass(Identity(), wider, SpikeInSlab(), None, float(np.log(101.0)), 0.01, 1)
    assert seen is not None and abs(seen.z) < 4


class TwoModes:
    """``log gamma``: 0.7 N(-5, 1) + 0.3 N(5, 1) in every coordinate (D of them)."""

    def log_density(self, x: dict[str, np.ndarray]) -> np.ndarray:
        z = x["x"]
        return np.logaddexp(*(np.log(m) + multivariate_normal(np.full(D, c), 1.0).logpdf(z)
                              for m, c in ((0.7, -5.0), (0.3, 5.0))))


def test_the_search_draws_weigh_each_mode_whatever_pathfinder_said() -> None:
    """The check of the search's Pathfinder shares (``unvisited_modes`` rests on it): the
    importance draws from the modes' Gaussians give each mode's cell its share of the mass,
    0.7 and 0.3 here, where the search said 0.5 and 0.5, within four of their standard
    errors (which are small: two well-fitted Gaussians)."""
    from types import SimpleNamespace

    from pemc_stan.modes.search_mass import SearchMassCheck, search_draws

    cov = np.eye(D)
    search = ModeSearch((2.0,), 2, 2, 16, "a test's search", (0.5, 0.5),
                        np.stack([np.full(D, -5.0), np.full(D, 5.0)]), (0.5, 0.5),
                        BaseDensity(np.zeros(D), 30.0 * np.eye(D), "dense"),
                        covariances=np.stack([cov, cov]))
    drawn = search_draws(Identity(), search, TwoModes(), None, seed=2)
    assert drawn is not None
    shares, ses = SearchMassCheck(drawn).mode_shares(SimpleNamespace(search=search))
    assert np.all(np.abs(shares - [0.7, 0.3]) < 4 * ses) and np.all(ses < 0.02), (shares, ses)
    assert SearchMassCheck(drawn).mode_shares(SimpleNamespace(search=None)) is None


def test_a_run_without_a_normaliser_of_its_own_is_judged_by_one_made_for_it() -> None:
    """Pseudo-extended MCMC has no log Z: the check compares the search's draws with the
    bridge estimate of what its draws hold (the conductor makes it), and without one it
    says nothing.  Chains that stayed in the slab of a half-and-half spike and slab."""
    from types import SimpleNamespace

    from pemc_stan.estimators.log_z import EvidenceEstimate
    from pemc_stan.modes.search_mass import SearchMassCheck, search_draws

    needle = SpikeInSlab()
    needle.log_density = lambda x: np.logaddexp(*(  # type: ignore[method-assign]
        np.log(0.5) + multivariate_normal(np.zeros(D), s**2).logpdf(x["x"])
        for s in (SPIKE[1], SLAB[1])))
    drawn = search_draws(Identity(), _search(SPIKE[1]), needle, None, seed=1)
    assert drawn is not None
    chains = _needle_chains(0.0, 1)
    pe_like = SimpleNamespace(cell_estimate=None, search=_search(SPIKE[1]),
                              run_log_z=lambda: None,
                              particle_coordinates=lambda: chains.reshape(-1, D),
                              target_weights=lambda: np.full((4, 1000), 1 / 4000))
    assert SearchMassCheck(drawn)(pe_like) == ("search_mass", None)
    slab = EvidenceEstimate(float(np.log(0.5)), 0.01, "bridge_sampling", {})
    name, reason = SearchMassCheck(drawn, slab)(pe_like)
    assert name == "search_mass" and reason is not None
    assert "% of the run's mass in its central region, where the run's weighted draws hold" \
        in reason.message and reason.message.count("standard errors less") == 1, reason
    whole = EvidenceEstimate(0.0, 0.01, "bridge_sampling", {})
    right = SimpleNamespace(**{**vars(pe_like), "particle_coordinates":
                               lambda: _needle_chains(0.5, 1).reshape(-1, D)})
    assert SearchMassCheck(drawn, whole)(right) == ("search_mass", None)


def test_a_mode_covariance_from_fewer_draws_than_dimensions_is_still_drawn_from() -> None:
    """A path's 1,000 draws in 1,000 dimensions give a singular covariance: the check
    could not be computed and refused the split of a 1,000-D Gaussian, which then tempered
    for hours.  It is shrunk towards its diagonal, just enough, and the check runs."""
    from pemc_stan.modes.search_mass import positive_definite

    rng = np.random.default_rng(2)
    draws = rng.standard_normal((50, D)) @ np.diag([1.0, 2.0, 3.0, 4.0])
    draws[:, -1] = draws[:, -2]  # two coordinates alike: rank D - 1, as too few draws give
    singular = np.cov(draws, rowvar=False)
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(singular)
    repaired = positive_definite(singular)
    np.linalg.cholesky(repaired)
    assert np.allclose(np.diag(repaired), np.diag(singular))  # the variances kept
    assert not np.allclose(repaired, np.diag(np.diag(singular)))  # and most correlation
    good = np.cov(rng.standard_normal((50, D)), rowvar=False)
    assert np.array_equal(positive_definite(good), good)  # a positive definite one as it is
    search = ModeSearch((2.0,), 1, 1, 8, "a test's search", (1.0,), np.zeros((1, D)), (1.0,),
                        BaseDensity(np.zeros(D), SLAB[1] ** 2 * np.eye(D), "dense"),
                        covariances=singular[None] * SLAB[1] ** 2)
    whole = float(np.log(SPIKE[0] + SLAB[0]))
    assert search_mass(Identity(), search, SpikeInSlab(), None, whole, 0.01, seed=1) is not None
