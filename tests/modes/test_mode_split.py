"""The mode split's grouping of cells and its record (fast: nothing is compiled)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pemc_stan.errors import OptionsError
from pemc_stan.methods import registry
from pemc_stan.modes.grouping import LEFT_SHARE_MAX, cell_groups, draw_cells
from pemc_stan.modes.split import SplitOutcome


def _chain(counts: dict[int, int]) -> list[int]:
    return [k for k, n in counts.items() for _ in range(n)]


def test_chains_that_stay_in_their_cells_make_one_group_per_cell() -> None:
    cells = np.array([_chain({0: 1000}), _chain({0: 1000}), _chain({1: 1000}),
                      _chain({1: 1000})])
    groups, outside, members = cell_groups(cells, 2)
    assert groups.tolist() == [0, 0, 1, 1]
    assert members == [[0], [1]]
    assert outside.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_cells_a_chain_moves_between_are_merged_transitively() -> None:
    cells = np.array([_chain({0: 600, 1: 400}), _chain({1: 500, 2: 500}),
                      _chain({3: 1000}), _chain({3: 1000})])
    groups, outside, members = cell_groups(cells, 4)
    assert members == [[0, 1, 2], [3]]
    assert groups.tolist() == [0, 0, 1, 1]
    assert np.all(outside == 0.0)


def test_a_brief_visit_is_not_a_merge_but_counts_as_outside() -> None:
    few = int(LEFT_SHARE_MAX * 1000) // 2  # below the share that merges
    cells = np.array([_chain({0: 1000 - few, 1: few}), _chain({1: 1000})])
    groups, outside, members = cell_groups(cells, 2)
    assert members == [[0], [1]]
    assert outside[0] == pytest.approx(few / 1000)


def test_a_chain_belongs_where_its_draws_are_and_an_abandoned_cell_to_no_group() -> None:
    # chains "started" in cell 2 ended in cell 0: cell 2 has no chain and no group
    cells = np.array([_chain({0: 1000}), _chain({0: 1000}), _chain({1: 1000})])
    groups, _, members = cell_groups(cells, 3)
    assert members == [[0], [1]]
    assert groups.tolist() == [0, 0, 1]


def test_cell_indices_out_of_range_raise() -> None:
    with pytest.raises(ValueError, match=r"0\.\.1"):
        cell_groups(np.array([[0, 2]]), 2)


def _banana(rng: np.random.Generator, n: int, sign: float) -> np.ndarray:
    """iid draws of one banana of the validation case ``curved_pair_2d``."""
    c, s1, m, k = (-2.5, 1.0, -1.0, 0.8) if sign < 0 else (2.5, 0.8, 1.0, -0.8)
    x1 = rng.normal(c, s1, n)
    return np.column_stack([x1, rng.normal(m + k * (x1 - c) ** 2, 0.35)])


def _nearest(z: np.ndarray, centres: np.ndarray, mean: np.ndarray, cov: np.ndarray
             ) -> np.ndarray:
    w = np.linalg.inv(np.linalg.cholesky(cov))
    d = ((z - mean) @ w.T)[:, None, :] - ((centres - mean) @ w.T)[None, :, :]
    return np.argmin(np.sum(d * d, axis=2), axis=1)


def test_cells_drawn_around_the_draws_keep_a_banana_s_arms_in_its_own_mode() -> None:
    # three chains per banana; the nearest centre in the covering metric cuts the arms
    rng = np.random.default_rng(11)
    z = np.stack([_banana(rng, 1000, -1.0) for _ in range(3)]
                 + [_banana(rng, 1000, 1.0) for _ in range(3)])
    flat = z.reshape(-1, 2)
    mean, cov = flat.mean(axis=0), np.cov(flat, rowvar=False)
    centres = np.array([z[:3].reshape(-1, 2).mean(axis=0), z[3:].reshape(-1, 2).mean(axis=0)])
    cells = _nearest(flat, centres, mean, cov).reshape(6, 1000)
    _, _, members = cell_groups(cells, 2)
    assert members == [[0, 1]]  # the arms past the midpoint merge the two modes
    partition, labels = draw_cells(z, cells, mean, cov)
    groups, outside, members = cell_groups(labels, 2)
    assert members == [[0], [1]] and groups.tolist() == [0, 0, 0, 1, 1, 1]
    assert np.all(outside <= LEFT_SHARE_MAX)
    fresh = [_banana(rng, 20000, -1.0), _banana(rng, 20000, 1.0)]  # the partition itself
    wrong = [np.mean(partition.labels(f) != k) for k, f in enumerate(fresh)]
    by_centre = [np.mean(_nearest(f, centres, mean, cov) != k) for k, f in enumerate(fresh)]
    assert max(wrong) < 0.001 and max(by_centre) > 0.005  # by the centres: about 1%


def test_cells_drawn_around_the_draws_still_see_a_chain_cross_between_modes() -> None:
    rng = np.random.default_rng(12)
    a, b = np.array([-2.0, 0.0]), np.array([2.0, 0.0])
    z = np.stack([rng.normal(a, 0.7, (1000, 2)), rng.normal(a, 0.7, (1000, 2)),
                  rng.normal(b, 0.7, (1000, 2)), rng.normal(b, 0.7, (1000, 2)),
                  np.concatenate([rng.normal(a, 0.7, (500, 2)), rng.normal(b, 0.7, (500, 2))])])
    cells = _nearest(z.reshape(-1, 2), np.stack([a, b]), np.zeros(2), np.eye(2)).reshape(5, 1000)
    _, labels = draw_cells(z, cells, np.zeros(2), np.eye(2))
    groups, _, members = cell_groups(labels, 2)
    assert members == [[0, 1]] and groups.tolist() == [0, 0, 0, 0, 0]


def test_a_chain_in_a_mode_the_search_missed_joins_a_found_mode_s_group() -> None:
    # its draws are labelled by the other chains' nearest draws, so it cannot hide as a
    # group of its own: it sits with the chains of the mode nearest it, and disagrees
    rng = np.random.default_rng(13)
    a, b, missed = np.array([-3.0, 0.0]), np.array([3.0, 0.0]), np.array([-3.0, 6.0])
    z = np.stack([rng.normal(a, 0.5, (1000, 2)), rng.normal(a, 0.5, (1000, 2)),
                  rng.normal(b, 0.5, (1000, 2)), rng.normal(b, 0.5, (1000, 2)),
                  rng.normal(missed, 0.5, (1000, 2))])
    cells = _nearest(z.reshape(-1, 2), np.stack([a, b]), np.zeros(2), np.eye(2)).reshape(5, 1000)
    _, labels = draw_cells(z, cells, np.zeros(2), np.eye(2))
    groups, _, members = cell_groups(labels, 2)
    assert members == [[0], [1]] and groups.tolist() == [0, 0, 1, 1, 0]


def test_cells_drawn_around_the_draws_check_their_shapes() -> None:
    with pytest.raises(ValueError, match="do not match"):
        draw_cells(np.zeros((2, 10, 2)), np.zeros((2, 9), dtype=int), np.zeros(2), np.eye(2))
    with pytest.raises(ValueError, match="positive definite"):
        draw_cells(np.zeros((2, 10, 2)), np.zeros((2, 10), dtype=int), np.zeros(2),
                   np.zeros((2, 2)))


def test_outcome_notes_say_why_the_method_ran() -> None:
    assert SplitOutcome().note() is None  # not tried, nothing to say
    tried = SplitOutcome(why="a chain spent 3% of its draws elsewhere", tried=True).note()
    assert tried is not None and tried[0] == "mode_split"
    assert "so the run tempered: a chain spent 3%" in tried[1]
    skipped = SplitOutcome(why="30 modes found (> 24)").note()
    assert skipped is not None and "not split: 30 modes found" in skipped[1]
    # how many chains ran, and why more than were asked for (#76)
    ran = SplitOutcome(why="rhat", tried=True)
    ran.ran = "20 NUTS chains: the 4 asked for and 2 at each of the search's 8 modes"
    said = ran.note()
    assert said is not None and ("not split (its 20 NUTS chains: the 4 asked for and 2 at "
                                 "each of the search's 8 modes), so the run tempered") in said[1]
    from pemc_stan.modes.split import _refusal

    assert _refusal("again", SplitOutcome(tried=True), ran).ran == ran.ran


@pytest.mark.parametrize("method", ["ct", "pe"])
def test_split_modes_option_is_validated_and_on_the_command_line(method: str) -> None:
    spec = registry.get(method)
    assert spec.build_options().split_modes == "auto"
    assert spec.build_options(split_modes="never").split_modes == "never"
    with pytest.raises(OptionsError, match="split_modes") as err:
        spec.build_options(split_modes="sometimes")
    assert "'auto' or 'never'" in str(err.value)


def test_the_wide_sampler_resolves_a_mode_as_heavy_as_the_lightest_found() -> None:
    from pemc_stan.modes.wide import (
        WIDE_EXCESS_Z,
        WIDE_POWER_Z,
        WIDE_SE_MAX,
        WIDE_SE_MIN,
        wide_resolution,
    )

    # 16 groups of one mode (5%) or a merged pair (10%): a missed 5% mode must show
    # WIDE_POWER_Z standard errors above the WIDE_EXCESS_Z that refuses the split
    twenty = np.log([0.05] * 12 + [0.1] * 4)
    assert wide_resolution(list(twenty)) == pytest.approx(0.05 / (WIDE_EXCESS_Z + WIDE_POWER_Z))
    assert wide_resolution([0.0, 0.0]) == WIDE_SE_MAX  # two equal modes: 0.5 / 4 > the cap
    assert wide_resolution([0.0, -20.0]) == WIDE_SE_MIN  # a tiny group: the floor
    assert wide_resolution([float("-inf"), 0.0, 0.0]) == WIDE_SE_MAX  # an empty group
    assert wide_resolution([]) == WIDE_SE_MAX


def _wide_batches(monkeypatch: pytest.MonkeyPatch, weights: np.ndarray, se: float,
                  log_masses: tuple[float, float] = (0.0, 0.0)) -> int:
    """How many batches the wide sampler draws when each batch's log weights are
    ``weights`` (against two groups of ``log_masses`` with standard error ``se``)."""
    from types import SimpleNamespace

    from pemc_stan.modes import wide

    drawn: list[int] = []

    def fake(*args: object, **kwargs: object) -> np.ndarray:
        drawn.append(1)
        return weights, np.zeros((weights.size, 1))

    monkeypatch.setattr(wide, "wide_log_weights", fake)
    masses = [SimpleNamespace(log_z=m, std_error=se) for m in log_masses]
    out = wide.wide_sample(None, None, None, None, 1, masses)  # type: ignore[arg-type]
    assert out is not None and out[0].size == len(drawn) * weights.size
    return len(drawn)


def test_the_wide_sampler_stops_when_more_batches_cannot_resolve_anything(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights that match the groups' mass (log 2) and vary: the sampler draws until its
    own standard error reaches the goal, stops at once when it is already there or when
    the groups' own error is the larger, and stops after one batch when all
    :data:`WIDE_BATCHES` could not bring it under the lightest group's share (uneven
    weights in many dimensions: the Boltzmann relaxation drew 8 batches, 25 s, for
    nothing); with a heavier lightest group the same weights are drawn on."""
    from pemc_stan.modes.wide import WIDE_BATCHES, WIDE_SE_MAX

    rng = np.random.default_rng(4)
    n = 200
    # sd(w / Z) = 0.5: the sampler's error is 0.5 / sqrt(draws), the goal WIDE_SE_MAX
    steady = np.log(2.0) + np.log(rng.uniform(1 - 0.5 * np.sqrt(3), 1 + 0.5 * np.sqrt(3), n))
    sd = float(np.std(np.exp(steady) / 2.0, ddof=1))
    needed = int(np.ceil((sd / WIDE_SE_MAX) ** 2 / n))  # batches to reach the goal
    assert 1 < needed <= WIDE_BATCHES
    assert _wide_batches(monkeypatch, steady, 0.0) in (needed, needed + 1)
    assert _wide_batches(monkeypatch, steady, 0.5) == 1  # the groups' error is larger
    # one weight holds all the mass: sd(w / Z) ~ sqrt(n), the sampler's error ~ 1, and
    # after 8 batches ~ 0.35: blind to the 3% (a lightest group of 0.1%: its resolution
    # is floored at 0.5%) or 12% (equal groups: capped at 2%) it must see at 6 standard
    # errors
    rare = np.full(n, -np.inf)
    rare[3] = np.log(n)
    assert _wide_batches(monkeypatch, rare, 0.0, (np.log(0.999), np.log(0.001))) == 1
    assert _wide_batches(monkeypatch, rare, 0.0) == 1
    # weights with sd(w / Z) = 0.5, a lightest group of 0.1%: the sampler can reach the
    # 0.5% floor's error within its batches, so it draws on (stopping after one batch
    # whenever the lightest share alone was out of reach lost the check's power)
    tiny = np.log(rng.uniform(1 - 0.5 * np.sqrt(3), 1 + 0.5 * np.sqrt(3), n))
    assert _wide_batches(monkeypatch, tiny, 0.0, (np.log(0.999), np.log(0.001))) > 1


