"""Where each parameter's pseudo-sample copies live, and how the PE program declares them.

A parameter ``T name`` becomes ``array[pemc_N] T name``, or ``N`` unrolled variables
``pemc_<name>_<k>`` when its bounds depend on other parameters or are containers
(:class:`ParameterCopies`, :func:`parameter_copies`); :func:`declared_parameters`
prints their declarations and, under partial non-centring, :func:`raw_coordinates`
their raw coordinates.  :mod:`pemc_stan.methods.pseudo_extended.transform` assembles
the program from these pieces.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pemc_stan.core.templates import ParameterDeclarations
from pemc_stan.errors import UnsupportedConstructError
from pemc_stan.stan import ast
from pemc_stan.stan.printer import print_expr, print_type
from pemc_stan.stan.symbols import SymbolTable, is_scalar_expr

__all__ = ["DeclaredParameter", "ParameterCopies", "RawCoordinates", "container_bound_error",
           "copy_bound", "declared_parameters", "parameter_copies", "raw_coordinates"]


@dataclass(frozen=True)
class ParameterCopies:
    """Where the pseudo-sample copies of one user parameter live in the PE output.

    Attributes
    ----------
    name
        The user's parameter name.
    declared_type
        The user's declaration type, as Stan text.
    unrolled
        False: one variable ``name`` of type ``array[pemc_N] T`` (copy ``k`` is
        ``name[k]``, CSV columns ``name.k...``); True: ``N`` variables
        ``pemc_<name>_<k>`` (bounds depending on other parameters).
    """

    name: str
    declared_type: str
    unrolled: bool

    def stan_variable(self, k: int) -> str:
        """Stan variable name holding copy ``k`` (1-based) when unrolled, else ``name``."""
        return f"pemc_{self.name}_{k}" if self.unrolled else self.name

    def column_prefix(self, k: int) -> str:
        """CSV column (prefix) of copy ``k`` (1-based): ``name.k`` or ``pemc_name_k``."""
        return f"pemc_{self.name}_{k}" if self.unrolled else f"{self.name}.{k}"


# --------------------------------------------------------------------------- #
# Helpers on declarations
# --------------------------------------------------------------------------- #


def _constraint_exprs(type_: ast.Type) -> list[ast.Expr]:
    """The bound (or offset/multiplier) expressions of a declared type.

    Raises
    ------
    Nothing.
    """
    out: list[ast.Expr] = []
    if isinstance(type_, ast.ArrayType):
        return _constraint_exprs(type_.element)
    if isinstance(type_, ast.TupleType):
        for t in type_.elements:
            out.extend(_constraint_exprs(t))
        return out
    if isinstance(type_, ast.BasicType) and type_.constraint is not None:
        c = type_.constraint
        for e in ((c.lower, c.upper) if isinstance(c, ast.Bounds) else (c.offset, c.multiplier)):
            if e is not None:
                out.append(e)
    return out


def _referenced(exprs: Sequence[ast.Expr], names: set[str]) -> set[str]:
    """The ``names`` that ``exprs`` use.

    Raises
    ------
    Nothing.
    """
    found: set[str] = set()
    for e in exprs:
        for node in ast.walk(e):
            if isinstance(node, ast.Variable) and node.name in names:
                found.add(node.name)
    return found


def _rename_params(node: ast.Node, copies: Mapping[str, ParameterCopies], k: int) -> ast.Node:
    """``node`` with each parameter replaced by its pseudo-sample ``k`` copy.

    Raises
    ------
    Nothing.
    """

    def fn(n: ast.Node) -> ast.Node:
        if isinstance(n, ast.Variable) and n.name in copies:
            c = copies[n.name]
            if c.unrolled:
                return ast.Variable(c.stan_variable(k), parens=n.parens)
            return ast.Indexed(ast.Variable(n.name), (ast.IntLit(str(k)),), parens=n.parens)
        return n

    return ast.transform(node, fn)


def _atom(text: str) -> str:
    """``text`` parenthesised unless it is a name or an unsigned number.

    Raises
    ------
    Nothing.
    """
    return text if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|[0-9.]+(?:[eE][-+]?[0-9]+)?",
                                text) else f"({text})"




# --------------------------------------------------------------------------- #
# The pieces of the program that the template cannot write itself
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class DeclaredParameter:
    """How the PE program declares one user parameter.

    Attributes
    ----------
    copies
        Where its pseudo-sample copies live.
    declarations
        Stan declarations without the ``;``: ``array[pemc_N] T name``, or the
        ``N`` unrolled copies ``T pemc_<name>_<k>``.
    note
        The comment line of a non-centred declaration (None when as written).
    """

    copies: ParameterCopies
    declarations: tuple[str, ...]
    note: str | None = None


@dataclass(frozen=True)
class RawCoordinates:
    """A parameter under partial non-centring: its raw coordinates ``pemc_raw_<name>``.

    Copy ``k`` has the unconstrained coordinates ``u = pemc_raw_<name>[k] * pemc_scale``
    with ``pemc_scale = beta_k^(-noncentring/2)``, constrained as Stan does
    (``lb + exp(u)``, ``ub - exp(u)``, ``lb + (ub - lb) inv_logit(u)``).

    Attributes
    ----------
    name
        The parameter's name.
    free_type
        Its declared type without the constraint, as Stan text.
    scalar
        True for ``real`` (False: a vector, row vector or matrix).
    lower, upper
        The bounds as Stan text (parenthesised unless atoms), or None.
    """

    name: str
    free_type: str
    scalar: bool
    lower: str | None = None
    upper: str | None = None


def parameter_copies(param_decls: Sequence[tuple[ast.Type, str]], table: SymbolTable
                      ) -> dict[str, ParameterCopies]:
    """Where each parameter's copies live.

    A parameter is unrolled into ``N`` separate declarations when a bound (or
    offset/multiplier) depends on another parameter (copy ``k`` must use copy
    ``k`` of that parameter) or is a container (stanc rejects container bounds
    on an array of containers).

    Raises
    ------
    Nothing.
    """
    names = {p for _, p in param_decls}
    copies: dict[str, ParameterCopies] = {}
    for type_, pname in param_decls:
        bounds = _constraint_exprs(type_)
        unroll = bool(_referenced(bounds, names)) or not all(
            is_scalar_expr(e, table) for e in bounds)
        copies[pname] = ParameterCopies(pname, print_type(type_), unroll)
    return copies


def declared_parameters(declarations: ParameterDeclarations,
                         copies: Mapping[str, ParameterCopies], n: int
                         ) -> tuple[DeclaredParameter, ...]:
    """The declarations of the parameters' copies, in declaration order.

    Raises
    ------
    Nothing.
    """
    out = []
    for type_, pname in declarations.decls:
        c = copies[pname]
        if c.unrolled:
            texts = []
            for k in range(1, n + 1):
                renamed = _rename_params(type_, copies, k)
                assert isinstance(renamed, ast.Type)
                texts.append(f"{print_type(renamed)} {c.stan_variable(k)}")
        else:
            dims = type_.dims if isinstance(type_, ast.ArrayType) else ()
            element = type_.element if isinstance(type_, ast.ArrayType) else type_
            array = ast.ArrayType(element, (ast.Variable("pemc_N"), *dims))
            texts = [f"{print_type(array)} {pname}"]
        out.append(DeclaredParameter(c, tuple(texts), declarations.note(pname)))
    return tuple(out)


_NONCENTRING_TYPES = ("real", "vector", "row_vector", "matrix")


def raw_coordinates(param_decls: Sequence[tuple[ast.Type, str]],
                     copies: Mapping[str, ParameterCopies], where: str
                     ) -> tuple[RawCoordinates, ...]:
    """The raw coordinates of every parameter under partial non-centring.

    Raises
    ------
    UnsupportedConstructError
        For a parameter whose bounds depend on other parameters or are
        containers, or whose type or constraint non-centring does not cover.
    """
    for type_, pname in param_decls:
        if copies[pname].unrolled:
            raise UnsupportedConstructError(
                f"{where}, line {type_.line}: the bounds of parameter '{pname}' depend on "
                "other parameters or are containers; noncentring supports only constant "
                "or data scalar bounds. Use noncentring=0.", where, type_.line,
                type_.column, construct=pname)
    out = []
    for type_, pname in param_decls:
        c = type_.constraint if isinstance(type_, ast.BasicType) else None
        if not (isinstance(type_, ast.BasicType) and type_.name in _NONCENTRING_TYPES
                and (c is None or isinstance(c, ast.Bounds))):
            raise UnsupportedConstructError(
                f"{where}, line {type_.line}: parameter '{pname}' is declared "
                f"'{print_type(type_)}'; noncentring supports only real, vector, row_vector "
                "and matrix parameters with lower/upper bounds (or none). Use noncentring=0.",
                where, type_.line, type_.column, construct=print_type(type_))
        assert c is None or isinstance(c, ast.Bounds)
        free = ast.BasicType(type_.name, type_.sizes, None, line=type_.line, column=type_.column)
        out.append(RawCoordinates(
            pname, print_type(free), type_.name == "real",
            None if c is None or c.lower is None else _atom(print_expr(c.lower)),
            None if c is None or c.upper is None else _atom(print_expr(c.upper))))
    return tuple(out)


def container_bound_error(param_decls: Sequence[tuple[ast.Type, str]],
                           copies: Mapping[str, ParameterCopies], where: str
                           ) -> UnsupportedConstructError | None:
    """Why ``temper="base"`` cannot map the copies, or None.

    Copy ``k`` of a parameter whose bounds name other parameters has the bounds
    renamed to copy ``k`` of those: fine when they are scalars (the analysis
    cannot tell the type of an indexed copy of a container parameter).

    Raises
    ------
    Nothing (the error is returned).
    """
    names = {p for _, p in param_decls}
    scalars = {p for t, p in param_decls if isinstance(t, ast.BasicType) and t.name == "real"}
    for type_, pname in param_decls:
        others = _referenced(_constraint_exprs(type_), names) - scalars
        if copies[pname].unrolled and others:
            return UnsupportedConstructError(
                f"{where}, line {type_.line}: the bounds of parameter '{pname}' depend on "
                f"the container parameter(s) {', '.join(sorted(others))}; temper='base' "
                "supports bounds on scalar parameters only. Use temper='posterior' or "
                "'likelihood'.", where, type_.line, type_.column, construct=pname)
    return None


def copy_bound(expr: ast.Expr | None, copies: Mapping[str, ParameterCopies], k: int
                ) -> ast.Expr | None:
    """A bound expression on copy ``k`` of the parameters it names.

    Raises
    ------
    Nothing.
    """
    if expr is None:
        return None
    renamed = _rename_params(expr, copies, k)
    assert isinstance(renamed, ast.Expr)
    return renamed
