"""Pathfinder pilots: paths grouped by mode, their masses combined."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

from pemc_stan.backend.pathfinder import (
    BARRIER_DEPTH,
    SEGMENT_POINTS,
    group_paths,
    mode_aware_log_z,
    mode_centres,
    mode_covariances,
    segment_points,
    without_barrier,
)


def test_mode_aware_pilot_combines_paths() -> None:
    rng = np.random.default_rng(0)
    names = ["lp_approx__", "lp__", "x"]
    blocks = []
    # paths 1-3 in the same mode (estimates 0.3, 0.2 and, from a draw far in one path's
    # tail, 60), path 4 elsewhere (0.5): a mode counts once, at its paths' median
    for centre, z in ((-3.0, 0.3), (-3.0, 0.2), (-3.0, 60.0), (3.0, 0.5)):
        x = rng.normal(centre, 0.5, size=200)
        lq = rng.normal(size=200)
        blocks.append(np.column_stack([lq, lq + np.log(z), x]))
    arr = np.vstack(blocks)
    assert mode_aware_log_z(arr, names, 4) == pytest.approx(np.log(0.3 + 0.5))
    # draws that cannot be split by path: pooled mean
    assert mode_aware_log_z(arr, names, 9) == pytest.approx(np.log((0.3 + 0.2 + 60 + 0.5) / 4))


def test_group_paths_returns_each_modes_draws_and_skips_thin_paths() -> None:
    rng = np.random.default_rng(1)
    z = np.concatenate([rng.normal(-5, 1, (50, 2)), rng.normal(5, 1, (50, 2)),
                        rng.normal(-5, 1, (50, 2))])
    lw = np.zeros(150)
    lw[100:] = np.log(0.5)
    lw[101:] = np.nan  # the third path keeps one finite draw
    groups, log_z = group_paths(z, lw, 3, min_draws=2)
    assert [g[0].size for g in groups] == [50, 50]
    assert log_z == pytest.approx(np.log(2.0))
    groups, _ = group_paths(z, lw, 3, min_draws=1)
    assert [g[0].size for g in groups] == [51, 50]  # the one-draw path joins its mode


def test_a_modes_centre_is_its_narrowest_paths_mean() -> None:
    """bimodal_1d, seed 4: a path stopped wide between the modes (mean 2.85, sd 2.6) joins
    the group of the mode at -3 (its 3 sd reach it); its draws, weighted by the target,
    sit mostly at 3 and would move that mode's centre towards the other mode."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(-3, 0.5, 400), rng.normal(3, 0.5, 400),
                        rng.normal(2.85, 2.6, 400), rng.normal(-3, 0.5, 400)])
    z = x[:, None]
    log_target = np.logaddexp(np.log(0.3) - 2 * (x + 3) ** 2, np.log(0.7) - 2 * (x - 3) ** 2)
    log_q = np.concatenate([-2 * (x[:400] + 3) ** 2, -2 * (x[400:800] - 3) ** 2,
                            -0.5 * ((x[800:1200] - 2.85) / 2.6) ** 2 - np.log(5.2),
                            -2 * (x[1200:] + 3) ** 2])
    lw = log_target - log_q
    groups, _ = group_paths(z, lw, 4)
    assert sorted(int(i.size) for i, _ in groups) == [400, 1200]  # the wide path joined -3
    left = next(g for g in groups if g[0].size == 1200)
    pooled = float(np.exp(lw[left[0]] - np.logaddexp.reduce(lw[left[0]])) @ x[left[0]])
    assert pooled > -1.5  # what a centre of the whole group would be
    centres = mode_centres(z, lw, groups, 4)
    assert sorted(centres[:, 0]) == pytest.approx([-3.0, 3.0], abs=0.1)
    # a path with few finite draws does not count as the narrowest: here the last path
    # keeps 3, close together at -2 (of the left mode's group)
    few_z, few_lw = z.copy(), lw.copy()
    few_z[1200:1203, 0] = [-2.01, -2.0, -1.99]
    few_lw[1203:] = np.nan
    groups, _ = group_paths(few_z, few_lw, 4, min_draws=2)
    assert sorted(int(i.size) for i, _ in groups) == [400, 803]
    ok = [(i[np.isfinite(few_lw[i])], m) for i, m in groups]
    assert sorted(mode_centres(few_z, few_lw, ok, 4)[:, 0]) == pytest.approx([-3.0, 3.0],
                                                                             abs=0.1)
    # draws that cannot be split by path: the group's own weighted mean
    one = [(np.arange(1600), 0.0)]
    whole = mode_centres(z, np.zeros(1600), one, 7)
    assert whole[0, 0] == pytest.approx(x.mean())


