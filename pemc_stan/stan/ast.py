"""Typed abstract syntax tree of Stan programs (the language of stanc 2.35).

Every node is a frozen, slotted dataclass.  Children are other nodes or
tuples of nodes (never lists), so every tree is immutable and hashable.  Trees
are rewritten with :func:`dataclasses.replace` or, wholesale, with
:func:`transform`.

Source positions
----------------
Every node carries ``line`` (1-based) and ``column`` (0-based, as stanc counts
columns in its messages) of its first character; nodes built by hand default to
``0``/``0``.  Positions are keyword-only, left out of ``repr`` and excluded
from equality and hashing, so two trees are equal when they have the same
structure wherever they came from; in particular ``parse(print(x)) == x``.

Parentheses
-----------
Expressions carry ``parens`` (keyword-only, excluded from equality): True when
the source wrapped the expression in parentheses.  The printer reproduces them
(stanc's canonical form keeps most user parentheses) and otherwise inserts
only the parentheses that precedence requires.  Analyses can ignore the flag.

Node overview
-------------
Expressions (:class:`Expr`)
    :class:`IntLit`, :class:`RealLit`, :class:`ImagLit` (literal text kept
    verbatim), :class:`Variable`, :class:`Call` (``conditional`` for
    ``f(y | theta)``), :class:`TargetValue` (``target()``),
    :class:`UnaryOp`, :class:`BinaryOp`, :class:`Conditional` (``?:``),
    :class:`Transpose`, :class:`Indexed` (with :class:`Slice` items),
    :class:`TupleProjection` (``x.1``), :class:`ArrayLit` (``{...}``),
    :class:`RowVectorLit` (``[...]``), :class:`TupleLit` (``(a, b)``).
Types
    :class:`BasicType` (int, real, vector, simplex, ... with sizes and a
    :class:`Bounds` or :class:`Affine` constraint), :class:`ArrayType`,
    :class:`TupleType`, :class:`UnsizedArrayType` (function signatures),
    :class:`VoidType` (function returns).
Statements (:class:`Stmt`)
    :class:`VarDecl` (with :class:`Declarator` s), :class:`Assign`,
    :class:`Tilde` (with optional :class:`Truncation`),
    :class:`TargetIncrement`, :class:`CallStmt`, :class:`If`, :class:`While`,
    :class:`For`, :class:`ForEach`, :class:`Block`, :class:`Profile`,
    :class:`Break`, :class:`Continue`, :class:`Return`, :class:`Print`,
    :class:`Reject`, :class:`FatalError`, :class:`Skip` (``;``).
Top level
    :class:`FunctionDef` (``body`` None for a forward declaration) with
    :class:`Param` s, :class:`FunctionsBlock`, :class:`ProgramBlock`,
    :class:`Program`.

Traversal
---------
:func:`children` yields a node's direct child nodes, :func:`walk` every node of
a tree (pre-order), :func:`map_children` rebuilds a node with each child
replaced, and :func:`transform` rewrites a tree bottom-up.

The language's operators, type names, block names and reserved words are in
:mod:`pemc_stan.stan.vocabulary`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

from pemc_stan.stan.vocabulary import BLOCK_NAMES

__all__ = [
    "Node",
    "Expr",
    "IntLit",
    "RealLit",
    "ImagLit",
    "StringLit",
    "Variable",
    "Call",
    "TargetValue",
    "UnaryOp",
    "BinaryOp",
    "Conditional",
    "Transpose",
    "Slice",
    "IndexItem",
    "Indexed",
    "TupleProjection",
    "ArrayLit",
    "RowVectorLit",
    "TupleLit",
    "Bounds",
    "Affine",
    "Type",
    "BasicType",
    "ArrayType",
    "TupleType",
    "UnsizedArrayType",
    "VoidType",
    "Stmt",
    "Declarator",
    "VarDecl",
    "Assign",
    "Truncation",
    "Tilde",
    "TargetIncrement",
    "CallStmt",
    "If",
    "While",
    "For",
    "ForEach",
    "Block",
    "Profile",
    "Break",
    "Continue",
    "Return",
    "Printable",
    "Print",
    "Reject",
    "FatalError",
    "Skip",
    "Param",
    "FunctionDef",
    "FunctionsBlock",
    "ProgramBlock",
    "Program",
    "children",
    "walk",
    "names_in",
    "map_children",
    "transform",
]


@dataclass(frozen=True, slots=True)
class Node:
    """Base class of every node: a source position, excluded from equality."""

    line: int = field(default=0, compare=False, repr=False, kw_only=True)
    column: int = field(default=0, compare=False, repr=False, kw_only=True)


# --------------------------------------------------------------------------- #
# Expressions
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, slots=True)
class Expr(Node):
    """Base class of expressions; ``parens`` records source parentheses."""

    parens: bool = field(default=False, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class IntLit(Expr):
    """Integer literal; ``text`` verbatim (may contain ``_`` separators)."""

    text: str

    @property
    def value(self) -> int:
        """The integer value."""
        return int(self.text.replace("_", ""))


@dataclass(frozen=True, slots=True)
class RealLit(Expr):
    """Real literal such as ``1.``, ``.5`` or ``1E-3``; ``text`` verbatim."""

    text: str

    @property
    def value(self) -> float:
        """The floating-point value."""
        return float(self.text.replace("_", ""))


@dataclass(frozen=True, slots=True)
class ImagLit(Expr):
    """Imaginary literal such as ``2i``; ``text`` verbatim including the ``i``."""

    text: str

    @property
    def value(self) -> complex:
        """The (purely imaginary) complex value."""
        return complex(0.0, float(self.text[:-1].replace("_", "")))


@dataclass(frozen=True, slots=True)
class StringLit(Node):
    """String literal of ``print``/``reject``/``fatal_error``; ``value`` unquoted.

    Stan strings have no escape sequences: ``value`` is the raw text between
    the quotes.  Not an :class:`Expr`: strings can only be printed.
    """

    value: str


@dataclass(frozen=True, slots=True)
class Variable(Expr):
    """A variable (or, as a call's name, never: see :class:`Call`)."""

    name: str


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """Function call ``name(args)``.

    With ``conditional`` True it was written ``name(args[0] | args[1:])``
    (the notation of ``_lpdf``/``_lpmf``/``_lcdf``/``_lccdf`` functions).
    """

    name: str
    args: tuple[Expr, ...] = ()
    conditional: bool = False


@dataclass(frozen=True, slots=True)
class TargetValue(Expr):
    """``target()``: the current value of the log density."""


@dataclass(frozen=True, slots=True)
class UnaryOp(Expr):
    """Prefix operation; ``op`` is ``"-"``, ``"+"`` or ``"!"``."""

    op: str
    operand: Expr


@dataclass(frozen=True, slots=True)
class BinaryOp(Expr):
    """Infix operation; ``op`` is one of :data:`~pemc_stan.stan.vocabulary.BINARY_OPERATORS`."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Conditional(Expr):
    """``cond ? if_true : if_false``."""

    cond: Expr
    if_true: Expr
    if_false: Expr


@dataclass(frozen=True, slots=True)
class Transpose(Expr):
    """Postfix transposition ``operand'``."""

    operand: Expr


@dataclass(frozen=True, slots=True)
class Slice(Node):
    """A range index ``lower:upper``; either bound may be None (``:`` is all)."""

    lower: Expr | None = None
    upper: Expr | None = None


#: One index of :class:`Indexed`: a single (or multi-) index expression or a slice.
IndexItem: TypeAlias = Expr | Slice


@dataclass(frozen=True, slots=True)
class Indexed(Expr):
    """Indexing ``value[i1, i2, ...]``; each index an :class:`Expr` or :class:`Slice`."""

    value: Expr
    indices: tuple[IndexItem, ...]


@dataclass(frozen=True, slots=True)
class TupleProjection(Expr):
    """Tuple element ``value.index`` (``index`` is 1-based, as written)."""

    value: Expr
    index: int


@dataclass(frozen=True, slots=True)
class ArrayLit(Expr):
    """Array expression ``{e1, e2, ...}`` (never empty)."""

    elements: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class RowVectorLit(Expr):
    """Row-vector expression ``[e1, e2, ...]`` (a matrix when rows are row vectors)."""

    elements: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class TupleLit(Expr):
    """Tuple expression ``(e1, e2, ...)`` with at least two elements.

    Also the target of an unpacking assignment ``(a, b) = f();``.
    """

    elements: tuple[Expr, ...]


# --------------------------------------------------------------------------- #
# Types
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, slots=True)
class Bounds(Node):
    """``<lower=..., upper=...>``; at least one bound is set."""

    lower: Expr | None = None
    upper: Expr | None = None


