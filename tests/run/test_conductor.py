"""The run's plan (fast: the split, the method's run and the follow-ups are stubbed)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.modes.scouts import ScoutsCheck, SplitDraws, SpreadCheck
from pemc_stan.modes.split import SplitOutcome
from pemc_stan.run import conductor as plan
from pemc_stan.sampling.follow_up import Budget
from pemc_stan.sampling.model import Found


class _Fit:
    later_checks: tuple[Any, ...] = ()

    def gradients(self) -> int:
        return 1000


class _Model:
    def search_modes(self, seed: Any) -> Found:
        return Found()

    def wants_split(self) -> bool:
        return True

    def sample(self, **kwargs: Any) -> _Fit:
        return _Fit()


def _plan(monkeypatch: pytest.MonkeyPatch, outcome: SplitOutcome, model: Any = None,
          seen: dict[str, Any] | None = None) -> Any:
    """``run_plan`` with the split's ``outcome`` and the follow-ups stubbed (their keyword
    arguments go to ``seen``)."""
    monkeypatch.setattr(plan, "split_modes", lambda *a, **k: outcome)
    def follow_up(model: Any, fit: Any, **k: Any) -> Any:  # no step; the estimate at the end
        if seen is not None:
            seen.update(k)
        return fit if k.get("estimate") is None else k["estimate"](fit)

    monkeypatch.setattr(plan, "follow_up", follow_up)
    return plan.run_plan(_Model() if model is None else model, chains=4, iter_warmup=10,
                         iter_sampling=10, seed=1, output_dir=None, show_progress=False,
                         budget=Budget())


@pytest.mark.parametrize("refused", [True, False])
def test_a_refused_split_s_chains_are_attached_to_the_tempered_fit(
        monkeypatch, refused: bool) -> None:
    draws = SplitDraws(np.zeros((2, 3, 1)), np.zeros(1), np.eye(1), {}, None, None, None)
    outcome = SplitOutcome(why="rhat: ...", tried=True, names=("rhat",))
    outcome.draws = draws if refused else None
    fit = _plan(monkeypatch, outcome)
    checks = [c for c in fit.later_checks if isinstance(c, ScoutsCheck | SpreadCheck)]
    assert [c.split for c in checks] == ([draws, draws] if refused else [])


@pytest.mark.parametrize(("names", "counted"), [(("rhat",), 5000), (("divergences",), 0),
                                                (("divergences", "rhat"), 0)])
def test_a_refused_split_s_gradients_join_the_first_attempt_unless_it_diverged(
        monkeypatch, names: tuple[str, ...], counted: int) -> None:
    outcome = SplitOutcome(why="...", tried=True, names=names)
    outcome.gradients = 5000
    seen: dict[str, Any] = {}
    _plan(monkeypatch, outcome, seen=seen)
    assert seen["refused_gradients"] == counted


def test_the_tempered_run_after_a_refused_split_starts_from_its_chains_base(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    z = rng.normal(0.0, 3.0, size=(4, 500, 1))  # the chains went wide
    outcome = SplitOutcome(why="chains_agree: ...", tried=True, names=("chains_agree",))
    outcome.draws = SplitDraws(z, np.zeros(1), np.eye(1), {}, None, None, None)
    pilot = BaseDensity(np.zeros(1), 0.04 * np.eye(1), "diag", {"method": "pathfinder"})
    seen: dict[str, Any] = {}

    class Model(_Model):
        def search_modes(self, seed: Any) -> Found:
            return Found(base=pilot)

        def sample(self, **kwargs: Any) -> _Fit:
            seen.update(kwargs)
            return _Fit()

    _plan(monkeypatch, outcome, Model())
    base = seen["found"].base
    assert base.cov[0, 0] == pytest.approx(np.median(np.var(z, axis=1)), rel=1e-6)
    assert base.info["method"] == "pathfinder" and "widened" in base.info
    assert seen["found"].widened


def test_chains_that_cannot_widen_the_base_leave_the_search_s(caplog) -> None:
    pilot = BaseDensity(np.zeros(2), np.eye(2))
    found = Found(base=pilot)
    refused = SplitDraws(np.ones((2, 5, 3)), np.zeros(3), np.eye(3), {}, None, None, None)
    assert plan._widened(found, refused) is found
    assert "could not widen the base" in caplog.text


@pytest.mark.parametrize("split", [True, False])
def test_only_a_tempered_run_is_checked_against_importance_moments(monkeypatch,
                                                                   split: bool) -> None:
    from pemc_stan.modes.wide import WideMoments, WideMomentsCheck

    moments = WideMoments(("x",), np.zeros(1), np.ones(1), np.ones(1), np.ones(1), 0.3, 10)
    monkeypatch.setattr(plan, "_wide_checks",
                        lambda model, found, seed, fit, allowance=0: (
                            WideMomentsCheck(moments),))
    outcome = SplitOutcome(why="rhat: ...", tried=True, names=("rhat",))
    outcome.fit = _Fit() if split else None
    fit = _plan(monkeypatch, outcome)
    checks = [c for c in fit.later_checks if isinstance(c, WideMomentsCheck)]
    assert [c.moments for c in checks] == ([] if split else [moments])


@pytest.mark.parametrize("own", [True, False])
def test_the_wide_draws_use_the_method_s_own_density_before_a_density_program(
        monkeypatch, own: bool) -> None:
    """CT's program computes ``log gamma``: no density program is built for its checks."""
    from types import SimpleNamespace

    mine, built, seen = object(), [], {}

    class _Evaluator:
        def __init__(self, *args: Any) -> None:
            built.append(self)

    class _Owner:
        program = SimpleNamespace(name="m")
        data: dict[str, Any] = {}
        result = SimpleNamespace(coordinates=object())

        def own_density(self, fit: Any) -> Any:
            return mine if own else None

    monkeypatch.setattr(plan, "DensityEvaluator", _Evaluator)
    monkeypatch.setattr(plan, "wide_draws",
                        lambda coords, base, evaluator, *a, **k: seen.update(ev=evaluator))
    found = Found(search=SimpleNamespace(base=object(), centres=None, covariances=None))
    fit = SimpleNamespace(gradients=lambda: 50_000, particle_coordinates=lambda: None)
    plan._wide_draws(_Owner(), found, 1, fit)  # type: ignore[arg-type]
    assert (seen["ev"] is mine) == own and len(built) == (0 if own else 1)
    assert own or seen["ev"] is built[0]