def test_importance_error_is_the_weights_relative_standard_error() -> None:
    from pemc_stan.estimators.mixture import importance_error

    w = np.array([1.0, 3.0, 2.0, 2.0])  # mean 2, sample sd sqrt(2/3)
    ratio, se = importance_error(np.log(w), np.log(2.0))
    assert ratio == pytest.approx(1.0)
    assert se == pytest.approx(np.sqrt(2.0 / 3.0) / 2.0 / 2.0)


def _refused(*names: str, rhat: float = float("nan")) -> Any:
    from pemc_stan.modes.split import SplitOutcome

    outcome = SplitOutcome(why="refused", tried=True, names=names)
    outcome.rhat = rhat
    return outcome


def test_the_split_runs_longer_only_within_the_follow_up_budget() -> None:
    from pemc_stan.modes.split import _next_step
    from pemc_stan.sampling.follow_up import DEFAULT_BUDGET, PREDICTION_MARGIN, Budget

    # 1000 warm-up + 2000 draws after 1000 + 1000: 1.5 times the cost, with the margin
    need = 1.0 + PREDICTION_MARGIN * 1.5
    assert DEFAULT_BUDGET >= need
    slow = _refused("rhat", rhat=1.08)
    for budget, runs in ((Budget(), True), (Budget(need), True),
                         (Budget(need - 0.01), False), (Budget(1.0), False)):
        step = _next_step(slow, budget, 0.0, 1.0, 1000, 1000, 0.8)
        assert (step is not None) == runs, budget
    assert _next_step(slow, Budget(), 0.0, 1.0, 1000, 1000, 0.8) == (
        "iter_sampling 1000 -> 2000 (mode split)", 0.8, 2000, 1.5)
    # an R-hat no budget's draws can fix, or a reason no new run fixes: nothing is run
    assert _next_step(_refused("rhat", rhat=3.0), Budget(), 0.0, 1.0, 1000, 1000, 0.8) is None
    assert _next_step(_refused("rhat", "mode_wide_mass"), Budget(), 0.0, 1.0, 1000, 1000,
                      0.8) is None


