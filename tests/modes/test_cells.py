"""A tempered run's cells weighed by importance sampling (no compilation: the density is
NumPy's): right where the run's particles or the search reach every mode, and what each
source of a cell's proposal carries."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.coordinates import base_coordinates
from pemc_stan.modes.cells import (  # _others_axes: the wiring of one cell's parts
    CELL_DRAWS_MAX,
    CELL_DRAWS_MIN,
    CELL_TOTAL,
    AxisPart,
    _others_axes,
    cell_count,
    cell_draws,
    cell_parts,
    cover_part,
)
from pemc_stan.stan.parser import parse

MEANS = np.array([[-4.0, 0.0], [0.0, 4.0], [4.0, 0.0], [4.6, 0.6], [0.0, -6.0]])
SD = 0.3
WEIGHTS = np.array([0.3, 0.25, 0.15, 0.1, 0.2])
LOG_C = 2.5  # gamma = exp(LOG_C) x the mixture


class Mixture:
    """Five Gaussian modes on R^2: two touch (2.8 sds apart), one lies far below."""

    def log_density(self, draws: dict[str, np.ndarray]) -> np.ndarray:
        x = np.asarray(draws["x"])
        parts = [np.log(w) + stats.multivariate_normal(m, SD**2).logpdf(x)
                 for w, m in zip(WEIGHTS, MEANS, strict=True)]
        return LOG_C + np.logaddexp.reduce(parts, axis=0)


def coords() -> Any:
    tree = parse("parameters { vector[2] x; } model { }")
    return base_coordinates([(s.type, d.name) for s in tree.parameters.stmts
                             for d in s.declarators])


METRIC = BaseDensity(np.zeros(2), np.diag([9.0, 9.0]), "dense")


def run_particles(rng: np.random.Generator, modes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Particles as a tempered run leaves them: a few hundred near each of ``modes`` at the
    target (weight 1), and low-temperature ones (weight 0) above the origin, where the
    chains crossed between the upper modes."""
    near = np.concatenate([rng.normal(MEANS[k], SD, (200, 2)) for k in modes])
    wide = rng.normal([0.0, 2.0], 1.0, (400, 2))
    return np.vstack([near, wide]), np.concatenate([np.zeros(len(near)),
                                                    np.full(len(wide), -np.inf)])


def exact_mean() -> np.ndarray:
    return np.asarray(WEIGHTS @ MEANS)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cells_are_right_when_the_search_missed_a_mode_the_run_held(seed: int) -> None:
    """The search found four modes (not the one at (4.6, 0.6) beside (4, 0)); the run
    held all five.  log Z and the means lie within four standard errors of exact."""
    rng = np.random.default_rng(seed)
    z, lw = run_particles(rng, [0, 1, 2, 3, 4])
    found = MEANS[[0, 1, 2, 4]]
    covs = np.array([SD**2 * np.eye(2)] * 4)
    draws = cell_draws(coords(), Mixture(), {}, METRIC, found, covs, z, lw, seed)
    assert draws is not None and draws.cells == 4
    log_z, se = draws.log_z()
    assert abs(log_z - LOG_C) < 4 * se < 0.1
    for d, column in enumerate(("x[1]", "x[2]")):
        est = draws.mean(column)
        assert abs(float(est.mean) - exact_mean()[d]) < 4 * float(est.std_error)
    assert draws.pareto_k() < 0.7