def test_importance_draws_that_cannot_be_weighed_are_named_in_the_verdict(monkeypatch) -> None:
    """A density the wide draws or the search's draws cannot be weighed by (an infinite
    value inside the support) gives the run a reason naming the check not made, never a
    verdict without it."""
    from types import SimpleNamespace

    from pemc_stan.modes.wide import UncomputedCheck, WideDrawsFailed

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise WideDrawsFailed("the density is +inf at 2 of 10000 points inside its support")

    owner = SimpleNamespace(program=SimpleNamespace(name="m"), data={},
                            result=SimpleNamespace(coordinates=object()),
                            own_density=lambda fit: object())
    monkeypatch.setattr(plan, "wide_draws", failing)
    monkeypatch.setattr(plan, "search_draws", failing)
    found = Found(search=SimpleNamespace(base=object(), centres=np.zeros((1, 2)),
                                         covariances=None))
    fit = SimpleNamespace(gradients=lambda: 50_000, particle_coordinates=lambda: None)
    checks = (*plan._wide_checks(owner, found, 1, fit),  # type: ignore[arg-type]
              *plan._search_check(owner, found, 1, fit))  # type: ignore[arg-type]
    assert all(isinstance(c, UncomputedCheck) for c in checks)
    named = dict(c(fit) for c in checks)
    assert set(named) == {"wide_checks", "search_mass"}
    assert all("could not be computed" in r.message and "+inf at 2" in r.message
               for r in named.values() if r is not None)


# --------------------------------------------------------------- the cells, through the plan