def test_a_modes_covariance_comes_from_the_path_its_centre_comes_from() -> None:
    """Two modes with known covariances; a wide path joined one of them, and a covariance
    of the whole group would be many times too wide.  The covariance is the
    importance-weighted one of the best path (the target's, not the path's own
    approximation, which here is too narrow), or the path's own spread when its weights
    hold too few effective draws."""
    rng = np.random.default_rng(5)
    cov_a = np.array([[0.25, 0.1], [0.1, 0.16]])
    cov_b = np.diag([0.04, 0.01])
    target = (stats.multivariate_normal([-3, 0], cov_a), stats.multivariate_normal([3, 1], cov_b))
    paths = [([-3, 0], 0.6 * cov_a), ([3, 1], 0.6 * cov_b), ([-1, 0], 9 * np.eye(2))]
    z, lw = [], []
    for mean, cov in paths:
        q = stats.multivariate_normal(mean, cov)
        draws = q.rvs(4000, random_state=rng)
        z.append(draws)
        lw.append(np.logaddexp(target[0].logpdf(draws), target[1].logpdf(draws)) - q.logpdf(draws))
    z_all, lw_all = np.vstack(z), np.concatenate(lw)
    groups = [(np.concatenate([np.arange(4000), np.arange(8000, 12000)]), 0.0),
              (np.arange(4000, 8000), 0.0)]
    covs = mode_covariances(z_all, lw_all, groups, 3)
    assert covs.shape == (2, 2, 2)
    assert covs[0] == pytest.approx(cov_a, abs=0.03)
    assert covs[1] == pytest.approx(cov_b, abs=0.005)
    # weights holding fewer than D + 1 effective draws: the path's own spread
    flat = lw_all.copy()
    flat[4000:8000] = -np.inf
    flat[4000] = 0.0
    own = mode_covariances(z_all, flat, groups[1:], 3)[0]
    assert own == pytest.approx(np.cov(z_all[4000:8000], rowvar=False, bias=True), rel=1e-9)


@pytest.mark.compiled
def test_pilot_estimate_of_log_z_on_known_answers(cmdstan_installation: object) -> None:
    """The Pathfinder pilot on a conjugate model (exact log Z) and on the 0.3 / 0.7 mixture
    whose modes are 12 sd apart (log Z = 0: both modes' masses are added)."""
    import json
    import math
    from pathlib import Path

    from pemc_stan.backend.compile import compile_model
    from pemc_stan.backend.pathfinder import estimate_log_scale

    models = Path(__file__).resolve().parents[2] / "models"
    data = json.loads((models / "normal_normal" / "data.json").read_text())
    y = np.asarray(data["y"], dtype=float)
    cov = data["sigma"] ** 2 * np.eye(len(y)) + data["tau0"] ** 2
    r = y - data["mu0"]
    exact = -0.5 * (len(y) * math.log(2 * math.pi) + np.linalg.slogdet(cov)[1]
                    + r @ np.linalg.solve(cov, r))
    pilot = estimate_log_scale(compile_model(models / "normal_normal" / "normal_normal.stan"),
                               data, seed=1)
    assert pilot.failure is None and abs(pilot.log_z - exact) < 0.05, (pilot, exact)
    bimodal = json.loads((models / "bimodal_1d" / "bimodal_1d.data.json").read_text())
    pilot = estimate_log_scale(compile_model(models / "bimodal_1d" / "bimodal_1d.stan"),
                               bimodal, seed=1, num_paths=8)
    assert pilot.failure is None and abs(pilot.log_z) < 0.1, pilot


def test_segment_points_lie_strictly_between_the_ends() -> None:
    pts = segment_points(np.array([0.0, 0.0]), np.array([[10.0, 0.0], [0.0, -4.0]]), n=4)
    assert pts.shape == (2, 4, 2)
    assert pts[0, :, 0] == pytest.approx([2.0, 4.0, 6.0, 8.0]) and np.all(pts[0, :, 1] == 0)
    assert pts[1, :, 1] == pytest.approx([-0.8, -1.6, -2.4, -3.2])