def test_the_search_s_part_covers_a_mode_no_chain_held_at_the_target() -> None:
    """The run held four modes at the target and never came near the one at (0, -6),
    which the search found.  The search's part reaches it, on three seeds.  Without the
    search's covariances that mode's mass is missed, many standard errors off, and the
    weights do not show it (no part reached the mode)."""
    covs = np.array([SD**2 * np.eye(2)] * 5)
    for seed in (4, 5, 6):
        rng = np.random.default_rng(seed)
        z, lw = run_particles(rng, [0, 1, 2, 3])
        draws = cell_draws(coords(), Mixture(), {}, METRIC, MEANS, covs, z, lw, seed)
        assert draws is not None and draws.cells == 5
        log_z, se = draws.log_z()
        assert abs(log_z - LOG_C) < 4 * se < 0.1
        est = draws.mean("x[2]")
        assert abs(float(est.mean) - exact_mean()[1]) < 4 * float(est.std_error)
        blind = cell_draws(coords(), Mixture(), {}, METRIC, MEANS, None, z, lw, seed)
        assert blind is not None
        log_z, se = blind.log_z()
        assert log_z - LOG_C < -10 * se
        assert blind.pareto_k() < 0.7
        # its cell had no part at all; a covering part gives every cell a proposal
        assert 4 not in blind.strata
        wide = BaseDensity(np.zeros(2), 16.0 * np.eye(2), "dense", df=3.0)
        covered = cell_draws(coords(), Mixture(), {}, METRIC, MEANS, None, z, lw, seed,
                             cover=wide)
        assert covered is not None and set(range(5)) <= set(np.unique(covered.strata))


def test_a_cell_s_parts_need_draws_enough_for_a_covariance() -> None:
    rng = np.random.default_rng(5)
    z = rng.normal(size=(10, 2))
    both = cell_parts(z, np.zeros(10), np.zeros(2), np.eye(2))
    assert len(both) == 5  # target, spread, kernels, search, the search's axes
    one_heavy = np.full(10, -np.inf)
    one_heavy[0] = 0.0  # one effective draw: no target part
    assert len(cell_parts(z, one_heavy, np.zeros(2), np.eye(2))) == 4
    assert len(cell_parts(z[:3], np.zeros(3), None, None)) == 0  # 3 draws: no covariance in 2-D
    assert len(cell_parts(z, np.zeros(10), np.zeros(2), -np.eye(2))) == 3  # not positive


def test_particles_that_do_not_match_the_centres_are_an_error() -> None:
    with pytest.raises(ValueError, match="do not agree"):
        cell_draws(coords(), Mixture(), {}, METRIC, MEANS, None, np.zeros((5, 3)),
                   np.zeros(5), 1)


def test_the_cells_report_expectations_log_z_and_draws_as_a_fit_does() -> None:
    """What a fit reports from the cells (``ExtendedFit.cell_estimate``): means of columns and of
    functions, ``log Z`` with its diagnostics, and resampled draws, each against the
    exact mixture; the draws come shuffled (every cut into chains holds every mode)."""
    rng = np.random.default_rng(7)
    z, lw = run_particles(rng, [0, 1, 2, 3, 4])
    covs = np.array([SD**2 * np.eye(2)] * 5)
    draws = cell_draws(coords(), Mixture(), {}, METRIC, MEANS, covs, z, lw, 7,
                       cover=cover_part(METRIC))
    assert draws is not None
    mean = draws.expectation("x[1]")
    assert abs(mean.mean - exact_mean()[0]) < 4 * mean.mcse < 0.2 and mean.ess > 1000
    second = draws.expectation(lambda v: v["x[2]"] ** 2)
    exact_second = float(WEIGHTS @ (MEANS[:, 1] ** 2 + SD**2))
    assert abs(second.mean - exact_second) < 4 * second.mcse
    log_z = draws.evidence()
    assert log_z.method == "cells" and abs(log_z.log_z - LOG_C) < 4 * log_z.std_error
    assert log_z.diagnostics == draws.describe()
    assert draws.describe()["cells"] == 5 and draws.describe()["draws"] == draws.log_u.size
    drawn = draws.resampled(8000, seed=1)
    low = np.asarray(drawn["x[2]"]) < -3  # the mode at (0, -6), a fifth of the mass
    for quarter in np.split(low, 4):
        assert abs(quarter.mean() - WEIGHTS[4]) < 4 * np.sqrt(0.2 * 0.8 / 2000)
    with pytest.raises(KeyError):
        draws.expectation("y")
    with pytest.raises(ValueError, match="one value per cell draw"):
        draws.expectation(lambda v: v["x[1]"][:10])


def test_the_cells_draw_the_run_s_gradients_at_most_within_bounds() -> None:
    assert cell_count(10, 20) == CELL_DRAWS_MIN  # a short run: the least a cell
    assert cell_count(40_000, 20) == 2000  # the run's gradients over the cells
    assert cell_count(10**9, 20) == CELL_TOTAL // 20  # no more than the total
    assert cell_count(10**9, 2) == CELL_DRAWS_MAX
    assert cell_count(50_000, 0) == CELL_DRAWS_MAX  # no cells: no division by zero