@dataclass(frozen=True, slots=True)
class Affine(Node):
    """``<offset=..., multiplier=...>``; at least one of them is set."""

    offset: Expr | None = None
    multiplier: Expr | None = None


@dataclass(frozen=True, slots=True)
class Type(Node):
    """Base class of types."""


@dataclass(frozen=True, slots=True)
class BasicType(Type):
    """A non-array, non-tuple type.

    Attributes
    ----------
    name
        ``int``, ``real``, ``complex``, one of :data:`~pemc_stan.stan.vocabulary.VECTOR_TYPES`,
        :data:`~pemc_stan.stan.vocabulary.MATRIX_TYPES`,
        :data:`~pemc_stan.stan.vocabulary.CONSTRAINED_VECTOR_TYPES` or
        :data:`~pemc_stan.stan.vocabulary.CONSTRAINED_MATRIX_TYPES`.
    sizes
        Size expressions: none for scalars and in function signatures, one
        for vectors and constrained types, two for matrices (and optionally
        for ``cholesky_factor_cov[M, N]``).
    constraint
        :class:`Bounds`, :class:`Affine` or None.
    """

    name: str
    sizes: tuple[Expr, ...] = ()
    constraint: Bounds | Affine | None = None


@dataclass(frozen=True, slots=True)
class ArrayType(Type):
    """``array[d1, d2, ...] element`` in a declaration."""

    element: Type
    dims: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    """``tuple(T1, T2, ...)``; sized in declarations, unsized in signatures."""

    elements: tuple[Type, ...]