def test_a_split_short_only_of_an_sd_s_precision_is_used_and_runs_longer() -> None:
    from pemc_stan.modes.split import SplitOutcome, _accepts, _next_step
    from pemc_stan.output.diagnostics import Reason, Verdict
    from pemc_stan.sampling.follow_up import Budget

    short = Reason("sd_precision", "33%", "run longer")
    assert _accepts(Verdict((), ("rhat",))) and _accepts(Verdict((short,), ("sd_precision",)))
    assert not _accepts(Verdict((short, Reason("rhat", "1.1", "")), ("rhat", "sd_precision")))
    fit: Any = object()  # an accepted split: only its presence matters here
    used = SplitOutcome(fit, why=str(short), tried=True, names=("sd_precision",))
    assert _next_step(used, Budget(), 0.0, 1.0, 1000, 1000, 0.8) == (
        "iter_sampling 1000 -> 2000 (mode split)", 0.8, 2000, 1.5)
    assert _next_step(used, Budget(1.0), 0.0, 1.0, 1000, 1000, 0.8) is None
    # an accepted split as it is, or one that names more than precision: nothing is run
    assert _next_step(SplitOutcome(fit, tried=True), Budget(), 0.0, 1.0, 1000, 1000,
                      0.8) is None
    both = SplitOutcome(fit, tried=True, names=("sd_precision", "rhat"))
    assert _next_step(both, Budget(), 0.0, 1.0, 1000, 1000, 0.8) is None


