"""The pilot's search for modes: its stopping rule, its record and the covering base.

Fast; the search on compiled models is in ``test_mode_search.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest
from scipy.special import logsumexp

from pemc_stan.core.base_density import BaseDensity, covering
from pemc_stan.core.search import NEW_MODE_SHARE, UNSEEN_SHARE_MAX, ModeSearch, unseen_share


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


def _groups_from_hits(hits: list[list[int]]) -> tuple[list[tuple[np.ndarray, float]],
                                                      np.ndarray]:
    """Mode groups (one draw per path that reached the mode) and the draws' path labels."""
    labels = np.array([p for mode in hits for p in mode], dtype=np.intp)
    groups, start = [], 0
    for mode in hits:
        groups.append((np.arange(start, start + len(mode)), 0.0))
        start += len(mode)
    return groups, labels


def test_a_restart_singleton_counts_only_at_a_mode_the_radius_rounds_missed() -> None:
    from pemc_stan.modes.pilot import restart_counts

    # paths 0-9 are radius rounds, 10-29 restarts (first = 10)
    hits = [[0, 1, 10, 11, 12], [2, 13], [14], [15, 16], list(range(17, 30))]
    groups, labels = _groups_from_hits(hits)
    major = np.ones(len(hits), dtype=bool)
    # mode 1 (one restart, found by a radius path) is no singleton; mode 2 (one restart,
    # nothing else) is; mode 3 was found by restarts alone, twice; minor modes are left out
    assert sorted(restart_counts(groups, major, labels, 10)) == [1, 2, 13]
    major[2] = False
    assert sorted(restart_counts(groups, major, labels, 10)) == [2, 13]


def test_the_restarts_unseen_share_estimates_the_mass_both_searches_missed() -> None:
    """Simulated searches: radius rounds that find each mode with a chance of their own,
    then restarts that reach the modes in proportion to their mass.  Singletons only
    at modes the radius rounds missed average to the mass neither found; counting every
    restart singleton reports the small modes' mass as missing."""
    from pemc_stan.modes.pilot import restart_counts

    rng = np.random.default_rng(5)
    mass = np.array([0.3, 0.2, 0.15, 0.1, 0.08, 0.06, 0.04, 0.03, 0.02, 0.01, 0.005, 0.005])
    radius_finds = np.array([0.9] * 8 + [0.5] * 4)
    n = 240
    new, old, missed = [], [], []
    for _ in range(3000):
        found = rng.random(mass.size) < radius_finds
        hits = np.bincount(rng.choice(mass.size, size=n, p=mass), minlength=mass.size)
        # path 0 stands for the radius rounds, 1..h for a mode's restarts
        paths = [([0] if f else []) + list(range(1, 1 + h))
                 for f, h in zip(found, hits, strict=True) if f or h]
        groups, labels = _groups_from_hits(paths)
        counts = restart_counts(groups, np.ones(len(groups), dtype=bool), labels, 1)
        new.append(sum(c == 1 for c in counts) / n)
        old.append(float(np.sum(hits == 1)) / n)
        missed.append(float(mass[~found & (hits == 0)].sum()))
    se = np.std(np.array(new) - np.array(missed)) / np.sqrt(len(new))
    assert abs(np.mean(new) - np.mean(missed)) < 4 * se + 2e-4
    # the small modes' singletons: about twice the missed mass, far beyond the noise
    bias_old = np.array(old) - np.array(missed)
    assert np.mean(bias_old) > 4 * np.std(bias_old) / np.sqrt(len(old))
    assert np.mean(old) > 1.5 * np.mean(missed)


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


def _bare_pilot(log_density_z):  # type: ignore[no-untyped-def]
    """A pilot with base coordinates whose target density is ``log_density_z``."""
    from types import SimpleNamespace

    from pemc_stan.modes.pilot import BasePilot

    pilot = BasePilot.__new__(BasePilot)
    pilot.coordinates = SimpleNamespace(blocks=[object()])
    pilot.log_density_z = log_density_z
    return pilot