@dataclass(frozen=True, slots=True)
class UnsizedArrayType(Type):
    """``array[,...] element`` in a function signature (``ndims`` dimensions)."""

    element: Type
    ndims: int


@dataclass(frozen=True, slots=True)
class VoidType(Type):
    """The ``void`` return type."""


# --------------------------------------------------------------------------- #
# Statements
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, slots=True)
class Stmt(Node):
    """Base class of statements."""


@dataclass(frozen=True, slots=True)
class Declarator(Node):
    """One declared variable of a :class:`VarDecl` with its optional initial value."""

    name: str
    init: Expr | None = None


@dataclass(frozen=True, slots=True)
class VarDecl(Stmt):
    """``type name1 = init1, name2, ...;`` (one type, one or more variables)."""

    type: Type
    declarators: tuple[Declarator, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The declared variable names."""
        return tuple(d.name for d in self.declarators)


@dataclass(frozen=True, slots=True)
class Assign(Stmt):
    """``target op value;`` with ``op`` in :data:`~pemc_stan.stan.vocabulary.ASSIGNMENT_OPERATORS`.

    ``target`` is an lvalue: a :class:`Variable`, possibly under
    :class:`Indexed`/:class:`TupleProjection`, or (for ``=`` only) a
    :class:`TupleLit` of lvalues.
    """

    target: Expr
    op: str
    value: Expr


@dataclass(frozen=True, slots=True)
class Truncation(Node):
    """``T[lower, upper]`` of a sampling statement; either bound may be None."""

    lower: Expr | None = None
    upper: Expr | None = None


@dataclass(frozen=True, slots=True)
class Tilde(Stmt):
    """``arg ~ distribution(args) T[...];``."""

    arg: Expr
    distribution: str
    args: tuple[Expr, ...] = ()
    truncation: Truncation | None = None


@dataclass(frozen=True, slots=True)
class TargetIncrement(Stmt):
    """``target += value;``."""

    value: Expr


@dataclass(frozen=True, slots=True)
class CallStmt(Stmt):
    """A call used as a statement, ``f(x);``."""

    call: Call


@dataclass(frozen=True, slots=True)
class If(Stmt):
    """``if (cond) then else otherwise``."""

    cond: Expr
    then: Stmt
    otherwise: Stmt | None = None


@dataclass(frozen=True, slots=True)
class While(Stmt):
    """``while (cond) body``."""

    cond: Expr
    body: Stmt


@dataclass(frozen=True, slots=True)
class For(Stmt):
    """``for (var in lower:upper) body``."""

    var: str
    lower: Expr
    upper: Expr
    body: Stmt


@dataclass(frozen=True, slots=True)
class ForEach(Stmt):
    """``for (var in iterable) body`` over an array, vector or matrix."""

    var: str
    iterable: Expr
    body: Stmt


@dataclass(frozen=True, slots=True)
class Block(Stmt):
    """``{ stmts }``."""

    stmts: tuple[Stmt, ...] = ()


@dataclass(frozen=True, slots=True)
class Profile(Stmt):
    """``profile("name") { stmts }``."""

    name: str
    stmts: tuple[Stmt, ...] = ()


@dataclass(frozen=True, slots=True)
class Break(Stmt):
    """``break;``."""


@dataclass(frozen=True, slots=True)
class Continue(Stmt):
    """``continue;``."""


@dataclass(frozen=True, slots=True)
class Return(Stmt):
    """``return value;`` or, in void functions, ``return;``."""

    value: Expr | None = None


#: One argument of ``print``/``reject``/``fatal_error``.
Printable: TypeAlias = Expr | StringLit


@dataclass(frozen=True, slots=True)
class Print(Stmt):
    """``print(args);``."""

    args: tuple[Printable, ...]


@dataclass(frozen=True, slots=True)
class Reject(Stmt):
    """``reject(args);``."""

    args: tuple[Printable, ...]


@dataclass(frozen=True, slots=True)
class FatalError(Stmt):
    """``fatal_error(args);``."""

    args: tuple[Printable, ...]


@dataclass(frozen=True, slots=True)
class Skip(Stmt):
    """The empty statement ``;``."""


# --------------------------------------------------------------------------- #
# Functions and program
# --------------------------------------------------------------------------- #


@dataclass(frozen=True, slots=True)
class Param(Node):
    """A function parameter ``[data] type name`` (``type`` unsized)."""

    type: Type
    name: str
    data_only: bool = False


@dataclass(frozen=True, slots=True)
class FunctionDef(Node):
    """A function definition, or a forward declaration when ``body`` is None."""

    return_type: Type
    name: str
    params: tuple[Param, ...]
    body: Stmt | None = None


@dataclass(frozen=True, slots=True)
class FunctionsBlock(Node):
    """The ``functions`` block."""

    functions: tuple[FunctionDef, ...] = ()


@dataclass(frozen=True, slots=True)
class ProgramBlock(Node):
    """A program block other than ``functions``; ``name`` as written in Stan."""

    name: str
    stmts: tuple[Stmt, ...] = ()


@dataclass(frozen=True, slots=True)
class Program(Node):
    """A whole Stan program; each block is None when absent."""

    functions: FunctionsBlock | None = None
    data: ProgramBlock | None = None
    transformed_data: ProgramBlock | None = None
    parameters: ProgramBlock | None = None
    transformed_parameters: ProgramBlock | None = None
    model: ProgramBlock | None = None
    generated_quantities: ProgramBlock | None = None
    #: Identifiers with the reserved prefix that pemc-stan itself wrote into the program
    #: (a marginalised parameter's functions and data): not the user's, so not rejected.
    generated: frozenset[str] = field(default=frozenset(), compare=False, repr=False,
                                      kw_only=True)

    def blocks(self) -> Iterator[FunctionsBlock | ProgramBlock]:
        """Yield the blocks that are present, in program order."""
        for attr, _ in BLOCK_NAMES:
            block = getattr(self, attr)
            if block is not None:
                yield block


# --------------------------------------------------------------------------- #
# Traversal
# --------------------------------------------------------------------------- #

N = TypeVar("N", bound=Node)


def _child_fields(node: Node) -> Iterator[dataclasses.Field[object]]:
    for f in dataclasses.fields(node):
        if f.compare:
            yield f


def children(node: Node) -> Iterator[Node]:
    """Yield the direct child nodes of ``node`` in field order.

    Parameters
    ----------
    node
        Any node.

    Returns
    -------
    Iterator[Node]
        Child nodes, including those inside tuple-valued fields.

    Raises
    ------
    Nothing.
    """
    for f in _child_fields(node):
        value = getattr(node, f.name)
        if isinstance(value, Node):
            yield value
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, Node):
                    yield item


def walk(node: Node) -> Iterator[Node]:
    """Yield ``node`` and all its descendants, pre-order, left to right.

    Raises
    ------
    Nothing.
    """
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(children(current))))


def names_in(node: Node) -> set[str]:
    """The names of every variable ``node`` reads (its :class:`Variable` descendants).

    Raises
    ------
    Nothing.
    """
    return {n.name for n in walk(node) if isinstance(n, Variable)}


def map_children(node: N, fn: Callable[[Node], Node]) -> N:
    """Return ``node`` with every direct child ``c`` replaced by ``fn(c)``.

    The node itself is returned unchanged (same object) when ``fn`` returns
    every child unchanged.  Positions and ``parens`` are kept.

    Raises
    ------
    Whatever ``fn`` raises.
    """
    changes: dict[str, Any] = {}
    for f in _child_fields(node):
        value = getattr(node, f.name)
        if isinstance(value, Node):
            new = fn(value)
            if new is not value:
                changes[f.name] = new
        elif isinstance(value, tuple) and any(isinstance(v, Node) for v in value):
            items = tuple(fn(v) if isinstance(v, Node) else v for v in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[f.name] = items
    return dataclasses.replace(node, **changes) if changes else node


def transform(node: Node, fn: Callable[[Node], Node]) -> Node:
    """Rewrite a tree bottom-up: children first, then ``fn`` on the rebuilt node.

    Parameters
    ----------
    node
        Root of the tree.
    fn
        Called on every node after its children were transformed; returns the
        replacement (or the node itself to keep it).

    Returns
    -------
    Node
        The rewritten tree (shares unchanged subtrees with the input).

    Raises
    ------
    Whatever ``fn`` raises.
    """
    return fn(map_children(node, lambda child: transform(child, fn)))
