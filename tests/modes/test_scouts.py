"""A refused split's chains judging the tempered run (fast: the masses are stubbed;
the compiled test with real bridge sampling is in test_mode_split_compiled.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.modes import scouts
from pemc_stan.modes.scouts import ScoutsCheck, SplitDraws, missed_regions, region_weights
from pemc_stan.output.diagnostics import Reason, Verdict


def _split(rng: np.random.Generator, centres: list[float]) -> SplitDraws:
    """One chain of 1,000 draws at each centre (2-D, unit sd)."""
    z = np.stack([rng.normal(c, 1.0, (1000, 2)) for c in centres])
    return SplitDraws(z, np.zeros(2), 100.0 * np.eye(2), {"x": z}, None, None, None)


def test_each_chain_s_region_holds_the_particles_nearest_its_draws() -> None:
    z = np.array([[[0.0, 0.0], [1.0, 0.0]], [[10.0, 0.0], [10.0, 0.0]]])  # (chains, draws, D)
    split = SplitDraws(z, np.zeros(2), np.eye(2), {"x": z}, None, None, None)
    particles = np.array([[0.2, 0.0], [9.0, 0.0], [12.0, 0.0], [0.9, 0.1]])
    held = region_weights(split.partition(), particles, np.array([0.1, 0.2, 0.3, 0.4]), 2)
    assert held == pytest.approx([0.5, 0.5])


def test_chains_where_the_tempered_draws_went_need_no_mass(monkeypatch) -> None:
    rng = np.random.default_rng(1)
    split = _split(rng, [-10.0, -10.0, 15.0])
    monkeypatch.setattr(scouts, "_region_log_mass", _unexpected)
    particles = np.concatenate([rng.normal(-10, 1, (300, 2)), rng.normal(15, 1, (700, 2))])
    assert missed_regions(split, particles, np.ones(1000), 1000.0, 0.0) == []


def _unexpected(*args: Any) -> float:
    raise AssertionError("no mass should be estimated")


def _mass(z: float) -> EvidenceEstimate:
    return EvidenceEstimate(float(np.log(z)), 0.01, "bridge_sampling")


def test_a_chain_s_region_is_weighed_by_its_draws_inside_it(monkeypatch) -> None:
    # two chains share the mode at 0, so each one's region is a slice of it: the
    # bridge gets only the chain's draws in its slice, which are draws of the target
    # restricted to it (all its draws would weigh the whole mode)
    rng = np.random.default_rng(5)
    split = _split(rng, [0.0, 0.0, 15.0])
    given: dict[str, np.ndarray] = {}

    def bridge(program: Any, data: Any, draws: dict[str, np.ndarray], **kw: Any
               ) -> EvidenceEstimate:
        given.update(draws)
        return _mass(0.5)

    monkeypatch.setattr(scouts, "bridge_from_draws", bridge)
    partition = split.partition()
    assert scouts._region_log_mass(split, partition, 0, None) == _mass(0.5)
    inside = partition.labels(split.z[0]) == 0
    assert 0.2 < inside.mean() < 0.8  # a slice, not the whole chain
    assert np.array_equal(given["x"], split.z[[0]][:, inside])


@pytest.mark.parametrize("n_eff, judged", [(3.2, False), (12.0, False), (13.0, True),
                                            (None, True)])
def test_a_region_s_bridge_on_few_effective_draws_is_not_judged(monkeypatch, n_eff,
                                                                 judged) -> None:
    # a chain that drifted through its region leaves a bridge whose error is unknown: its
    # estimate (here 9 times the whole mass) is no evidence, so the region is not judged
    rng = np.random.default_rng(5)
    split = _split(rng, [0.0, 15.0])
    diagnostics = {} if n_eff is None else {"n1_eff": n_eff}
    est = EvidenceEstimate(float(np.log(9.0)), 1.05, "bridge_sampling", diagnostics)
    monkeypatch.setattr(scouts, "bridge_from_draws", lambda *a, **kw: est)
    assert scouts.REGION_ESS_MIN == pytest.approx(12.5)
    got = scouts._region_log_mass(split, split.partition(), 0, None)
    assert (got is est) if judged else (got is None)


@pytest.mark.parametrize("share, named", [(0.3, True), (0.002, False)])
def test_a_chain_alone_where_the_tempered_draws_never_went_is_named_by_its_mass(
        monkeypatch, share: float, named: bool) -> None:
    rng = np.random.default_rng(2)
    split = _split(rng, [15.0, 15.0, -10.0])  # the third chain sits where nothing went
    asked: list[int] = []

    def mass(split: SplitDraws, partition: Any, c: int, seed: Any) -> EvidenceEstimate:
        asked.append(c)
        return _mass(share / (1 - share))  # against log Z = 0 of the rest

    monkeypatch.setattr(scouts, "_region_log_mass", mass)
    particles = rng.normal(15, 1, (1000, 2))
    found = missed_regions(split, particles, np.ones(1000), 1000.0, 0.0)
    assert asked == [2]
    assert found == ([(2, pytest.approx(share))] if named else [])


@pytest.mark.parametrize("std_error, named", [(0.05, True), (2.0, False)])
def test_a_region_s_mass_counts_at_its_bridge_s_lower_bound(
        monkeypatch, std_error: float, named: bool) -> None:
    # 5% of the mass by the bridge: named when the bridge knows it to 5%, not when its
    # error (e^(2 x 2) = 55 times) leaves the mass anywhere down to 0.1%
    rng = np.random.default_rng(6)
    split = _split(rng, [15.0, 15.0, -10.0])
    monkeypatch.setattr(scouts, "_region_log_mass", lambda *a: EvidenceEstimate(
        float(np.log(0.05 / 0.95)), std_error, "bridge_sampling"))
    found = missed_regions(split, rng.normal(15, 1, (1000, 2)), np.ones(1000), 1000.0, 0.0)
    assert found == ([(2, pytest.approx(0.05))] if named else [])


class _Fit:
    """A tempered fit's surface for the check: particles, weights, verdict, log Z."""

    later_checks: tuple[Any, ...] = ()

    def __init__(self, particles: np.ndarray, other_reason: bool) -> None:
        self._z, self.other_reason = particles, other_reason

    def particle_coordinates(self) -> np.ndarray:
        return self._z

    def target_weights(self) -> np.ndarray:
        return np.ones(self._z.shape[0])

    def check(self) -> Verdict:
        names, reasons = ["ess"], []
        if self.other_reason:
            reasons.append(Reason("ess", "few draws", "run longer"))
        for later in self.later_checks:
            name, found = later(self)
            names.append(name)
            reasons += [found] if found is not None else []
        return Verdict(tuple(reasons), tuple(names))

    def run_log_z(self) -> None:
        return None

    log_zeta = 0.0


