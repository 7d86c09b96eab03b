"""Known-answer tests for pemc_stan.estimators.convergence: ArviZ's estimators as the
reference, and the ESS of an AR(1) chain and the R-hat of unmixed chains in closed form."""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pytest

from pemc_stan.estimators.convergence import (
    convergence,
    ess_bulk,
    ess_mean,
    ess_tail,
    rhat_rank,
    split_chains,
)


def _ar1(rng: np.random.Generator, chains: int, draws: int, phi: float) -> np.ndarray:
    """Stationary AR(1) chains of unit variance: tau = (1 + phi) / (1 - phi)."""
    x = rng.normal(size=(chains, draws))
    x[:, 0] = rng.normal(size=chains)
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + np.sqrt(1 - phi**2) * x[:, t]
    return x


def _draws(kind: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    chains, draws = int(rng.integers(1, 9)), int(rng.integers(4, 400))
    x = rng.normal(size=(chains, draws))
    if kind == "ar1":
        x = _ar1(rng, chains, draws, float(rng.uniform(-0.9, 0.99)))
    elif kind == "ties":  # NUTS repeats a draw when it keeps its start
        x = np.round(2 * x) / 2
    elif kind == "unmixed":
        x = x + np.arange(chains)[:, None] * rng.uniform(0.0, 3.0)
    elif kind == "heavy":
        x = np.exp(3 * x)
    return x


@pytest.mark.parametrize("kind", ["iid", "ar1", "ties", "unmixed", "heavy"])
def test_equal_to_arviz(kind: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(60):
            x = _draws(kind, seed)
            ref_rhat = float(az.rhat(x)) if x.shape[0] >= 2 else float("nan")
            for ours, ref in ((rhat_rank(x), ref_rhat),
                              (ess_bulk(x), float(az.ess(x, method="bulk"))),
                              (ess_tail(x), float(az.ess(x, method="tail"))),
                              (ess_mean(x), float(az.ess(x, method="mean")))):
                np.testing.assert_allclose(ours, ref, rtol=1e-9, equal_nan=True,
                                           err_msg=f"{kind} seed {seed} shape {x.shape}")


def test_tail_quantile_at_an_order_statistic_counts_as_arviz() -> None:
    # 741 draws: (n - 1) * 0.95 = 703 exactly, where the type-7 arithmetic of ArviZ
    # falls just below the order statistic
    x = np.random.default_rng(0).normal(size=(3, 247))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ess_tail(x) == pytest.approx(float(az.ess(x, method="tail")), rel=1e-12)


def test_ess_of_ar1_chains_is_draws_over_tau() -> None:
    phi, chains, draws = 0.5, 4, 5000
    x = _ar1(np.random.default_rng(3), chains, draws, phi)
    expected = chains * draws * (1 - phi) / (1 + phi)  # 6,667, not the 20,000 draws
    assert ess_mean(x) == pytest.approx(expected, rel=0.1)
    assert ess_bulk(x) == pytest.approx(expected, rel=0.1)


def test_rhat_near_one_when_mixed_and_large_when_not() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(4, 1000))
    assert rhat_rank(x) < 1.01
    shifted = x + np.array([0.0, 0.0, 0.0, 2.0])[:, None]  # one chain in another mode
    assert rhat_rank(shifted) > 1.1
    # the tail R-hat sees chains of one mean but different spreads
    spread = x * np.array([1.0, 1.0, 1.0, 3.0])[:, None]
    assert rhat_rank(spread) > 1.05


def test_split_chains_drops_the_middle_of_an_odd_count() -> None:
    x = np.arange(14.0).reshape(2, 7)
    np.testing.assert_array_equal(split_chains(x), [[0, 1, 2], [7, 8, 9], [4, 5, 6],
                                                    [11, 12, 13]])


def test_undefined_cases_are_nan_or_the_size() -> None:
    assert np.isnan(rhat_rank(np.ones((1, 100))))  # one chain
    assert np.isnan(ess_bulk(np.zeros((2, 3))))  # fewer than four draws
    assert np.isnan(ess_mean(np.array([[0.0, 1.0, np.nan, 2.0]])))
    assert ess_mean(np.full((2, 10), 3.0)) == 20.0  # constant: its size


def test_convergence_is_the_three_together() -> None:
    for seed in range(20):
        x = _draws("ar1", seed)
        assert convergence(x) == pytest.approx((rhat_rank(x), ess_bulk(x), ess_tail(x)),
                                               rel=1e-12, nan_ok=True)