def test_without_barrier_sees_a_valley_and_not_a_slope() -> None:
    """A log-concave density never dips below the lower end of a segment; two modes of a
    mixture do, by the barrier between them."""
    x = np.linspace(0.0, 1.0, SEGMENT_POINTS + 2)
    ridge = -0.5 * (x - 0.3) ** 2  # one Gaussian: up, then down to the other end
    slope = -3.0 * x  # a centre uphill of the other
    valley = np.logaddexp(-0.5 * ((x - 0.0) / 0.1) ** 2, -0.5 * ((x - 1.0) / 0.1) ** 2)
    shallow = np.logaddexp(-0.5 * ((x - 0.0) / 0.3) ** 2, -0.5 * ((x - 1.0) / 0.3) ** 2)
    ends = np.array([c[-1] for c in (ridge, slope, valley, shallow)])
    inside = np.array([c[1:-1] for c in (ridge, slope, valley, shallow)])
    # each curve shares the centre's value at x = 0 up to a constant: compare per segment
    starts = np.array([c[0] for c in (ridge, slope, valley, shallow)])
    got = [bool(without_barrier(starts[i], ends[i:i + 1], inside[i:i + 1])[0])
           for i in range(4)]
    assert got == [True, True, False, True]
    assert float(np.min(shallow) - shallow[0]) > -BARRIER_DEPTH  # the premise of "shallow"
    # a point where the density is not finite: not merged on evidence that cannot be read
    holed = inside[:1].copy()
    holed[0, 3] = np.nan
    assert not without_barrier(starts[0], ends[:1], holed)[0]


def test_groups_on_one_ridge_merge_and_separate_modes_do_not() -> None:
    """Paths ending at different points of one long ridge look like different modes to the
    3-sd rule (kilpisjarvi's intercept: 21 "modes"); the density between their centres has
    no valley, so they are one mode.  Its parts cover stretches of the ridge far apart
    (each path's weights say how much its stretch holds), so its mass is their sum.  A
    mode behind a valley stays apart."""
    rng = np.random.default_rng(5)
    ridge = [np.column_stack([rng.normal(c, 0.3, 100), rng.normal(0, 0.1, 100)])
             for c in (-20.0, 0.0, 15.0)]
    far = np.column_stack([rng.normal(0, 0.1, 100), rng.normal(8, 0.1, 100)])
    z = np.vstack([*ridge, far])
    lw = np.concatenate([np.full(100, np.log(m)) for m in (1.0, 2.0, 3.0, 4.0)])

    def log_density(p: np.ndarray) -> np.ndarray:  # a ridge along x at y = 0; a mode at y = 8
        ridge_part = -0.5 * (p[:, 0] / 30) ** 2 - 0.5 * (p[:, 1] / 0.1) ** 2
        mode_part = -0.5 * (p[:, 0] / 0.1) ** 2 - 0.5 * ((p[:, 1] - 8) / 0.1) ** 2
        return np.logaddexp(ridge_part, mode_part)

    calls: list[int] = []

    def counted(p: np.ndarray) -> np.ndarray:
        calls.append(len(p))
        return log_density(p)

    plain, _ = group_paths(z, lw, 4)
    assert len(plain) == 4
    groups, log_z = group_paths(z, lw, 4, log_density=counted)
    assert sorted(int(i.size) for i, _ in groups) == [100, 300]
    ridge_mass = next(m for i, m in groups if i.size == 300)
    assert ridge_mass == pytest.approx(np.log(1.0 + 2.0 + 3.0))
    assert log_z == pytest.approx(np.log(6.0 + 4.0))
    # the centres, then the midpoints of every head's segments to the centres after it,
    # in one batch, then all points of the three segments along the ridge (no valley at
    # their midpoints); the far mode's valley is seen at the midpoint
    assert calls == [4, 3 + 2 + 1, 3 * SEGMENT_POINTS]


