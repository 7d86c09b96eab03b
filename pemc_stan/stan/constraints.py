"""Stan's constraining transforms and their log-Jacobians in NumPy, vectorised over draws.

Bridge sampling (:func:`pemc_stan.evidence`) fits its proposal on the
unconstrained scale, so it needs, for every declared parameter type, the
bijection ``x = c(u)`` between the unconstrained vector ``u`` and the
constrained value ``x`` together with ``log |J(u)|`` exactly as Stan 2.35
defines them (stan/math/prim/constraint): then the posterior density of ``u``
is ``gamma(c(u)) |J(u)|``, and ``integral gamma(c(u)) |J(u)| du = Z``.

Supported declared types (with Stan 2.35's parametrisation):

* ``real``/``vector``/``row_vector``/``matrix`` (and arrays of them) with
  ``<lower>``, ``<upper>``, ``<lower, upper>`` (``x = lb + exp(u)``,
  ``x = ub - exp(u)``, ``x = lb + (ub - lb) logistic(u)``) or
  ``<offset, multiplier>`` (``x = offset + multiplier u``; an offset or multiplier
  that cannot be evaluated from the data, e.g. one depending on another
  parameter, is replaced by the identity ``x = u``, an equally valid bijection
  of the real line);
* ``simplex`` (stick-breaking, ``z_k = logistic(u_k - log(K - k))``);
* ``ordered``, ``positive_ordered``;
* ``cholesky_factor_corr``, ``cholesky_factor_cov``, ``corr_matrix``,
  ``cov_matrix``.

``unit_vector`` is not a bijection (Stan adds a normal density on the
radius), so it is rejected with :class:`UnsupportedConstructError`, as are
bounds that are neither data expressions (literals, data variables, arithmetic
and a few elementwise functions of them) nor such expressions of parameters
declared earlier (``real<lower=0, upper=1 - alpha1> beta1``).  A bound that
depends on earlier parameters is evaluated per draw from their constrained
values: the map of all parameters is then block-triangular in declaration
order, so its ``log |J|`` is still the sum of the per-parameter terms.

The layout of the unconstrained vector of one parameter is: array elements in
row-major order, each followed by its own unconstrained coordinates in Stan's
order for that type (``cholesky_factor_corr`` row-major over the strict lower
triangle, ``corr_matrix`` column-major, matrices with bounds row-major).
Only self-consistency matters for the estimators; the log-Jacobians agree
with Stan's (tested against ``log_prob`` with and without Jacobian).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, logit

from pemc_stan.errors import UnevaluableExpressionError, UnsupportedConstructError
from pemc_stan.stan import ast
from pemc_stan.stan.evaluate import broadcast_per_draw, evaluate, evaluate_per_draw

logger = logging.getLogger(__name__)

__all__ = [
    "ParameterSpace",
    "ParameterTransform",
    "evaluate_data_expression",
    "parameter_space",
]

_ELEMENTWISE = ("real", "vector", "row_vector", "matrix")
_VECTOR_LIKE = ("vector", "row_vector", "simplex", "ordered", "positive_ordered", "unit_vector")
_MATRIX_LIKE = ("matrix", "cholesky_factor_corr", "cholesky_factor_cov", "corr_matrix",
                "cov_matrix")
_SUPPORTED = ("real", "vector", "row_vector", "matrix", "simplex", "ordered",
              "positive_ordered", "cholesky_factor_corr", "cholesky_factor_cov", "corr_matrix",
              "cov_matrix")


def _log_expit(u: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log(logistic(u))`` without overflow."""
    return -np.logaddexp(0.0, -u)


# --------------------------------------------------------------------------- data expressions


