"""Declared Stan types as local variables: their sizes, their constraints, their checks.

The log-density rewrite (:mod:`pemc_stan.stan.logdensity`) turns parameters into
function arguments (:func:`unsized_type`) and transformed-parameter declarations into
locals (:func:`local_type`: sized, constraints stripped), followed by statements that
return ``negative_infinity()`` when a value violates its declared constraint
(:func:`constraint_checks`), which is what Stan's rejection of the draw amounts to
for a density.  The report program of :mod:`pemc_stan.output.generated_quantities`
declares its copies of transformed parameters with :func:`local_type` too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from pemc_stan.stan import ast

if TYPE_CHECKING:
    from pemc_stan.stan.analysis import Analysis

__all__ = ["constraint_checks", "local_type", "unsized_type"]


_CONSTRAINT_TOLERANCE = "1e-8"  # stan::math::CONSTRAINT_TOLERANCE

_VECTOR_LIKE = {"simplex", "ordered", "positive_ordered", "unit_vector"}
_MATRIX_LIKE = {"cholesky_factor_corr", "cholesky_factor_cov", "corr_matrix", "cov_matrix"}


def _var(name: str) -> ast.Variable:
    return ast.Variable(name)


def _call(name: str, *args: ast.Expr, conditional: bool = False) -> ast.Call:
    return ast.Call(name, tuple(args), conditional)


def _neg_inf() -> ast.Call:
    return _call("negative_infinity")


# --------------------------------------------------------------------------- #
# Types
# --------------------------------------------------------------------------- #


def unsized_type(type_: ast.Type) -> ast.Type:
    """The function-argument type of a declared type (no sizes, no constraints).

    Raises
    ------
    TypeError
        If ``type_`` is not a declaration type.
    """
    if isinstance(type_, ast.BasicType):
        name = type_.name
        if name in _VECTOR_LIKE:
            name = "vector"
        elif name in _MATRIX_LIKE:
            name = "matrix"
        return ast.BasicType(name)
    if isinstance(type_, ast.ArrayType):
        element, ndims = type_.element, len(type_.dims)
        while isinstance(element, ast.ArrayType):
            ndims += len(element.dims)
            element = element.element
        return ast.UnsizedArrayType(unsized_type(element), ndims)
    if isinstance(type_, ast.TupleType):
        return ast.TupleType(tuple(unsized_type(t) for t in type_.elements))
    if isinstance(type_, ast.UnsizedArrayType):
        return type_
    raise TypeError(f"not a declaration type: {type_!r}")


def local_type(type_: ast.Type) -> ast.Type:
    """A declared (sized) type without constraints, usable for a local variable.

    Raises
    ------
    TypeError
        If ``type_`` is not a declaration type.
    """
    if isinstance(type_, ast.BasicType):
        name, sizes = type_.name, type_.sizes
        if name in _VECTOR_LIKE:
            name = "vector"
        elif name in ("corr_matrix", "cov_matrix", "cholesky_factor_corr"):
            name, sizes = "matrix", (sizes[0], sizes[0])
        elif name == "cholesky_factor_cov":
            name, sizes = "matrix", (sizes if len(sizes) == 2 else (sizes[0], sizes[0]))
        return ast.BasicType(name, sizes, None)
    if isinstance(type_, ast.ArrayType):
        return ast.ArrayType(local_type(type_.element), type_.dims)
    if isinstance(type_, ast.TupleType):
        return ast.TupleType(tuple(local_type(t) for t in type_.elements))
    raise TypeError(f"not a declaration type: {type_!r}")


# --------------------------------------------------------------------------- #
# Constraint checks of transformed parameters
# --------------------------------------------------------------------------- #


def _not(e: ast.Expr) -> ast.Expr:
    return ast.UnaryOp("!", dataclasses.replace(e, parens=True))


def _or(a: ast.Expr | None, b: ast.Expr) -> ast.Expr:
    return b if a is None else ast.BinaryOp("||", a, b)


def _is_zero(e: ast.Expr) -> bool:
    return isinstance(e, (ast.IntLit, ast.RealLit)) and e.value == 0


def _basic_violation(
    e: ast.Expr, t: ast.BasicType, bound_index: Callable[[ast.Expr], ast.Expr], node: ast.Node,
) -> ast.Expr | None:
    """Expression true when ``e`` (of basic type ``t``) violates ``t``'s constraint."""
    tol = ast.RealLit(_CONSTRAINT_TOLERANCE)
    zero = ast.IntLit("0")
    scalar = t.name in ("int", "real")
    violation: ast.Expr | None = None
    if isinstance(t.constraint, ast.Bounds):
        lower, upper = t.constraint.lower, t.constraint.upper
        if lower is not None:
            lo = bound_index(lower)
            if scalar:
                violation = _or(violation, _not(ast.BinaryOp(">=", e, lo)))
            else:
                diff = e if _is_zero(lo) else ast.BinaryOp("-", e, lo)
                violation = _or(violation, _not(ast.BinaryOp(">=", _call("min", diff), zero)))
        if upper is not None:
            hi = bound_index(upper)
            if scalar:
                violation = _or(violation, _not(ast.BinaryOp("<=", e, hi)))
            else:
                diff = e if _is_zero(hi) else ast.BinaryOp("-", e, hi)
                violation = _or(violation, _not(ast.BinaryOp("<=", _call("max", diff), zero)))
    n = _call("rows", e)
    if t.name in ("ordered", "positive_ordered"):
        n1 = ast.BinaryOp("-", n, ast.IntLit("1"))
        steps = ast.BinaryOp("-", ast.Indexed(e, (ast.Slice(ast.IntLit("2"), None),)),
                             ast.Indexed(e, (ast.Slice(None, n1),)))
        violation = _or(violation, ast.BinaryOp(
            "&&", ast.BinaryOp(">", n, ast.IntLit("1")),
            _not(ast.BinaryOp(">", _call("min", steps), zero))))
        if t.name == "positive_ordered":
            violation = _or(violation, ast.BinaryOp(
                "&&", ast.BinaryOp(">", n, zero),
                _not(ast.BinaryOp(">=", _call("min", e), zero))))
    elif t.name == "simplex":
        violation = _or(violation, _not(ast.BinaryOp(">=", _call("min", e), zero)))
        violation = _or(violation, _not(ast.BinaryOp(
            "<=", _call("abs", ast.BinaryOp("-", _call("sum", e), ast.IntLit("1"))), tol)))
    elif t.name == "unit_vector":
        violation = _or(violation, _not(ast.BinaryOp(
            "<=", _call("abs", ast.BinaryOp("-", _call("dot_self", e), ast.IntLit("1"))), tol)))
    elif t.name in ("cov_matrix", "corr_matrix"):
        # check_pos_definite: symmetric (absolute tolerance 1e-8) and positive definite
        asym = _call("max", _call("abs", ast.BinaryOp("-", e, ast.Transpose(e))))
        violation = _or(violation, _not(ast.BinaryOp("<=", asym, tol)))
        violation = _or(violation, _not(ast.BinaryOp(
            ">", _call("min", _call("eigenvalues_sym", e)), zero)))
        if t.name == "corr_matrix":
            off = _call("max", _call("abs", ast.BinaryOp("-", _call("diagonal", e),
                                                         ast.IntLit("1"))))
            violation = _or(violation, _not(ast.BinaryOp("<=", off, tol)))
    elif t.name in ("cholesky_factor_corr", "cholesky_factor_cov"):
        # positive diagonal (check_cholesky_factor); lower triangularity is
        # checked by the loop of _cholesky_upper_check
        violation = _or(violation, _not(ast.BinaryOp(">", _call("min", _call("diagonal", e)),
                                                     zero)))
        if t.name == "cholesky_factor_corr":
            unit = _call("max", _call("abs", ast.BinaryOp("-", _call("rows_dot_self", e),
                                                          ast.IntLit("1"))))
            violation = _or(violation, _not(ast.BinaryOp("<=", unit, tol)))
    return violation


