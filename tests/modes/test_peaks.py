"""The peak probe of the search's modes (modes/peaks.py), with CmdStan replaced by exact
answers: a spike inside a slab becomes a mode of its own, with its mass; a Gaussian mode
does not."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from pemc_stan.modes.peaks import PEAK_GAP, gaussian_peak, probe_peaks

D = 3
#: The constants of ``~`` statements CmdStan's log_prob method drops (Pathfinder keeps them).
LOST_CONSTANTS = 40.0
SPIKE_SD, SLAB_SD, SPIKE_SHARE = 0.01, 1.0, 0.99


def _log_target(z: np.ndarray) -> np.ndarray:
    spike = multivariate_normal(np.zeros(D), SPIKE_SD**2 * np.eye(D)).logpdf(z)
    slab = multivariate_normal(np.zeros(D), SLAB_SD**2 * np.eye(D)).logpdf(z)
    return np.logaddexp(math.log(SPIKE_SHARE) + spike, math.log(1 - SPIKE_SHARE) + slab)


class _Identity:
    blocks = ("x",)

    def forward(self, draws: dict[str, np.ndarray], data: Any) -> tuple[np.ndarray, Any]:
        return np.asarray(draws["x"], dtype=float), None


class _Fit:
    column_names = [f"x[{i + 1}]" for i in range(D)]

    def __init__(self, values: np.ndarray) -> None:
        self.optimized_params_np = values
        self._draws = values

    def draws(self) -> np.ndarray:
        return self._draws


class _Model:
    """L-BFGS reaches the origin (the spike's top); Laplace draws the spike's Gaussian."""

    sd = SPIKE_SD

    def optimize(self, **_: Any) -> _Fit:
        return _Fit(np.zeros(D))

    def laplace_sample(self, mode: _Fit, draws: int, **_: Any) -> _Fit:
        rng = np.random.default_rng(5)
        return _Fit(mode.optimized_params_np + self.sd * rng.standard_normal((draws, D)))


class _Owner:
    data = None

    def original_model(self) -> _Model:
        return _Model()


class _Pilot:
    owner, coordinates, draws = _Owner(), _Identity(), 1000

    def __init__(self) -> None:  # Pathfinder's lp__ keeps the constants log_prob drops
        ref = np.random.default_rng(4).standard_normal((8, D))
        self.lp_reference = (ref, self.log_density_z(ref) + LOST_CONSTANTS)

    def log_density_z(self, z: np.ndarray) -> np.ndarray:
        return np.atleast_1d(_log_target(np.atleast_2d(z))) - LOST_CONSTANTS

    def _inits(self, z: np.ndarray) -> list[dict[str, Any]]:
        return [{"x": row.tolist()} for row in z]

    def param_draws(self, values: np.ndarray, columns: list[str]) -> dict[str, np.ndarray]:
        return {"x": np.atleast_2d(values)}



def _slab_search(n: int = 400, paths: int = 4) -> tuple[Any, ...]:
    """Pathfinder as it fails: slab Gaussians, weights against the whole target."""
    rng = np.random.default_rng(2)
    z = rng.standard_normal((n * paths, D))
    lw = _log_target(z) - multivariate_normal(np.zeros(D), np.eye(D)).logpdf(z)
    labels = np.repeat(np.arange(paths), n)
    mass = float(np.log(np.mean(np.exp(lw))))
    return [(np.arange(n * paths), mass)], z, lw, labels


def test_gaussian_peak_is_exact() -> None:
    cov = np.diag([0.5, 2.0])
    dist = multivariate_normal(np.zeros(2), cov)
    assert gaussian_peak(math.log(3.0), cov) == pytest.approx(math.log(3.0) + dist.logpdf([0, 0]))
    assert gaussian_peak(0.0, np.zeros((2, 2))) == math.inf


def test_a_spike_the_search_missed_becomes_a_mode_with_its_mass() -> None:
    groups, z, lw, labels = _slab_search()
    assert math.exp(groups[0][1]) < 0.1  # the search's mass: the slab's, not the spike's
    out, z2, lw2, lab2, added = probe_peaks(_Pilot(), 1, groups, z, lw, labels, None)
    assert added == 1 and len(out) == 2
    idx, log_mass = out[1]
    assert math.exp(log_mass) == pytest.approx(SPIKE_SHARE, rel=0.02)
    assert np.all(lab2[idx] == labels.max() + 1) and z2.shape[0] == lw2.shape[0] == lab2.size
    assert np.allclose(z2[idx].std(axis=0), SPIKE_SD, rtol=0.15)


def test_a_gaussian_mode_is_not_given_a_peak() -> None:
    # the same search of a slab without a spike: its top is where its Gaussian says
    rng = np.random.default_rng(2)
    z = rng.standard_normal((1600, D))
    lw = np.zeros(1600)
    groups = [(np.arange(1600), 0.0)]

    class Plain(_Pilot):
        def log_density_z(self, z: np.ndarray) -> np.ndarray:
            return np.atleast_1d(multivariate_normal(np.zeros(D), np.eye(D)).logpdf(
                np.atleast_2d(z))) - LOST_CONSTANTS

    labels = np.repeat(np.arange(4), 400)
    out, *_, added = probe_peaks(Plain(), 1, groups, z, lw, labels, None)
    assert added == 0 and out == groups
    # its paths underrated its mass (by more than PEAK_GAP): its top stands above its
    # Gaussian's, but the Laplace Gaussian there is the mode itself, no narrower
    underrated = [(groups[0][0], -2.0 * PEAK_GAP)]

    class Wide(_Model):
        sd = 1.0

    class PlainOwner(_Owner):
        def original_model(self) -> _Model:
            return Wide()

    pilot = Plain()
    pilot.owner = PlainOwner()
    out, *_, added = probe_peaks(pilot, 1, underrated, z, lw, labels, None)
    assert added == 0 and out == underrated
