"""The searched box screened for mass the found modes do not explain (fast, no CmdStan)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from pemc_stan.modes.screen import SCREEN_DRAWS_MAX, SCREEN_HITS, screen_draws, screen_starts
from pemc_stan.modes.wide import UNEXPLAINED_STARTS

# three modes far apart in 2-D, the lightest narrow: far_modes_2d of the shared suite
W = np.array([0.5, 0.3, 0.2])
MU = np.array([[8.0, 8.0], [-8.0, 6.0], [4.0, -9.0]])
SD = np.array([0.5, 1.0, 0.3])


def _log_density(z: np.ndarray, modes: tuple[int, ...] = (0, 1, 2)) -> np.ndarray:
    """The mixture's log density up to a constant (as the pilot's, which drops some)."""
    terms = [np.log(W[k]) + stats.multivariate_normal(MU[k], SD[k]**2 * np.eye(2)).logpdf(z)
             + 3.0 for k in modes]
    return np.asarray(logsumexp(terms, axis=0)).reshape(-1)


def _search(modes: list[int], paths: int = 3, draws: int = 300, seed: int = 0
            ) -> tuple[list[tuple[np.ndarray, float]], np.ndarray, np.ndarray, np.ndarray]:
    """A search's record that found ``modes``: ``paths`` paths of exact Gaussian draws each
    (log weights log w), grouped by mode as group_paths does."""
    rng = np.random.default_rng(seed)
    z, lw, labels, groups, at = [], [], [], [], 0
    for k in modes:
        for _ in range(paths):
            z.append(MU[k] + SD[k] * rng.standard_normal((draws, 2)))
            lw.append(np.full(draws, np.log(W[k])))
            labels.append(np.full(draws, len(labels)))
        groups.append((np.arange(at, at + paths * draws), float(np.log(W[k]))))
        at += paths * draws
    return groups, np.concatenate(z), np.concatenate(lw), np.concatenate(labels)


def test_the_draws_put_the_asked_hits_in_the_most_compact_modes_central_99() -> None:
    cov = np.array([np.eye(2), 0.25 * np.eye(2)])
    n = screen_draws(cov, 32.0)
    area = np.pi * stats.chi2.ppf(0.99, 2) * 0.25  # the narrower mode's 99% ellipse
    assert n == pytest.approx(SCREEN_HITS * 64.0**2 / area, rel=1e-3)
    rng = np.random.default_rng(1)  # and by simulation: the hits the count promises
    u = rng.uniform(-32, 32, size=(200, n, 2))
    inside = np.sum(np.sum(u**2, axis=2) / 0.25 <= stats.chi2.ppf(0.99, 2), axis=1)
    assert np.mean(inside) == pytest.approx(SCREEN_HITS, rel=0.05)


def test_no_screen_where_uniform_draws_could_not_reach_a_mode_like_the_found_ones() -> None:
    assert screen_draws(np.array([np.eye(5)]), 32.0) == 0  # 5-D: ~1e8 draws needed
    assert screen_draws(np.array([1e-4 * np.eye(2)]), 32.0) == 0  # a posterior far narrower
    assert 0 < screen_draws(np.array([np.eye(2)]), 32.0) <= SCREEN_DRAWS_MAX
    assert screen_draws(np.array([np.zeros((2, 2))]), 32.0) == 0  # singular
    assert screen_draws(np.zeros((0, 2, 2)), 32.0) == 0


def test_a_missed_narrow_far_mode_gets_starts_and_found_modes_none() -> None:
    """The radius rounds found the two wide modes; the screen's starts lie in the third
    (which L-BFGS reaches from 4% of the widest box); without a third mode, none."""
    groups, z, lw, labels = _search([0, 1])
    starts, n = screen_starts(groups, z, lw, labels, _log_density, seed=3)
    assert 0 < n <= SCREEN_DRAWS_MAX
    assert starts.shape[0] > 0
    assert np.all(np.linalg.norm(starts - MU[2], axis=1) < 6 * SD[2])
    assert starts.shape[0] == UNEXPLAINED_STARTS  # hundreds of draws there: a full round
    for seed in range(5):
        starts, n = screen_starts(groups, z, lw, labels,
                                  lambda p: _log_density(p, (0, 1)), seed=seed)
        assert n > 0 and starts.shape[0] == 0


def test_a_draw_is_unexplained_only_100_times_above_the_prediction() -> None:
    """The found modes' own density raised by a factor in a ring 1-2 sds from their centres
    (where their widened Gaussians predict 0.5-0.8 of it): at 50 no starts, at 300 starts
    in the ring."""
    groups, z, lw, labels = _search([0, 1])

    def ring(p: np.ndarray) -> np.ndarray:
        d = np.min([np.linalg.norm(p - MU[k], axis=1) / SD[k] for k in (0, 1)], axis=0)
        return (d > 1.0) & (d < 2.0)

    for factor, any_starts in ((50.0, False), (300.0, True)):
        starts, _ = screen_starts(groups, z, lw, labels, lambda p, f=factor:
                                  _log_density(p, (0, 1)) + np.log(f) * ring(p), seed=1)
        assert (starts.shape[0] > 0) == any_starts, factor
        assert np.all(ring(starts))


def test_a_density_that_cannot_be_evaluated_leaves_no_starts() -> None:
    groups, z, lw, labels = _search([0, 1])

    def failing(points: np.ndarray) -> np.ndarray:
        raise RuntimeError("CmdStan failed")

    starts, _ = screen_starts(groups, z, lw, labels, failing, seed=3)
    assert starts.shape[0] == 0
    nan_everywhere = screen_starts(groups, z, lw, labels,
                                   lambda p: np.full(p.shape[0], np.nan), seed=3)[0]
    assert nan_everywhere.shape[0] == 0


def _fake_pilot(round_: Any) -> Any:
    """A pilot of the mixture above in 2-D base coordinates whose Pathfinder rounds are
    ``round_``."""
    from types import SimpleNamespace

    from pemc_stan.modes.pilot import BasePilot

    pilot = BasePilot.__new__(BasePilot)
    pilot.num_paths, pilot.draws, pilot.covariance = 8, 50, "dense"
    pilot.coordinates = SimpleNamespace(blocks=[object()],
                                        inverse=lambda z, data: {"z": np.asarray(z)})
    pilot.owner = SimpleNamespace(data=None)
    pilot.log_density_z = _log_density
    pilot._pathfinder_round = round_
    return pilot


def test_the_search_runs_paths_from_the_screens_starts_and_finds_the_missed_mode() -> None:
    """The wiring: radius rounds whose paths never reach the narrow far mode (as on a seed
    that missed its 4% basin), then one round from the screen's starts, which L-BFGS takes
    to the mode each start's component dominates: the search reports all three."""


    rng = np.random.default_rng(11)
    rounds: list[str] = []
    ran: list[int] = []

    def component(x0: np.ndarray) -> np.ndarray:
        logs = [np.log(W[k]) - 2 * np.log(SD[k])
                - 0.5 * np.sum((x0 - MU[k]) ** 2, axis=1) / SD[k] ** 2 for k in range(3)]
        return np.argmax(np.array(logs), axis=0)

    def round_(seed: int | None, radius: float, n: int, timeout: float | None,
               draws: int | None = None, starts: list[dict] | None = None,
               where: str = "") -> tuple[np.ndarray, np.ndarray]:
        rounds.append(where if starts is not None else f"radius {radius:g}")
        ran.append(n)
        x0 = (np.array([s["z"] for s in starts]) if starts is not None
              else rng.uniform(-radius, radius, size=(n, 2)))
        modes = component(x0)
        if starts is None:  # the radius rounds' paths all miss the narrow mode
            modes = np.where(modes == 2, 1, modes)
        k = 50 if draws is None else draws
        mu, sd = np.repeat(MU[modes], k, axis=0), np.repeat(SD[modes], k)[:, None]
        z = mu + sd * rng.standard_normal((n * k, 2))
        log_q = (np.log(W[np.repeat(modes, k)]) - 2 * np.log(sd[:, 0])
                 - 0.5 * np.sum(((z - mu) / sd) ** 2, axis=1) - np.log(2 * np.pi) + 3.0)
        return z, _log_density(z) - log_q + np.log(W[np.repeat(modes, k)])

    pilot = _fake_pilot(round_)
    groups, _, z, _ = pilot.pathfinder(seed=5)
    assert "from draws the modes found do not explain" in rounds
    assert pilot.search is not None and pilot.search.major_modes == 3
    assert pilot.search.paths == sum(ran)  # the screen's paths counted, as every round's
    assert "uniform draws the modes found did not explain: 1 more mode" in pilot.search.stopped
    centres = np.asarray(pilot.search.centres)
    assert np.min(np.linalg.norm(centres - MU[2], axis=1)) < SD[2]