class _Particles:
    """A tempered run's particles in base coordinates, their target weights, its cost."""

    def __init__(self, z: np.ndarray, log_w: np.ndarray, gradients: int) -> None:
        self.z, self.log_w, self.cost = z, log_w, gradients

    def particle_coordinates(self) -> np.ndarray:
        return self.z

    def target_weights(self) -> np.ndarray:
        return np.exp(self.log_w)

    def gradients(self) -> int:
        return self.cost


def _owner(density: Any) -> Any:
    from types import SimpleNamespace

    from modes.test_cells import coords

    return SimpleNamespace(result=SimpleNamespace(coordinates=coords()), data={},
                           program=SimpleNamespace(marginalised=(), name="m"),
                           own_density=lambda fit: density)


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_the_plan_s_cells_are_right_or_refused_where_only_the_covering_part_reaches_a_mode(
        seed: int) -> None:
    """Five modes; the search found them all but kept no covariances, and the run never
    came near the one at (0, -6): only the covering part reaches it.  The cells the plan
    reports are then right within four standard errors, or refused by their Pareto k; without
    the covering part they would be 40 standard errors low and pass."""
    from types import SimpleNamespace

    from modes.test_cells import LOG_C, MEANS, METRIC, Mixture, run_particles

    z, log_w = run_particles(np.random.default_rng(seed), [0, 1, 2, 3])
    found = Found(search=SimpleNamespace(base=METRIC, centres=MEANS, covariances=None))
    draws, note = plan._cells(_owner(Mixture()), found, seed,
                              _Particles(z, log_w, 200_000))  # type: ignore[arg-type]
    if draws is None:
        assert "Pareto k" in note
    else:
        log_z, se = draws.log_z()
        assert abs(log_z - LOG_C) < 4 * se < 0.1


def test_the_plan_gates_the_cells_by_each_cell_s_pareto_k_with_a_covering_part(
        monkeypatch) -> None:
    """One heavy cell among even ones: the pooled k passes, the cell's does not, and the plan
    refuses the cells by the cell's; every cell's proposal is given the covering part."""
    from types import SimpleNamespace

    from modes.test_cells import METRIC

    from pemc_stan.modes.cells import CellDraws

    rng = np.random.default_rng(2)
    even = rng.normal(0.0, 0.1, 20_000)
    heavy = np.log(rng.pareto(0.5, 400) + 1.0) - 16.0
    log_u = np.concatenate([even, heavy])
    made = CellDraws(log_u, np.repeat([0, 1], [even.size, heavy.size]),
                     {"x": np.zeros(log_u.size)}, 2)
    assert made.pooled_k() < 0.7 < made.pareto_k()
    seen: dict[str, Any] = {}

    def cell_draws(*args: Any, **kwargs: Any) -> CellDraws:
        seen.update(kwargs)
        return made

    monkeypatch.setattr(plan, "cell_draws", cell_draws)
    found = Found(search=SimpleNamespace(base=METRIC, centres=np.zeros((2, 2)),
                                         covariances=None))
    fit = _Particles(np.zeros((1, 10, 2)), np.zeros((1, 10)), 50_000)
    draws, note = plan._cells(_owner(object()), found, 1, fit)  # type: ignore[arg-type]
    assert draws is None and f"{made.pareto_k():.2f}" in note
    cover = seen.get("cover")
    assert cover is not None and cover.df is not None and np.allclose(cover.mean, METRIC.mean)


