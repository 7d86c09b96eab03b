"""The wide check of a tempered run's moments: importance estimates from around the modes
found (no compilation: the density is NumPy's), and the reason it gives a fit."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm
from scipy.stats import t as student_t

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.coordinates import base_coordinates
from pemc_stan.modes import wide
from pemc_stan.modes.wide import WideMoments, WideMomentsCheck, wide_moments
from pemc_stan.sampling.hooks import WeightedEstimate
from pemc_stan.stan.parser import parse


def _coords(program: str) -> Any:
    tree = parse(program)
    return base_coordinates([(s.type, d.name) for s in tree.parameters.stmts
                             for d in s.declarators])


class Banana:
    """0.5 x a banana (x1 ~ N(-3, 1.5), x2 | x1 ~ N(0.6 ((x1 + 3)^2 - 2.25), 1)) and
    0.5 x Student-t(5) coordinates at (3, 2): the validation case's density."""

    mean = np.array([0.0, 1.0])
    var = np.array([0.5 * (2.25 + 9) + 0.5 * (5 / 3 + 9),
                    0.5 * (1 + 2 * 0.36 * 1.5**4) + 0.5 * (5 / 3 + 4) - 1.0])

    def log_density(self, draws: dict[str, np.ndarray]) -> np.ndarray:
        x = np.asarray(draws["x"])
        lb = norm.logpdf(x[:, 0], -3, 1.5) + norm.logpdf(x[:, 1], 0.6 * ((x[:, 0] + 3) ** 2
                                                                         - 2.25))
        lt = student_t.logpdf(x[:, 0], 5, 3, 1) + student_t.logpdf(x[:, 1], 5, 2, 1)
        return np.logaddexp(np.log(0.5) + lb, np.log(0.5) + lt)


def test_importance_moments_of_a_banana_beside_a_heavy_tail_are_right() -> None:
    """From a covering Gaussian of the two modes, the estimates are within four of their
    own standard errors of the exact means and variances, on three seeds (the arms and
    the tails that tempered chains miss are reached without a chain)."""
    coords = _coords("parameters { vector[2] x; } model { }")
    base = BaseDensity(np.array([0.25, 0.47]), np.diag([3.17**2, 1.95**2]), "dense")
    for seed in (1, 2, 3):
        mo = wide_moments(coords, base, Banana(), {}, seed)  # type: ignore[arg-type]
        assert mo is not None and mo.columns == ("x[1]", "x[2]")
        assert mo.pareto_k <= wide.MOMENT_K_MAX and mo.draws == wide.MOMENT_DRAWS
        assert np.all(np.abs(mo.mean - Banana.mean) <= 4 * mo.mean_se)
        assert np.all(np.abs(mo.var - Banana.var) <= 4 * mo.var_se)
        assert np.all(mo.var_se < 0.05 * Banana.var)  # precise enough to check a run