@pytest.mark.parametrize("other_reason", [False, True])
def test_the_check_names_a_missed_chain_only_when_nothing_else_flags_the_run(
        monkeypatch, other_reason: bool) -> None:
    rng = np.random.default_rng(3)
    split = _split(rng, [15.0, 15.0, -10.0])
    monkeypatch.setattr(scouts, "_region_log_mass", lambda *a: _mass(0.3 / 0.7))
    monkeypatch.setattr("pemc_stan.sampling.checks.estimates_ess", lambda fit: 1000.0)
    fit = _Fit(rng.normal(15, 1, (1000, 2)), other_reason)
    fit.later_checks = (ScoutsCheck(split),)
    names = [r.name for r in fit.check().reasons]
    assert names == (["ess"] if other_reason else ["split_chains"])
    assert "chain 3 (30% of the mass)" in str(fit.check()) or other_reason


def test_the_check_judges_the_cells_draws_once_they_are_the_estimate(monkeypatch) -> None:
    # the run's particles miss chain 3's region, the cells' importance draws (which reach
    # where the search found mass) hold it: the check names the chain before the cells
    # and not once they are the reported estimate (judged again, not kept from before)
    rng = np.random.default_rng(3)
    split = _split(rng, [15.0, 15.0, -10.0])
    monkeypatch.setattr(scouts, "_region_log_mass", lambda *a: _mass(0.3 / 0.7))
    monkeypatch.setattr("pemc_stan.sampling.checks.estimates_ess", lambda fit: 1000.0)
    fit = _Fit(rng.normal(15, 1, (1000, 2)), False)
    fit.cell_estimate = None
    fit.later_checks = (ScoutsCheck(split),)
    assert [r.name for r in fit.check().reasons] == ["split_chains"]
    cells = np.concatenate([rng.normal(15, 1, (700, 2)), rng.normal(-10, 1, (300, 2))])
    monkeypatch.setattr(scouts, "_reported_points", lambda f: (
        (cells, np.full(1000, 1e-3), 1000.0, 0.0) if f.cell_estimate is not None else
        (f._z, np.full(1000, 1e-3), 1000.0, 0.0)))
    fit.cell_estimate = object()
    assert fit.check().ok, fit.check()


