"""NUTS transition counts and the max-treedepth advice (no compilation)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pemc_stan.output.diagnostics import (
    TREEDEPTH_WARN_SHARE,
    TransitionCounts,
    transition_counts,
    treedepth_advice,
)

COLUMNS = {"lp__": 0, "treedepth__": 1, "divergent__": 2}


def _run(max_depth: int | None) -> SimpleNamespace:
    """A stand-in for CmdStanMCMC: only the parsed CSV configuration."""
    config = {} if max_depth is None else {"max_depth": max_depth, "algorithm": "hmc"}
    return SimpleNamespace(metadata=SimpleNamespace(cmdstan_config=config))


def _draws(depths: np.ndarray, divergent: np.ndarray) -> np.ndarray:
    arr = np.zeros(depths.shape + (3,))
    arr[..., 1] = depths
    arr[..., 2] = divergent
    return arr


def test_counts_every_chain_and_iteration() -> None:
    depths = np.full((100, 3), 6.0)
    depths[[4, 50], 0] = 10
    depths[99, 2] = 10
    depths[7, 1] = 9  # below the limit
    divergent = np.zeros((100, 3))
    divergent[[1, 2], 1] = 1
    counts = transition_counts(_run(10), _draws(depths, divergent), COLUMNS)
    assert counts == TransitionCounts(transitions=300, divergences=2, max_treedepth=10,
                                      max_treedepth_hits=3)


def test_limit_comes_from_the_run_configuration() -> None:
    depths = np.full((10, 1), 8.0)
    draws = _draws(depths, np.zeros((10, 1)))
    assert transition_counts(_run(8), draws, COLUMNS).max_treedepth_hits == 10
    assert transition_counts(_run(12), draws, COLUMNS).max_treedepth_hits == 0


def test_without_a_recorded_limit_nothing_is_counted_or_advised() -> None:
    draws = _draws(np.full((10, 2), 10.0), np.zeros((10, 2)))
    for fit in (_run(None), object()):
        counts = transition_counts(fit, draws, COLUMNS)
        assert counts.max_treedepth is None and counts.max_treedepth_hits == 0
        assert treedepth_advice(counts) is None
    no_columns = transition_counts(_run(10), draws[..., :1], {"lp__": 0})
    assert no_columns.divergences == 0 and no_columns.max_treedepth_hits == 0


def test_advice_above_the_threshold_names_the_setting() -> None:
    n = 1000
    at = int(TREEDEPTH_WARN_SHARE * n)
    assert treedepth_advice(TransitionCounts(n, 0, 10, at)) is None
    msg = treedepth_advice(TransitionCounts(n, 0, 10, at + 1))
    assert msg is not None
    assert f"{at + 1} of {n} transitions" in msg and "max_treedepth=10" in msg
    assert "max_treedepth=12" in msg


def test_rejects_draws_of_the_wrong_rank() -> None:
    with pytest.raises(ValueError, match="iterations, chains, columns"):
        transition_counts(_run(10), np.zeros((10, 3)), COLUMNS)


# --------------------------------------------------------------------------- verdicts


def test_verdict_ok_and_suspect_text() -> None:
    from pemc_stan.output.diagnostics import Reason, Verdict

    ok = Verdict((), ("rhat", "ess"))
    assert ok.ok and ok.status == "ok" and "2 checks" in str(ok)
    bad = Verdict((Reason("rhat", "R-hat 1.4", "run longer"),), ("rhat", "ess"))
    assert not bad.ok and bad.status == "suspect" and bad.names() == ["rhat"]
    assert "SUSPECT" in str(bad) and "rhat: R-hat 1.4; run longer" in str(bad)


def test_chains_disagree_known_answers() -> None:
    from pemc_stan.output.diagnostics import chains_disagree

    # three chains agree within their errors, the fourth is 10 combined SEs away
    z = chains_disagree(np.array([0.0, 0.1, -0.1, 0.0]), np.full(4, 0.1))
    assert z < 2
    z = chains_disagree(np.array([0.0, 0.0, 0.0, 10 * np.hypot(0.1, 0.1 / np.sqrt(3))]),
                        np.full(4, 0.1))
    assert z == pytest.approx(10.0, rel=1e-9)
    assert np.isnan(chains_disagree(np.array([1.0]), np.array([0.1])))


def test_rhat_flags_chains_in_different_modes() -> None:
    from pemc_stan.output.diagnostics import rhat_and_ess

    rng = np.random.default_rng(0)
    mixed = rng.normal(size=(4, 500))
    stuck = mixed + np.array([[-3.0], [-3.0], [3.0], [3.0]])
    assert rhat_and_ess(mixed)[0] < 1.01 and rhat_and_ess(mixed)[1] > 1000
    assert rhat_and_ess(stuck)[0] > 1.5
    assert np.isnan(rhat_and_ess(np.ones((4, 10)))[0])  # constant draws: no statement