def _gaussian_paths(rng: np.random.Generator, log_gamma: Any, means: list[float],
                    sd: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Paths drawing ``n`` points each from N((m, 0), diag(sd^2, 0.1^2)), with their exact
    log importance weights against ``log_gamma``."""
    z, lw = [], []
    for m in means:
        q = np.column_stack([rng.normal(m, sd, n), rng.normal(0.0, 0.1, n)])
        log_q = stats.norm.logpdf(q[:, 0], m, sd) + stats.norm.logpdf(q[:, 1], 0.0, 0.1)
        z.append(q)
        lw.append(log_gamma(q) - log_q)
    return np.vstack(z), np.concatenate(lw)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_a_mode_merged_from_parts_that_each_cover_a_stretch_has_the_whole_mass(
        seed: int) -> None:
    """Three paths along one wide Gaussian (sd 3), each approximation narrower (sd 1.5)
    and 6 apart, so the 3-sd rule keeps them apart and the density test merges them.  The
    merged mode's mass is the target's (log 5 to 0.05: the partition of unity over the
    parts), where the median of the three paths' estimates was 0.1 to 1.2 too low on
    these seeds and their sum counts the overlap twice."""
    rng = np.random.default_rng(seed)
    log_mass = np.log(5.0)

    def log_gamma(p: np.ndarray) -> np.ndarray:
        return log_mass + stats.norm.logpdf(p[:, 0], 0, 3) + stats.norm.logpdf(p[:, 1], 0, 0.1)

    z, lw = _gaussian_paths(rng, log_gamma, [-6.0, 0.0, 6.0], 1.5, 1000)
    assert len(group_paths(z, lw, 3)[0]) == 3
    groups, log_z = group_paths(z, lw, 3, log_density=log_gamma)
    assert len(groups) == 1
    assert log_z == pytest.approx(log_mass, abs=0.05)


def test_a_mode_merged_from_two_bumps_has_both_masses() -> None:
    """Two bumps 2 apart (sd 0.5, masses 1 and 3) with a valley shallower than
    :data:`BARRIER_DEPTH` between them: one mode, and its mass is the sum of both (the
    median of the two paths' estimates was one bump's)."""
    rng = np.random.default_rng(11)

    def log_gamma(p: np.ndarray) -> np.ndarray:
        y = stats.norm.logpdf(p[:, 1], 0, 0.1)
        return y + np.logaddexp(stats.norm.logpdf(p[:, 0], -1, 0.5),
                                np.log(3.0) + stats.norm.logpdf(p[:, 0], 1, 0.5))

    z, lw = _gaussian_paths(rng, log_gamma, [-1.0, 1.0], 0.5, 2000)
    groups, log_z = group_paths(z, lw, 2, log_density=log_gamma)
    assert len(groups) == 1
    assert log_z == pytest.approx(np.log(4.0), abs=0.03)


def test_a_valley_away_from_the_midpoint_keeps_two_modes_apart() -> None:
    """Modes at -2 and 2 with a third bump at 0 that no path found: the midpoint of their
    segment is high, the valleys at -1 and 1 keep them apart (the points beyond the
    midpoint are evaluated whenever it shows no valley)."""
    rng = np.random.default_rng(2)
    z = np.vstack([rng.normal([-2.0, 0.0], 0.1, (100, 2)), rng.normal([2.0, 0.0], 0.1, (100, 2))])
    lw = np.zeros(200)

    def log_density(p: np.ndarray) -> np.ndarray:
        bumps = [-0.5 * np.sum(((p - [c, 0.0]) / 0.1) ** 2, axis=1) for c in (-2.0, 0.0, 2.0)]
        return np.logaddexp.reduce(bumps, axis=0)

    groups, _ = group_paths(z, lw, 2, log_density=log_density)
    assert len(groups) == 2


def test_a_group_centred_low_between_modes_does_not_join_them() -> None:
    """A path that stopped wide between two narrow modes has its centre in the valley,
    every mode uphill of it.  As the head of the merge (it is the heaviest) it would take
    in both; the highest centre leads instead, takes the low group in, and the valley
    keeps the other mode apart."""
    rng = np.random.default_rng(3)
    a = rng.normal([0.0, 0.0], 0.1, (100, 2))
    b = rng.normal([1.0, 0.0], 0.1, (100, 2))
    wide = rng.normal([0.5, 0.0], 0.5, (100, 2))
    z = np.vstack([a, b, wide])
    lw = np.concatenate([np.full(100, np.log(m)) for m in (1.0, 1.0, 5.0)])

    def log_density(p: np.ndarray) -> np.ndarray:
        return np.logaddexp(-0.5 * np.sum((p / 0.1) ** 2, axis=1),
                            -0.5 * np.sum(((p - [1.0, 0.0]) / 0.1) ** 2, axis=1))

    groups, _ = group_paths(z, lw, 3, log_density=log_density)
    assert sorted(int(i.size) for i, _ in groups) == [100, 200]
    # the valley's group went to one mode, not to both
    joined = next(i for i, _ in groups if i.size == 200)
    assert set(np.unique(joined // 100)) in ({0, 2}, {1, 2})


def test_a_degenerate_path_neither_places_nor_weighs_the_mode_it_joins() -> None:
    """Two modes of mass 1 at (0, 0) and (0, 1.2) (sd 0.1), one path converged on each,
    and first a degenerate path (sd 0.005 across, 1 along the line through both) whose
    mean lies within 3 of the first mode's standard deviations, as Pathfinder returned on
    the mixture on R^2 (seed 7).  By spread it was the narrowest, so the first mode's
    centre was its weighted mean, in the valley, and the density test merged both modes;
    by the effective sample share of its weights it is the worst, and neither places the
    mode nor counts in its mass."""
    rng = np.random.default_rng(5)
    centres = np.array([[0.0, 0.0], [0.0, 1.2]])

    def log_gamma(p: np.ndarray) -> np.ndarray:
        return np.logaddexp.reduce([stats.norm.logpdf(p[:, 0], c[0], 0.1)
                                    + stats.norm.logpdf(p[:, 1], c[1], 0.1) for c in centres],
                                   axis=0)

    paths = [((0.0, 0.25), (0.005, 1.0)), ((0.0, 0.0), (0.1, 0.1)), ((0.0, 1.2), (0.1, 0.1))]
    z, lw = [], []
    for mean, sd in paths:
        q = rng.normal(mean, sd, (1000, 2))
        z.append(q)
        lw.append(log_gamma(q) - np.sum(stats.norm.logpdf(q, mean, sd), axis=1))
    z_all, lw_all = np.vstack(z), np.concatenate(lw)
    groups, log_z = group_paths(z_all, lw_all, 3, log_density=log_gamma)
    assert len(groups) == 2
    assert sorted(g[0].size for g in groups) == [1000, 2000]  # the degenerate path joined
    assert log_z == pytest.approx(np.log(2.0), abs=0.02)
    placed = mode_centres(z_all, lw_all, groups, 3)
    assert np.sort(placed[:, 1]) == pytest.approx([0.0, 1.2], abs=0.02)


def test_paths_run_on_every_core_only_for_a_threaded_executable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from pemc_stan.backend import pathfinder

    model: Any = SimpleNamespace(exe_file="/nowhere/model")
    monkeypatch.setattr(pathfinder, "usable_cores", lambda: 3)
    monkeypatch.setattr(pathfinder, "_threaded", lambda exe: exe == "/nowhere/model")
    assert pathfinder.path_threads(model) == 3
    monkeypatch.setattr(pathfinder, "_threaded", lambda exe: False)
    assert pathfinder.path_threads(model) is None
    monkeypatch.setattr(pathfinder, "usable_cores", lambda: 1)
    monkeypatch.setattr(pathfinder, "_threaded", lambda exe: True)
    assert pathfinder.path_threads(model) is None  # one core: CmdStan's default


@pytest.mark.compiled
def test_paths_side_by_side_draw_what_one_thread_draws(cmdstan_installation: object) -> None:
    from pemc_stan.backend.compile import compile_model
    from pemc_stan.backend.pathfinder import path_threads

    model = compile_model("parameters { vector[3] x; } model { x ~ normal(1, 2); }",
                          name="threads_check")
    runs = [np.asarray(model.pathfinder(seed=3, num_paths=4, draws=200, psis_resample=False,
                                        show_console=False, num_threads=n).draws())
            for n in (1, path_threads(model) or 2)]
    np.testing.assert_array_equal(runs[0], runs[1])


def test_a_failed_pilot_says_cmdstans_reason_not_its_command_line(
        caplog: pytest.LogCaptureFixture) -> None:
    """The issue's "a failed Pathfinder leaked a truncated internal command line"."""
    from pemc_stan.backend.pathfinder import estimate_log_scale

    class Failing:
        exe_file = "/nonexistent/model"

        def pathfinder(self, **kwargs: Any) -> None:
            raise RuntimeError(
                "Error during pathfinder:\nRejecting initial value: log density is -inf\n"
                "Command and output files:\nRunSet: chains=1, chain_ids=[1], "
                "num_processes=1\n cmd (chain 1):\n\t['/root/model', 'id=1', "
                "'method=pathfinder']\n retcodes=[1]\n")

    with caplog.at_level("WARNING", logger="pemc_stan.backend.pathfinder"):
        pilot = estimate_log_scale(Failing(), {}, seed=1)  # type: ignore[arg-type]
    assert pilot.log_z == 0.0 and pilot.failure is not None
    assert "log density is -inf" in pilot.failure
    for text in (pilot.failure, caplog.text):
        assert "method=pathfinder" not in text and "cmd (chain" not in text