def test_a_kernel_part_is_the_equal_mixture_of_its_student_t_kernels() -> None:
    """Its density is the mixture's (each kernel a ``BaseDensity`` Student-t), computed in
    blocks, and its draws have the mixture's mean and covariance."""
    from scipy.special import logsumexp

    from pemc_stan.modes.cells import KERNEL_BLOCK, KernelPart

    rng = np.random.default_rng(3)
    centres = rng.normal(size=(7, 2)) * 3
    scale = np.array([[0.5, 0.2], [0.2, 0.3]])
    part = KernelPart(centres, np.linalg.cholesky(scale), 5.0)
    z = rng.normal(size=(KERNEL_BLOCK + 11, 2)) * 4
    kernels = [BaseDensity(c, scale, "dense", df=5.0).log_density_z(z) for c in centres]
    expected = logsumexp(kernels, axis=0) - np.log(len(centres))
    assert np.allclose(part.log_density_z(z), expected, atol=1e-9)
    draws = part.sample_z(200_000, rng)
    assert np.allclose(draws.mean(axis=0), centres.mean(axis=0), atol=0.03)
    cov = np.cov(centres, rowvar=False, bias=True) + scale * 5.0 / 3.0
    assert np.allclose(np.cov(draws, rowvar=False), cov, atol=0.15)


def test_each_cell_is_judged_by_its_own_pareto_k() -> None:
    """Pooled, one cell's heavy weights vanish among the others' (the pooled k is low);
    judged cell by cell they do not.  A cell with too few draws inside is not judged."""
    from pemc_stan.modes.cells import CELL_K_DRAWS, CellDraws

    rng = np.random.default_rng(2)
    even = rng.normal(0.0, 0.1, 20_000)  # a well-covered cell
    heavy = np.log(rng.pareto(0.5, 400) + 1.0) - 16.0  # k about 2, a tiny share
    lone = np.array([0.0] * (CELL_K_DRAWS - 1))
    log_u = np.concatenate([even, heavy, lone])
    strata = np.repeat([0, 1, 2], [even.size, heavy.size, lone.size])
    draws = CellDraws(log_u, strata, {"x": np.zeros(log_u.size)}, 3)
    k = draws.cell_k()
    assert k[0] < 0.3 and k[1] > 1.0 and np.isnan(k[2])
    assert draws.pooled_k() < 0.7 < draws.pareto_k() == k[1]


class TwoInOne:
    """N((0, 0), 0.3^2) and N((3, 0), 0.3^2), equal weights, and a third mode far left."""

    def log_density(self, draws: dict[str, np.ndarray]) -> np.ndarray:
        x = np.asarray(draws["x"])
        parts = [np.log(1 / 3) + stats.multivariate_normal(m, SD**2).logpdf(x)
                 for m in ([0.0, 0.0], [3.0, 0.0], [-10.0, 0.0])]
        return np.logaddexp.reduce(parts, axis=0)