class Narrow:
    """A Gaussian 50 times narrower than the base in each of 20 dimensions."""

    def log_density(self, draws: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray(norm.logpdf(np.asarray(draws["x"]), 0, 0.02).sum(axis=1))


def test_no_check_where_the_pilot_draws_hold_too_few_effective_draws(monkeypatch) -> None:
    coords = _coords("parameters { vector[20] x; } model { }")
    base = BaseDensity(np.zeros(20), np.eye(20), "dense")
    calls: list[int] = []
    real = wide.wide_log_weights

    def counted(*args: Any, n: int, **kwargs: Any) -> Any:
        calls.append(n)
        return real(*args, n=n, **kwargs)

    monkeypatch.setattr(wide, "wide_log_weights", counted)
    assert wide_moments(coords, base, Narrow(), {}, 1) is None  # type: ignore[arg-type]
    assert calls == [wide.MOMENT_PILOT]  # the rest is never drawn


class Fit:
    """A fit whose estimates of a column's mean and of its squared deviations are given."""

    def __init__(self, mean: float, mean_se: float, var: float, var_se: float) -> None:
        self.values = (mean, mean_se, var, var_se)

    def expectation(self, f: Any) -> WeightedEstimate:
        m, m_se, v, v_se = self.values
        if isinstance(f, str):
            if f != "x[1]":
                raise KeyError(f)
            return WeightedEstimate(mean=m, mcse=m_se, ess=400.0)
        return WeightedEstimate(mean=v, mcse=v_se, ess=400.0)


MOMENTS = WideMoments(("x[1]",), np.array([0.0]), np.array([0.03]), np.array([10.96]),
                      np.array([0.1]), 0.5, 100_000)


@pytest.mark.parametrize(("fit", "flagged"), [
    (Fit(0.1, 0.2, 10.5, 0.2), False),   # 2.1 standard errors: a right run
    (Fit(0.1, 0.2, 10.21, 0.14), True),  # the banana's arms missed: 4.4 standard errors
    (Fit(1.2, 0.2, 10.9, 0.2), True),    # a mean 5.9 standard errors off
])
def test_a_run_whose_draws_miss_part_of_a_mode_is_flagged_by_name(fit: Fit, flagged: bool
                                                                  ) -> None:
    name, reason = WideMomentsCheck(MOMENTS)(fit)
    assert name == "wide_moments"
    assert (reason is not None) is flagged
    if reason is not None:
        assert reason.name == "wide_moments" and "x[1]" in reason.message
        assert "importance sampling" in reason.message and reason.remedy


def test_a_quantity_the_importance_draws_cannot_estimate_is_not_compared() -> None:
    blind = WideMoments(("x[1]", "y"), np.array([np.nan, 0.0]), np.array([np.nan, 0.1]),
                        np.array([np.nan, 1.0]), np.array([np.nan, 0.1]), 0.4, 100_000)
    assert WideMomentsCheck(blind)(Fit(5.0, 0.1, 50.0, 0.1))[1] is None  # y: not in the fit


def test_the_moment_check_pickles_with_the_fit_it_judges() -> None:
    check = pickle.loads(pickle.dumps(WideMomentsCheck(MOMENTS)))
    assert check(Fit(0.1, 0.2, 10.21, 0.14))[1] is not None


# ----------------------------------------------------------- the spread a run must hold

def _slab_draws(n: int, seed: int) -> wide.WideDraws:
    """Draws of q = N(0, 2^2) weighing a target 0.8 N(0, 0.2^2) + 0.2 N(0, 5^2) (Z = 1):
    a peak over a slab that q's tails reach only rarely (its weights have no variance)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 2.0, n)
    log_target = np.logaddexp(np.log(0.8) + norm.logpdf(x, 0, 0.2),
                              np.log(0.2) + norm.logpdf(x, 0, 5.0))
    return wide.WideDraws(log_target - norm.logpdf(x, 0, 2.0), {"x[1]": x})


SLAB_SECOND = 0.8 * 0.2**2 + 0.2 * 5.0**2  # E[x^2] = 5.032


class RunFit(Fit):
    """A fit with a log normaliser and given estimates of a column's moments."""

    def __init__(self, log_z: float, log_z_se: float, *values: float) -> None:
        super().__init__(*values)
        self.evidence = (log_z, log_z_se)

    def log_normaliser(self) -> Any:
        from pemc_stan.estimators.log_z import EvidenceEstimate

        return EvidenceEstimate(*self.evidence, "ct")


def test_the_truncated_importance_spread_errs_low_never_high() -> None:
    """Over 200 seeds, the estimate of Z E[x^2] (exact 5.032) from 10,000 draws whose
    weights have infinite variance lies below the truth on most seeds, and more than four
    of its standard errors above it on none: a run that holds the spread is not flagged."""
    z = []
    for seed in range(200):
        ex = wide.excess_of(_slab_draws(10_000, seed), {"x[1]": 0.0})
        est = float(np.exp(ex.log_estimate[0]))
        z.append((est - SLAB_SECOND) / (est * float(ex.rel_se[0])))
    z_arr = np.array(z)
    assert np.mean(z_arr < 0) > 0.6 and np.max(z_arr) < 4.0


@pytest.mark.parametrize(("var", "flagged"), [(SLAB_SECOND, False), (0.04, True)])
def test_a_run_that_never_left_the_peak_is_flagged_and_a_right_one_is_not(
        var: float, flagged: bool) -> None:
    """The peak alone (var 0.04, Z 0.8: the slab missed, both error bars small) against a
    run that holds the slab; the truncated estimate decides, one-sidedly."""
    ex = wide.excess_of(_slab_draws(100_000, 7), {"x[1]": 0.0})
    log_z = 0.0 if not flagged else float(np.log(0.8))
    fit = RunFit(log_z, 0.02, 0.0, 0.01, var, 0.05 * var)
    name, reason = wide.WideExcessCheck(ex)(fit)
    assert name == "wide_excess" and (reason is not None) is flagged
    if reason is not None:
        assert "x[1]" in reason.message and "split_modes='auto'" in reason.remedy


def test_no_excess_check_without_the_run_s_evidence_and_it_pickles() -> None:
    ex = wide.excess_of(_slab_draws(10_000, 3), {"x[1]": 0.0})
    assert wide.WideExcessCheck(ex)(Fit(0.0, 0.01, 0.04, 0.002))[1] is None  # no log Z
    check = pickle.loads(pickle.dumps(wide.WideExcessCheck(ex)))
    assert check(RunFit(float(np.log(0.8)), 0.02, 0.0, 0.01, 0.04, 0.002))[1] is not None


class Needle:
    """Half the mass in a needle (sd 0.001) at the origin, half in N(0, I), 2-D: the
    variance of each coordinate is 0.5 (to 1e-6)."""

    def log_density(self, draws: dict[str, np.ndarray]) -> np.ndarray:
        x = np.asarray(draws["x"])
        needle = np.sum(norm.logpdf(x, 0.0, 0.001), axis=1)
        return np.logaddexp(np.log(0.5) + needle, np.log(0.5) + np.sum(norm.logpdf(x), axis=1))


@pytest.mark.parametrize("with_modes", [True, False])
def test_a_needle_the_search_found_is_weighed_by_the_wide_draws(with_modes: bool) -> None:
    # the covering Gaussian alone never draws the needle (its share of a draw: ~1e-6),
    # and its weights look healthy while the variance is twice the truth; with the
    # search's Gaussians in the proposal the estimate is right
    coords = _coords("parameters { vector[2] x; } model { }")
    base = BaseDensity(np.zeros(2), np.eye(2), "dense")
    modes = [(np.log(0.5), np.zeros(2), 1e-6 * np.eye(2)), (np.log(0.5), np.zeros(2), np.eye(2))]
    draws = wide.wide_draws(coords, base, Needle(), {}, 1,  # type: ignore[arg-type]
                            modes=modes if with_modes else None)
    assert draws is not None
    mo = wide.moments_of(draws)
    assert mo is not None
    right = np.all(np.abs(mo.var - 0.5) <= 4 * mo.var_se)
    assert right == with_modes, (mo.var, mo.var_se)


def _needle_search() -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(centres=np.zeros((1, 2)), covariances=1e-6 * np.eye(2)[None],
                           major_shares=np.array([1.0]))


def test_a_run_s_weight_outside_the_search_s_modes_joins_the_proposal() -> None:
    # the needle's half of the kind: the search found the needle, the run holds
    # the slab around it too; with the needle alone the covering part never draws it and
    # the slab alone is weighed (variance 1 against 0.5, with healthy weights), with the
    # needle left out nothing draws it either
    rng = np.random.default_rng(1)
    particles = np.concatenate([1e-3 * rng.standard_normal((500, 2)),
                                rng.standard_normal((500, 2))])
    modes = wide.search_gaussians(_needle_search(), particles, np.ones(1000))
    assert len(modes) == 2
    share, centre, cov = modes[1]
    assert share == pytest.approx(np.log(0.5), abs=0.05)  # the slab's draws outside
    assert np.allclose(centre, 0.0, atol=0.15) and np.allclose(cov, np.eye(2), atol=0.2)
    coords = _coords("parameters { vector[2] x; } model { }")
    base = BaseDensity(np.zeros(2), np.eye(2), "dense")
    draws = wide.wide_draws(coords, base, Needle(), {}, 1, modes=modes)  # type: ignore[arg-type]
    mo = wide.moments_of(draws)
    assert mo is not None and np.all(np.abs(mo.var - 0.5) <= 4 * mo.var_se), mo.var


def test_a_mode_only_the_run_found_is_drawn_and_one_only_the_search_found_too() -> None:
    from types import SimpleNamespace

    search = SimpleNamespace(centres=np.zeros((1, 2)), covariances=np.eye(2)[None],
                             major_shares=np.array([1.0]))
    rng = np.random.default_rng(1)
    found = rng.standard_normal((900, 2))
    assert len(wide.search_gaussians(search, found, np.ones(900))) == 1
    run = np.concatenate([found, 20.0 + rng.standard_normal((100, 2))])
    modes = wide.search_gaussians(search, run, np.ones(1000))
    assert np.allclose([np.exp(m[0]) for m in modes], [0.9, 0.1], atol=0.02)  # 1% of the
    # search's mode lies beyond its central 99%
    assert np.allclose(modes[1][1], 20.0, atol=0.3)
    # a run that left the search's mode entirely: that mode keeps half the mode part
    left = wide.search_gaussians(search, 20.0 + rng.standard_normal((100, 2)), np.ones(100))
    assert np.allclose([np.exp(m[0]) for m in left], [0.5, 0.5])
    # too few effective draws outside for a Gaussian: the covering part alone
    thin = np.concatenate([found, 20.0 + rng.standard_normal((3, 2))])
    weights = np.concatenate([np.full(900, 0.01), np.ones(3)])
    assert wide.search_gaussians(search, thin, weights) == []


class DirichletPole:
    """Dirichlet(0.3, 0.3, 0.3) on a 3-simplex, exact at every point inside; ``pole``:
    +inf at a point inside too (a density a round trip through Stan's stick-breaking
    once produced there)."""

    def __init__(self, pole: bool = False) -> None:
        self.pole = pole

    def log_density(self, draws: dict[str, np.ndarray]) -> np.ndarray:
        from scipy.special import gammaln

        x = np.asarray(draws["theta"], dtype=float)
        out = gammaln(0.9) - 3 * gammaln(0.3) + (0.3 - 1) * np.log(x).sum(axis=1)
        if self.pole:
            out[np.argmin(x.min(axis=1))] = np.inf
        return np.asarray(out, dtype=float)


def test_an_infinite_density_inside_the_support_fails_the_wide_draws_by_name() -> None:
    coords = _coords("parameters { simplex[3] theta; } model { }")
    base = BaseDensity(np.zeros(2), 9.0 * np.eye(2), "dense")
    draws = wide.wide_draws(coords, base, DirichletPole(), {}, 1)  # type: ignore[arg-type]
    # Student-t tails reach z where a component underflows to 0: those weigh nothing
    assert np.mean(np.isfinite(draws.log_w)) > 0.99 and not np.any(np.isposinf(draws.log_w))
    with pytest.raises(wide.WideDrawsFailed, match="infinite at 1 of .* inside its support"):
        wide.wide_draws(coords, base, DirichletPole(pole=True), {}, 1)  # type: ignore[arg-type]


def test_a_point_whose_simplex_underflows_to_an_edge_weighs_nothing() -> None:
    """``x(z)`` with a component 0 in floating point (``z`` beyond -745): not a point
    inside the support, so neither the density's pole there nor ``log|dz/dx|`` enter."""
    coords = _coords("parameters { simplex[3] theta; } model { }")
    z = np.array([[0.5, -0.2], [-800.0, 0.0], [3.0, 1.0]])
    log_q = np.zeros(3)
    lw = wide.importance_log_weights(coords, DirichletPole(), {}, z, log_q)  # type: ignore[arg-type]
    assert np.isfinite(lw[[0, 2]]).all() and lw[1] == -np.inf


def test_wide_draws_that_cannot_be_weighed_are_a_named_reason() -> None:
    check = wide.UncomputedCheck("wide_checks", "the wide checks",
                                 "the density is infinite at 3 of 2000 points")
    name, reason = check(None)
    assert name == "wide_checks" and reason is not None
    assert "the wide checks could not be computed" in reason.message
    assert "infinite at 3" in reason.message
    assert pickle.loads(pickle.dumps(check)).why == check.why


def test_an_infinite_density_is_named_with_its_point_for_scalar_parameters_too() -> None:
    class Pole:
        def log_density(self, draws: dict[str, np.ndarray]) -> np.ndarray:
            out = norm.logpdf(np.asarray(draws["mu"])) + norm.logpdf(np.log(draws["s"]))
            out[3] = np.inf
            return np.asarray(out, dtype=float)

    coords = _coords("parameters { real mu; real<lower=0> s; } model { }")
    base = BaseDensity(np.zeros(2), np.eye(2), "dense")
    with pytest.raises(wide.WideDrawsFailed, match=r"infinite at 1 of .*\(the first: mu = "):
        wide.wide_draws(coords, base, Pole(), {}, 1)  # type: ignore[arg-type]