class _Touching:
    """Unit Gaussians at (0, 0), (8, 0) and (2.5, 2) on R^2 (shares 0.4, 0.3, 0.3),
    ``gamma`` = e times their mixture: the search found the first two."""

    means = np.array([[0.0, 0.0], [8.0, 0.0], [2.5, 2.0]])
    shares = np.array([0.4, 0.3, 0.3])

    def log_density(self, draws: dict[str, np.ndarray]) -> np.ndarray:
        from scipy import stats
        from scipy.special import logsumexp

        x = np.asarray(draws["x"])
        return 1.0 + logsumexp([np.log(w) + stats.multivariate_normal(m, np.eye(2)).logpdf(x)
                                for w, m in zip(self.shares, self.means, strict=True)],
                               axis=0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_plan_cuts_an_uneven_cell_again_where_it_weighs_heaviest(monkeypatch,
                                                                     seed: int) -> None:
    """The search missed the mode at (2.5, 2) beside a found one, and the run held all
    three: the cells of the two found modes are uneven (a Pareto k near 3, its draws at
    the missed mode weighing far more than the rest, bounded).  The plan cuts them again
    where the uneven cell weighs heaviest, and its three cells are right (log Z within 4
    standard errors of 1) and even.  Without the second cut the cells are refused."""
    from types import SimpleNamespace

    from pemc_stan.core.base_density import BaseDensity
    from pemc_stan.modes.cells import CellDraws

    target = _Touching()
    rng = np.random.default_rng(seed)
    z = np.vstack([rng.normal(m, 1.0, (int(600 * w), 2))
                   for w, m in zip(target.shares, target.means, strict=True)])
    metric = BaseDensity(np.array([4.0, 0.0]), np.diag([16.0, 4.0]), "dense")
    found = Found(search=SimpleNamespace(base=metric, centres=target.means[:2],
                                         covariances=np.array([np.eye(2)] * 2)))
    fit = _Particles(z, np.zeros(len(z)), 50_000)
    draws, note = plan._cells(_owner(target), found, seed, fit)  # type: ignore[arg-type]
    assert draws is not None and draws.cells == 3, note
    log_z, se = draws.log_z()
    assert abs(log_z - 1.0) < 4 * se < 0.05
    monkeypatch.setattr(CellDraws, "heavy_modes",
                        lambda self, cells: (np.empty((0, 2)), np.empty((0, 2, 2))))
    draws, note = plan._cells(_owner(target), found, seed, fit)  # type: ignore[arg-type]
    assert draws is None and "Pareto k" in note


def test_the_plan_judges_a_small_cell_at_its_sample_size(monkeypatch) -> None:
    """A cell of 150 draws whose weights have a k of about 0.6, below 0.7 but above PSIS's
    bound at 150 draws (0.54): the plan refuses the cells and says which and why."""
    from types import SimpleNamespace

    from modes.test_cells import METRIC

    from pemc_stan.modes.cells import CellDraws

    even = np.random.default_rng(3).normal(0.0, 0.1, 20_000)
    small = -0.65 * np.log((np.arange(150) + 0.5) / 150)
    log_u = np.concatenate([even, small])
    made = CellDraws(log_u, np.repeat([0, 1], [even.size, small.size]),
                     {"x": np.zeros(log_u.size)}, 2)
    assert made.pareto_k() < 0.7
    monkeypatch.setattr(plan, "cell_draws", lambda *a, **k: made)
    found = Found(search=SimpleNamespace(base=METRIC, centres=np.zeros((2, 2)),
                                         covariances=None))
    fit = _Particles(np.zeros((1, 10, 2)), np.zeros((1, 10)), 50_000)
    draws, note = plan._cells(_owner(object()), found, 1, fit)  # type: ignore[arg-type]
    assert draws is None and "cell 2" in note and "0.54" in note


def test_an_accepted_split_is_the_run_no_second_run_follows(monkeypatch) -> None:
    """A search of one mode: the split's plain NUTS run is the result; the method does not
    run again, and the follow-ups are handed that run."""
    sampled: list[Any] = []
    handed: list[Any] = []

    class Model(_Model):
        def sample(self, **kwargs: Any) -> _Fit:
            sampled.append(kwargs)
            return _Fit()

    split = _Fit()
    outcome = SplitOutcome(split, tried=True)
    monkeypatch.setattr(plan, "split_modes", lambda *a, **k: outcome)
    monkeypatch.setattr(plan, "follow_up", lambda model, fit, **k: handed.append(fit) or fit)
    fit = plan.run_plan(Model(), chains=4, iter_warmup=10, iter_sampling=10, seed=1,
                        output_dir=None, show_progress=False, budget=Budget())
    assert fit is split and handed == [split] and sampled == []
    assert not hasattr(fit, "cell_estimate") or fit.cell_estimate is None
