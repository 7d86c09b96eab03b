"""The parameters' base coordinates ``z = c(x)``: one map per constraint type.

The Gaussian base densities (:mod:`pemc_stan.core.base_density`) are
Gaussians in *base coordinates* ``z = c(x) in R^D``; this module holds the
maps, their log-Jacobians and the parameters' draws read out of CmdStan's
columns.  The coordinate maps (each mirrored in Stan by the functions of
``stan_templates/base_density.stan.jinja``,
:func:`~pemc_stan.core.coordinate_code.stan_base_functions`, and called by
the statements of :func:`~pemc_stan.core.coordinate_code.stan_coordinate_code`):

=====================  ===================================  ==================================
declared type          base coordinates ``z``                ``log |det dz/dx|``
=====================  ===================================  ==================================
unbounded (any shape)  ``x``                                0
``<offset=a,           ``(x - a) / m`` (Stan's own           ``-sum log m``
multiplier=m>``        unconstrained coordinates)
``<lower=L>``          ``log(x - L)``                        ``-sum log(x - L)``
``<upper=U>``          ``log(U - x)``                        ``-sum log(U - x)``
``<lower=L,upper=U>``  ``logit((x - L) / (U - L))``          ``sum [log(U-L) - log(x-L)``
                                                             ``- log(U-x)]``
``simplex[K]``         additive log-ratios                   ``-sum_{k<=K} log x_k``
                       ``log(x_k / x_K)``, k<K
``sum_to_zero_vector`` ``x_{1:K-1}``                         0
``ordered[K]``         ``x_1, log(x_k - x_{k-1})``           ``-sum_{k>=2} log(x_k - x_{k-1})``
``positive_ordered``   ``log x_1, log(x_k - x_{k-1})``       ``-log x_1 - sum_{k>=2} log(...)``
``cholesky_factor_cov`` free entries of ``L``, log of the   ``-sum_j log L_jj``
                       diagonal
``cov_matrix[K]``      as ``cholesky_factor_cov`` of         ``-K log 2``
                       ``chol(x)``                           ``- sum_i (K - i + 2) log L_ii``
column/row stochastic  additive log-ratios of each           as ``simplex``, summed
                       column/row
=====================  ===================================  ==================================


containers of the parameter's type) or depend on parameters declared earlier
(a non-centred hierarchy ``vector<multiplier=tau>[J] theta``): the map of all
parameters is then block-triangular, so ``log |det|`` is still the sum of the
per-parameter terms and ``b`` stays normalised.

(``simplex``: ``x = softmax([z, 0])`` and ``|det dx_{1:K-1}/dz| = prod_k x_k``;
``cov_matrix``: ``|det dSigma/dL| = 2^K prod_i L_ii^(K-i+1)`` for the lower
triangles.)  ``unit_vector``, ``corr_matrix`` and ``cholesky_factor_corr``
are not supported (:class:`UnsupportedBaseError`).

Elements are flattened in a fixed order, identical in Stan and Python: array
indices row-major (last index fastest), then the element's own entries
(vectors in order, matrices column-major, Cholesky factors column by column
from the diagonal down).

"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

from pemc_stan.errors import UnevaluableExpressionError, UnsupportedBaseError
from pemc_stan.numeric import logsumexp
from pemc_stan.stan import ast
from pemc_stan.stan.evaluate import broadcast_per_draw, evaluate_per_draw, with_definitions
from pemc_stan.stan.evaluate import evaluate as evaluate_expression
from pemc_stan.stan.printer import print_expr, print_type

__all__ = ["BaseCoordinates", "ParameterBlock", "base_coordinates",
           "coordinate_draws", "extract_variable"]

_ELEMENTWISE_TYPES = ("real", "vector", "row_vector", "matrix")
#: Coordinate maps acting entry by entry on the elementwise types.
_ELEMENTWISE_KINDS = ("identity", "lower", "upper", "interval", "affine")
_SUPPORTED = _ELEMENTWISE_TYPES + (
    "simplex", "sum_to_zero_vector", "ordered", "positive_ordered", "cholesky_factor_cov",
    "cov_matrix", "column_stochastic_matrix", "row_stochastic_matrix")



# --------------------------------------------------------------------------- #
# Evaluating size and bound expressions from data
# --------------------------------------------------------------------------- #

def evaluate(expr: ast.Expr, data: Mapping[str, Any],
             draws: Mapping[str, Any] | None = None, n_draws: int = 1) -> Any:
    """Evaluate a size or bound expression from the data (:func:`pemc_stan.stan.evaluate.evaluate`),
    or, given the ``draws`` of the parameters a bound uses (draws first), its value at each
    of ``n_draws`` draws (:func:`~pemc_stan.stan.evaluate.evaluate_per_draw`).

    Raises
    ------
    UnsupportedBaseError
        For expressions that need more than the data (e.g. transformed data
        variables), naming what is missing.
    """
    try:
        if draws is not None:
            return evaluate_per_draw(expr, data, draws, n_draws)
        return evaluate_expression(expr, data)
    except UnevaluableExpressionError as err:
        if err.missing:
            raise UnsupportedBaseError(
                f"the base density needs the value of {err.missing!r} (in a size or bound), "
                "which is not in the data; base coordinates support sizes and bounds computed "
                f"from data variables and literals only: pass {err.missing!r} as data or "
                "write the size or bound with data variables") from None
        raise UnsupportedBaseError(
            f"cannot evaluate {print_expr(expr)!r} for the base density ({err.reason}); base "
            "coordinates support sizes and bounds computed from data variables and literals "
            "only: write the size or bound with data variables") from None


# --------------------------------------------------------------------------- #
# Coordinate maps
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class ParameterBlock:
    """How one declared parameter maps to base coordinates.

    Attributes
    ----------
    name
        The parameter's name.
    kind
        ``identity``, ``lower``, ``upper``, ``interval``, ``affine``, ``simplex``,
        ``sum_to_zero``, ``ordered``, ``positive_ordered``,
        ``cholesky_factor_cov``, ``cov_matrix``, ``column_stochastic`` or
        ``row_stochastic``.
    element
        The element type name (``real``, ``vector``, ``simplex``, ...).
    array_dims, element_sizes
        Size expressions (Stan ASTs) of the array dimensions and the element.
    lower, upper
        Bound expressions or None; for ``kind="affine"`` the offset (``lower``)
        and the multiplier (``upper``), so that one pair of expressions serves
        every elementwise map.
    declared
        The declared type as Stan text.
    lower_is_container, upper_is_container
        Whether a bound is a container of the parameter's full type (Stan
        allows a scalar or the declared type); it is then indexed like the
        parameter.
    bound_parameters
        Other parameters the bounds depend on (declared earlier; the map of
        all parameters is then block-triangular, so its log-Jacobian is still
        the sum of the per-parameter terms).
    """

    name: str
    kind: str
    element: str
    array_dims: tuple[ast.Expr, ...]
    element_sizes: tuple[ast.Expr, ...]
    lower: ast.Expr | None = None
    upper: ast.Expr | None = None
    declared: str = ""
    lower_is_container: bool = False
    upper_is_container: bool = False
    bound_parameters: tuple[str, ...] = ()

    # ---- sizes --------------------------------------------------------- #

    def shape(self, data: Mapping[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(array dims, element shape) as integers.

        Raises
        ------
        UnsupportedBaseError
            If a size cannot be evaluated from the data.
        """
        arr = tuple(int(evaluate(e, data)) for e in self.array_dims)
        sizes = [int(evaluate(e, data)) for e in self.element_sizes]
        if self.element == "real":
            el: tuple[int, ...] = ()
        elif self.element in ("vector", "row_vector", "simplex", "sum_to_zero_vector",
                              "ordered", "positive_ordered"):
            el = (sizes[0],)
        elif self.element in ("cov_matrix",):
            el = (sizes[0], sizes[0])
        elif self.element == "cholesky_factor_cov":
            el = (sizes[0], sizes[1] if len(sizes) > 1 else sizes[0])
        else:
            el = (sizes[0], sizes[1])
        return arr, el

    def element_dim(self, el: tuple[int, ...]) -> int:
        """Number of base coordinates of one element of shape ``el``."""
        k = self.kind
        if k in _ELEMENTWISE_KINDS:
            return int(np.prod(el)) if el else 1
        if k in ("simplex", "sum_to_zero"):
            return el[0] - 1
        if k in ("ordered", "positive_ordered"):
            return el[0]
        if k == "cholesky_factor_cov":
            m, n = el
            return n * (n + 1) // 2 + (m - n) * n
        if k == "cov_matrix":
            return el[0] * (el[0] + 1) // 2
        if k == "column_stochastic":
            return (el[0] - 1) * el[1]
        if k == "row_stochastic":
            return el[0] * (el[1] - 1)
        raise AssertionError(k)

    def dim(self, data: Mapping[str, Any]) -> int:
        """Total number of base coordinates of the parameter."""
        arr, el = self.shape(data)
        return int(np.prod(arr)) * self.element_dim(el) if arr else self.element_dim(el)

    # ---- numeric maps (per element, vectorised over draws) ------------- #

    def _bounds(self, data: Mapping[str, Any], params: Mapping[str, Any] | None = None,
                n_draws: int = 1) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Bounds as arrays (draws or 1, number of elements, entries of one element in z order).

        Raises
        ------
        UnsupportedBaseError
            If a bound cannot be evaluated (or a parameter it uses is missing).
        """
        arr, el = self.shape(data)
        n_el = int(np.prod(arr)) if arr else 1
        full = (*arr, *el)
        used: dict[str, NDArray[np.float64]] = {}
        if self.bound_parameters:
            missing = [p for p in self.bound_parameters if params is None or p not in params]
            if missing or params is None:
                raise UnsupportedBaseError(
                    f"the bounds of {self.name!r} depend on {missing}, whose values are "
                    "needed (pass every parameter)")
            used = {p: np.asarray(params[p], dtype=np.float64) for p in self.bound_parameters}
        out = []
        defaults = (0.0, 1.0) if self.kind == "affine" else (-math.inf, math.inf)
        for expr, default in ((self.lower, defaults[0]), (self.upper, defaults[1])):
            if expr is not None and set(used) & ast.names_in(expr):
                lead = n_draws
                v = broadcast_per_draw(evaluate(expr, data, used, n_draws), n_draws, full,
                                       f"bound of {self.name!r}")
            else:
                lead = 1
                v = np.asarray(default if expr is None else evaluate(expr, data), dtype=float)
                v = v[None, ...]
            b = np.broadcast_to(v, (lead, *full)).reshape((lead, n_el, *el))
            out.append(b.reshape(lead, n_el, -1, order="F"))
        return out[0], out[1]

    def _forward(self, x: NDArray[np.float64], el: tuple[int, ...], lo: Any, hi: Any
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(z (S, d), log|dz/dx| (S,)) for elements ``x`` of shape (S, *el)."""
        s = x.shape[0]
        k = self.kind
        if k in _ELEMENTWISE_KINDS:
            v = x.reshape(s, -1, order="F")
            if k == "identity":
                return v, np.zeros(s)
            if k == "affine":  # lo: offset, hi: multiplier
                scale = np.broadcast_to(hi, v.shape)
                return (v - lo) / hi, -np.log(scale).sum(axis=1)
            if k == "lower":
                z = np.log(v - lo)
                return z, -z.sum(axis=1)
            if k == "upper":
                z = np.log(hi - v)
                return z, -z.sum(axis=1)
            a, b = np.log(v - lo), np.log(hi - v)
            return a - b, (np.log(hi - lo) - a - b).sum(axis=1)
        if k == "simplex":
            lv = np.log(x)
            return lv[:, :-1] - lv[:, -1:], -lv.sum(axis=1)
        if k == "sum_to_zero":
            return x[:, :-1], np.zeros(s)
        if k in ("ordered", "positive_ordered"):
            d = np.log(np.diff(x, axis=1))
            first = x[:, :1] if k == "ordered" else np.log(x[:, :1])
            z = np.concatenate([first, d], axis=1)
            jac = -d.sum(axis=1) - (np.log(x[:, 0]) if k == "positive_ordered" else 0.0)
            return z, jac
        if k in ("cholesky_factor_cov", "cov_matrix"):
            if k == "cov_matrix":
                chol = np.linalg.cholesky(x)
            else:
                chol = x
            n = chol.shape[2]
            cols = []
            for j in range(n):
                cols.append(np.log(chol[:, j, j])[:, None])
                cols.append(chol[:, j + 1:, j])
            z = np.concatenate(cols, axis=1)
            logdiag = np.log(np.stack([chol[:, j, j] for j in range(n)], axis=1))
            if k == "cholesky_factor_cov":
                return z, -logdiag.sum(axis=1)
            kk = n
            coef = kk - np.arange(1, kk + 1) + 2.0
            return z, -kk * math.log(2.0) - logdiag @ coef
        if k in ("column_stochastic", "row_stochastic"):
            mat = x if k == "column_stochastic" else np.swapaxes(x, 1, 2)
            lv = np.log(mat)  # (S, K, ncols): columns are simplexes
            z = (lv[:, :-1, :] - lv[:, -1:, :]).reshape(s, -1, order="F")
            return z, -lv.sum(axis=(1, 2))
        raise AssertionError(k)

    def _inverse(self, z: NDArray[np.float64], el: tuple[int, ...], lo: Any, hi: Any
                 ) -> NDArray[np.float64]:
        """Elements (S, *el) from base coordinates (S, d)."""
        s = z.shape[0]
        k = self.kind
        if k in _ELEMENTWISE_KINDS:
            if k == "identity":
                v = z
            elif k == "affine":
                v = lo + hi * z
            elif k == "lower":
                v = lo + np.exp(z)
            elif k == "upper":
                v = hi - np.exp(z)
            else:
                v = lo + (hi - lo) * expit(z)
            return v.reshape((s, *el), order="F") if el else v[:, 0]
        if k == "simplex":
            full = np.concatenate([z, np.zeros((s, 1))], axis=1)
            return np.exp(full - logsumexp(full, axis=1, keepdims=True))
        if k == "sum_to_zero":
            return np.concatenate([z, -z.sum(axis=1, keepdims=True)], axis=1)
        if k in ("ordered", "positive_ordered"):
            first = z[:, :1] if k == "ordered" else np.exp(z[:, :1])
            return np.cumsum(np.concatenate([first, np.exp(z[:, 1:])], axis=1), axis=1)
        if k in ("cholesky_factor_cov", "cov_matrix"):
            m, n = (el[0], el[1]) if k == "cholesky_factor_cov" else (el[0], el[0])
            chol = np.zeros((s, m, n))
            pos = 0
            for j in range(n):
                chol[:, j, j] = np.exp(z[:, pos])
                pos += 1
                chol[:, j + 1:, j] = z[:, pos:pos + m - j - 1]
                pos += m - j - 1
            return chol if k == "cholesky_factor_cov" else chol @ np.swapaxes(chol, 1, 2)
        if k in ("column_stochastic", "row_stochastic"):
            rows, cols = el if k == "column_stochastic" else (el[1], el[0])
            zz = z.reshape(s, rows - 1, cols, order="F")
            full = np.concatenate([zz, np.zeros((s, 1, cols))], axis=1)
            mat = np.exp(full - logsumexp(full, axis=1, keepdims=True))
            return mat if k == "column_stochastic" else np.swapaxes(mat, 1, 2)
        raise AssertionError(k)

    def forward(self, x: ArrayLike, data: Mapping[str, Any],
                params: Mapping[str, Any] | None = None
                ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Base coordinates and log-Jacobian of draws ``x`` of shape (S, *array dims, *element).

        ``params`` holds the draws of the parameters the bounds depend on.

        Returns
        -------
        (ndarray (S, d), ndarray (S,))

        Raises
        ------
        UnsupportedBaseError
            If sizes or bounds cannot be evaluated.
        """
        arr, el = self.shape(data)
        xa = np.asarray(x, dtype=float)
        s = xa.shape[0]
        lo, hi = self._bounds(data, params, s)
        n_el = int(np.prod(arr)) if arr else 1
        elems = xa.reshape((s, n_el, *el))
        zs, jac = [], np.zeros(s)
        for i in range(n_el):
            z, j = self._forward(elems[:, i], el, lo[:, i], hi[:, i])
            zs.append(z)
            jac = jac + j
        return np.concatenate(zs, axis=1), jac

    def inverse(self, z: ArrayLike, data: Mapping[str, Any],
                params: Mapping[str, Any] | None = None) -> NDArray[np.float64]:
        """Draws (S, *array dims, *element) from base coordinates (S, d).

        ``params`` holds the draws of the parameters the bounds depend on.

        Raises
        ------
        UnsupportedBaseError
            If sizes or bounds cannot be evaluated.
        """
        arr, el = self.shape(data)
        za = np.asarray(z, dtype=float)
        s = za.shape[0]
        lo, hi = self._bounds(data, params, s)
        n_el = int(np.prod(arr)) if arr else 1
        d = self.element_dim(el)
        parts = [self._inverse(za[:, i * d:(i + 1) * d], el, lo[:, i], hi[:, i])
                 for i in range(n_el)]
        out = np.stack(parts, axis=1)
        return out.reshape((s, *arr, *el))

    # ---- Stan code ----------------------------------------------------- #

    def stan_element_call(self, elem: str, index: str = "") -> tuple[str, str]:
        """Stan expressions (z vector, log|dz/dx|) of one element named ``elem``.

        ``index`` is the array index text (``"[pemc_i1]"``) applied to
        container bounds.
        """

        def bound(expr: ast.Expr | None, container: bool) -> str | None:
            if expr is None:
                return None
            text = print_expr(expr)
            if not container:
                return text
            if index:
                text = f"({text}){index}" if not text.isidentifier() else f"{text}{index}"
            if self.element in ("row_vector", "matrix"):
                text = f"to_vector({text})"
            return text

        lo = bound(self.lower, self.lower_is_container)
        hi = bound(self.upper, self.upper_is_container)
        k = self.kind
        if k == "interval" and self.element != "real" and (
                self.lower_is_container != self.upper_is_container):
            # mixed scalar/container bounds: make both vectors
            if not self.lower_is_container:
                lo = f"rep_vector({lo}, {self.stan_dim()})"
            else:
                hi = f"rep_vector({hi}, {self.stan_dim()})"
        if self.element == "real":
            v = f"[{elem}]'"
        elif self.element in ("vector", "simplex", "sum_to_zero_vector", "ordered",
                              "positive_ordered"):
            v = elem
        else:
            v = f"to_vector({elem})"
        if k == "identity":
            return v, ""
        if k == "affine":
            off, mult = lo or "0", hi or "1"
            return (f"pemc_base_affine({v}, {off}, {mult})",
                    f"pemc_base_affine_jacobian({v}, {mult})")
        if k == "lower":
            return f"pemc_base_lower({v}, {lo})", f"pemc_base_lower_jacobian({v}, {lo})"
        if k == "upper":
            return f"pemc_base_upper({v}, {hi})", f"pemc_base_upper_jacobian({v}, {hi})"
        if k == "interval":
            return (f"pemc_base_interval({v}, {lo}, {hi})",
                    f"pemc_base_interval_jacobian({v}, {lo}, {hi})")
        if k == "column_stochastic":
            return (f"pemc_base_stochastic({elem})", f"pemc_base_stochastic_jacobian({elem})")
        if k == "row_stochastic":
            return (f"pemc_base_stochastic({elem}')", f"pemc_base_stochastic_jacobian({elem}')")
        return f"pemc_base_{k}({elem})", f"pemc_base_{k}_jacobian({elem})"

    def stan_dim(self) -> str:
        """Stan integer expression of the number of base coordinates of one element."""
        s = [print_expr(e) for e in self.element_sizes]
        k = self.kind
        if k in _ELEMENTWISE_KINDS:
            if self.element == "real":
                return "1"
            if self.element in ("vector", "row_vector"):
                return s[0]
            return f"{s[0]} * {s[1]}"
        if k in ("simplex", "sum_to_zero"):
            return f"{s[0]} - 1"
        if k in ("ordered", "positive_ordered"):
            return s[0]
        if k == "cholesky_factor_cov":
            m = s[0]
            n = s[1] if len(s) > 1 else s[0]
            return f"{n} * ({n} + 1) %/% 2 + ({m} - {n}) * {n}"
        if k == "cov_matrix":
            return f"{s[0]} * ({s[0]} + 1) %/% 2"
        if k == "column_stochastic":
            return f"({s[0]} - 1) * {s[1]}"
        if k == "row_stochastic":
            return f"{s[0]} * ({s[1]} - 1)"
        raise AssertionError(k)


_SCALAR_CALLS = frozenset({
    "min", "max", "sum", "mean", "prod", "sd", "variance", "log_sum_exp", "num_elements",
    "size", "rows", "cols", "norm1", "norm2", "dot_self", "dot_product", "squared_distance",
    "distance", "determinant", "log_determinant", "trace", "max_int", "min_int"})


def _is_container(expr: ast.Expr, table: Any) -> bool:
    """Whether a bound expression is a container (else a scalar); from declared types."""
    from pemc_stan.stan.symbols import dims_of as _dims_of

    if isinstance(expr, (ast.IntLit, ast.RealLit)):
        return False
    if isinstance(expr, ast.Variable):
        sym = table.lookup(expr.name) if table is not None else None
        return sym is not None and _dims_of(sym.type) not in (0, None)
    if isinstance(expr, ast.Indexed):
        if not isinstance(expr.value, ast.Variable) or table is None:
            return True
        sym = table.lookup(expr.value.name)
        dims = _dims_of(sym.type) if sym is not None else None
        singles = [i for i in expr.indices if not isinstance(i, ast.Slice)]
        return not (dims is not None and len(singles) == len(expr.indices) == dims)
    if isinstance(expr, ast.Call):
        if expr.name in _SCALAR_CALLS:
            return False
        return any(_is_container(a, table) for a in expr.args)
    if isinstance(expr, (ast.UnaryOp, ast.BinaryOp, ast.Conditional)):
        kids = [c for c in ast.children(expr) if isinstance(c, ast.Expr)]
        if isinstance(expr, ast.Conditional):
            kids = kids[1:]
        return any(_is_container(c, table) for c in kids)
    return True


def _block_for(name: str, type_: ast.Type, parameter_names: set[str],
               table: Any = None, method: str | None = None) -> ParameterBlock:
    """How parameter ``name`` of type ``type_`` maps to base coordinates.

    Raises
    ------
    UnsupportedBaseError
        For a type without a base density, naming ``method`` when given.
    """
    dims: tuple[ast.Expr, ...] = ()
    el = type_
    if isinstance(type_, ast.ArrayType):
        dims, el = type_.dims, type_.element
    if not isinstance(el, ast.BasicType) or el.name not in _SUPPORTED:
        what = el.name if isinstance(el, ast.BasicType) else print_type(el)
        who = f"the {method} program" if method else "pemc-stan"
        raise UnsupportedBaseError(
            f"parameter {name!r} has type {print_type(type_)}: {who} has no base density "
            f"for {what} (supported: {', '.join(_SUPPORTED)}, with any bounds); use "
            "temper='likelihood', which needs no base density (the prior is then the "
            "base), or reparameterise the parameter with a supported type",
            "<string>", type_.line, type_.column)
    lower = upper = None
    bound_params: set[str] = set()
    affine = isinstance(el.constraint, ast.Affine) and el.name in _ELEMENTWISE_TYPES
    if isinstance(el.constraint, ast.Bounds):
        lower, upper = el.constraint.lower, el.constraint.upper
    elif affine:
        assert isinstance(el.constraint, ast.Affine)
        lower, upper = el.constraint.offset, el.constraint.multiplier
    if lower is not None or upper is not None:
        for e in (lower, upper):
            if e is None:
                continue
            bound_params |= ast.names_in(e) & parameter_names
    if affine:
        kind = "affine"
    elif el.name in _ELEMENTWISE_TYPES:
        kind = ("interval" if lower is not None and upper is not None else
                "lower" if lower is not None else "upper" if upper is not None else "identity")
    else:
        kind = {"sum_to_zero_vector": "sum_to_zero", "column_stochastic_matrix":
                "column_stochastic", "row_stochastic_matrix": "row_stochastic"}.get(el.name,
                                                                                   el.name)
    return ParameterBlock(name, kind, el.name, tuple(dims), tuple(el.sizes), lower, upper,
                          print_type(type_),
                          lower is not None and _is_container(lower, table),
                          upper is not None and _is_container(upper, table),
                          tuple(sorted(bound_params)))


@dataclass(frozen=True)
class BaseCoordinates:
    """The base coordinate map of all parameters, in declaration order.

    Attributes
    ----------
    blocks
        One :class:`ParameterBlock` per parameter.
    """

    blocks: tuple[ParameterBlock, ...]
    #: Transformed-data scalars defined where declared (``int Kc = K - 1;``): sizes and
    #: bounds may use them.
    definitions: tuple[tuple[str, ast.Expr], ...] = ()

    def env(self, data: Mapping[str, Any] | None) -> dict[str, Any]:
        """``data`` with the transformed-data definitions evaluated from it."""
        return with_definitions(data, self.definitions)

    def dim(self, data: Mapping[str, Any] | None) -> int:
        """Total number of base coordinates ``D``.

        Raises
        ------
        UnsupportedBaseError
            If a size cannot be evaluated from ``data``.
        """
        env = self.env(data)
        return sum(b.dim(env) for b in self.blocks)

    def coordinate_names(self, data: Mapping[str, Any] | None) -> list[str]:
        """Readable names ``z_<param>[j]`` of the base coordinates."""
        out = []
        env = self.env(data)
        for b in self.blocks:
            d = b.dim(env)
            out += [f"z_{b.name}" if d == 1 and not b.array_dims and b.element == "real"
                    else f"z_{b.name}[{j + 1}]" for j in range(d)]
        return out

    def forward(self, draws: Mapping[str, ArrayLike], data: Mapping[str, Any] | None
                ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(z (S, D), log|dz/dx| (S,))`` of constrained draws ``{name: (S, *shape)}``.

        Raises
        ------
        KeyError
            If a parameter is missing from ``draws``.
        UnsupportedBaseError
            If sizes or bounds cannot be evaluated.
        """
        zs, jac = [], None
        env = self.env(data)
        # a draw printed on its bound (a rate written as 0 in the CSV) has an infinite
        # coordinate: its callers leave such draws out, so numpy's warning says nothing
        with np.errstate(divide="ignore", invalid="ignore"):
            for b in self.blocks:
                z, j = b.forward(draws[b.name], env, draws)
                zs.append(z)
                jac = j if jac is None else jac + j
        assert jac is not None
        return np.concatenate(zs, axis=1), jac

    def inverse(self, z: ArrayLike, data: Mapping[str, Any] | None
                ) -> dict[str, NDArray[np.float64]]:
        """Constrained draws ``{name: (S, *shape)}`` from base coordinates (S, D).

        Raises
        ------
        UnsupportedBaseError
            If sizes or bounds cannot be evaluated.
        """
        za = np.atleast_2d(np.asarray(z, dtype=float))
        out: dict[str, NDArray[np.float64]] = {}
        pos = 0
        env = self.env(data)
        for b in self.blocks:  # declaration order: bounds use earlier parameters only
            d = b.dim(env)
            out[b.name] = b.inverse(za[:, pos:pos + d], env, out)
            pos += d
        return out


def base_coordinates(param_decls: Sequence[tuple[ast.Type, str]], table: Any = None,
                     definitions: tuple[tuple[str, ast.Expr], ...] = (), *,
                     method: str | None = None) -> BaseCoordinates:
    """The base coordinate map of declared parameters ``[(type, name), ...]``.

    Parameters
    ----------
    param_decls
        The declarations.
    table
        The program's :class:`~pemc_stan.stan.analysis.SymbolTable` (to tell
        container bounds from scalar ones; without it variables are scalars).
    definitions
        Transformed-data scalars defined where declared (sizes and bounds may use them).
    method
        The label of the method that needs the base (``"continuous-tempering"``,
        ``"pseudo-extended"``), named in error messages; None for a neutral wording.

    Raises
    ------
    UnsupportedBaseError
        For a type or bound without a base density.
    """
    names = {n for _, n in param_decls}
    return BaseCoordinates(tuple(_block_for(n, t, names, table, method)
                                 for t, n in param_decls), definitions)


# --------------------------------------------------------------------------- #
# Reading variables out of cmdstanpy column tables
# --------------------------------------------------------------------------- #

_COL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[([0-9, ]+)\])?$")


