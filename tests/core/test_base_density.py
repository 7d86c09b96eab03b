"""Base densities of continuous tempering (fast; nothing compiles).

* the coordinate maps round-trip (x -> z -> x and z -> x -> z);
* ``log |det dz/dx|`` agrees with a finite-difference Jacobian of the inverse map;
* ``b`` integrates to one on the constrained space (quadrature) and matches
  scipy's log-normal / logit-normal / multivariate normal densities;
* moment matching (weighted, mixtures of modes) against closed forms.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from pemc_stan.core.base_density import BaseDensity, moment_match
from pemc_stan.core.coordinates import (
    UnsupportedBaseError,
    base_coordinates,
    extract_variable,
)
from pemc_stan.stan.parser import parse

PROGRAM = """
data { int K; real lo; }
parameters {
  real a;
  real<lower=lo> b;
  real<upper=2> c;
  real<lower=-1, upper=3> d;
  simplex[K] e;
  ordered[3] f;
  positive_ordered[3] g;
  cov_matrix[3] h;
  cholesky_factor_cov[4, 3] l;
  array[2] vector<lower=0>[2] m;
  matrix<lower=-2, upper=0>[2, 3] n;
  row_vector[2] r;
}
model { }
"""
DATA = {"K": 4, "lo": 0.5}


def _coords(program: str = PROGRAM):
    tree = parse(program)
    decls = [(s.type, d.name) for s in tree.parameters.stmts for d in s.declarators]
    return base_coordinates(decls)


def _free(kind: str, x: np.ndarray) -> np.ndarray:
    """The free coordinates of one element (Stan's reference measure), in z order."""
    if kind in ("simplex", "sum_to_zero"):
        return x[:-1]
    if kind in ("cholesky_factor_cov", "cov_matrix"):
        return np.concatenate([x[j:, j] for j in range(x.shape[1])])
    return x.reshape(-1, order="F")


def test_dimensions_and_names() -> None:
    coords = _coords()
    # a b c d e(3) f(3) g(3) h(6) l(3*4/2 + 3) m(4) n(6) r(2)
    assert coords.dim(DATA) == 1 + 1 + 1 + 1 + 3 + 3 + 3 + 6 + 9 + 4 + 6 + 2
    names = coords.coordinate_names(DATA)
    assert names[:5] == ["z_a", "z_b", "z_c", "z_d", "z_e[1]"]
    assert len(names) == coords.dim(DATA)


def test_round_trip_all_kinds() -> None:
    coords = _coords()
    rng = np.random.default_rng(1)
    z = rng.normal(size=(7, coords.dim(DATA)))
    x = coords.inverse(z, DATA)
    assert x["e"].shape == (7, 4) and np.allclose(x["e"].sum(axis=1), 1)
    assert np.all(x["b"] > 0.5) and np.all(x["c"] < 2) and np.all((x["d"] > -1) & (x["d"] < 3))
    assert np.all(np.diff(x["f"], axis=1) > 0) and np.all(x["g"] > 0)
    assert np.all(np.linalg.eigvalsh(x["h"]) > 0) and np.allclose(x["h"], np.swapaxes(x["h"], 1, 2))
    assert x["l"].shape == (7, 4, 3) and np.allclose(np.triu(x["l"][0], 1), 0)
    assert x["m"].shape == (7, 2, 2) and np.all(x["m"] > 0)
    assert x["n"].shape == (7, 2, 3) and np.all((x["n"] > -2) & (x["n"] < 0))
    z2, _ = coords.forward(x, DATA)
    assert np.allclose(z2, z, atol=1e-10)
    x2 = coords.inverse(z2, DATA)
    for k in x:
        assert np.allclose(x2[k], x[k], atol=1e-10)


@pytest.mark.parametrize("name", ["a", "b", "c", "d", "e", "f", "g", "h", "l", "m", "n", "r"])
def test_log_jacobian_by_finite_differences(name: str) -> None:
    coords = _coords()
    block = next(b for b in coords.blocks if b.name == name)
    dim = block.dim(DATA)
    rng = np.random.default_rng(2)
    arr, el = block.shape(DATA)
    n_el = int(np.prod(arr)) if arr else 1
    d_el = dim // n_el
    for _ in range(3):
        z0 = 0.7 * rng.normal(size=dim)
        x0 = block.inverse(z0[None], DATA)
        _, jac = block.forward(x0, DATA)
        # numerical d x_free / d z, element by element (the map is block diagonal)
        total = 0.0
        for i in range(n_el):
            cols = []
            for j in range(d_el):
                h = 1e-6
                zp, zm = z0.copy(), z0.copy()
                zp[i * d_el + j] += h
                zm[i * d_el + j] -= h
                xp = block.inverse(zp[None], DATA)[0].reshape((n_el, *el))[i]
                xm = block.inverse(zm[None], DATA)[0].reshape((n_el, *el))[i]
                cols.append((_free(block.kind, xp) - _free(block.kind, xm)) / (2 * h))
            jmat = np.stack(cols, axis=1)
            total -= np.linalg.slogdet(jmat)[1]  # log|dz/dx| = -log|dx/dz|
        assert jac[0] == pytest.approx(total, abs=1e-6), name


def _base_1d(program: str, mean: float = 0.3, sd: float = 0.8) -> tuple:
    coords = _coords(program)
    return coords, BaseDensity(np.array([mean]), np.array([[sd**2]])).validate()


@pytest.mark.parametrize(
    ("decl", "lo", "hi"),
    [("real", -np.inf, np.inf), ("real<lower=0.5>", 0.5, np.inf),
     ("real<upper=2>", -np.inf, 2.0), ("real<lower=-1, upper=3>", -1.0, 3.0)])
def test_scalar_base_integrates_to_one(decl: str, lo: float, hi: float) -> None:
    coords, base = _base_1d(f"parameters {{ {decl} x; }} model {{ }}")

    def pdf(x: float) -> float:
        return float(np.exp(base.log_density(coords, {"x": np.array([x])}, {}))[0])

    mass = integrate.quad(pdf, lo, hi, limit=200)[0]
    assert mass == pytest.approx(1.0, abs=1e-8)


def test_lower_bound_base_is_shifted_lognormal_and_interval_is_logit_normal() -> None:
    coords, base = _base_1d("parameters { real<lower=0.5> x; } model { }", 0.3, 0.8)
    x = np.linspace(0.6, 9, 17)
    ref = stats.lognorm(s=0.8, scale=math.exp(0.3), loc=0.5).logpdf(x)
    assert np.allclose(base.log_density(coords, {"x": x}, {}), ref, atol=1e-12)
    coords, base = _base_1d("parameters { real<lower=-1, upper=3> x; } model { }", 0.3, 0.8)
    x = np.linspace(-0.9, 2.9, 17)
    p = (x + 1) / 4
    ref = stats.norm(0.3, 0.8).logpdf(np.log(p / (1 - p))) - np.log(4 * p * (1 - p))
    assert np.allclose(base.log_density(coords, {"x": x}, {}), ref, atol=1e-12)


def test_dense_base_matches_scipy_multivariate_normal() -> None:
    coords = _coords("parameters { vector[3] x; } model { }")
    rng = np.random.default_rng(3)
    a = rng.normal(size=(3, 3))
    cov = a @ a.T + np.eye(3)
    base = BaseDensity(np.array([0.1, -0.2, 0.3]), cov, "dense").validate()
    x = rng.normal(size=(5, 3))
    ref = stats.multivariate_normal(base.mean, cov).logpdf(x)
    assert np.allclose(base.log_density(coords, {"x": x}, {}), ref, atol=1e-12)
    assert np.allclose(np.asarray(base.stan_data()["pemc_base_chol"]), np.linalg.cholesky(cov))


def test_simplex_base_integrates_to_one() -> None:
    coords = _coords("parameters { simplex[3] x; } model { }")
    base = BaseDensity(np.array([0.2, -0.4]), np.diag([0.5, 1.2])).validate()

    def pdf(x2: float, x1: float) -> float:
        x = np.array([[x1, x2, 1.0 - x1 - x2]])
        return float(np.exp(base.log_density(coords, {"x": x}, {}))[0])

    mass = integrate.dblquad(pdf, 0, 1, 0, lambda x1: 1 - x1, epsabs=1e-9)[0]
    assert mass == pytest.approx(1.0, abs=1e-6)


def test_positive_ordered_base_integrates_to_one() -> None:
    coords = _coords("parameters { positive_ordered[2] x; } model { }")
    base = BaseDensity(np.array([0.0, -0.5]), np.diag([0.3, 0.6])).validate()

    def pdf(x2: float, x1: float) -> float:
        x = np.array([[x1, x2]])
        return float(np.exp(base.log_density(coords, {"x": x}, {}))[0])

    mass = integrate.dblquad(pdf, 0, 12, lambda x1: x1, 20, epsabs=1e-7)[0]
    assert mass == pytest.approx(1.0, abs=1e-5)


def test_cov_matrix_base_integrates_to_one() -> None:
    """K = 1 by quadrature (the K = 3 Jacobian is checked by finite differences above)."""
    coords = _coords("parameters { cov_matrix[1] x; } model { }")
    base = BaseDensity(np.array([0.4]), np.array([[0.3]])).validate()

    def pdf(v: float) -> float:
        return float(np.exp(base.log_density(coords, {"x": np.array([[[v]]])}, {}))[0])

    assert integrate.quad(pdf, 0, np.inf, limit=200)[0] == pytest.approx(1.0, abs=1e-8)


def test_sampling_from_base_has_the_known_moments_in_base_coordinates() -> None:
    coords = _coords()
    d = coords.dim(DATA)
    rng = np.random.default_rng(5)
    mean = rng.normal(size=d) * 0.3
    base = BaseDensity(mean, np.diag(np.full(d, 0.04))).validate()
    x = base.sample(coords, 20_000, rng, DATA)
    z, _ = coords.forward(x, DATA)
    assert np.allclose(z.mean(axis=0), mean, atol=4 * 0.2 / math.sqrt(20_000))


def test_moment_match_weighted_and_mixture() -> None:
    rng = np.random.default_rng(6)
    z = rng.normal(size=(4000, 2))
    lw = np.log(rng.uniform(0.1, 1.0, size=4000))
    w = np.exp(lw) / np.exp(lw).sum()
    mu = w @ z
    cov = ((z - mu) * w[:, None]).T @ (z - mu)
    b = moment_match(z, lw, covariance="dense")
    assert np.allclose(b.mean, mu) and np.allclose(b.cov, cov, atol=1e-5)
    bd = moment_match(z, lw, covariance="diag")
    assert np.allclose(bd.cov, np.diag(np.diag(cov)), atol=1e-5)
    # two "modes" with masses 0.3 / 0.7: the mixture's mean and variance
    za = rng.normal(-3, 0.5, size=(1000, 1))
    zb = rng.normal(3, 0.5, size=(1000, 1))
    zz = np.concatenate([za, zb])
    groups = [(np.arange(1000), math.log(0.3)), (np.arange(1000, 2000), math.log(0.7))]
    bm = moment_match(zz, None, groups)
    ma, mb = za.mean(), zb.mean()
    m = 0.3 * ma + 0.7 * mb
    v = 0.3 * (za.var() + (ma - m) ** 2) + 0.7 * (zb.var() + (mb - m) ** 2)
    assert bm.mean[0] == pytest.approx(m) and bm.cov[0, 0] == pytest.approx(v)


def test_validation_errors() -> None:
    with pytest.raises(ValueError, match="positive definite"):
        BaseDensity(np.zeros(2), np.diag([1.0, -1.0])).validate()
    with pytest.raises(ValueError, match="off-diagonal"):
        BaseDensity(np.zeros(2), np.array([[1.0, 0.5], [0.5, 1.0]]), "diag").validate()
    with pytest.raises(ValueError, match="covariance='full'"):
        BaseDensity(np.zeros(1), np.eye(1), "full").validate()
    with pytest.raises(ValueError, match="shape"):
        BaseDensity(np.zeros(2), np.eye(3)).validate()


@pytest.mark.parametrize(
    ("decl", "fragment"),
    [("corr_matrix[3] x;", "corr_matrix"), ("unit_vector[3] x;", "unit_vector"),
     ("cholesky_factor_corr[3] x;", "cholesky_factor_corr")])
def test_unsupported_types_are_rejected(decl: str, fragment: str) -> None:
    with pytest.raises(UnsupportedBaseError, match=fragment):
        _coords(f"parameters {{ {decl} }} model {{ }}")


def test_parameter_dependent_bounds_joint_base_integrates_to_one() -> None:
    """(tau, x) with x in (-tau, tau): the joint map is triangular and b is normalised."""
    coords = _coords("parameters { real<lower=0> tau; real<lower=-tau, upper=tau> x; } "
                     "model { }")
    assert coords.blocks[1].bound_parameters == ("tau",)
    base = BaseDensity(np.array([0.2, -0.3]), np.diag([0.3, 0.8])).validate()
    rng = np.random.default_rng(7)
    draws = base.sample(coords, 50, rng, {})
    assert np.all(np.abs(draws["x"]) < draws["tau"])
    z, _ = coords.forward(draws, {})
    assert np.allclose(coords.inverse(z, {})["x"], draws["x"])

    def pdf(x: float, tau: float) -> float:
        d = {"tau": np.array([tau]), "x": np.array([x])}
        return float(np.exp(base.log_density(coords, d, {}))[0])

    mass = integrate.dblquad(pdf, 0, 25, lambda t: -t, lambda t: t, epsabs=1e-8)[0]
    assert mass == pytest.approx(1.0, abs=1e-5)
    lo = coords.blocks[1]
    with pytest.raises(UnsupportedBaseError, match="depend on"):
        lo.forward(np.zeros((2,)), {})


def test_a_bound_that_indexes_or_scales_a_parameter_holds_at_every_draw() -> None:
    """``real<upper=v[1]>`` and ``vector<lower=a * w>`` (w data): each draw's bound is
    its own (once the first draw's vector, or a refused product of a draw and a data
    vector), and the map round-trips."""
    coords = _coords("data { vector[2] w; } parameters { vector<lower=0>[2] v; "
                     "real<upper=v[1]> r; real<lower=0, upper=1> a; vector<lower=a * w>[2] c; } "
                     "model { }")
    data = {"w": [1.0, 2.0]}
    base = BaseDensity(np.zeros(6), np.eye(6)).validate()
    draws = base.sample(coords, 7, np.random.default_rng(5), data)
    assert np.all(draws["r"] < draws["v"][:, 0])
    assert np.all(draws["c"] > draws["a"][:, None] * np.array([1.0, 2.0]))
    z, _ = coords.forward(draws, data)
    for name, value in coords.inverse(z, data).items():
        np.testing.assert_allclose(value, draws[name])


def test_bounds_from_transformed_data_cannot_be_evaluated() -> None:
    coords = _coords("transformed data { real t = 1; } parameters { real<lower=t> x; } "
                     "model { }")
    with pytest.raises(UnsupportedBaseError, match="'t'"):
        coords.forward({"x": np.ones((2,))}, {})


def test_extract_variable() -> None:
    cols = ["lp__", "m[1,1]", "m[2,1]", "m[1,2]", "m[2,2]", "s"]
    vals = np.arange(12.0).reshape(2, 6)
    m = extract_variable(vals, cols, "m", (2, 2))
    assert m[1].tolist() == [[7.0, 9.0], [8.0, 10.0]]
    assert extract_variable(vals, cols, "s", ())[:, ...].tolist() == [5.0, 11.0]
    with pytest.raises(KeyError, match="found 0 of 3"):
        extract_variable(vals, cols, "v", (3,))


def test_a_dense_base_from_too_few_draws_keeps_only_the_variances() -> None:
    rng = np.random.default_rng(3)
    cov = np.array([[1.0, 0.9], [0.9, 1.0]])
    z = rng.multivariate_normal(np.zeros(2), cov, size=4000)
    many = moment_match(z, covariance="dense")
    assert many.cov[0, 1] == pytest.approx(0.9, abs=0.05)
    few = moment_match(z[:7], covariance="dense")  # 7 < 4 D draws
    assert few.covariance == "dense" and few.cov[0, 1] == 0.0
    assert np.all(np.diag(few.cov) > 0)
    weighted = np.full(4000, -np.inf)
    weighted[:7] = 0.0  # 7 draws carry all the weight: Kish ESS 7
    assert moment_match(z, weighted, covariance="dense").cov[0, 1] == 0.0


def test_cells_of_two_centres_have_the_exact_base_masses() -> None:
    """Two centres split whitened space by a hyperplane: cell 0 has mass Phi(c / |d1 - d0|)
    with c = (|d1|^2 - |d0|^2) / 2 (d_k the whitened centres)."""
    from scipy.stats import norm

    rng = np.random.default_rng(3)
    a = rng.normal(size=(5, 5))
    base = BaseDensity(rng.normal(size=5), a @ a.T + 0.5 * np.eye(5), "dense").validate()
    centres = base.mean + rng.normal(size=(2, 5)) * 2.0
    chol = np.linalg.cholesky(base.cov)
    d0, d1 = np.linalg.solve(chol, (centres - base.mean).T).T
    exact = norm.cdf(0.5 * (d1 @ d1 - d0 @ d0) / np.linalg.norm(d1 - d0))
    mass = base.centre_masses(centres, 400_000, np.random.default_rng(1))
    assert mass.sum() == pytest.approx(1.0)
    assert abs(mass[0] - exact) < 4 * np.sqrt(exact * (1 - exact) / 400_000)
    # the same cells as classifying full base draws by nearest centre
    z = base.sample_z(100_000, np.random.default_rng(2))
    share = np.mean(base.nearest_centre(z, centres) == 0)
    assert abs(share - exact) < 4 * np.sqrt(exact * (1 - exact) / 100_000)
    # each centre lies in its own cell
    np.testing.assert_array_equal(base.nearest_centre(centres, centres), [0, 1])
    with pytest.raises(ValueError, match="coordinates"):
        base.nearest_centre(z, centres[:, :3])


def test_cells_of_many_centres_in_few_dimensions() -> None:
    base = BaseDensity(np.zeros(1), np.eye(1) * 4.0, "diag").validate()
    centres = np.array([[-3.0], [0.0], [3.0], [10.0]])  # boundaries -1.5, 1.5, 6.5
    mass = base.centre_masses(centres, 400_000, np.random.default_rng(5))
    from scipy.stats import norm

    exact = np.diff(norm.cdf([-np.inf, -1.5, 1.5, 6.5, np.inf], 0.0, 2.0))
    np.testing.assert_allclose(mass, exact, atol=4 * np.sqrt(0.25 / 400_000))


def test_affine_declarations_use_stans_own_coordinates_and_stay_normalised() -> None:
    """``real<offset=1, multiplier=exp(v / 2)> x``: z = (x - 1) / exp(v / 2), log|dz/dx| =
    -v / 2, and the joint base of (v, x) integrates to one (a non-centred funnel)."""
    coords = _coords("parameters { real v; real<offset=1, multiplier=exp(v / 2)> x; } "
                     "model { }")
    block = coords.blocks[1]
    assert block.kind == "affine" and block.bound_parameters == ("v",)
    draws = {"v": np.array([0.0, -2.0, 3.0]), "x": np.array([1.5, 0.0, 4.0])}
    z, jac = coords.forward(draws, {})
    assert np.allclose(z[:, 1], (draws["x"] - 1) / np.exp(draws["v"] / 2))
    assert np.allclose(jac, -draws["v"] / 2)
    back = coords.inverse(z, {})
    assert np.allclose(back["x"], draws["x"]) and np.allclose(back["v"], draws["v"])
    base = BaseDensity(np.array([0.3, -0.2]), np.array([[1.2, 0.3], [0.3, 0.7]]),
                       "dense").validate()

    def pdf(x: float, v: float) -> float:
        d = {"v": np.array([v]), "x": np.array([x])}
        return float(np.exp(base.log_density(coords, d, {}))[0])

    mass = integrate.dblquad(pdf, -9, 9, lambda v: 1 - 12 * math.exp(v / 2),
                             lambda v: 1 + 12 * math.exp(v / 2), epsabs=1e-9)[0]
    assert mass == pytest.approx(1.0, abs=1e-5)


def test_container_offset_and_scalar_multiplier_round_trip_with_the_jacobian() -> None:
    from pemc_stan.stan.symbols import build_symbol_table

    tree = parse("parameters { vector[2] m; real<lower=0> s; "
                 "vector<offset=m, multiplier=s>[2] x; } model { }")
    decls = [(s.type, d.name) for s in tree.parameters.stmts for d in s.declarators]
    coords = base_coordinates(decls, build_symbol_table(tree))  # m is a container
    rng = np.random.default_rng(3)
    z = rng.normal(size=(5, coords.dim({})))
    x = coords.inverse(z, {})
    assert np.allclose((x["x"] - x["m"]) / x["s"][:, None], z[:, 3:])
    z2, jac = coords.forward(x, {})
    assert np.allclose(z2, z)
    # log s (lower bound) and -2 log s (the multiplier of two entries)
    assert np.allclose(jac, -np.log(x["s"]) - 2 * np.log(x["s"]))


@pytest.mark.parametrize("form", ["diag", "dense"])
def test_a_student_t_base_is_scipys_t_and_has_its_known_moments(form: str) -> None:
    """``df`` degrees of freedom: independent t coordinates (diag) or the multivariate t
    (dense), with location ``mean`` and scale ``cov``; covariance ``cov df / (df - 2)``."""
    rng = np.random.default_rng(7)
    a = rng.normal(size=(3, 3))
    cov = a @ a.T + np.eye(3) if form == "dense" else np.diag([0.5, 2.0, 1.0])
    mean = np.array([0.3, -1.0, 2.0])
    base = BaseDensity(mean, cov, form, df=5.0).validate()
    assert base.tails and base.with_df(math.inf).tails is False
    z = rng.normal(size=(6, 3)) * 3
    if form == "dense":
        ref = stats.multivariate_t(mean, cov, df=5.0).logpdf(z)
    else:
        ref = stats.t.logpdf(z, 5.0, mean, np.sqrt(np.diag(cov))).sum(axis=1)
    np.testing.assert_allclose(base.log_density_z(z), ref, rtol=1e-12)
    draws = base.sample_z(200_000, np.random.default_rng(3))
    se = np.sqrt(base.variances / 200_000)
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * se)
    np.testing.assert_allclose(base.variances, np.diag(cov) * 5 / 3)
    # the variance's standard error from the t_5's kurtosis (excess 6: var(z^2) = 8 sigma^4)
    assert np.all(np.abs(draws.var(axis=0) - base.variances)
                  < 4 * np.sqrt(8 * base.variances**2 / 200_000))
    assert base.stan_data()["pemc_base_df"] == 5.0
    # cells of two centres: full draws and the scale-mixture projection agree
    centres = np.array([mean - 1.0, mean + 1.5])
    share = np.mean(base.nearest_centre(draws, centres) == 0)
    mass = base.centre_masses(centres, 200_000, np.random.default_rng(4))
    assert abs(mass[0] - share) < 4 * np.sqrt(2 * share * (1 - share) / 200_000)


def test_a_student_t_base_needs_more_than_two_degrees_of_freedom() -> None:
    with pytest.raises(ValueError, match="df=2.0"):
        BaseDensity(np.zeros(1), np.eye(1), "diag", df=2.0).validate()


def test_the_stan_base_lpdf_names_the_t_with_its_degrees_of_freedom() -> None:
    from pemc_stan.core.base_density import stan_base_lpdf

    assert stan_base_lpdf("diag", tails=True).startswith("student_t_lpdf(pemc_z | pemc_base_df")
    assert stan_base_lpdf("dense", tails=True).startswith(
        "multi_student_t_cholesky_lpdf(pemc_z | pemc_base_df")
    assert stan_base_lpdf("dense") == stan_base_lpdf("dense", tails=False)


def test_a_draw_on_its_bound_gives_an_infinite_coordinate_without_a_numpy_warning() -> None:
    import warnings

    coords = _coords("parameters { real<lower=0> rate; } model { }")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's RuntimeWarning would raise here
        z, _ = coords.forward({"rate": np.array([0.0, 1.0])}, {})
    assert np.isneginf(z[0, 0]) and z[1, 0] == 0.0
