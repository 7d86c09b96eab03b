"""The one evaluator of data expressions (sizes, bounds, offsets, multipliers) in Python.

:func:`evaluate` computes a Stan expression from the values of data
variables (or parameter draws, arrays with the draws first, for bounds that
depend on parameters), with Stan's semantics where they differ from
Python's: ``int / int`` and ``%/%`` divide integers towards zero, ``*`` and
``/`` of two containers (matrix products) are refused rather than taken
elementwise.  It is used by the data checker (sizes), the evidence
estimators' parameter transforms (bounds) and the continuous-tempering base
coordinates (sizes and bounds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from pemc_stan.errors import UnevaluableExpressionError
from pemc_stan.stan import ast
from pemc_stan.stan.printer import print_expr

__all__ = ["broadcast_per_draw", "evaluate", "evaluate_per_draw", "size_of",
           "scalar_definitions", "with_definitions"]



_UNARY: dict[str, Callable[[Any], Any]] = {
    "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "log1p": np.log1p, "log2": np.log2,
    "log10": np.log10, "fabs": np.abs, "abs": np.abs, "square": np.square, "inv": np.reciprocal,
    "floor": np.floor, "ceil": np.ceil, "sum": np.sum, "mean": np.mean, "size": np.size,
    "expm1": np.expm1, "minus": np.negative, "min": np.min, "max": np.max,
    "num_elements": np.size, "logit": lambda x: np.log(x) - np.log1p(-np.asarray(x)),
    "inv_logit": lambda x: 1.0 / (1.0 + np.exp(-np.asarray(x))),
}
_BINARY: dict[str, Callable[[Any, Any], Any]] = {"min": np.minimum, "max": np.maximum,
                                                  "fmin": np.minimum, "fmax": np.maximum,
                                                  "pow": np.power}
def _to_matrix(v: Any, m: Any, n: Any) -> Any:
    """Stan's ``to_matrix(v, m, n)``: the values of ``v`` filled column by column."""
    return np.reshape(np.asarray(v, dtype=float), (int(m), int(n)), order="F")


def _flatten(v: Any) -> Any:
    """Stan's ``to_vector`` / ``to_row_vector``: a container's values, column-major."""
    return np.ravel(np.asarray(v, dtype=float), order="F")


#: Reshaping functions: name -> (accepted argument counts, implementation).
_RESHAPE: dict[str, tuple[tuple[int, ...], Callable[..., Any]]] = {
    "to_matrix": ((3,), _to_matrix), "to_vector": ((1,), _flatten),
    "to_row_vector": ((1,), _flatten),
}
_CONSTANTS = {"pi": math.pi, "e": math.e, "sqrt2": math.sqrt(2.0), "log2": math.log(2.0),
              "log10": math.log(10.0), "not_a_number": math.nan,
              "positive_infinity": math.inf, "negative_infinity": -math.inf,
              "machine_precision": float(np.finfo(float).eps)}
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "==": np.equal, "!=": np.not_equal}


#: Functions whose value is an int for int arguments, as in Stan (the others are real:
#: ``square(3) / 2`` is 4.5, ``inv(2)`` 0.5).
_INT_PRESERVING = frozenset({"abs", "minus", "sum", "size", "num_elements", "min", "max"})


def _real(v: Any) -> Any:
    """``v`` as Stan's real: a float, or a float array."""
    out = np.asarray(v, dtype=float)
    return float(out) if out.ndim == 0 else out


def _as_int(v: Any) -> Any:
    """A comparison's or logical operator's value as Stan's int (1 or 0)."""
    out = np.asarray(v).astype(int)
    return int(out) if out.ndim == 0 else out


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _int_div(a: int, b: int) -> int:
    q = abs(int(a)) // abs(int(b))
    return q if (a >= 0) == (b >= 0) else -q