def test_a_cell_with_uneven_weights_gets_more_draws(monkeypatch) -> None:
    """The search found (0, 0) and (-10, 0); the run held (0, 0) alone.  The mode at
    (3, 0) lies in the cell of (0, 0), where only the covering part reaches it: that
    cell's weights are uneven, so it is drawn :data:`CELL_MORE` times as often as the
    other, and its k is judged on those draws (the second cut left out here)."""
    from pemc_stan.modes.cells import CELL_MORE, CellDraws

    monkeypatch.setattr(CellDraws, "heavy_modes",
                        lambda self, cells: (np.empty((0, 2)), np.empty((0, 2, 2))))
    rng = np.random.default_rng(8)
    z = rng.normal([0.0, 0.0], SD, (400, 2))
    found = np.array([[0.0, 0.0], [-10.0, 0.0]])
    covs = np.array([SD**2 * np.eye(2)] * 2)
    draws = cell_draws(coords(), TwoInOne(), {}, METRIC, found, covs, z, np.zeros(400), 8,
                       n=2000, cover=cover_part(METRIC))
    assert draws is not None
    assert list(np.bincount(draws.strata)) == [CELL_MORE * 2000, 2000]
    assert draws.cell_k()[0] > 0.7 >= draws.cell_k()[1]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_an_uneven_cell_is_cut_again_where_it_weighs_heaviest(monkeypatch,
                                                              seed: int) -> None:
    """The same cells: the draws that the covering part put at (3, 0) weigh most, and a
    cell centred on them, drawn afresh with the cell of (0, 0), makes every cell even and
    log Z (0) right within 4 standard errors.  Without the second cut the cells stay
    uneven (the run's own estimate would stand)."""
    from pemc_stan.modes.cells import CellDraws

    z = np.random.default_rng(8).normal([0.0, 0.0], SD, (400, 2))
    found = np.array([[0.0, 0.0], [-10.0, 0.0]])
    covs = np.array([SD**2 * np.eye(2)] * 2)

    def drawn() -> CellDraws:
        out = cell_draws(coords(), TwoInOne(), {}, METRIC, found, covs, z, np.zeros(400),
                         seed, n=2000, cover=cover_part(METRIC))
        assert out is not None
        return out

    draws = drawn()
    assert draws.cells == 3 and not draws.uneven_cells()
    log_z, se = draws.log_z()
    assert abs(log_z) < 4 * se < 0.15
    monkeypatch.setattr(CellDraws, "heavy_modes",
                        lambda self, cells: (np.empty((0, 2)), np.empty((0, 2, 2))))
    assert drawn().uneven_cells() == [0]


def test_a_cell_s_pareto_k_is_judged_at_its_sample_size() -> None:
    """PSIS's bound min(1 - 1/log10 S, 0.7): weights with a Pareto tail of k 0.65 (their
    exact quantiles, no sampling noise) pass in a cell of 20,000 draws (bound 0.7) and fail
    in one of 150 (bound 0.54), where a 0.7 alone would have let them through."""
    from pemc_stan.modes.cells import CellDraws

    def cell(n: int) -> CellDraws:
        lu = -0.65 * np.log((np.arange(n) + 0.5) / n)
        return CellDraws(lu, np.zeros(n, dtype=np.intp), {"x": np.zeros(n)}, 1)

    large, small = cell(20_000), cell(150)
    assert large.cell_k_bound()[0] == pytest.approx(0.7)
    assert small.cell_k_bound()[0] == pytest.approx(1 - 1 / np.log10(150))
    assert 0.6 < large.cell_k()[0] < 0.7 and 0.56 < small.cell_k()[0] < 0.7
    assert large.uneven_cells() == [] and small.uneven_cells() == [0]


def test_the_furthest_above_their_bounds_get_more_draws_first() -> None:
    """Twelve uneven cells of 3,000 draws: 100,000 more draws pay for eleven at three times
    3,000 more each; the cell nearest its bound goes without, none is left out for want of
    budget for all, and a cell without a proposal gets none."""
    from pemc_stan.modes.cells import CellDraws, more_draws_for

    n = 3000
    shapes = [0.8 + 0.02 * j for j in range(12)] + [0.3]  # 12 uneven, one even
    q = (np.arange(n) + 0.5) / n
    log_u = np.concatenate([-k * np.log(q) for k in shapes])
    draws = CellDraws(log_u, np.repeat(np.arange(13), n), {"x": np.zeros(log_u.size)}, 13)
    assert draws.uneven_cells() == list(range(12))
    chosen = more_draws_for(draws, set(range(13)), n)
    assert len(chosen) == 11 and 0 not in chosen and chosen[0] == 11
    assert more_draws_for(draws, {0, 12}, n) == [0]


class SpikeInSlab:
    """Half the mass in a spike (sd 0.05) inside a slab N(0, I), 10-D, ``gamma`` normalised:
    log Z = 0, the variance of each coordinate (0.05^2 + 1) / 2."""

    def log_density(self, draws: dict[str, np.ndarray]) -> np.ndarray:
        x = np.asarray(draws["x"])
        spike = np.sum(stats.norm.logpdf(x, 0.0, 0.05), axis=1)
        return np.logaddexp(np.log(0.5) + spike, np.log(0.5) + np.sum(stats.norm.logpdf(x), axis=1))


