"""The search's Gaussians against the mass the split's chains found
(:mod:`pemc_stan.modes.search_mass`; fast: the target is NumPy's, nothing compiles).

A spike (sd 0.01, mass 100) inside a slab (sd 0.1, mass 1) in 4-D, one maximum: chains
adapted in the slab report its mass alone; the search's Gaussian sits on the spike.
"""

from __future__ import annotations

from typing import Any

import numpy as np
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


def test_a_density_that_diverges_gives_no_comparison() -> None:
    class Diverging(SpikeInSlab):
        def log_density(self, x: dict[str, np.ndarray]) -> np.ndarray:
            out = super().log_density(x)
            out[0] = np.inf
            return out

    assert search_mass(Identity(), _search(SPIKE[1]), Diverging(), None, 0.0, 0.01, 1) is None


def test_the_split_names_the_mode_and_refuses_only_a_significant_excess() -> None:
    fit = split_fit([0.0], [0.01], [0.0], [1.0], [0, 0, 0, 0], n_draws=500)
    assert "mode_search_mass" not in fit.check().names()
    fit.search_mass = SearchMass(99.0, 3.9, 0, {"x": np.array([0.001])})
    assert "mode_search_mass" not in fit.check().names()
    fit.search_mass = SearchMass(99.0, 250.0, 0, {"x": np.array([0.001])})
    reason = next(r for r in fit.check().reasons if r.name == "mode_search_mass")
    assert "mode 1 (x[1] = 0.001)" in str(reason) and "100 times" in str(reason)
    assert "split_modes" in reason.remedy
