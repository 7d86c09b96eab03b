"""Stan's constraining transforms in NumPy: round trips, log-Jacobians, and Stan agreement."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pemc_stan.errors import UnsupportedConstructError
from pemc_stan.stan import ast
from pemc_stan.stan.constraints import (
    ParameterTransform,
    evaluate_data_expression,
    parameter_space,
)
from pemc_stan.stan.parser import parse

CASES: list[tuple[str, ParameterTransform]] = [
    ("real", ParameterTransform("a", "real", (), ())),
    ("lower", ParameterTransform("a", "real", (), (), lower=np.asarray(1.5))),
    ("upper", ParameterTransform("a", "vector", (), (3,), upper=np.asarray([0.0, 1.0, 2.0]))),
    ("lower_upper", ParameterTransform("a", "real", (2,), (), lower=np.asarray(-1.0),
                                       upper=np.asarray(3.0))),
    ("lower_upper_matrix", ParameterTransform("a", "matrix", (), (2, 3), lower=np.asarray(0.0),
                                              upper=np.asarray(1.0))),
    ("lower_inf", ParameterTransform("a", "real", (), (), lower=np.asarray(-np.inf),
                                     upper=np.asarray(2.0))),
    ("affine", ParameterTransform("a", "vector", (), (2,), offset=np.asarray(1.0),
                                  multiplier=np.asarray([2.0, 0.5]))),
    ("simplex", ParameterTransform("a", "simplex", (), (4,))),
    ("simplex_array", ParameterTransform("a", "simplex", (2,), (3,))),
    ("ordered", ParameterTransform("a", "ordered", (), (4,))),
    ("positive_ordered", ParameterTransform("a", "positive_ordered", (), (3,))),
    ("cholesky_factor_corr", ParameterTransform("a", "cholesky_factor_corr", (), (4, 4))),
    ("cholesky_factor_cov", ParameterTransform("a", "cholesky_factor_cov", (), (4, 3))),
    ("cov_matrix", ParameterTransform("a", "cov_matrix", (), (3, 3))),
    ("corr_matrix", ParameterTransform("a", "corr_matrix", (), (4, 4))),
]


def intrinsic(t: ParameterTransform, x: np.ndarray) -> np.ndarray:
    """Free coordinates of the constrained value (one draw) in which |J| is a density."""
    name, s = t.type_name, t.shape
    out = []
    for elem in x.reshape((-1, *s)) if t.array_dims else [x]:
        if name in ("real", "vector", "row_vector", "matrix", "ordered", "positive_ordered"):
            out.append(np.ravel(elem))
        elif name == "simplex":
            out.append(elem[:-1])
        elif name in ("cholesky_factor_corr", "corr_matrix"):
            out.append(elem[np.tril_indices(s[0], -1)])
        elif name == "cov_matrix":
            out.append(elem[np.tril_indices(s[0])])
        elif name == "cholesky_factor_cov":
            rows, cols = s
            out.append(np.concatenate([elem[:cols][np.tril_indices(cols)],
                                       elem[cols:].ravel()]))
    return np.concatenate(out)


@pytest.mark.parametrize("label,t", CASES, ids=[c[0] for c in CASES])
def test_round_trip_and_log_jacobian(label: str, t: ParameterTransform) -> None:
    rng = np.random.default_rng(7)
    u = rng.normal(scale=0.8, size=(5, t.unconstrained_size))
    x, lj = t.constrain(u)
    assert x.shape == (5, *t.array_dims, *t.shape)
    np.testing.assert_allclose(t.unconstrain(x), u, rtol=1e-9, atol=1e-9)
    h = 1e-6
    for i in range(u.shape[0]):
        jac = np.empty((u.shape[1], u.shape[1]))
        for j in range(u.shape[1]):
            up, dn = u[i:i + 1].copy(), u[i:i + 1].copy()
            up[0, j] += h
            dn[0, j] -= h
            jac[:, j] = (intrinsic(t, t.constrain(up)[0][0])
                         - intrinsic(t, t.constrain(dn)[0][0])) / (2 * h)
        sign, logdet = np.linalg.slogdet(jac)
        assert sign != 0
        # cov_matrix: Stan keeps the "needless constant" K log 2 -- also a true Jacobian term
        assert lj[i] == pytest.approx(logdet, abs=1e-6), label


def test_constrained_values_lie_in_their_sets() -> None:
    rng = np.random.default_rng(3)
    for _, t in CASES:
        x, _ = t.constrain(rng.normal(scale=2.0, size=(50, t.unconstrained_size)))
        if t.type_name == "simplex":
            assert np.all(x >= 0) and np.allclose(x.sum(axis=-1), 1.0)
        elif t.type_name == "ordered":
            assert np.all(np.diff(x, axis=-1) > 0)
        elif t.type_name == "positive_ordered":
            assert np.all(x > 0) and np.all(np.diff(x, axis=-1) > 0)
        elif t.type_name == "corr_matrix":
            assert np.allclose(np.diagonal(x, axis1=-2, axis2=-1), 1.0)
            assert np.all(np.linalg.eigvalsh(x) > 0)
        elif t.type_name == "cholesky_factor_corr":
            assert np.allclose(np.sum(x**2, axis=-1), 1.0)
            assert np.allclose(np.triu(x[0], 1), 0.0)
        elif t.type_name == "cov_matrix":
            assert np.all(np.linalg.eigvalsh(x) > 0)
        elif t.lower is not None or t.upper is not None:
            lb = -np.inf if t.lower is None else t.lower
            ub = np.inf if t.upper is None else t.upper
            assert np.all(x > lb) and np.all(x < ub)


def test_unconstrain_rejects_points_outside_the_support() -> None:
    t = ParameterTransform("p", "real", (), (), lower=np.asarray(0.0), upper=np.asarray(1.0))
    with pytest.raises(ValueError, match="outside the support"):
        t.unconstrain(np.array([0.5, 1.0]))


PROGRAM = """
data { int K; real lo; vector[3] ub; }
parameters {
  real<lower=0> sigma;
  real<lower=-lo, upper=2 * lo + 1> theta;
  vector<upper=ub>[3] v;
  array[2] simplex[K] s;
  real<offset=lo, multiplier=exp(lo)> z;
  cholesky_factor_corr[K] L;
  cov_matrix[2] S;
}
model { }
"""


def test_parameter_space_from_a_program() -> None:
    data = {"K": 3, "lo": 0.5, "ub": [1.0, 2.0, 3.0]}
    space = parameter_space(parse(PROGRAM), data)
    assert space.names == ["sigma", "theta", "v", "s", "z", "L", "S"]
    theta = space.transforms[1]
    assert float(theta.lower) == -0.5 and float(theta.upper) == 2.0
    assert space.transforms[3].array_dims == (2,) and space.transforms[3].shape == (3,)
    assert space.dim == 1 + 1 + 3 + 2 * 2 + 1 + 3 + 3
    rng = np.random.default_rng(1)
    u = rng.normal(size=(4, space.dim))
    draws, lj = space.constrain(u)
    np.testing.assert_allclose(space.unconstrain(draws), u, atol=1e-9)
    np.testing.assert_allclose(space.log_jacobian(draws), lj, atol=1e-9)


def test_unit_vector_and_non_data_bounds_are_rejected() -> None:
    with pytest.raises(UnsupportedConstructError, match="unit_vector"):
        parameter_space(parse("parameters { unit_vector[3] u; } model { }"))
    prog = parse("transformed data { real b = 1; } parameters { real<lower=b> x; } model { }")
    with pytest.raises(UnsupportedConstructError, match="lower bound of x"):
        parameter_space(prog, {})


DEPENDENT = """
data { vector[2] w; }
parameters {
  real<lower=0, upper=1> alpha1;
  real<lower=0, upper=(1 - alpha1)> beta1;
  vector<lower=0>[2] v;
  real<upper=v[1]> r;
  vector<lower=alpha1 * w>[2] c;
}
model { }
"""


def test_bounds_of_earlier_parameters_hold_per_draw_with_a_triangular_jacobian() -> None:
    """GARCH's ``beta1 < 1 - alpha1`` and kin: every draw within its own bounds, the map
    inverted exactly, and ``log |J|`` that of the whole (block-triangular) map, checked
    against a finite-difference Jacobian of all coordinates at once."""
    space = parameter_space(parse(DEPENDENT), {"w": [1.0, 2.0]})
    assert [t.bound_parameters for t in space.transforms] == [
        (), ("alpha1",), (), ("v",), ("alpha1",)]
    rng = np.random.default_rng(4)
    u = rng.normal(size=(6, space.dim))
    x, lj = space.constrain(u)
    assert np.all(x["beta1"] < 1 - x["alpha1"]) and np.all(x["r"] < x["v"][:, 0])
    assert np.all(x["c"] > x["alpha1"][:, None] * np.array([1.0, 2.0]))
    np.testing.assert_allclose(space.unconstrain(x), u, atol=1e-10)

    def flat(point: np.ndarray) -> np.ndarray:
        values = space.constrain(point[None])[0]
        return np.concatenate([np.ravel(values[n]) for n in space.names])

    h = 1e-6
    for i in range(3):
        jac = np.stack([(flat(u[i] + h * e) - flat(u[i] - h * e)) / (2 * h)
                        for e in np.eye(space.dim)], axis=1)
        assert np.linalg.slogdet(jac)[1] == pytest.approx(lj[i], abs=1e-6)


def test_one_sided_bounds_on_matrices_and_arrays_of_vectors() -> None:
    """A missing bound of a 2-D parameter is as flat as its draws (it was (2, 3) against
    (n, 6) and failed), with data bounds and with a bound of an earlier parameter."""
    prog = parse("parameters { real<lower=0> s; matrix<lower=0>[2, 3] m; "
                 "array[2] vector<lower=s>[3] y; array[2] vector<upper=-1>[2] v; } model { }")
    space = parameter_space(prog, {})
    u = np.random.default_rng(6).normal(size=(5, space.dim))
    x, lj = space.constrain(u)
    assert np.all(x["m"] > 0) and np.all(x["y"] > x["s"][:, None, None]) and np.all(x["v"] < -1)
    np.testing.assert_allclose(space.unconstrain(x), u, atol=1e-10)
    assert np.all(np.isfinite(lj))


def test_evaluate_data_expression() -> None:
    e = ast.BinaryOp("-", ast.Call("log", (ast.Variable("a"),)), ast.RealLit("1.5"))
    assert float(evaluate_data_expression(e, {"a": np.e})) == pytest.approx(-0.5)


# ----------------------------------------------------------------------------- compiled

STAN_TYPES = """
parameters {
  real<lower=1> a;
  real<lower=-1, upper=2> b;
  vector<upper=0>[2] c;
  real<offset=1, multiplier=3> d;
  simplex[4] s;
  ordered[3] o;
  positive_ordered[2] po;
  cholesky_factor_corr[3] lc;
  cholesky_factor_cov[3, 2] lv;
  corr_matrix[3] r;
  cov_matrix[3] v;
  real<lower=a, upper=a + 2 * b + 4> e;
  vector<lower=c>[2] f;
}
model { }
"""


@pytest.mark.compiled
def test_log_jacobian_matches_stan(compiled: Any, tmp_path: Path) -> None:
    """Stan's log_prob(jacobian=True) - log_prob(jacobian=False) equals our log|J|."""
    model = compiled(STAN_TYPES, name="pemc_constraint_types")
    space = parameter_space(parse(STAN_TYPES), {})
    rng = np.random.default_rng(11)
    u = rng.normal(scale=0.7, size=(3, space.dim))
    draws, lj = space.constrain(u)
    for i in range(u.shape[0]):
        params = {k: v[i].tolist() for k, v in draws.items()}
        path = tmp_path / f"p{i}.json"
        path.write_text(json.dumps(params))
        with_j = model.log_prob(params=str(path), jacobian=True, sig_figs=15)
        without = model.log_prob(params=str(path), jacobian=False, sig_figs=15)
        diff = float(with_j["lp__"].iloc[0]) - float(without["lp__"].iloc[0])
        assert diff == pytest.approx(lj[i], abs=1e-6)