def test_the_slab_s_particles_place_parts_when_the_base_sits_on_the_spike() -> None:
    """The search found the spike alone, so its base is a hundredth of the slab's width;
    the run's particles at the target are the slab's (tempered chains that never entered
    the spike), hundreds of the base's sds away.  They still place the cell's parts: its
    weights are even and the estimate right.  Taken only within 20 of the base's sds, no
    part reached the slab beyond the covering part's tails (k far above 0.7)."""
    dim = 10
    tree = parse(f"parameters {{ vector[{dim}] x; }} model {{ }}")
    c = base_coordinates([(s.type, d.name) for s in tree.parameters.stmts
                          for d in s.declarators])
    base = BaseDensity(np.zeros(dim), 0.05**2 * np.eye(dim), "dense")
    rng = np.random.default_rng(3)
    z = np.vstack([rng.standard_normal((2000, dim)), 0.05 * rng.standard_normal((500, dim))])
    lw = np.concatenate([np.zeros(2000), np.full(500, -np.inf)])  # the spike's: low beta
    draws = cell_draws(c, SpikeInSlab(), {}, base, np.zeros((1, dim)),
                       0.05**2 * np.eye(dim)[None], z, lw, 3, 8000, cover=cover_part(base))
    assert draws is not None and draws.uneven_cells() == []
    log_z, se = draws.log_z()
    assert abs(log_z) < 4 * se < 0.1
    est = draws.mean(draws.values["x[1]"] ** 2)
    assert abs(float(est.mean) - (0.05**2 + 1) / 2) < 4 * float(est.std_error)


class StudentTProduct:
    """A product of ten 1-D Student-t densities of 2 degrees of freedom, times ``e``:
    log Z = 1.  Its tails run out along the axes (one coordinate at distance r falls as
    r^-3), where an elliptical part in 10-D falls as r^-(df + 10)."""

    def log_density(self, draws: dict[str, np.ndarray]) -> np.ndarray:
        return 1.0 + np.sum(stats.t.logpdf(np.asarray(draws["x"]), 2), axis=1)


def test_the_axis_part_reaches_the_arms_of_a_product_of_heavy_tails() -> None:
    """The run's particles are the mode's bulk (as chains near it leave them) weighted to
    the target, the search's covariance the identity.  Without the axis part the elliptical
    parts miss the arms: log Z 5.3 standard errors low with the cell's k at 0.70, under its
    bound, an underestimate the weights do not show."""
    dim = 10
    tree = parse(f"parameters {{ vector[{dim}] x; }} model {{ }}")
    c = base_coordinates([(s.type, d.name) for s in tree.parameters.stmts
                          for d in s.declarators])
    base = BaseDensity(np.zeros(dim), np.eye(dim), "dense")
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2000, dim))
    lw = np.sum(stats.t.logpdf(z, 2) - stats.norm.logpdf(z), axis=1)
    draws = cell_draws(c, StudentTProduct(), {}, base, np.zeros((1, dim)), np.eye(dim)[None],
                       z, lw, 0, 16_000, cover=cover_part(base))
    assert draws is not None and draws.uneven_cells() == []
    log_z, se = draws.log_z()
    assert abs(log_z - 1.0) < 3 * se < 0.05


def test_an_axis_part_is_a_product_of_cut_cauchy_coordinates() -> None:
    part = AxisPart(np.array([1.0, -2.0, 3.0]), np.array([0.5, 2.0, 1.0]), np.full(3, 50.0))
    z = part.sample_z(4000, np.random.default_rng(1))
    u = (z - part.centre) / part.scale
    assert np.all(np.abs(u) <= 50.0) and np.mean(np.abs(u) > 10.0) > 0.03  # Cauchy: 0.05
    inside = stats.cauchy.cdf(50.0) - stats.cauchy.cdf(-50.0)
    exact = np.sum(stats.cauchy.logpdf(z, loc=part.centre, scale=part.scale)
                   - np.log(inside), axis=1)
    np.testing.assert_allclose(part.log_density_z(z), exact, rtol=1e-12)
    q = np.quantile(z, [0.25, 0.75], axis=0)  # each coordinate's quartiles at +- scale
    np.testing.assert_allclose((q[1] - q[0]) / 2, part.scale, rtol=0.1)
    beyond = part.centre + np.array([0.0, 0.0, 51.0])
    assert part.log_density_z(beyond[None])[0] == -np.inf