def evaluate(expr: ast.Expr, data: Mapping[str, Any]) -> Any:
    """Evaluate ``expr`` from ``data``: an int, a float or a NumPy array.

    Supports literals, variables of ``data`` (lists become arrays), integer
    indexing, unary ``-``/``+``/``!``, ``+ - * / %/% % ^ .* ./ .^``, comparisons,
    ``&&``/``||``, ``?:``, elementwise functions (``sqrt``, ``exp``, ``log``,
    ``abs``, ``min``, ``max``, ``sum``, ``mean``, ...), the reshaping functions
    ``to_matrix(v, m, n)``, ``to_vector`` and ``to_row_vector`` (column-major, as Stan)
    and constants (``pi()``, ``negative_infinity()``, ...).

    Raises
    ------
    UnevaluableExpressionError
        For anything else, e.g. a variable not in ``data`` (a transformed
        data variable or a parameter; :attr:`~UnevaluableExpressionError.missing`
        names it), a matrix product or an unknown function.
    """
    def fail(reason: str, node: ast.Node = expr, missing: str = "") -> UnevaluableExpressionError:
        return UnevaluableExpressionError(
            f"cannot evaluate {print_expr(expr)!r} from the data ({reason})",
            line=node.line, column=node.column, construct=print_expr(expr), missing=missing,
            reason=reason)

    def ev(e: ast.Expr) -> Any:
        if isinstance(e, ast.IntLit):
            return int(e.text.replace("_", ""))
        if isinstance(e, ast.RealLit):
            return float(e.text.replace("_", ""))
        if isinstance(e, ast.Variable):
            if e.name not in data:
                raise fail(f"{e.name!r} is not in the data", e, e.name)
            value = data[e.name]
            if isinstance(value, (list, tuple)):
                return np.asarray(value, dtype=float)
            return value
        if isinstance(e, ast.UnaryOp):
            v = ev(e.operand)
            if e.op == "-":
                return -v
            if e.op == "+":
                return v
            return np.logical_not(v)
        if isinstance(e, ast.BinaryOp):
            a, b = ev(e.left), ev(e.right)
            if e.op in _COMPARE:
                return _as_int(_COMPARE[e.op](a, b))
            if e.op == "&&":
                return _as_int(np.logical_and(a, b))
            if e.op == "||":
                return _as_int(np.logical_or(a, b))
            if e.op in ("*", "/") and np.ndim(a) > 0 and np.ndim(b) > 0:
                raise fail(f"operator {e.op!r} of two containers", e)
            if e.op in ("+", ".+"):
                return a + b
            if e.op in ("-", ".-"):
                return a - b
            if e.op in ("*", ".*"):
                return a * b
            if e.op in ("^", ".^"):  # real in Stan, for int operands too
                with np.errstate(divide="ignore", invalid="ignore"):
                    return _real(np.power(np.asarray(a, dtype=float), b))
            if e.op in ("/", "./", "%/%"):
                if _is_int(a) and _is_int(b):
                    return _int_div(a, b)
                if e.op == "%/%":
                    raise fail("%/% of non-integers", e)
                return np.divide(a, b) if np.ndim(a) or np.ndim(b) else a / b
            if e.op == "%" and _is_int(a) and _is_int(b):
                return int(math.fmod(a, b))
            raise fail(f"operator {e.op!r}", e)
        if isinstance(e, ast.Indexed):
            if any(isinstance(i, ast.Slice) for i in e.indices):
                raise fail("a slice", e)
            v = np.asarray(ev(e.value))
            idx = tuple(int(ev(i)) - 1 for i in e.indices)  # type: ignore[arg-type]
            out = v[idx]
            return out.item() if np.ndim(out) == 0 else out
        if isinstance(e, ast.Conditional):
            out = np.where(ev(e.cond), ev(e.if_true), ev(e.if_false))
            return out.item() if out.ndim == 0 else out
        if isinstance(e, ast.Call):
            if not e.args and e.name in _CONSTANTS:
                return _CONSTANTS[e.name]
            if e.name in _UNARY and len(e.args) == 1 or e.name in _BINARY and len(e.args) == 2:
                args = [ev(a) for a in e.args]
                if e.name in _INT_PRESERVING:
                    return (_UNARY if len(args) == 1 else _BINARY)[e.name](*args)
                with np.errstate(divide="ignore", invalid="ignore"):
                    return _real((_UNARY if len(args) == 1 else _BINARY)[e.name](
                        *(_real(a) for a in args)))
            if e.name in _RESHAPE and len(e.args) in _RESHAPE[e.name][0]:
                try:
                    return _RESHAPE[e.name][1](*(ev(a) for a in e.args))
                except ValueError as exc:  # sizes that do not fit
                    raise fail(f"{e.name}: {exc}", e) from None
            raise fail(f"function {e.name!r}", e)
        raise fail(f"a {type(e).__name__} expression", e)

    return ev(expr)


#: Functions that act on each value alone, so that a draws-first array of scalars may be
#: passed through them whole (``sum``, ``max`` of one argument, ``size``... reduce).
_ELEMENTWISE_CALLS = frozenset(_UNARY) - {"sum", "mean", "size", "min", "max", "num_elements"}


