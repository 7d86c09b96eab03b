"""Parse Stan source text into :mod:`pemc_stan.stan.ast` trees.

The grammar (``stan.lark``) is compiled once per process into a Lark LALR(1)
parser with a contextual lexer; :class:`_Builder`, a Lark transformer, turns
the parse tree into frozen dataclasses.  Lark trees never leave this module.

:func:`parse` first lets stanc check the program (so errors in it are reported
with stanc's own messages), then parses it.  :func:`parse_expression` and
:func:`parse_statement` parse fragments, without stanc.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.resources
import logging
import os
import re
import sys
from typing import Any, TypedDict

import lark
from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, VisitError
from lark.tree import Meta

from pemc_stan.backend.runtime import cache_root
from pemc_stan.errors import StanProgramError, StanSyntaxError, UnsupportedConstructError
from pemc_stan.stan import ast
from pemc_stan.stan.vocabulary import BLOCK_NAMES, MATRIX_TYPES, VECTOR_TYPES

logger = logging.getLogger(__name__)

__all__ = ["parse", "parse_expression", "parse_statement", "grammar", "nesting_error"]

_INCLUDE = re.compile(r"^[ \t]*#include\b.*$", re.MULTILINE)


#: The parser's options (part of the cached tables' key).
_OPTIONS: dict[str, Any] = {"parser": "lalr", "lexer": "contextual",
                            "start": ["start", "stmt_only", "expr_only"],
                            "propagate_positions": True, "maybe_placeholders": True}


@functools.cache
def grammar() -> Lark:
    """Return the compiled Stan grammar (built on first use, then cached).

    Building the LALR tables takes about 0.4 s, paid by every process that parses (each
    command, each test worker); they are kept in pemc-stan's cache folder under a key of
    the grammar, the options, Lark's and Python's versions, written whole or not at all.

    Raises
    ------
    lark.exceptions.GrammarError
        Only if ``stan.lark`` itself is broken.
    """
    text = importlib.resources.files("pemc_stan.stan").joinpath("stan.lark").read_text("utf-8")
    key = hashlib.sha256(repr((text, sorted(_OPTIONS.items()), lark.__version__,
                               sys.version_info[:2])).encode()).hexdigest()[:20]
    try:
        folder = cache_root() / "grammar"
        folder.mkdir(exist_ok=True)
    except OSError:  # no cache folder: build the tables each time
        return Lark(text, **_OPTIONS)
    tables = folder / f"stan-{key}.lark"
    try:
        with tables.open("rb") as f:
            return Lark.load(f)
    except FileNotFoundError:
        pass
    except Exception as exc:  # unreadable tables: built again, and written anew
        logger.debug("the grammar's cached tables %s could not be read (%s)", tables, exc)
    parser = Lark(text, **_OPTIONS)
    partial = folder / f".stan-{key}-{os.getpid()}.tmp"
    try:
        with partial.open("wb") as f:
            parser.save(f)
        os.replace(partial, tables)  # other processes read whole tables or none
    except OSError:
        partial.unlink(missing_ok=True)
    return parser


class _Position(TypedDict, total=False):
    """The keyword arguments ``line``/``column`` of a node."""

    line: int
    column: int


def _pos(meta: Meta | Token) -> _Position:
    """Keyword arguments ``line``/``column`` (0-based) for a node built from ``meta``."""
    if isinstance(meta, Token):
        return {"line": meta.line or 0, "column": max((meta.column or 1) - 1, 0)}
    if getattr(meta, "empty", True):
        return {}
    return {"line": meta.line, "column": meta.column - 1}


class _ForwardDecl:
    """Marker for a function body that is only ``;`` (a forward declaration)."""


_FORWARD = _ForwardDecl()


def _present(items: list[Any]) -> list[Any]:
    """Drop the ``None`` placeholders of absent optional items."""
    return [item for item in items if item is not None]


@v_args(meta=True)
class _Builder(Transformer[Token, Any]):
    """Builds :mod:`pemc_stan.stan.ast` nodes from the Lark parse tree.

    Each method is named after a rule (or alias) of ``stan.lark`` and receives
    the rule's position and its already-transformed children.
    """

    # ----------------------------------------------------------- top level
    def start(self, meta: Meta, items: list[Any]) -> ast.Program:
        return items[0]

    def stmt_only(self, meta: Meta, items: list[Any]) -> ast.Stmt:
        return items[0]

    def expr_only(self, meta: Meta, items: list[Any]) -> ast.Expr:
        return items[0]

    def program(self, meta: Meta, items: list[Any]) -> ast.Program:
        fields = [name for name, _ in BLOCK_NAMES]
        return ast.Program(**dict(zip(fields, items, strict=True)), **_pos(meta))

    def functions_block(self, meta: Meta, items: list[Any]) -> ast.FunctionsBlock:
        return ast.FunctionsBlock(tuple(items), **_pos(meta))

    def _block(self, name: str, meta: Meta, items: list[Any]) -> ast.ProgramBlock:
        return ast.ProgramBlock(name, tuple(items), **_pos(meta))

    def data_block(self, meta: Meta, items: list[Any]) -> ast.ProgramBlock:
        return self._block("data", meta, items)

    def tdata_block(self, meta: Meta, items: list[Any]) -> ast.ProgramBlock:
        return self._block("transformed data", meta, items)

    def params_block(self, meta: Meta, items: list[Any]) -> ast.ProgramBlock:
        return self._block("parameters", meta, items)

    def tparams_block(self, meta: Meta, items: list[Any]) -> ast.ProgramBlock:
        return self._block("transformed parameters", meta, items)

    def model_block(self, meta: Meta, items: list[Any]) -> ast.ProgramBlock:
        return self._block("model", meta, items)

    def gq_block(self, meta: Meta, items: list[Any]) -> ast.ProgramBlock:
        return self._block("generated quantities", meta, items)

    # ----------------------------------------------------------- functions
    def function_def(self, meta: Meta, items: list[Any]) -> ast.FunctionDef:
        return_type, name, *params, body = items
        return ast.FunctionDef(
            return_type,
            str(name),
            tuple(_present(params)),
            None if body is _FORWARD else body,
            **_pos(meta),
        )

    def forward_decl(self, meta: Meta, items: list[Any]) -> _ForwardDecl:
        return _FORWARD

    def void_type(self, meta: Meta, items: list[Any]) -> ast.VoidType:
        return ast.VoidType(**_pos(meta))

    def param(self, meta: Meta, items: list[Any]) -> ast.Param:
        return ast.Param(items[0], str(items[1]), False, **_pos(meta))

    def data_param(self, meta: Meta, items: list[Any]) -> ast.Param:
        return ast.Param(items[0], str(items[1]), True, **_pos(meta))

    def unsized_array_type(self, meta: Meta, items: list[Any]) -> ast.UnsizedArrayType:
        ndims, element = items
        return ast.UnsizedArrayType(element, ndims, **_pos(meta))

    def unsized_dims(self, meta: Meta, items: list[Any]) -> int:
        return sum(1 for token in items if token == ",") + 1

    def unsized_basic_type(self, meta: Meta, items: list[Any]) -> ast.BasicType:
        return ast.BasicType(items[0], **_pos(meta))

    # ------------------------------------------------------- declarations
    def var_decl(self, meta: Meta, items: list[Any]) -> ast.VarDecl:
        return ast.VarDecl(items[0], tuple(items[1:]), **_pos(meta))

    def declarator(self, meta: Meta, items: list[Any]) -> ast.Declarator:
        return ast.Declarator(str(items[0]), items[1], **_pos(meta))

    def array_type(self, meta: Meta, items: list[Any]) -> ast.ArrayType:
        *dims, element = items
        return ast.ArrayType(element, tuple(dims), **_pos(meta))

    def tuple_type(self, meta: Meta, items: list[Any]) -> ast.TupleType:
        return ast.TupleType(tuple(items), **_pos(meta))

    def scalar_type(self, meta: Meta, items: list[Any]) -> ast.BasicType:
        return ast.BasicType(items[0], (), items[1], **_pos(meta))

    def vector_type(self, meta: Meta, items: list[Any]) -> ast.BasicType:
        name, *rest = items
        constraint = None
        if name in VECTOR_TYPES or name in MATRIX_TYPES:
            constraint, *rest = rest
        return ast.BasicType(name, tuple(_present(rest)), constraint, **_pos(meta))

    def _name(self, meta: Meta, items: list[Any]) -> str:
        return str(items[0])

    scalar_name = vector_name = matrix_name = _name
    special_vector_name = special_matrix_name = cholesky_cov_name = basic_type_name = _name

    def constraint(self, meta: Meta, items: list[Any]) -> ast.Bounds | ast.Affine:
        return items[1]  # between the "<" and ">" tokens

    def lower_bound(self, meta: Meta, items: list[Any]) -> ast.Bounds:
        return ast.Bounds(items[0], None, **_pos(meta))

    def upper_bound(self, meta: Meta, items: list[Any]) -> ast.Bounds:
        return ast.Bounds(None, items[0], **_pos(meta))

    def lower_upper_bound(self, meta: Meta, items: list[Any]) -> ast.Bounds:
        return ast.Bounds(items[0], items[1], **_pos(meta))

    def upper_lower_bound(self, meta: Meta, items: list[Any]) -> ast.Bounds:
        return ast.Bounds(items[1], items[0], **_pos(meta))

    def offset_only(self, meta: Meta, items: list[Any]) -> ast.Affine:
        return ast.Affine(items[0], None, **_pos(meta))

    def multiplier_only(self, meta: Meta, items: list[Any]) -> ast.Affine:
        return ast.Affine(None, items[0], **_pos(meta))

    def offset_multiplier(self, meta: Meta, items: list[Any]) -> ast.Affine:
        return ast.Affine(items[0], items[1], **_pos(meta))

    def multiplier_offset(self, meta: Meta, items: list[Any]) -> ast.Affine:
        return ast.Affine(items[1], items[0], **_pos(meta))

    # ---------------------------------------------------------- statements
    def assign(self, meta: Meta, items: list[Any]) -> ast.Assign:
        return ast.Assign(items[0], "=", items[1], **_pos(meta))

    def compound_assign(self, meta: Meta, items: list[Any]) -> ast.Assign:
        return ast.Assign(items[0], str(items[1]), items[2], **_pos(meta))

    def tilde(self, meta: Meta, items: list[Any]) -> ast.Tilde:
        arg, dist, args, truncation = items
        return ast.Tilde(arg, str(dist), args or (), truncation, **_pos(meta))

    def truncation(self, meta: Meta, items: list[Any]) -> ast.Truncation:
        return ast.Truncation(items[0], items[1], **_pos(meta))

    def target_increment(self, meta: Meta, items: list[Any]) -> ast.TargetIncrement:
        return ast.TargetIncrement(items[0], **_pos(meta))

    def call_stmt(self, meta: Meta, items: list[Any]) -> ast.CallStmt:
        call = items[0]
        if not isinstance(call, ast.Call):
            raise StanSyntaxError(
                f"line {meta.line}, column {meta.column - 1}: an expression statement "
                "must be a function call",
                line=meta.line,
                column=meta.column - 1,
            )
        return ast.CallStmt(call, **_pos(meta))

    def break_stmt(self, meta: Meta, items: list[Any]) -> ast.Break:
        return ast.Break(**_pos(meta))

    def continue_stmt(self, meta: Meta, items: list[Any]) -> ast.Continue:
        return ast.Continue(**_pos(meta))

    def return_stmt(self, meta: Meta, items: list[Any]) -> ast.Return:
        return ast.Return(items[0], **_pos(meta))

    def print_stmt(self, meta: Meta, items: list[Any]) -> ast.Print:
        return ast.Print(items[0], **_pos(meta))

    def reject_stmt(self, meta: Meta, items: list[Any]) -> ast.Reject:
        return ast.Reject(items[0], **_pos(meta))

    def fatal_error_stmt(self, meta: Meta, items: list[Any]) -> ast.FatalError:
        return ast.FatalError(items[0], **_pos(meta))

    def skip_stmt(self, meta: Meta, items: list[Any]) -> ast.Skip:
        return ast.Skip(**_pos(meta))

    def printables(self, meta: Meta, items: list[Any]) -> tuple[ast.Printable, ...]:
        return tuple(items)

    def string_lit(self, meta: Meta, items: list[Any]) -> ast.StringLit:
        return ast.StringLit(str(items[0])[1:-1], **_pos(meta))

    def block(self, meta: Meta, items: list[Any]) -> ast.Block:
        return ast.Block(tuple(items), **_pos(meta))

    def if_stmt(self, meta: Meta, items: list[Any]) -> ast.If:
        return ast.If(items[0], items[1], items[2], **_pos(meta))

    def while_stmt(self, meta: Meta, items: list[Any]) -> ast.While:
        return ast.While(items[0], items[1], **_pos(meta))

    def for_stmt(self, meta: Meta, items: list[Any]) -> ast.For:
        var, lower, upper, body = items
        return ast.For(str(var), lower, upper, body, **_pos(meta))

    def foreach_stmt(self, meta: Meta, items: list[Any]) -> ast.ForEach:
        var, iterable, body = items
        return ast.ForEach(str(var), iterable, body, **_pos(meta))

    def profile_stmt(self, meta: Meta, items: list[Any]) -> ast.Profile:
        name, *stmts = items
        return ast.Profile(str(name)[1:-1], tuple(stmts), **_pos(meta))

    # --------------------------------------------------------- expressions
    def conditional_op(self, meta: Meta, items: list[Any]) -> ast.Conditional:
        return ast.Conditional(items[0], items[1], items[2], **_pos(meta))

    def binary_op(self, meta: Meta, items: list[Any]) -> ast.BinaryOp:
        left, op, right = items
        return ast.BinaryOp(str(op), left, right, **_pos(meta))

    def unary_op(self, meta: Meta, items: list[Any]) -> ast.UnaryOp:
        op, operand = items
        return ast.UnaryOp(str(op), operand, **_pos(meta))

    def transpose(self, meta: Meta, items: list[Any]) -> ast.Transpose:
        return ast.Transpose(items[0], **_pos(meta))

    def indexed(self, meta: Meta, items: list[Any]) -> ast.Indexed:
        return ast.Indexed(items[0], items[1], **_pos(meta))

    def indexes(self, meta: Meta, items: list[Any]) -> tuple[ast.IndexItem, ...]:
        # An empty index position means "all", exactly like ":".
        return tuple(ast.Slice() if item is None else item for item in items)

    def slice_index(self, meta: Meta, items: list[Any]) -> ast.Slice:
        return ast.Slice(items[0], items[1], **_pos(meta))

    def tuple_proj(self, meta: Meta, items: list[Any]) -> ast.TupleProjection:
        digits = str(items[1])[1:]
        try:
            index = int(digits)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            line, column = items[1].line or 0, max((items[1].column or 1) - 1, 0)
            raise StanSyntaxError(
                f"line {line}, column {column}: the tuple index has {len(digits)} digits, far "
                "more than a tuple has components; write the component's number (.1, .2, ...)",
                line=line,
                column=column,
            ) from None
        return ast.TupleProjection(items[0], index, **_pos(meta))

    def int_lit(self, meta: Meta, items: list[Any]) -> ast.IntLit:
        return ast.IntLit(str(items[0]), **_pos(items[0]))

    def real_lit(self, meta: Meta, items: list[Any]) -> ast.RealLit:
        return ast.RealLit(str(items[0]), **_pos(items[0]))

    def imag_lit(self, meta: Meta, items: list[Any]) -> ast.ImagLit:
        return ast.ImagLit(str(items[0]), **_pos(items[0]))

    def variable(self, meta: Meta, items: list[Any]) -> ast.Variable:
        return ast.Variable(str(items[0]), **_pos(items[0]))

    def call(self, meta: Meta, items: list[Any]) -> ast.Call:
        name, args = items
        return ast.Call(str(name), args or (), False, **_pos(meta))

    def cond_call(self, meta: Meta, items: list[Any]) -> ast.Call:
        name, first, rest = items
        return ast.Call(str(name), (first, *(rest or ())), True, **_pos(meta))

    def args(self, meta: Meta, items: list[Any]) -> tuple[ast.Expr, ...]:
        return tuple(items)

    def target_value(self, meta: Meta, items: list[Any]) -> ast.TargetValue:
        return ast.TargetValue(**_pos(meta))

    def paren(self, meta: Meta, items: list[Any]) -> ast.Expr:
        return dataclasses.replace(items[0], parens=True)

    def tuple_lit(self, meta: Meta, items: list[Any]) -> ast.TupleLit:
        return ast.TupleLit(tuple(items), **_pos(meta))

    def array_lit(self, meta: Meta, items: list[Any]) -> ast.ArrayLit:
        return ast.ArrayLit(tuple(items), **_pos(meta))

    def row_vector_lit(self, meta: Meta, items: list[Any]) -> ast.RowVectorLit:
        return ast.RowVectorLit(tuple(_present(items)), **_pos(meta))


_BUILDER = _Builder()


def _describe(exc: UnexpectedInput) -> str:
    """A short description of what the parser choked on."""
    if isinstance(exc, UnexpectedCharacters):
        return f"character {exc.char!r}"
    if isinstance(exc, UnexpectedEOF):
        return "end of input"
    token = getattr(exc, "token", None)
    return f"token {str(token)!r}" if token is not None else "input"


def _run(text: str, start: str, filename: str, stanc_accepted: bool) -> Any:
    """Parse ``text`` from rule ``start`` and build the AST.

    Raises
    ------
    UnsupportedConstructError
        If ``stanc_accepted`` and the grammar fails (a gap in pemc-stan).
    StanSyntaxError
        If not ``stanc_accepted`` and the grammar fails.
    """
    tree = None
    try:
        tree = grammar().parse(text, start=start)
        return _BUILDER.transform(tree)
    except RecursionError:
        raise nesting_error(filename, tree) from None
    except UnexpectedInput as exc:
        line = getattr(exc, "line", 0) or 0
        column = max((getattr(exc, "column", 1) or 1) - 1, 0)
        what = _describe(exc)
        if stanc_accepted:
            raise UnsupportedConstructError(
                f"{filename}, line {line}, column {column}: stanc accepts this program but "
                f"pemc-stan's parser cannot handle the construct at {what}\n"
                f"{exc.get_context(text).rstrip()}",
                filename,
                line,
                column,
                construct=what,
            ) from None
        raise StanSyntaxError(
            f"Syntax error in '{filename}', line {line}, column {column}: unexpected {what}\n"
            f"{exc.get_context(text).rstrip()}",
            filename,
            line,
            column,
        ) from None
    except VisitError as exc:
        if isinstance(exc.orig_exc, StanProgramError):
            exc.orig_exc.filename = filename
            raise exc.orig_exc from None
        if isinstance(exc.orig_exc, RecursionError):
            raise nesting_error(filename, tree) from None
        raise


def _deepest_position(root: Tree[Token] | ast.Node) -> tuple[int, int]:
    """Line and 0-based column of the most deeply nested node (of a Lark or pemc-stan
    tree) that has a position; ``(0, 0)`` when none has.  Iterative: it works on trees
    too deep for recursion."""
    best, best_depth = (0, 0), -1
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Tree):
            kids: list[Any] = node.children
            pos = _pos(node.meta)
        elif isinstance(node, ast.Node):
            kids = list(ast.children(node))
            pos = {"line": node.line, "column": node.column}
        else:
            continue
        if depth > best_depth and pos.get("line"):
            best, best_depth = (pos["line"], pos.get("column", 0)), depth
        stack.extend((kid, depth + 1) for kid in kids)
    return best


def nesting_error(filename: str, tree: Tree[Token] | ast.Node | None = None
                  ) -> UnsupportedConstructError:
    """The error for a program nested more deeply than pemc-stan's recursive front end
    (parser, analysis, transformations, printer) can follow.

    Parameters
    ----------
    filename
        Name of the program in the message.
    tree
        The program's tree, if one was built: the error names the line of its
        most deeply nested node.

    Raises
    ------
    Nothing (the error is returned).
    """
    line, column = _deepest_position(tree) if tree is not None else (0, 0)
    where = f"{filename}, line {line}, column {column}" if line else filename
    return UnsupportedConstructError(
        f"{where}: the program is nested too deeply for pemc-stan: Python's recursion limit "
        f"({sys.getrecursionlimit()}) was reached"
        f"{' (the deepest nesting is at this line)' if line else ''}. Hundreds of nested "
        "brackets, calls or statements do this, and so does a very long chain like "
        "a + b + c + ...; compute such expressions in steps with local variables. (If the "
        "program is not deeply nested, this is a bug in pemc-stan: please report it.)",
        filename,
        line,
        column,
        construct="deep nesting",
    )


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_characters(text: str, filename: str) -> None:
    """Raise unless ``text`` is Unicode text (it may hold lone surrogates, e.g. when it was
    decoded from bytes that are not UTF-8 with ``errors="surrogateescape"``).

    Raises
    ------
    StanSyntaxError
        Naming the line and column of the first lone surrogate.
    """
    bad = _SURROGATE.search(text)
    if bad is None:
        return
    line = text.count("\n", 0, bad.start()) + 1
    column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1)
    raise StanSyntaxError(
        f"{filename}, line {line}, column {column}: {bad.group()!r} is a lone surrogate, not "
        "a character: the text was decoded from bytes that are not UTF-8; save the program "
        "as UTF-8 and read it with encoding='utf-8' (or pass the .stan path)",
        filename,
        line,
        column,
    )


def parse(text: str, filename: str = "<string>", *, check: bool = True) -> ast.Program:
    """Parse a Stan program.

    Parameters
    ----------
    text
        The program's source.
    filename
        Name used in error messages.
    check
        First let stanc check the program (recommended: then every error is
        reported with stanc's own message).  Tests pass False to stay fast.

    Returns
    -------
    ast.Program
        The program's syntax tree (comments are dropped).

    Raises
    ------
    StanSyntaxError
        If stanc (or, with ``check=False``, this parser) finds a syntax error, or
        ``text`` holds a lone surrogate (it is not text).
    StanSemanticError
        If stanc finds a semantic error (only with ``check=True``).
    UnsupportedConstructError
        If the program uses ``#include`` or a construct stanc accepts but this
        parser does not.
    StancError
        If stanc cannot be run.
    """
    _check_characters(text, filename)  # before stanc, which is given the text as UTF-8
    include = _INCLUDE.search(text)  # before stanc, whose message would be "not found"
    if include is not None:
        line = text.count("\n", 0, include.start()) + 1
        column = len(include.group(0)) - len(include.group(0).lstrip())
        raise UnsupportedConstructError(
            f"{filename}, line {line}, column {column}: #include is not supported; "
            "inline the included file (stanc --print-canonical does this)",
            filename,
            line,
            column,
            construct="#include",
        )
    if check:
        from pemc_stan.stan.stanc import check_with_stanc

        check_with_stanc(text, filename)
    program: ast.Program = _run(text, "start", filename, stanc_accepted=check)
    return program


def parse_statement(text: str) -> ast.Stmt:
    """Parse one statement (or declaration) without consulting stanc.

    Raises
    ------
    StanSyntaxError
        If ``text`` is not a single statement.
    """
    stmt: ast.Stmt = _run(text, "stmt_only", "<string>", stanc_accepted=False)
    return stmt


def parse_expression(text: str) -> ast.Expr:
    """Parse one expression without consulting stanc.

    Raises
    ------
    StanSyntaxError
        If ``text`` is not a single expression.
    """
    expr: ast.Expr = _run(text, "expr_only", "<string>", stanc_accepted=False)
    return expr