class HeavyBesideNarrow:
    """A product of ten 1-D Student-t's (2 degrees of freedom) at the origin and a narrow
    Gaussian (sd 0.1) at (8, 1.5, ..., 1.5), mass 1 each: the heavy mode's arm along the
    first axis crosses into the narrow mode's cell from r = 5.3 (the cut between the
    centres), 1.5 from its centre in nine coordinates."""

    narrow = np.r_[8.0, np.full(9, 1.5)]

    def log_density(self, draws: dict[str, np.ndarray]) -> np.ndarray:
        x = np.asarray(draws["x"])
        return np.logaddexp(np.sum(stats.t.logpdf(x, 2), axis=1),
                            np.sum(stats.norm.logpdf(x, self.narrow, 0.1), axis=1))


def test_a_mode_s_axis_part_reaching_into_a_neighbour_s_cell_is_a_part_there() -> None:
    """The heavy mode's axis part puts its draws in the narrow mode's cell (its arm along
    the first axis crosses the cut): that cell's proposal gets it, and the cells' log Z is
    right."""
    dim = 10
    tree = parse(f"parameters {{ vector[{dim}] x; }} model {{ }}")
    c = base_coordinates([(s.type, d.name) for s in tree.parameters.stmts
                          for d in s.declarators])
    base = BaseDensity(np.zeros(dim), np.eye(dim), "dense")
    centres = np.vstack([np.zeros(dim), HeavyBesideNarrow.narrow])
    covs = np.stack([np.eye(dim), 0.01 * np.eye(dim)])
    others = _others_axes(base, centres, covs, 0)
    assert [type(p).__name__ for p in others[1].parts] == ["AxisPart"]
    np.testing.assert_array_equal(others[1].parts[0].centre, np.zeros(dim))
    rng = np.random.default_rng(0)
    z0 = rng.standard_normal((2000, dim))
    lw0 = np.sum(stats.t.logpdf(z0, 2) - stats.norm.logpdf(z0), axis=1)
    z1 = HeavyBesideNarrow.narrow + 0.1 * rng.standard_normal((2000, dim))
    draws = cell_draws(c, HeavyBesideNarrow(), {}, base, centres, covs, np.vstack([z0, z1]),
                       np.r_[lw0, np.zeros(2000)], 0, 8000, cover=cover_part(base))
    assert draws is not None
    log_z, se = draws.log_z()
    assert abs(log_z - np.log(2)) < 4 * se < 0.1


def test_a_cell_s_heavy_mode_is_where_its_weights_are_largest() -> None:
    """A cell whose proposal falls short at (5, 5): its 300 draws there weigh e^3 times
    the rest.  Its heavy mode is their mean and covariance; a cell of even weights has
    its tail spread over the cell; draws kept without coordinates have none."""
    from pemc_stan.modes.cells import CellDraws

    rng = np.random.default_rng(7)
    z = np.vstack([rng.normal(0.0, 1.0, (5000, 2)), rng.normal(5.0, 0.5, (300, 2)),
                   rng.normal(-3.0, 1.0, (2000, 2))])
    log_u = np.concatenate([np.zeros(5000), np.full(300, 3.0), np.zeros(2000)])
    strata = np.repeat([0, 0, 1], [5000, 300, 2000])
    draws = CellDraws(log_u, strata, {"x": np.zeros(log_u.size)}, 2, z)
    means, covs = draws.heavy_modes([0])
    assert means.shape == (1, 2) and covs.shape == (1, 2, 2)
    assert np.allclose(means[0], 5.0, atol=0.1)
    assert np.allclose(covs[0], 0.25 * np.eye(2), atol=0.06)
    means, _ = draws.heavy_modes([1])  # even weights: its tail is drawn from all of it
    assert np.allclose(means[0], -3.0, atol=0.3)
    assert len(CellDraws(log_u, strata, {"x": log_u}, 2).heavy_modes([0])[0]) == 0
