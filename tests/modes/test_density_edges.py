"""The density evaluator at the edges of every constrained type, against SciPy.

Each parameter type in turn takes 10,000 random values, a third of them within 1e-12 of
an edge (a simplex component near 0, a bound, a gap of an ordered vector, a singular
covariance or correlation matrix), the others held at one interior point; the density
of each kind diverges at its edge, so a value changed by a round trip through Stan's
constraining transforms shows.  The reference is the same density in SciPy at the very
values given (the LKJ terms by their formulas, plus the normalising constants Stan gives
at the interior point).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from pemc_stan.modes.density import DensityEvaluator

pytestmark = pytest.mark.compiled

PROGRAM = """
parameters {
  real<lower=0> a;
  real<upper=1> b;
  real<lower=0, upper=1> p;
  simplex[4] theta;
  ordered[3] o;
  positive_ordered[2] po;
  cov_matrix[2] S;
  cholesky_factor_cov[2] L;
  cholesky_factor_corr[3] Lc;
  corr_matrix[3] R;
  real<offset=1, multiplier=3> m;
}
model {
  a ~ gamma(0.4, 1);
  target += -0.6 * log1m(b) + normal_lpdf(b | 0, 1);
  p ~ beta(0.3, 0.4);
  theta ~ dirichlet(rep_vector(0.3, 4));
  o ~ normal(0, 1);
  target += -0.5 * log(o[2] - o[1]) - 0.5 * log(o[3] - o[2]);
  po ~ exponential(1);
  target += -0.5 * log(po[1]) - 0.5 * log(po[2] - po[1]);
  S ~ wishart(2.5, identity_matrix(2));
  to_vector(L) ~ normal(0, 1);
  target += -0.5 * log(L[1, 1]) - 0.5 * log(L[2, 2]);
  Lc ~ lkj_corr_cholesky(0.5);
  R ~ lkj_corr(0.5);
  m ~ normal(1, 3);
}
"""

N = 10_000
REL = 1e-8


def _edge(rng: np.random.Generator, n: int) -> NDArray[np.float64]:
    """Distances to an edge: a third within 1e-12 (down to 1e-15), the rest up to 1."""
    near = rng.uniform(12.0, 15.0, n)
    far = rng.uniform(0.0, 12.0, n)
    return np.asarray(10.0 ** -np.where(rng.uniform(size=n) < 1 / 3, near, far), dtype=float)


def _corr_cholesky(rng: np.random.Generator, n: int) -> NDArray[np.float64]:
    """3x3 Cholesky factors of correlation matrices, the last row nearly in the span of
    the first two (``L[3, 3]`` at an edge distance)."""
    d = _edge(rng, n)
    u = rng.normal(size=(n, 2))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    out = np.zeros((n, 3, 3))
    c = rng.uniform(-0.9, 0.9, n)
    out[:, 0, 0] = 1.0
    out[:, 1, 0], out[:, 1, 1] = c, np.sqrt(1 - c**2)
    out[:, 2, 2] = d
    out[:, 2, :2] = u * np.sqrt(1 - d**2)[:, None]
    return out


def _corr(rng: np.random.Generator, n: int) -> NDArray[np.float64]:
    """3x3 correlation matrices with one correlation ``+-(1 - d)``, ``d`` a power of two
    from 2^-50 (9e-16) to 1/2: exact in floating point, so that ``1 - r^2`` and the
    determinant are too (Stan's own arithmetic holds there)."""
    d = 2.0 ** -rng.integers(1, 51, n)
    r = np.where(rng.uniform(size=n) < 0.5, 1.0, -1.0) * (1.0 - d)
    out = np.repeat(np.eye(3)[None], n, axis=0)
    pair = rng.integers(0, 3, n)
    i, j = np.array([0, 0, 1])[pair], np.array([1, 2, 2])[pair]
    out[np.arange(n), i, j] = out[np.arange(n), j, i] = r
    return out


def _values(rng: np.random.Generator, n: int) -> dict[str, NDArray[np.float64]]:
    """``n`` values of every parameter, each near one of its edges or inside."""
    d = _edge(rng, n)
    z = rng.normal(0.0, 10.0, size=(n, 4))
    theta = np.exp(z - z.max(axis=1, keepdims=True))
    o1 = rng.normal(size=n)
    c, r = rng.uniform(0.5, 2.0, n), rng.uniform(-0.5, 0.5, n)
    cov = np.zeros((n, 2, 2))
    cov[:, 0, 0], cov[:, 1, 1] = d, c
    cov[:, 0, 1] = cov[:, 1, 0] = r * np.sqrt(d * c)
    swap = rng.uniform(size=n) < 0.5
    cov[swap] = cov[swap][:, ::-1, ::-1]
    chol = np.zeros((n, 2, 2))
    chol[:, 0, 0], chol[:, 1, 0], chol[:, 1, 1] = d, rng.normal(size=n), _edge(rng, n)
    return {
        "a": d, "b": 1.0 - d, "p": np.where(rng.uniform(size=n) < 0.5, d, 1.0 - d),
        "theta": theta / theta.sum(axis=1, keepdims=True),
        "o": np.stack([o1, o1 + d, o1 + d + _edge(rng, n)], axis=1),
        "po": np.stack([d, d + _edge(rng, n)], axis=1),
        "S": cov, "L": chol, "Lc": _corr_cholesky(rng, n), "R": _corr(rng, n),
        "m": rng.normal(1.0, 30.0, n),
    }


#: One point inside every type's support; the LKJ densities' kernels are 0 there.
INSIDE = {
    "a": [0.5], "b": [0.3], "p": [0.4], "theta": [[0.1, 0.2, 0.3, 0.4]], "o": [[-1.0, 0.0, 1.0]],
    "po": [[0.5, 1.5]], "S": [[[1.0, 0.3], [0.3, 2.0]]], "L": [[[1.0, 0.0], [0.5, 1.2]]],
    "Lc": [np.eye(3)], "R": [np.eye(3)], "m": [1.5],
}


def _lkj_kernel(chol: NDArray[np.float64], eta: float) -> NDArray[np.float64]:
    """The LKJ log density of a Cholesky factor without its constant:
    ``(eta - 1) log det R + sum_k (K - k) log L_kk``, ``log det R = 2 sum_k log L_kk``."""
    k = chol.shape[-1]
    logdiag = np.log(np.diagonal(chol, axis1=-2, axis2=-1))
    return np.asarray(2 * (eta - 1) * logdiag.sum(axis=-1) + logdiag @ (k - np.arange(1, k + 1.0)),
                      dtype=float)


def _log_det_corr(r: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log det R`` of :func:`_corr`'s matrices (one correlation ``r``, else identity)
    exactly: ``log(1 - |r|) + log(1 + |r|)``, with ``1 - |r|`` exact; identity: 0."""
    off = np.abs(r - np.eye(3)).max(axis=(1, 2))
    return np.asarray(np.log1p(-off) + np.log1p(off), dtype=float)


def _reference(v: dict[str, Any], lkj_constant: float) -> NDArray[np.float64]:
    """The model's log density at ``v`` (all constants) in SciPy."""
    o, po, lmat = v["o"], v["po"], v["L"]
    wish = stats.wishart(df=2.5, scale=np.eye(2))
    parts = [
        stats.gamma(0.4).logpdf(v["a"]),
        -0.6 * np.log1p(-v["b"]) + stats.norm.logpdf(v["b"]),
        stats.beta(0.3, 0.4).logpdf(v["p"]),
        np.array([stats.dirichlet(np.full(4, 0.3)).logpdf(t) for t in v["theta"]]),
        stats.norm.logpdf(o).sum(axis=1) - 0.5 * np.log(o[:, 1] - o[:, 0])
        - 0.5 * np.log(o[:, 2] - o[:, 1]),
        -po.sum(axis=1) - 0.5 * np.log(po[:, 0]) - 0.5 * np.log(po[:, 1] - po[:, 0]),
        np.array([wish.logpdf(s) for s in v["S"]]),
        stats.norm.logpdf(lmat).sum(axis=(1, 2)) - 0.5 * np.log(lmat[:, 0, 0])
        - 0.5 * np.log(lmat[:, 1, 1]),
        _lkj_kernel(v["Lc"], 0.5) - 0.5 * _log_det_corr(v["R"]) + lkj_constant,
        stats.norm(1, 3).logpdf(v["m"]),
    ]
    return np.asarray(np.sum(parts, axis=0), dtype=float)


def test_the_density_is_exact_at_the_edges_of_every_constrained_type(
        compiled: Callable[..., Any]) -> None:
    rng = np.random.default_rng(20261207)
    evaluator = DensityEvaluator(PROGRAM, None, "edges")
    compiled(evaluator.code)  # through the session's cache
    inside = {name: np.asarray(x, dtype=float) for name, x in INSIDE.items()}
    lkj_constant = float(evaluator.log_density(inside)[0] - _reference(inside, 0.0)[0])
    edges = _values(rng, N)
    for name in edges:
        draws = {k: np.repeat(x, N, axis=0) for k, x in inside.items()}
        draws[name] = edges[name]
        got = evaluator.log_density(draws)
        want = _reference(draws, lkj_constant)
        assert np.all(np.isfinite(want)), name
        worst = np.max(np.abs(got - want) / np.maximum(np.abs(want), 1.0))
        assert worst <= REL, f"{name}: relative error {worst:.3g} at the edges"