def evaluate_data_expression(expr: ast.Expr, data: Mapping[str, Any], what: str = "expression"
                             ) -> NDArray[np.float64]:
    """Evaluate a constant or data-valued Stan expression (bounds, offsets, multipliers).

    Supports literals, data variables, unary ``-``/``+``, binary ``+ - * / ^``
    (elementwise, as NumPy broadcasting), a few elementwise functions
    (``log``, ``exp``, ``sqrt``, ...) and constants (``pi()``,
    ``negative_infinity()``, ...).

    Parameters
    ----------
    expr : ast.Expr
        The expression.
    data : mapping
        Values of the data block's variables.
    what : str
        Description used in error messages (e.g. ``"lower bound of sigma"``).

    Returns
    -------
    ndarray
        The value (0-d for scalars).

    Raises
    ------
    UnsupportedConstructError
        If the expression uses anything else (transformed data, parameters,
        indexing, other functions): pass such a model through NUTS-only
        methods or rewrite the bound in terms of data.
    """
    try:
        return np.asarray(evaluate(expr, data), dtype=float)
    except UnevaluableExpressionError as err:
        raise _unsupported(what, err) from None


def _unsupported(what: str, err: UnevaluableExpressionError) -> UnsupportedConstructError:
    return UnsupportedConstructError(
        f"cannot evaluate the {what} in Python ({err.reason}); pemc-stan's evidence "
        "estimators support bounds, offsets and multipliers that are literals, data "
        "variables, parameters declared earlier (bounds only) or elementwise arithmetic of "
        "them -- move the computation into the data",
        line=err.line, column=err.column, construct=what)


# --------------------------------------------------------------------------- per-type maps
# Each maps a batch: constrain(u (m, k_unc)) -> (x (m, *shape), logJ (m,)),
# unconstrain(x (m, *shape)) -> u (m, k_unc).


def _simplex_constrain(y: NDArray[np.float64], k: int) -> tuple[NDArray[np.float64],
                                                                 NDArray[np.float64]]:
    m = y.shape[0]
    x = np.empty((m, k))
    stick = np.ones(m)
    lp = np.zeros(m)
    for j in range(k - 1):
        adj = y[:, j] - np.log(k - 1 - j)
        x[:, j] = stick * expit(adj)
        lp += np.log(stick) + _log_expit(adj) + _log_expit(-adj)
        stick = stick - x[:, j]
    x[:, k - 1] = stick
    return x, lp