def _one_bad_point() -> tuple[list[int], Callable[[np.ndarray], np.ndarray], np.ndarray]:
    """320 points on a line, one (row 200) where the density throws, as CmdStan's
    log_prob fails the whole call: (the sizes of the calls, the pilot's density test,
    the points)."""
    calls: list[int] = []

    def density(z: np.ndarray) -> np.ndarray:
        calls.append(len(z))
        if np.any(z[:, 0] > 900):
            raise RuntimeError("log_prob failed")
        return -0.5 * np.sum(z**2, axis=1)

    z = np.zeros((320, 2))
    z[:, 0] = np.arange(320.0)
    z[200, 0] = 1000.0
    at = _bare_pilot(density).log_density()
    assert at is not None
    return calls, at, z


def test_a_failed_density_call_leaves_only_the_failing_points_unevaluated() -> None:
    """CmdStan's log_prob fails the whole call for one bad point; the retries on halves
    keep the rest, so one bad segment point does not stop every merge."""
    from pemc_stan.core.search import DENSITY_SPLITS

    calls, at, z = _one_bad_point()
    out = at(z)
    bad = ~np.isfinite(out)
    assert bad[200] and np.sum(bad) == 320 // 2**DENSITY_SPLITS  # its last chunk only
    assert np.allclose(out[~bad], -0.5 * np.sum(z[~bad] ** 2, axis=1))
    assert len(calls) == 1 + 2 * DENSITY_SPLITS


def test_points_left_unevaluated_by_a_bad_neighbour_are_evaluated_again() -> None:
    """The points that shared a failed chunk with the bad one are not remembered as nan:
    the next grouping asks for them again, and gets them, and the bad point alone stays
    nan (remembered once evaluated alone)."""
    from pemc_stan.core.search import DENSITY_SPLITS

    calls, at, z = _one_bad_point()
    at(z)
    calls.clear()
    again = at(z)
    assert calls[0] == 320 // 2**DENSITY_SPLITS  # only the failed chunk is asked again
    bad = ~np.isfinite(again)
    assert bad.tolist() == [i == 200 for i in range(320)]
    calls.clear()
    at(z)
    assert calls == []  # every point now known, the bad one as nan


def test_the_density_test_evaluates_each_point_once() -> None:
    """The search groups its rounds again after each: segments between centres that did
    not move are the same points, and are not written for CmdStan again."""
    evaluated: list[int] = []

    def density(z: np.ndarray) -> np.ndarray:
        evaluated.append(len(z))
        return -0.5 * np.sum(z**2, axis=1)

    at = _bare_pilot(density).log_density()
    z = np.arange(20.0).reshape(10, 2)
    first = at(z)
    again = at(np.vstack([z[::-1], [[7.5, 8.5]]]))  # the same points, and one new
    assert evaluated == [10, 1]
    assert np.array_equal(again[:10], first[::-1])
    assert again[10] == -0.5 * (7.5**2 + 8.5**2)


def test_restart_starts_are_distinct() -> None:
    """Resampled without replacement: L-BFGS from two copies of one start reaches one mode
    twice, and the restarts' unseen share would count it as seen twice."""
    from pemc_stan.core.search import RESTART_PATHS

    def density(z: np.ndarray) -> np.ndarray:  # two narrow modes at -3 and 3
        return np.logaddexp(-0.5 * np.sum(((z - 3) / 0.3) ** 2, axis=1),
                            -0.5 * np.sum(((z + 3) / 0.3) ** 2, axis=1))

    cover = BaseDensity(np.zeros(2), 9.0 * np.eye(2), "dense")
    starts = _bare_pilot(density)._restart_starts(cover, np.random.default_rng(1),
                                                  8 * RESTART_PATHS)
    assert starts.shape == (8 * RESTART_PATHS, 2)
    assert len(np.unique(starts, axis=0)) == len(starts)
    near = np.minimum(np.linalg.norm(starts - 3, axis=1), np.linalg.norm(starts + 3, axis=1))
    assert np.median(near) < 1.0  # resampled towards the modes, not raw draws