def coordinate_draws(coords: BaseCoordinates, values: NDArray[np.float64],
                     columns: Sequence[str], data: Mapping[str, Any] | None
                     ) -> dict[str, NDArray[np.float64]]:
    """The parameters' draws by name, shaped as declared, from CmdStan-named columns.

    Raises
    ------
    KeyError
        If a parameter's columns are missing.
    """
    env = coords.env(data)
    return {b.name: extract_variable(values, columns, b.name, (*arr, *el))
            for b in coords.blocks for arr, el in [b.shape(env)]}


def extract_variable(values: NDArray[np.float64], columns: Sequence[str], name: str,
                     shape: tuple[int, ...]) -> NDArray[np.float64]:
    """Variable ``name`` of full ``shape`` from a (S, columns) table with bracket column names.

    Raises
    ------
    KeyError
        If a column of the variable is missing.
    """
    out = np.full((values.shape[0], *shape), np.nan)
    found = 0
    for j, c in enumerate(columns):
        m = _COL.match(c)
        if m is None or m.group(1) != name:
            continue
        idx = () if m.group(2) is None else tuple(int(i) - 1 for i in m.group(2).split(","))
        if len(idx) != len(shape):
            continue
        key: tuple[Any, ...] = (slice(None), *idx)
        out[key] = values[:, j]
        found += 1
    expected = int(np.prod(shape)) if shape else 1
    if found != expected:
        raise KeyError(f"variable {name!r}: found {found} of {expected} columns")
    return out