def test_a_split_that_diverged_runs_again_with_a_smaller_step_first() -> None:
    """Divergences come before slow mixing: the chains must reach all of each mode before
    their mixing is judged. Each step's cost is predicted from the last run's."""
    from pemc_stan.modes.split import ADAPT_DELTA_COST, _next_step
    from pemc_stan.sampling.follow_up import ADAPT_DELTA_STEPS, Budget

    both = _refused("divergences", "rhat", rhat=1.08)
    c = ADAPT_DELTA_COST
    # a budget that pays for every step left takes them in turn
    assert _next_step(both, Budget(8.0), 0.0, 1.0, 1000, 1000, 0.8) == (
        "adapt_delta 0.8 -> 0.95 (mode split)", 0.95, 1000, c)
    step = _next_step(both, Budget(8.0), c, c, 1000, 1000, 0.95)
    assert step is not None and step[1] == 0.99 and step[3] == pytest.approx(c * c)
    assert _next_step(both, Budget(8.0), 0.0, 1.0, 1000, 1000, ADAPT_DELTA_STEPS[-1]) is None
    # the default budget pays for one of them (1 + c + c^2 > 4 >= 1 + c^2): the last,
    # which passed wherever the one before did (curved_pair_2d; docs/decisions.md)
    assert 1 + c + c * c > 4.0 >= 1 + c * c
    assert _next_step(both, Budget(), 0.0, 1.0, 1000, 1000, 0.8) == (
        "adapt_delta 0.8 -> 0.99 (mode split)", 0.99, 1000, pytest.approx(c * c))
    # and nothing more after it
    assert _next_step(both, Budget(), c, c, 1000, 1000, 0.95) is None
    assert _next_step(both, Budget(3.0), 0.0, 1.0, 1000, 1000, 0.8) == (
        "adapt_delta 0.8 -> 0.95 (mode split)", 0.95, 1000, c)