def test_the_check_pickles_with_the_fit_it_judges() -> None:
    import pickle

    split = _split(np.random.default_rng(4), [0.0, 5.0])
    again = pickle.loads(pickle.dumps(ScoutsCheck(split, seed=3)))
    assert again.seed == 3 and np.array_equal(again.split.z, split.z)


class _WeightedFit:
    """A tempered fit whose weighted draws of x are N(0, var) (expectations exact)."""

    def __init__(self, var: float, ok: bool = True) -> None:
        self.var, self.ok = var, ok

    def run_expectation(self, f: Any) -> Any:
        from types import SimpleNamespace

        if isinstance(f, str):
            if f != "x":
                raise KeyError(f)
            return SimpleNamespace(mean=0.0, mcse=0.0)
        return SimpleNamespace(mean=self.var, mcse=0.0)

    def check(self) -> Verdict:
        return Verdict(() if self.ok else (Reason("rhat", "...", "..."),), ("rhat",))


def _chains(sds: list[float], seed: int = 3) -> SplitDraws:
    rng = np.random.default_rng(seed)
    x = np.stack([rng.normal(0.0, s, 1000) for s in sds])  # (chains, draws)
    return SplitDraws(np.zeros((len(sds), 1000, 1)), np.zeros(1), np.eye(1), {"x": x}, None,
                      None, None)


def test_tempered_draws_narrower_than_every_chain_are_a_miss() -> None:
    """changepoint_normal with tempering alone (seeds 2, 3): CT's variance of mu1 was
    0.06-0.14 where every plain NUTS chain on the same program had 2.3-8.1."""
    from pemc_stan.modes.scouts import SPREAD_RATIO_MAX, narrower_than_every_chain

    wide = _chains([1.6, 1.8, 2.0, 2.8])
    ((column, var, smallest),) = narrower_than_every_chain(wide, _WeightedFit(0.1))
    assert column == "x" and var == 0.1 and smallest == pytest.approx(1.6**2, rel=0.15)
    # right, or narrower than one chain only (that chain's region may hold little mass)
    assert narrower_than_every_chain(wide, _WeightedFit(3.0)) == []
    assert narrower_than_every_chain(_chains([0.3, 1.8, 2.0, 2.8]), _WeightedFit(0.1)) == []
    # the bound is a factor, not a test of equality: a variance a bit low is left alone
    assert narrower_than_every_chain(wide, _WeightedFit(1.6**2 / (SPREAD_RATIO_MAX - 1))) == []


def test_the_spread_check_names_the_miss_only_when_the_other_checks_passed() -> None:
    from pemc_stan.modes.scouts import SpreadCheck

    name, reason = SpreadCheck(_chains([1.6, 1.8, 2.0, 2.8]))(_WeightedFit(0.1))
    assert name == "split_spread" and reason is not None
    assert "x (variance 0.1; every chain at least 2." in reason.message
    assert SpreadCheck(_chains([1.6, 1.8]))(_WeightedFit(0.1, ok=False)) == ("split_spread",
                                                                               None)


def test_the_chains_widen_the_base_to_their_own_spread_and_no_further() -> None:
    rng = np.random.default_rng(3)
    z = np.stack([rng.normal(0.0, [3.0, 0.5], size=(4000, 2)) for _ in range(3)]
                 + [rng.normal(40.0, 0.1, size=(4000, 2))])  # one chain stuck far away
    like = BaseDensity(np.zeros(2), np.array([[1.0, 0.5], [0.5, 1.0]]), "dense", df=5.0)
    base = SplitDraws(z, np.zeros(2), np.eye(2), {}, None, None, None).base(like)
    assert base.covariance == "dense" and base.df == 5.0 and "widened" in base.info
    np.testing.assert_array_equal(base.mean, like.mean)  # the far chain moves nothing
    # x1: the chains' own variance 9 (median over chains); x2: the base was wider already
    assert base.cov[0, 0] == pytest.approx(9.0, rel=0.05) and base.cov[1, 1] == 1.0
    assert base.cov[0, 1] / np.sqrt(base.cov[0, 0]) == pytest.approx(0.5)  # correlation kept
    with pytest.raises(ValueError, match="3 base coordinates and the base 2"):
        SplitDraws(np.zeros((2, 5, 3)), np.zeros(3), np.eye(3), {}, None, None, None).base(like)