def test_the_search_is_limited_per_round_not_by_its_total_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each later round may take ROUND_TIME_FACTOR times the first round's time per path,
    however long the search has run: a total time limit ended the Boltzmann relaxation's
    restarts after 48 of 240 on a slower machine, so the modes found depended on it.
    The search records its time per path, and the mode split's later search from
    unexplained mass (:meth:`Pilot.modes_from`, on a fresh pilot) is limited by it."""
    from types import SimpleNamespace

    from pemc_stan.modes import pilot as pilot_module
    from pemc_stan.modes.pilot import _round_timeout

    centres = 10.0 * np.array([[np.cos(a), np.sin(a)]
                               for a in np.linspace(0, 2 * np.pi, 12, endpoint=False)])

    def density(z: np.ndarray) -> np.ndarray:  # 12 equal modes of sd 0.3 on a circle
        d2 = np.sum((z[:, None, :] - centres[None]) ** 2, axis=2)
        return np.asarray(logsumexp(-0.5 * d2 / 0.09, axis=1))

    clock = [0.0]
    monkeypatch.setattr(pilot_module.time, "monotonic", lambda: clock[0])
    timeouts: list[tuple[int, float | None]] = []
    rng = np.random.default_rng(7)

    def round_(seed: int | None, radius: float, n: int, timeout: float | None,
               draws: int | None = None, starts: list[dict] | None = None,
               where: str = "") -> tuple[np.ndarray, np.ndarray]:
        clock[0] += 1.0 * n  # one second per path, every round
        timeouts.append((n, timeout))
        x0 = (np.array([s["z"] for s in starts]) if starts is not None
              else rng.uniform(-radius, radius, size=(n, 2)))
        near = centres[np.argmin(np.sum((x0[:, None] - centres[None]) ** 2, axis=2), axis=1)]
        k = 20 if draws is None else draws
        z = np.repeat(near, k, axis=0) + 0.3 * rng.standard_normal((n * k, 2))
        log_q = -0.5 * np.sum((z - np.repeat(near, k, axis=0)) ** 2, axis=1) / 0.09
        return z, density(z) - log_q

    pilot = _bare_pilot(density)
    pilot.num_paths, pilot.draws, pilot.covariance = 8, 20, "dense"
    pilot.coordinates = SimpleNamespace(
        blocks=[object()], inverse=lambda z, data: {"z": np.asarray(z)})
    pilot.owner = SimpleNamespace(data=None)
    pilot._pathfinder_round = round_  # type: ignore[method-assign]
    pilot.pathfinder(seed=3)

    assert pilot.search is not None and "time limit" not in pilot.search.stopped
    assert timeouts[0] == (8, None)
    assert all(t == _round_timeout(1.0, n) for n, t in timeouts[1:])
    assert "restarts near the modes found" in pilot.search.stopped
    # the search ran past the old total limit (8 times the first round: 64 s)
    assert clock[0] > 64.0
    assert pilot.search.seconds_per_path == 1.0
    starts = np.array(centres[:6])
    pilot.modes_from(starts, 5, pilot.search.seconds_per_path)
    assert timeouts[-1] == (6, _round_timeout(1.0, 6))
    pilot.modes_from(starts, 5)  # no search to measure against: no limit
    assert timeouts[-1] == (6, None)


_NAN_AT_START = ("Error during sampling:\nRejecting initial value:\n  Error evaluating the log "
                 "probability at the initial value.\nException: normal_lpdf: Random "
                 "variable[2] is nan, but must be not nan! (in 'm.stan', line 3, column 4 to "
                 "column 26)\n")


def _failing_pilot(data: dict[str, object], reasons: dict[str, str]):  # type: ignore[no-untyped-def]
    """A pilot whose Pathfinder and approximations raise ``reasons[how]``."""
    from types import SimpleNamespace

    from pemc_stan.modes.pilot import BasePilot

    pilot = BasePilot(SimpleNamespace(name="m", data=data), SimpleNamespace(blocks=[object()]),
                      num_paths=4, draws=100, covariance="diag")

    def fail(how: str, seed: int | None = None):  # type: ignore[no-untyped-def]
        raise RuntimeError(reasons[how])

    pilot.pathfinder = lambda seed: fail("pathfinder")  # type: ignore[method-assign]
    pilot.approximation = fail  # type: ignore[method-assign]
    return pilot


def test_approximations_stop_when_two_fail_alike_and_name_the_datas_nan() -> None:
    from pemc_stan.errors import UnevaluableDensityError

    alike = dict.fromkeys(("pathfinder", "advi", "laplace", "nuts"), _NAN_AT_START)
    pilot = _failing_pilot({"N": 2, "y": [1.0, "NaN"]}, alike)
    with pytest.raises(UnevaluableDensityError) as caught:
        pilot.fit(1, want_base=True)
    error = caught.value
    assert [how for how, _, _ in pilot.failures] == ["pathfinder", "advi"]  # no third try
    assert error.data_problem and "y[2] (NaN)" in str(error)
    assert error.reason.startswith("normal_lpdf: Random variable[2] is nan")
    assert "(in 'm.stan', line 3" in error.reason and "missing" in error.remedy


def test_failures_that_differ_try_every_approximation_and_keep_the_general_error() -> None:
    from pemc_stan.errors import UnevaluableDensityError

    pilot = _failing_pilot({"N": 2}, {how: f"Exception: {how} broke at step {i}"
                                      for i, how in enumerate(("pathfinder", "advi", "laplace",
                                                               "nuts"))})
    # numbers aside the messages differ in their words: the model is not at fault everywhere
    with pytest.raises(RuntimeError, match="no base density could be fitted") as caught:
        pilot.fit(1, want_base=True)
    assert not isinstance(caught.value, UnevaluableDensityError)
    assert len(pilot.failures) == 4


def test_one_message_everywhere_without_bad_data_blames_the_model_not_the_data() -> None:
    from pemc_stan.errors import UnevaluableDensityError

    same = {how: "Rejecting initial value:\nException: log_mix: lambda is 1.5, but must be in "
                 "[0, 1]" for how in ("pathfinder", "advi", "laplace", "nuts")}
    pilot = _failing_pilot({"N": 2}, same)
    with pytest.raises(UnevaluableDensityError) as caught:
        pilot.fit(1, want_base=True)
    assert not caught.value.data_problem and "inits=" in caught.value.remedy
    assert len(pilot.failures) == 2


def test_one_message_that_is_not_where_cmdstan_starts_tries_every_approximation() -> None:
    """Rejected proposals during a run that failed for another reason share their message
    too; NUTS may still run such a model, so the approximations go on."""
    from pemc_stan.errors import UnevaluableDensityError

    during = {how: "Exception: log_mix: lambda is 1.5, but must be in [0, 1]" for how in
              ("pathfinder", "advi", "laplace", "nuts")}
    pilot = _failing_pilot({"N": 2}, during)
    with pytest.raises(RuntimeError, match="no base density could be fitted") as caught:
        pilot.fit(1, want_base=True)
    assert not isinstance(caught.value, UnevaluableDensityError)
    assert len(pilot.failures) == 4


def test_a_nan_in_the_data_and_two_failures_over_a_nan_stop_the_approximations() -> None:
    """Where the messages do not say where CmdStan failed, the data's NaN and two failures
    that name a NaN are enough; with no NaN in the data the same failures go on."""
    from pemc_stan.errors import UnevaluableDensityError

    over_nan = dict.fromkeys(("pathfinder", "advi", "laplace", "nuts"),
                             "Exception: normal_lpdf: Random variable[2] is nan")
    pilot = _failing_pilot({"N": 2, "y": [1.0, float("nan")]}, over_nan)
    with pytest.raises(UnevaluableDensityError):
        pilot.fit(1, want_base=True)
    assert len(pilot.failures) == 2
    clean = _failing_pilot({"N": 2, "y": [1.0, 2.0]}, over_nan)
    with pytest.raises(RuntimeError, match="no base density could be fitted"):
        clean.fit(1, want_base=True)
    assert len(clean.failures) == 4


def test_mass_scatter_is_the_widest_interquartile_range_of_paths_estimates_in_a_mode() -> None:
    from pemc_stan.backend.pathfinder import mass_scatter

    # mode A: five paths of two draws, estimates log 1 .. log 5 (quartiles log 2, log 4:
    # range log 2); mode B: four paths, estimates log 1, 1, 9, 9 (range log 9); mode C:
    # three paths, too few for quartiles, however far apart
    est = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0, 4: 5.0, 5: 1.0, 6: 1.0, 7: 9.0, 8: 9.0,
           9: 1.0, 10: 1e6, 11: 1e-6}
    labels = np.repeat(np.arange(12), 2)
    lw = np.log(np.array([est[int(k)] for k in labels]))
    groups = [(np.arange(10), 0.0), (np.arange(10, 18), 0.0), (np.arange(18, 24), 0.0)]
    assert mass_scatter(groups, lw, labels) == pytest.approx(np.log(9.0), rel=1e-12)
    assert mass_scatter(groups[:1], lw, labels) == pytest.approx(np.log(2.0), rel=1e-12)
    assert mass_scatter(groups[2:], lw, labels) == 0.0


def test_a_mode_rated_under_the_share_counts_while_the_scatter_could_lift_it() -> None:
    from pemc_stan.modes.pilot import DEFENSIVE_SHARE, defensive_groups

    # a mirror side rated 1e-5 by its few paths, and a far optimum at exp(-50)
    p = np.array([1.0, 1e-5, np.exp(-50.0)])
    p = p / p.sum()
    groups = [(np.array([k]), float(np.log(pk))) for k, pk in enumerate(p)]
    q0 = np.exp([m for _, m in defensive_groups(groups)])
    np.testing.assert_allclose(q0, (1 - DEFENSIVE_SHARE) * p + DEFENSIVE_SHARE * np.array(
        [1.0, 0.0, 0.0]), rtol=1e-12)
    # scatter just short of lifting it to NEW_MODE_SHARE: unchanged
    short = np.log(NEW_MODE_SHARE / p[1]) - 1e-6
    q1 = np.exp([m for _, m in defensive_groups(groups, scatter=short)])
    np.testing.assert_allclose(q1, q0, rtol=1e-12)
    # a scatter of 30 in log: the mirror side shares the defensive half, the far
    # optimum (50 below) does not
    q2 = np.exp([m for _, m in defensive_groups(groups, scatter=30.0)])
    np.testing.assert_allclose(q2, (1 - DEFENSIVE_SHARE) * p + DEFENSIVE_SHARE * np.array(
        [0.5, 0.5, 0.0]), rtol=1e-12)
    assert q2.sum() == pytest.approx(1.0)


def test_the_pilots_base_spreads_half_its_weight_evenly_over_the_major_modes() -> None:
    from pemc_stan.core.base_density import moment_match
    from pemc_stan.modes.pilot import DEFENSIVE_SHARE, defensive_groups

    # three modes: 0.899, 0.1 and 0.001 * 0.5 (minor: under NEW_MODE_SHARE)
    p = np.array([0.8995, 0.1, 0.0005])
    groups = [(np.array([k]), float(np.log(pk))) for k, pk in enumerate(p)]
    q = np.exp([m for _, m in defensive_groups(groups)])
    assert p[2] < NEW_MODE_SHARE
    expected = (1 - DEFENSIVE_SHARE) * p + DEFENSIVE_SHARE * np.array([0.5, 0.5, 0.0])
    np.testing.assert_allclose(q, expected, rtol=1e-12)
    assert q.sum() == pytest.approx(1.0)
    # the base built on them: modes at -10 and +10 (1-D), each with draws of sd 1
    rng = np.random.default_rng(0)
    z = np.concatenate([rng.normal(-10, 1, 4000), rng.normal(10, 1, 4000)])[:, None]
    two = [(np.arange(4000), float(np.log(0.99))), (np.arange(4000, 8000), float(np.log(0.01)))]
    base = moment_match(z, None, defensive_groups(two))
    w = np.array([0.5 * 0.99 + 0.25, 0.5 * 0.01 + 0.25])
    mean = w @ np.array([-10.0, 10.0])
    var = 1.0 + w @ (np.array([-10.0, 10.0]) - mean) ** 2
    assert base.mean[0] == pytest.approx(mean, abs=0.05)
    assert base.sd[0] == pytest.approx(np.sqrt(var), rel=0.02)
    assert base.sd[0] > 8.0  # the estimate alone (0.99 / 0.01) gives sd 2.2: +10 is 9 sd out