def _scalar_elementwise(expr: ast.Expr, data: Mapping[str, Any], draws: Mapping[str, Any]
                        ) -> bool:
    """Whether ``expr`` is elementwise arithmetic of scalars (data or per-draw parameters),
    which NumPy can evaluate over all draws at once with Stan's meaning."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Variable):
            if np.ndim(draws[node.name]) != 1 if node.name in draws \
                    else np.ndim(data.get(node.name, 0)) != 0:
                return False
        elif isinstance(node, ast.Call):
            if not (node.name in _ELEMENTWISE_CALLS and len(node.args) == 1
                    or node.name in _BINARY and len(node.args) == 2
                    or node.name in _CONSTANTS and not node.args):
                return False
        elif not isinstance(node, (ast.IntLit, ast.RealLit, ast.UnaryOp, ast.BinaryOp,
                                   ast.Conditional)):
            return False
    return True


def evaluate_per_draw(expr: ast.Expr, data: Mapping[str, Any],
                      draws: Mapping[str, Any], n_draws: int) -> np.ndarray:
    """The value of ``expr`` (a bound that uses parameters) at each of ``n_draws`` draws.

    ``draws`` maps each parameter the expression uses to its draws, draws first
    (``(n_draws, *declared shape)``).  Elementwise arithmetic of scalars is evaluated
    over all draws at once; anything else (indexing, containers, reductions) draw by
    draw, so every expression keeps Stan's meaning.

    Returns
    -------
    ndarray, shape (n_draws, *the value's shape)

    Raises
    ------
    UnevaluableExpressionError
        As :func:`evaluate`.
    """
    if _scalar_elementwise(expr, data, draws):
        try:
            value = np.asarray(evaluate(expr, {**data, **draws}), dtype=float)
            return np.broadcast_to(value, (n_draws,)) if value.ndim == 0 else value
        except UnevaluableExpressionError:
            pass  # e.g. ``a * b`` of two per-draw scalars, refused as two containers
    rows = [np.asarray(evaluate(expr, {**data, **{k: np.asarray(v)[i] for k, v in draws.items()}}),
                       dtype=float) for i in range(n_draws)]
    return np.stack(rows) if rows else np.zeros((0,))


def broadcast_per_draw(value: np.ndarray, n_draws: int, shape: tuple[int, ...], what: str
                       ) -> np.ndarray:
    """A per-draw value ``(n_draws, *rest)`` broadcast to ``(n_draws, *shape)``, ``rest``
    aligned with the trailing dimensions of ``shape`` as Stan's elementwise arithmetic
    does (a scalar per draw applies to every element).

    Raises
    ------
    ValueError
        If ``rest`` does not fit ``shape``, naming ``what``.
    """
    rest = value.shape[1:]
    try:
        if len(rest) > len(shape):
            raise ValueError
        value = value.reshape((n_draws,) + (1,) * (len(shape) - len(rest)) + rest)
        return np.broadcast_to(value, (n_draws, *shape))
    except ValueError:
        raise ValueError(f"the {what} has shape {rest} per draw, expected a scalar or "
                         f"{shape}") from None


def size_of(expr: ast.Expr, data: Mapping[str, Any]) -> int | None:
    """A size expression's value, or None when it cannot be evaluated or is not an integer.

    Raises
    ------
    Nothing.
    """
    try:
        value = evaluate(expr, data)
    except UnevaluableExpressionError:
        return None
    except (TypeError, ValueError, IndexError, ArithmeticError):
        return None
    if _is_int(value):
        return int(value)
    return None


def scalar_definitions(program: ast.Program) -> tuple[tuple[str, ast.Expr], ...]:
    """``(name, expression)`` of the transformed data's scalars defined where they are
    declared (``int Kc = K - 1;``), in order: sizes and bounds may use them.

    Raises
    ------
    Nothing.
    """
    block = program.transformed_data
    out: list[tuple[str, ast.Expr]] = []
    for stmt in block.stmts if block is not None else ():
        if (isinstance(stmt, ast.VarDecl) and isinstance(stmt.type, ast.BasicType)
                and stmt.type.name in ("int", "real") and not stmt.type.sizes):
            out.extend((d.name, d.init) for d in stmt.declarators if d.init is not None)
    return tuple(out)


def with_definitions(data: Mapping[str, Any] | None,
                     definitions: tuple[tuple[str, ast.Expr], ...]) -> dict[str, Any]:
    """``data`` plus every definition that can be evaluated from it (in order).

    Raises
    ------
    Nothing (definitions that cannot be evaluated are left out).
    """
    out = dict(data or {})
    for name, expr in definitions:
        if name in out:
            continue
        try:
            value = evaluate(expr, out)
        except (UnevaluableExpressionError, TypeError, ValueError, ArithmeticError,
                IndexError):
            continue
        if np.ndim(value) == 0:
            out[name] = value.item() if isinstance(value, np.generic) else value
    return out