def test_a_search_from_unexplained_mass_adds_only_the_modes_it_did_not_hold() -> None:
    """The refused split's starts lead Pathfinder to a mode already found (inside its
    Gaussian's 99.9% ellipse) and to a new one of half the found mass: only the new one
    joins the search, and the shares are renormalised over all."""
    from types import SimpleNamespace

    from pemc_stan.core.search import ModeSearch
    from pemc_stan.modes.split import _extend_search, _held

    modes = [(np.log(0.5), np.zeros(2), 0.01 * np.eye(2)),
             (np.log(0.5), np.array([3.0, 0.0]), 0.01 * np.eye(2))]
    assert _held(np.array([[0.3, 0.0], [0.4, 0.0], [3.0, 3.0]]), modes).tolist() == \
        [True, False, False]  # 3 sd is inside (chi2 99.9%, 2 dof: 3.72 sd), 4 sd is not
    reached = ([(np.arange(5), np.log(0.5)), (np.arange(5, 10), np.log(0.45))],
               np.array([[3.02, 0.01], [0.0, 3.0]]))
    limits: list[float] = []

    def modes_from(starts: np.ndarray, seed: int, seconds_per_path: float) -> tuple:
        limits.append(seconds_per_path)
        return reached

    pilot = SimpleNamespace(modes_from=modes_from)
    model = SimpleNamespace(pilot=lambda: pilot)
    search = ModeSearch((2.0,), 2, 2, 8, "path limit", (0.5, 0.5), np.array([[0.0, 0.0],
                                                                            [3.0, 0.0]]),
                        (0.5, 0.5), None, seconds_per_path=0.25)
    refused = SplitOutcome(why="mode_wide_mass: 45% more", tried=True, names=("mode_wide_mass",))
    refused.unexplained, refused.modes = np.zeros((16, 2)), modes
    wider = _extend_search(model, search, refused, 1)  # type: ignore[arg-type]
    assert wider is not None
    assert wider.centres.tolist() == [[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]]
    assert wider.major_shares == pytest.approx([0.5 / 1.45, 0.5 / 1.45, 0.45 / 1.45])
    assert (wider.modes, wider.major_modes, wider.paths) == (3, 3, 24)
    assert limits == [0.25]  # the search's time per path bounds the new paths
    assert wider.stopped.endswith("16 restarts from the mass the split's importance sampler "
                                  "saw beyond the modes: 1 new mode(s)")
    # nothing new: no extension
    pilot.modes_from = lambda starts, seed, per_path: (reached[0][:1], reached[1][:1])
    assert _extend_search(model, search, refused, 1) is None  # type: ignore[arg-type]


def test_a_refusal_counts_the_gradients_of_every_run_behind_it() -> None:
    from pemc_stan.modes.split import SplitOutcome, _refusal

    first = SplitOutcome(why="divergences: ...", tried=True, names=("divergences",))
    again = SplitOutcome(why="rhat: ...", tried=True, names=("rhat",))
    first.gradients, again.gradients = 7000, 11000
    out = _refusal("divergences: ...; after adapt_delta 0.8 -> 0.95: rhat: ...", again, first)
    assert out.gradients == 18000 and out.names == ("rhat",)
    assert _refusal("rhat", again).gradients == 11000


def test_the_split_s_chains_are_told_in_all_and_why() -> None:
    """One phrase for the stage line and the refused split's note: how many chains ran,
    and why more than were asked for (#76)."""
    from pemc_stan.modes.split import _chains_run

    assert _chains_run(4, 0) == "4 NUTS chains from Stan's usual initial values"
    assert _chains_run(4, 9) == ("22 NUTS chains: 4 from Stan's usual initial values and 2 "
                                 "at each of 9 modes of the search")
