"""Pathfinder pilots: paths grouped by mode, their masses combined."""

from __future__ import annotations

import numpy as np
import pytest

from pemc_stan.backend.pathfinder import group_paths, mode_aware_log_z, mode_centres


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