def test_a_round_that_finds_no_other_mode_leaves_the_search_as_it_was() -> None:
    """Paths from a banana's arms climb back into the banana: they are left out, so the
    found modes' centres and masses (and everything built on them) stay as they were."""

    from pemc_stan.modes.pilot import BasePilot

    def pilot_with(screen_finds: bool) -> BasePilot:
        rng = np.random.default_rng(11)

        def round_(seed: int | None, radius: float, n: int, timeout: float | None,
                   draws: int | None = None, starts: list[dict] | None = None,
                   where: str = "") -> tuple[np.ndarray, np.ndarray]:
            x0 = (np.array([s["z"] for s in starts]) if starts is not None
                  else rng.uniform(-radius, radius, size=(n, 2)))
            modes = np.where(np.linalg.norm(x0 - MU[0], axis=1)
                             < np.linalg.norm(x0 - MU[1], axis=1), 0, 1)
            if starts is not None and not screen_finds:
                modes = np.zeros(n, dtype=int)  # every screen path back in mode 0
            k = 50 if draws is None else draws
            mu, sd = np.repeat(MU[modes], k, axis=0), np.repeat(SD[modes], k)[:, None]
            z = mu + sd * rng.standard_normal((n * k, 2))
            return z, np.log(W[np.repeat(modes, k)]) + 0.01 * rng.standard_normal(n * k)

        pilot = _fake_pilot(round_)
        pilot.pathfinder(seed=5)
        return pilot

    back = pilot_with(screen_finds=False)
    assert back.search is not None
    assert "did not explain: no other mode" in back.search.stopped
    assert back.search.major_modes == 2
    # the screen's 16 paths are not in the record: the radius rounds' 72 and the restarts'
    assert back.search.paths == 72 + int(back.search.stopped.split("; ")[-1].split()[0])