def _cholesky_upper_check(e: ast.Expr, loop_var: str) -> ast.Stmt:
    """``for (i in 1:(cols(e) - 1)) if (max(abs(e[i, (i + 1):cols(e)])) != 0) return -inf;``."""
    i = _var(loop_var)
    cols = _call("cols", e)
    upper = ast.Indexed(e, (i, ast.Slice(ast.BinaryOp("+", i, ast.IntLit("1"), parens=True),
                                         cols)))
    cond = ast.BinaryOp("!=", _call("max", _call("abs", upper)), ast.IntLit("0"))
    return ast.For(loop_var, ast.IntLit("1"),
                   ast.BinaryOp("-", cols, ast.IntLit("1"), parens=True),
                   ast.If(cond, ast.Return(_neg_inf())))


def constraint_checks(
    name: str, type_: ast.Type, analysis: Analysis, node: ast.Node,
) -> list[ast.Stmt]:
    """Statements returning ``negative_infinity()`` when a TP violates its declared type."""
    counter = [0]

    def check(e: ast.Expr, t: ast.Type, indices: tuple[ast.Expr, ...]) -> list[ast.Stmt]:
        if isinstance(t, ast.ArrayType):
            out_stmts: list[ast.Stmt] = []
            element: ast.Type = t.element
            dims = len(t.dims)
            loop_vars = []
            for _ in range(dims):
                counter[0] += 1
                loop_vars.append(f"pemc_i{counter[0]}")
            indexed = ast.Indexed(e, tuple(_var(v) for v in loop_vars))
            inner = check(indexed, element, indices + tuple(_var(v) for v in loop_vars))
            if not inner:
                return []
            body: ast.Stmt = inner[0] if len(inner) == 1 else ast.Block(tuple(inner))
            for k in reversed(range(dims)):
                sized = ast.Indexed(e, tuple(_var(v) for v in loop_vars[:k])) if k else e
                body = ast.For(loop_vars[k], ast.IntLit("1"), _call("size", sized), body)
            out_stmts.append(body)
            return out_stmts
        if isinstance(t, ast.TupleType):
            result: list[ast.Stmt] = []
            for i, sub in enumerate(t.elements, start=1):
                result.extend(check(ast.TupleProjection(e, i), sub, indices))
            return result
        if isinstance(t, ast.BasicType):

            def bound_index(bound: ast.Expr) -> ast.Expr:
                # vectorised bound of an array: index it like the variable
                if indices and isinstance(bound, ast.Variable):
                    sym = analysis.table.lookup(bound.name)
                    if sym is not None and isinstance(sym.type, ast.ArrayType):
                        return ast.Indexed(bound, indices)
                return bound

            violation = _basic_violation(e, t, bound_index, node)
            found: list[ast.Stmt] = []
            if violation is not None:
                found.append(ast.If(violation, ast.Return(_neg_inf())))
            if t.name in ("cholesky_factor_corr", "cholesky_factor_cov"):
                counter[0] += 1
                found.append(_cholesky_upper_check(e, f"pemc_i{counter[0]}"))
            return found
        return []

    return check(_var(name), type_, ())