def _simplex_free(x: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    y = np.empty((x.shape[0], k - 1))
    stick = x[:, k - 1].copy()
    for j in range(k - 2, -1, -1):
        stick = stick + x[:, j]
        y[:, j] = logit(x[:, j] / stick) + np.log(k - 1 - j)
    return y


def _ordered_constrain(y: NDArray[np.float64], positive: bool
                       ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    steps = np.exp(y)
    if not positive:
        steps[:, 0] = y[:, 0]
        return np.cumsum(steps, axis=1), y[:, 1:].sum(axis=1)
    return np.cumsum(steps, axis=1), y.sum(axis=1)


def _ordered_free(x: NDArray[np.float64], positive: bool) -> NDArray[np.float64]:
    y = np.empty_like(x)
    y[:, 0] = np.log(x[:, 0]) if positive else x[:, 0]
    y[:, 1:] = np.log(np.diff(x, axis=1))
    return y


def _cholesky_corr_constrain(y: NDArray[np.float64], k: int
                             ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    z = np.tanh(y)
    lp = np.sum(np.log1p(-z * z), axis=1)  # corr_constrain
    m = y.shape[0]
    x = np.zeros((m, k, k))
    x[:, 0, 0] = 1.0
    pos = 0
    for i in range(1, k):
        x[:, i, 0] = z[:, pos]
        pos += 1
        sum_sqs = x[:, i, 0] ** 2
        for j in range(1, i):
            lp += 0.5 * np.log1p(-sum_sqs)
            x[:, i, j] = z[:, pos] * np.sqrt(1.0 - sum_sqs)
            pos += 1
            sum_sqs = sum_sqs + x[:, i, j] ** 2
        x[:, i, i] = np.sqrt(1.0 - sum_sqs)
    return x, lp


def _cholesky_corr_free(x: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    out = []
    for i in range(1, k):
        out.append(np.arctanh(x[:, i, 0]))
        sum_sqs = x[:, i, 0] ** 2
        for j in range(1, i):
            out.append(np.arctanh(x[:, i, j] / np.sqrt(1.0 - sum_sqs)))
            sum_sqs = sum_sqs + x[:, i, j] ** 2
    return np.stack(out, axis=1) if out else np.zeros((x.shape[0], 0))


def _cholesky_cov_constrain(y: NDArray[np.float64], rows: int, cols: int
                            ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    m = y.shape[0]
    x = np.zeros((m, rows, cols))
    lp = np.zeros(m)
    pos = 0
    for r in range(cols):
        for c in range(r):
            x[:, r, c] = y[:, pos]
            pos += 1
        x[:, r, r] = np.exp(y[:, pos])
        lp += y[:, pos]
        pos += 1
    for r in range(cols, rows):
        for c in range(cols):
            x[:, r, c] = y[:, pos]
            pos += 1
    return x, lp


def _cholesky_cov_free(x: NDArray[np.floating[Any]], rows: int, cols: int
                       ) -> NDArray[np.float64]:
    out = []
    for r in range(cols):
        for c in range(r):
            out.append(x[:, r, c])
        out.append(np.log(x[:, r, r]))
    for r in range(cols, rows):
        for c in range(cols):
            out.append(x[:, r, c])
    return np.stack(out, axis=1)


def _cov_constrain(y: NDArray[np.float64], k: int) -> tuple[NDArray[np.float64],
                                                           NDArray[np.float64]]:
    chol, _ = _cholesky_cov_constrain(y, k, k)
    lp = np.full(y.shape[0], k * np.log(2.0))
    for j in range(k):
        lp += (k - j + 1) * np.log(chol[:, j, j])
    return chol @ np.swapaxes(chol, 1, 2), lp


def _cov_free(x: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    return _cholesky_cov_free(np.linalg.cholesky(x), k, k)


def _corr_constrain(y: NDArray[np.float64], k: int) -> tuple[NDArray[np.float64],
                                                            NDArray[np.float64]]:
    z = np.tanh(y)  # canonical partial correlations, column-major
    lp = np.sum(np.log1p(-z * z), axis=1)
    m = y.shape[0]
    chol = np.zeros((m, k, k))
    acc = np.ones((m, k))
    pos = 0
    for c in range(k):
        chol[:, c, c] = np.sqrt(acc[:, c])
        for i in range(c + 1, k):
            lp += 0.5 * (k - c - 2) * np.log1p(-z[:, pos] ** 2)
            chol[:, i, c] = z[:, pos] * np.sqrt(acc[:, i])
            acc[:, i] = acc[:, i] * (1.0 - z[:, pos] ** 2)
            pos += 1
    return chol @ np.swapaxes(chol, 1, 2), lp


def _corr_free(x: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    chol = np.linalg.cholesky(x)
    out = []
    acc = np.ones((x.shape[0], k))
    for c in range(k):
        for i in range(c + 1, k):
            out.append(np.arctanh(chol[:, i, c] / np.sqrt(acc[:, i])))
            acc[:, i] = acc[:, i] - chol[:, i, c] ** 2
    return np.stack(out, axis=1) if out else np.zeros((x.shape[0], 0))


# --------------------------------------------------------------------------- one parameter


@dataclass(frozen=True)
class ParameterTransform:
    """The constraining transform of one declared parameter.

    Attributes
    ----------
    name : str
        Parameter name.
    type_name : str
        Declared base type (``real``, ``vector``, ``simplex``, ...).
    array_dims : tuple of int
        Sizes of the enclosing arrays (outermost first).
    shape : tuple of int
        Shape of one element (``()`` for ``real``, ``(K,)``, ``(M, N)``).
    lower, upper, offset, multiplier : ndarray or None
        Evaluated bounds / affine transform, broadcastable to
        ``array_dims + shape`` (elementwise types only).
    lower_expr, upper_expr : ast.Expr or None
        A bound that depends on the parameters ``bound_parameters`` (declared
        earlier), evaluated per draw with ``bound_data`` and their values (in place
        of ``lower`` / ``upper``).
    bound_parameters : tuple of str
        The parameters those bounds use.
    """

    name: str
    type_name: str
    array_dims: tuple[int, ...]
    shape: tuple[int, ...]
    lower: NDArray[np.float64] | None = None
    upper: NDArray[np.float64] | None = None
    offset: NDArray[np.float64] | None = None
    multiplier: NDArray[np.float64] | None = None
    lower_expr: ast.Expr | None = None
    upper_expr: ast.Expr | None = None
    bound_parameters: tuple[str, ...] = ()
    bound_data: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def n_elements(self) -> int:
        """Number of array elements (1 for a non-array)."""
        return int(np.prod(self.array_dims, dtype=int))

    @property
    def element_unconstrained_size(self) -> int:
        """Unconstrained dimension of one array element."""
        t, s = self.type_name, self.shape
        if t in _ELEMENTWISE or t in ("ordered", "positive_ordered"):
            return int(np.prod(s, dtype=int))
        if t == "simplex":
            return s[0] - 1
        if t in ("cholesky_factor_corr", "corr_matrix"):
            return s[0] * (s[0] - 1) // 2
        if t == "cov_matrix":
            return s[0] * (s[0] + 1) // 2
        if t == "cholesky_factor_cov":
            rows, cols = s
            return cols * (cols + 1) // 2 + (rows - cols) * cols
        raise AssertionError(t)

    @property
    def unconstrained_size(self) -> int:
        """Total unconstrained dimension."""
        return self.n_elements * self.element_unconstrained_size

    def _full(self, v: NDArray[np.float64] | None, default: float) -> NDArray[np.float64]:
        full = self.array_dims + self.shape
        if v is None:
            return np.full(int(np.prod(full, dtype=int)), default)
        try:
            return np.broadcast_to(np.asarray(v, dtype=float), full).reshape(-1)
        except ValueError as err:
            raise ValueError(f"bound of {self.name} has shape {np.shape(v)}, expected a scalar "
                             f"or {full}") from err

    def _bounds(self, n: int, params: Mapping[str, Any] | None
                ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Lower and upper bounds, flat: ``(size,)``, or ``(n, size)`` per draw when they
        depend on parameters (whose constrained draws ``params`` holds, draws first).

        Raises
        ------
        KeyError
            If a parameter a bound uses is missing from ``params``.
        UnsupportedConstructError
            If a bound cannot be evaluated.
        """
        if not self.bound_parameters:
            return self._full(self.lower, -np.inf), self._full(self.upper, np.inf)
        missing = [p for p in self.bound_parameters if params is None or p not in params]
        if missing:
            raise KeyError(f"the bounds of {self.name} depend on {missing}: pass their draws")
        assert params is not None
        env = {p: np.asarray(params[p], dtype=float) for p in self.bound_parameters}
        full = self.array_dims + self.shape
        out = []
        for expr, fixed, default in ((self.lower_expr, self.lower, -np.inf),
                                     (self.upper_expr, self.upper, np.inf)):
            if expr is None:
                out.append(np.broadcast_to(self._full(fixed, default), (n, int(np.prod(full)))))
                continue
            try:
                v = evaluate_per_draw(expr, self.bound_data, env, n)
            except UnevaluableExpressionError as err:
                raise _unsupported(f"bound of {self.name}", err) from None
            out.append(broadcast_per_draw(v, n, full, f"bound of {self.name}").reshape(n, -1))
        return out[0], out[1]

    def constrain(self, u: ArrayLike, params: Mapping[str, Any] | None = None
                  ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Map unconstrained draws to constrained values.

        Parameters
        ----------
        u : array_like, shape (n, unconstrained_size)
        params : mapping, optional
            Constrained draws of the parameters the bounds depend on (draws first).

        Returns
        -------
        x : ndarray, shape (n, *array_dims, *shape)
        log_jacobian : ndarray, shape (n,)

        Raises
        ------
        ValueError
            If ``u`` has the wrong shape.
        KeyError
            If a parameter the bounds depend on is missing from ``params``.
        """
        u = np.asarray(u, dtype=float)
        n = u.shape[0]
        if u.shape != (n, self.unconstrained_size):
            raise ValueError(f"{self.name}: expected unconstrained draws of shape "
                             f"(n, {self.unconstrained_size}), got {u.shape}")
        t, s, e = self.type_name, self.shape, self.n_elements
        if t in _ELEMENTWISE:
            flat = u.reshape(n, -1)
            if self.offset is not None or self.multiplier is not None:
                mu = self._full(self.offset, 0.0)
                sig = self._full(self.multiplier, 1.0)
                x = mu + sig * flat
                lj = np.full(n, np.sum(np.log(sig)))
            else:
                lb, ub = self._bounds(n, params)
                x, lj = _bounded_constrain(flat, lb, ub)
            return x.reshape((n, *self.array_dims, *s)), lj
        batch = u.reshape(n * e, self.element_unconstrained_size)
        if t == "simplex":
            xb, lj = _simplex_constrain(batch, s[0])
        elif t in ("ordered", "positive_ordered"):
            xb, lj = _ordered_constrain(batch, t == "positive_ordered")
        elif t == "cholesky_factor_corr":
            xb, lj = _cholesky_corr_constrain(batch, s[0])
        elif t == "cholesky_factor_cov":
            xb, lj = _cholesky_cov_constrain(batch, *s)
        elif t == "cov_matrix":
            xb, lj = _cov_constrain(batch, s[0])
        elif t == "corr_matrix":
            xb, lj = _corr_constrain(batch, s[0])
        else:  # pragma: no cover - rejected at construction
            raise AssertionError(t)
        return xb.reshape((n, *self.array_dims, *s)), lj.reshape(n, e).sum(axis=1)

    def unconstrain(self, x: ArrayLike, check: bool = True,
                    params: Mapping[str, Any] | None = None) -> NDArray[np.float64]:
        """Map constrained values to unconstrained draws (inverse of :meth:`constrain`).

        Parameters
        ----------
        x : array_like, shape (n, *array_dims, *shape)
        check : bool, default True
            Raise on non-finite results; with False they are returned (NaN or
            infinite rows mark draws outside the support).
        params : mapping, optional
            Constrained draws of the parameters the bounds depend on (draws first).

        Returns
        -------
        ndarray, shape (n, unconstrained_size)

        Raises
        ------
        ValueError
            If ``x`` has the wrong shape or violates the constraint (values on
            or beyond a bound give non-finite unconstrained values).
        KeyError
            If a parameter the bounds depend on is missing from ``params``.
        """
        x = np.asarray(x, dtype=float)
        n = x.shape[0] if x.ndim else 1
        full = self.array_dims + self.shape
        try:
            x = x.reshape((n, *full))
        except ValueError as err:
            raise ValueError(f"{self.name}: expected draws of shape (n, *{full}), got "
                             f"{x.shape}") from err
        t, s, e = self.type_name, self.shape, self.n_elements
        with np.errstate(all="ignore"):
            if t in _ELEMENTWISE:
                flat = x.reshape(n, -1)
                if self.offset is not None or self.multiplier is not None:
                    u = (flat - self._full(self.offset, 0.0)) / self._full(self.multiplier, 1.0)
                else:
                    u = _bounded_free(flat, *self._bounds(n, params))
            else:
                batch = x.reshape((n * e, *s))
                if t == "simplex":
                    ub = _simplex_free(batch, s[0])
                elif t in ("ordered", "positive_ordered"):
                    ub = _ordered_free(batch, t == "positive_ordered")
                elif t == "cholesky_factor_corr":
                    ub = _cholesky_corr_free(batch, s[0])
                elif t == "cholesky_factor_cov":
                    ub = _cholesky_cov_free(batch, *s)
                elif t in ("cov_matrix", "corr_matrix"):
                    try:
                        ub = (_cov_free if t == "cov_matrix" else _corr_free)(batch, s[0])
                    except np.linalg.LinAlgError:
                        ub = np.stack([_pd_free_or_nan(t, b, s[0]) for b in batch])
                else:  # pragma: no cover
                    raise AssertionError(t)
                u = ub.reshape(n, -1)
        if check and not np.all(np.isfinite(u)):
            raise ValueError(f"{self.name}: some draws are on or outside the support of "
                             f"{self.type_name} (non-finite unconstrained values)")
        return u


def _pd_free_or_nan(t: str, x: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """Free coordinates of one matrix, NaN when it is not positive definite."""
    try:
        return (_cov_free if t == "cov_matrix" else _corr_free)(x[None], k)[0]
    except np.linalg.LinAlgError:
        return np.full(k * (k + 1) // 2 if t == "cov_matrix" else k * (k - 1) // 2, np.nan)


def _bounded_constrain(u: NDArray[np.float64], lb: NDArray[np.float64], ub: NDArray[np.float64]
                       ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    lo, hi = np.isfinite(lb), np.isfinite(ub)
    both = lo & hi
    x = u.copy()
    lj = np.zeros_like(u)
    with np.errstate(all="ignore"):
        width = np.where(both, ub - lb, 1.0)
        x = np.where(both, lb + width * expit(u), x)
        lj = np.where(both, np.log(width) + _log_expit(u) + _log_expit(-u), lj)
        x = np.where(lo & ~hi, lb + np.exp(u), x)
        x = np.where(hi & ~lo, ub - np.exp(u), x)
        lj = np.where(lo ^ hi, u, lj)
    return x, lj.sum(axis=1)


def _bounded_free(x: NDArray[np.float64], lb: NDArray[np.float64], ub: NDArray[np.float64]
                  ) -> NDArray[np.float64]:
    lo, hi = np.isfinite(lb), np.isfinite(ub)
    both = lo & hi
    u = x.copy()
    u = np.where(both, logit((x - lb) / np.where(both, ub - lb, 1.0)), u)
    u = np.where(lo & ~hi, np.log(x - lb), u)
    u = np.where(hi & ~lo, np.log(ub - x), u)
    return u


# --------------------------------------------------------------------------- all parameters


@dataclass(frozen=True)
class ParameterSpace:
    """All parameters of a program, in declaration order, with their transforms."""

    transforms: tuple[ParameterTransform, ...]

    @property
    def names(self) -> list[str]:
        """Parameter names in declaration order."""
        return [t.name for t in self.transforms]

    @property
    def dim(self) -> int:
        """Total unconstrained dimension."""
        return sum(t.unconstrained_size for t in self.transforms)

    def unconstrain(self, draws: Mapping[str, ArrayLike]) -> NDArray[np.float64]:
        """Stack the unconstrained values of every parameter.

        Parameters
        ----------
        draws : mapping
            Constrained draws per parameter, ``(n, *array_dims, *shape)``
            (as ``CmdStanMCMC.stan_variable`` returns them).

        Returns
        -------
        ndarray, shape (n, dim)

        Raises
        ------
        KeyError
            If a parameter is missing.
        ValueError
            As :meth:`ParameterTransform.unconstrain`.
        """
        parts = [t.unconstrain(draws[t.name], params=draws) for t in self.transforms]
        return np.concatenate(parts, axis=1)

    def constrain(self, u: ArrayLike) -> tuple[dict[str, NDArray[np.float64]],
                                                NDArray[np.float64]]:
        """Constrained values of every parameter and the total ``log |J|``.

        Parameters
        ----------
        u : array_like, shape (n, dim)

        Returns
        -------
        draws : dict of name to ndarray
        log_jacobian : ndarray, shape (n,)

        Raises
        ------
        ValueError
            If ``u`` does not have ``dim`` columns.
        """
        u = np.atleast_2d(np.asarray(u, dtype=float))
        if u.shape[1] != self.dim:
            raise ValueError(f"expected {self.dim} unconstrained columns, got {u.shape[1]}")
        out: dict[str, NDArray[np.float64]] = {}
        lj = np.zeros(u.shape[0])
        start = 0
        for t in self.transforms:
            x, l_t = t.constrain(u[:, start:start + t.unconstrained_size], out)
            out[t.name] = x
            lj += l_t
            start += t.unconstrained_size
        return out, lj

    def log_jacobian(self, draws: Mapping[str, ArrayLike]) -> NDArray[np.float64]:
        """``log |J|`` of the constraining map at the unconstrained image of ``draws``.

        Raises
        ------
        KeyError, ValueError
            As :meth:`unconstrain`.
        """
        return self.constrain(self.unconstrain(draws))[1]


def _split_type(type_: ast.Type, data: Mapping[str, Any], name: str
                ) -> tuple[ast.BasicType, tuple[int, ...]]:
    dims: list[int] = []
    while isinstance(type_, ast.ArrayType):
        for d in type_.dims:
            dims.append(int(evaluate_data_expression(d, data, f"array size of {name}")))
        type_ = type_.element
    if not isinstance(type_, ast.BasicType):
        raise UnsupportedConstructError(
            f"parameter {name!r} has type {type(type_).__name__}; pemc-stan's evidence "
            "estimators support (arrays of) basic and constrained types only",
            line=type_.line, column=type_.column, construct=type(type_).__name__)
    return type_, tuple(dims)


def parameter_space(program: ast.Program, data: Mapping[str, Any] | None = None,
                    shapes: Mapping[str, tuple[int, ...]] | None = None,
                    filename: str = "<string>") -> ParameterSpace:
    """The transforms of every declared parameter of ``program``.

    Parameters
    ----------
    program : ast.Program
        Parsed program.
    data : mapping, optional
        Data values (for bounds and sizes).
    shapes : mapping, optional
        Shape of one draw of each parameter (``array_dims + shape``); when
        given it overrides the sizes in the declarations (which then need not
        be evaluable).
    filename : str
        Program name for error messages.

    Returns
    -------
    ParameterSpace

    Raises
    ------
    UnsupportedConstructError
        For ``unit_vector``, tuple or complex parameters, sizes that are not
        constant or data expressions, or bounds that are neither those nor such
        expressions of parameters declared earlier.
    """
    data = dict(data or {})
    out: list[ParameterTransform] = []
    block = program.parameters.stmts if program.parameters is not None else ()
    for stmt in block:
        if not isinstance(stmt, ast.VarDecl):
            continue
        for decl in stmt.declarators:
            name = decl.name
            try:
                out.append(_one_transform(stmt.type, name, data, shapes, out))
            except UnsupportedConstructError as exc:
                exc.filename = filename
                raise
    return ParameterSpace(tuple(out))


def _bound(expr: ast.Expr, data: Mapping[str, Any], what: str,
           earlier: list[ParameterTransform]) -> tuple[NDArray[np.float64] | None,
                                                       tuple[str, ...]]:
    """A bound's value from the data, or ``(None, the earlier parameters it uses)`` when
    it depends on them (checked by evaluating it at one draw of ones).

    Raises
    ------
    UnsupportedConstructError
        If the bound is neither a data expression nor one of earlier parameters.
    """
    shapes = {t.name: t.array_dims + t.shape for t in earlier}
    used = tuple(sorted(ast.names_in(expr) & set(shapes)))
    if not used:
        return evaluate_data_expression(expr, data, what), ()
    try:
        with np.errstate(all="ignore"):
            evaluate_per_draw(expr, data, {p: np.ones((1, *shapes[p])) for p in used}, 1)
    except UnevaluableExpressionError as err:
        raise _unsupported(what, err) from None
    return None, used


def _one_transform(type_: ast.Type, name: str, data: Mapping[str, Any],
                   shapes: Mapping[str, tuple[int, ...]] | None,
                   earlier: list[ParameterTransform] | None = None) -> ParameterTransform:
    base = type_
    n_array = 0
    while isinstance(base, ast.ArrayType):
        n_array += len(base.dims)
        base = base.element
    if not isinstance(base, ast.BasicType):
        raise UnsupportedConstructError(
            f"parameter {name!r} has a {type(base).__name__}; pemc-stan's evidence estimators "
            "support (arrays of) basic and constrained types only",
            line=base.line, column=base.column, construct=type(base).__name__)
    t = base.name
    if t == "unit_vector":
        raise UnsupportedConstructError(
            f"parameter {name!r} is a unit_vector, whose Stan transform is not a bijection "
            "(Stan adds a normal density on the radius), so no normalising constant on the "
            "unconstrained scale exists; reparametrise (e.g. an angle) to estimate evidence",
            line=base.line, column=base.column, construct="unit_vector")
    if t not in _SUPPORTED:
        raise UnsupportedConstructError(
            f"parameter {name!r} has type {t}, which pemc-stan's constraining transforms do "
            f"not support (supported: {', '.join(_SUPPORTED)})",
            line=base.line, column=base.column, construct=t)
    n_elem_dims = 0 if t == "real" else (1 if t in _VECTOR_LIKE else 2)
    if shapes is not None and name in shapes:
        full = tuple(int(v) for v in shapes[name])
        if len(full) != n_array + n_elem_dims:
            raise ValueError(f"shape {full} of {name} does not match its declared type")
        dims, shape = full[:n_array], full[n_array:]
    else:
        btype, dims = _split_type(type_, data, name)
        sizes = [int(evaluate_data_expression(s, data, f"size of {name}")) for s in btype.sizes]
        if t in ("cholesky_factor_corr", "corr_matrix", "cov_matrix"):
            shape = (sizes[0], sizes[0])
        elif t == "cholesky_factor_cov":
            shape = (sizes[0], sizes[1] if len(sizes) > 1 else sizes[0])
        else:
            shape = tuple(sizes)
    if t in ("row_vector",) and len(shape) != 1:
        raise ValueError(f"shape {shape} of {name} does not match row_vector")
    lower = upper = offset = multiplier = None
    lower_expr = upper_expr = None
    uses: tuple[str, ...] = ()
    c = base.constraint
    if isinstance(c, ast.Bounds):
        if c.lower is not None:
            lower, used = _bound(c.lower, data, f"lower bound of {name}", earlier or [])
            lower_expr, uses = (c.lower if used else None), uses + used
        if c.upper is not None:
            upper, used = _bound(c.upper, data, f"upper bound of {name}", earlier or [])
            upper_expr, uses = (c.upper if used else None), uses + used
    elif isinstance(c, ast.Affine):
        try:
            offset = (evaluate_data_expression(c.offset, data, f"offset of {name}")
                      if c.offset is not None else None)
            multiplier = (evaluate_data_expression(c.multiplier, data, f"multiplier of {name}")
                          if c.multiplier is not None else None)
        except UnsupportedConstructError as exc:
            # x = offset + multiplier * u ranges over all of R whatever the offset and
            # the (positive) multiplier, so the identity is an equally valid bijection for
            # the estimators (only self-consistency matters): an offset or multiplier that
            # depends on other parameters (a non-centred hierarchy) needs no evaluation.
            logger.debug("%s: using the identity as its unconstrained map (%s)", name, exc)
            offset = multiplier = None
    return ParameterTransform(name, t, tuple(dims), tuple(shape), lower, upper, offset,
                              multiplier, lower_expr, upper_expr,
                              tuple(sorted(set(uses))), data if uses else {})
