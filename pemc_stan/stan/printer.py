"""Print :mod:`pemc_stan.stan.ast` trees back to Stan source.

The output is conventionally laid out (two-space indentation, one statement
per line, like stanc's formatter).  Parentheses are printed where the source
had them (``Expr.parens``) and wherever precedence or associativity requires
them, nowhere else; so ``parse(print_program(p)) == p`` and stanc's canonical
form of the output equals that of the original (comments aside: they are not
part of the tree).

:func:`sourced_program` and :func:`sourced_stmt` print the same text as a
:class:`~pemc_stan.stan.line_map.SourcedText`: each printed line with the source
line of the statement it was printed from (a compound statement's braces and
``else`` lines carry its own line; nodes built by hand carry 0), from which the
transformations map CmdStan's messages about a generated program back to the
user's lines.

The one place where the printer must change the tree is the dangling
``else``: an ``if`` without ``else`` printed as the ``then`` branch of an ``if``
with ``else`` is wrapped in braces, or the ``else`` would bind to it.
"""

from __future__ import annotations

import logging

from pemc_stan.stan import ast
from pemc_stan.stan.line_map import SourcedText

logger = logging.getLogger(__name__)

__all__ = ["print_program", "print_stmt", "print_expr", "print_type", "sourced_program",
           "sourced_stmt", "INDENT"]

#: One level of indentation.
INDENT = "  "

# Precedence levels, loosest first (higher binds tighter).
_CONDITIONAL = 1
_BINARY_PRECEDENCE: dict[str, int] = {
    "||": 2,
    "&&": 3,
    "==": 4,
    "!=": 4,
    "<": 5,
    "<=": 5,
    ">": 5,
    ">=": 5,
    "+": 6,
    "-": 6,
    "*": 7,
    "/": 7,
    "%": 7,
    ".*": 7,
    "./": 7,
    "\\": 8,
    "%/%": 8,
    "^": 10,
    ".^": 10,
}
_PREFIX = 9
_POSTFIX = 11
_ATOM = 12
#: Bounds, offsets and multipliers may not contain comparisons, logic or ``?:``.
_CONSTRAINT = 6


def _precedence(expr: ast.Expr) -> int:
    if isinstance(expr, ast.Conditional):
        return _CONDITIONAL
    if isinstance(expr, ast.BinaryOp):
        return _BINARY_PRECEDENCE[expr.op]
    if isinstance(expr, ast.UnaryOp):
        return _PREFIX
    if isinstance(expr, (ast.Transpose, ast.Indexed, ast.TupleProjection)):
        return _POSTFIX
    return _ATOM


def print_expr(expr: ast.Expr, min_precedence: int = 0) -> str:
    """Return Stan source for an expression.

    Parameters
    ----------
    expr
        The expression.
    min_precedence
        Parenthesise ``expr`` unless it binds at least this tightly (used
        internally for operands; callers normally leave it at 0).

    Returns
    -------
    str
        The expression, on one line.

    Raises
    ------
    TypeError
        If ``expr`` is not an expression node.
    KeyError
        If a :class:`~pemc_stan.stan.ast.BinaryOp` has an unknown operator.
    """
    text = _expr_text(expr)
    if expr.parens or _precedence(expr) < min_precedence:
        return f"({text})"
    return text


def _exprs(exprs: tuple[ast.Expr, ...]) -> str:
    return ", ".join(print_expr(e) for e in exprs)


def _index(item: ast.IndexItem) -> str:
    if isinstance(item, ast.Slice):
        lower = "" if item.lower is None else print_expr(item.lower)
        upper = "" if item.upper is None else print_expr(item.upper)
        return f"{lower}:{upper}"
    return print_expr(item)


def _postfix_base(value: ast.Expr) -> str:
    """The indexed or projected expression: stanc rejects ``v'[1]``, wants ``(v')[1]``."""
    text = print_expr(value, _POSTFIX)
    # Also "(1).2": "1.2" would read as a real literal.
    postfix_unsafe = (ast.Transpose, ast.IntLit, ast.RealLit, ast.ImagLit)
    if isinstance(value, postfix_unsafe) and not value.parens:
        return f"({text})"
    return text


def _expr_text(expr: ast.Expr) -> str:
    """The expression without its own optional parentheses."""
    if isinstance(expr, (ast.IntLit, ast.RealLit, ast.ImagLit)):
        return expr.text
    if isinstance(expr, ast.Variable):
        return expr.name
    if isinstance(expr, ast.BinaryOp):
        level = _BINARY_PRECEDENCE[expr.op]
        if expr.op in ("^", ".^"):  # right associative; base is a postfix expression
            left = print_expr(expr.left, _POSTFIX)
            right = print_expr(expr.right, _PREFIX)
        else:  # left associative
            left = print_expr(expr.left, level)
            right = print_expr(expr.right, level + 1)
        return f"{left} {expr.op} {right}"
    if isinstance(expr, ast.UnaryOp):
        operand = print_expr(expr.operand, _PREFIX)
        # "- -a" rather than "--a", which reads like a decrement.
        separator = " " if operand[:1] in ("-", "+", "!") else ""
        return f"{expr.op}{separator}{operand}"
    if isinstance(expr, ast.Call):
        if expr.conditional:
            first, *rest = expr.args
            tail = " " + _exprs(tuple(rest)) if rest else ""
            return f"{expr.name}({print_expr(first)} |{tail})"
        return f"{expr.name}({_exprs(expr.args)})"
    if isinstance(expr, ast.Indexed):
        indices = ", ".join(_index(i) for i in expr.indices)
        return f"{_postfix_base(expr.value)}[{indices}]"
    if isinstance(expr, ast.Conditional):
        cond = print_expr(expr.cond, _CONDITIONAL + 1)
        if_true = print_expr(expr.if_true)
        if_false = print_expr(expr.if_false, _CONDITIONAL)
        return f"{cond} ? {if_true} : {if_false}"
    if isinstance(expr, ast.Transpose):
        return f"{print_expr(expr.operand, _POSTFIX)}'"
    if isinstance(expr, ast.TupleProjection):
        return f"{_postfix_base(expr.value)}.{expr.index}"
    if isinstance(expr, ast.ArrayLit):
        return "{" + _exprs(expr.elements) + "}"
    if isinstance(expr, ast.RowVectorLit):
        return "[" + _exprs(expr.elements) + "]"
    if isinstance(expr, ast.TupleLit):
        return "(" + _exprs(expr.elements) + ")"
    if isinstance(expr, ast.TargetValue):
        return "target()"
    raise TypeError(f"not an expression node: {expr!r}")


# --------------------------------------------------------------------------- #
# Types
# --------------------------------------------------------------------------- #


def _constraint(constraint: ast.Bounds | ast.Affine | None) -> str:
    if constraint is None:
        return ""
    if isinstance(constraint, ast.Bounds):
        parts = [("lower", constraint.lower), ("upper", constraint.upper)]
    else:
        parts = [("offset", constraint.offset), ("multiplier", constraint.multiplier)]
    inner = ", ".join(f"{k}={print_expr(v, _CONSTRAINT)}" for k, v in parts if v is not None)
    return f"<{inner}>"


def print_type(type_: ast.Type) -> str:
    """Return Stan source for a type (sized, unsized or ``void``).

    Raises
    ------
    TypeError
        If ``type_`` is not a type node.
    """
    if isinstance(type_, ast.BasicType):
        sizes = f"[{_exprs(type_.sizes)}]" if type_.sizes else ""
        return f"{type_.name}{_constraint(type_.constraint)}{sizes}"
    if isinstance(type_, ast.ArrayType):
        return f"array[{_exprs(type_.dims)}] {print_type(type_.element)}"
    if isinstance(type_, ast.UnsizedArrayType):
        return f"array[{',' * (type_.ndims - 1)}] {print_type(type_.element)}"
    if isinstance(type_, ast.TupleType):
        return "tuple(" + ", ".join(print_type(t) for t in type_.elements) + ")"
    if isinstance(type_, ast.VoidType):
        return "void"
    raise TypeError(f"not a type node: {type_!r}")


# --------------------------------------------------------------------------- #
# Statements
# --------------------------------------------------------------------------- #


def _printables(args: tuple[ast.Printable, ...]) -> str:
    return ", ".join(
        f'"{a.value}"' if isinstance(a, ast.StringLit) else print_expr(a) for a in args
    )


def _dangles(stmt: ast.Stmt) -> bool:
    """Whether a following ``else`` would attach to an ``if`` inside ``stmt``."""
    if isinstance(stmt, ast.If):
        return stmt.otherwise is None or _dangles(stmt.otherwise)
    if isinstance(stmt, (ast.While, ast.For, ast.ForEach)):
        return _dangles(stmt.body)
    return False


#: A printed line and the source line of the node it was printed from (0: none).
_Line = tuple[str, int]


def _lines(stmts: tuple[ast.Stmt, ...], depth: int) -> list[_Line]:
    out: list[_Line] = []
    for stmt in stmts:
        out.extend(_stmt_lines(stmt, depth))
    return out


def _braced(head: str, stmts: tuple[ast.Stmt, ...], depth: int, line: int) -> list[_Line]:
    """``head {`` + statements + ``}`` (head already indented); the braces are ``line``'s."""
    return [(f"{head}{{", line), *_lines(stmts, depth + 1), (INDENT * depth + "}", line)]


def _with_body(head: str, body: ast.Stmt, depth: int, line: int) -> list[_Line]:
    """A compound statement ``head body`` where ``head`` is already indented."""
    if isinstance(body, ast.Block):
        return _braced(head + " ", body.stmts, depth, line)
    return [(head, line), *_stmt_lines(body, depth + 1)]


def _stmt_lines(stmt: ast.Stmt, depth: int) -> list[_Line]:
    pad = INDENT * depth
    if isinstance(stmt, ast.Block):
        return _braced(pad, stmt.stmts, depth, stmt.line)
    if isinstance(stmt, ast.If):
        then = stmt.then
        if stmt.otherwise is not None and _dangles(then):
            logger.debug("wrapping a dangling if in braces")
            then = ast.Block((then,), line=then.line, column=then.column)
        lines = _with_body(f"{pad}if ({print_expr(stmt.cond)})", then, depth, stmt.line)
        if stmt.otherwise is None:
            return lines
        else_line = stmt.otherwise.line or stmt.line
        if isinstance(then, ast.Block):
            head = lines.pop()[0] + " else"
        else:
            head = f"{pad}else"
        if isinstance(stmt.otherwise, ast.If):
            (first, source), *rest = _stmt_lines(stmt.otherwise, depth)
            return [*lines, (f"{head} {first.lstrip()}", source), *rest]
        return [*lines, *_with_body(head, stmt.otherwise, depth, else_line)]
    if isinstance(stmt, ast.While):
        return _with_body(f"{pad}while ({print_expr(stmt.cond)})", stmt.body, depth, stmt.line)
    if isinstance(stmt, ast.For):
        head = f"{pad}for ({stmt.var} in {print_expr(stmt.lower)}:{print_expr(stmt.upper)})"
        return _with_body(head, stmt.body, depth, stmt.line)
    if isinstance(stmt, ast.ForEach):
        head = f"{pad}for ({stmt.var} in {print_expr(stmt.iterable)})"
        return _with_body(head, stmt.body, depth, stmt.line)
    if isinstance(stmt, ast.Profile):
        return _braced(f'{pad}profile("{stmt.name}") ', stmt.stmts, depth, stmt.line)
    return [(pad + _simple(stmt), stmt.line)]


def _simple(stmt: ast.Stmt) -> str:
    """A statement that fits on one line, without indentation."""
    if isinstance(stmt, ast.VarDecl):
        decls = ", ".join(
            d.name if d.init is None else f"{d.name} = {print_expr(d.init)}"
            for d in stmt.declarators
        )
        return f"{print_type(stmt.type)} {decls};"
    if isinstance(stmt, ast.Assign):
        return f"{print_expr(stmt.target)} {stmt.op} {print_expr(stmt.value)};"
    if isinstance(stmt, ast.Tilde):
        text = f"{print_expr(stmt.arg)} ~ {stmt.distribution}({_exprs(stmt.args)})"
        if stmt.truncation is not None:
            lower, upper = stmt.truncation.lower, stmt.truncation.upper
            lo = "" if lower is None else print_expr(lower)
            hi = "" if upper is None else print_expr(upper)
            text += f" T[{lo}, {hi}]" if hi else f" T[{lo},]"
        return text + ";"
    if isinstance(stmt, ast.TargetIncrement):
        return f"target += {print_expr(stmt.value)};"
    if isinstance(stmt, ast.CallStmt):
        return f"{print_expr(stmt.call)};"
    if isinstance(stmt, ast.Break):
        return "break;"
    if isinstance(stmt, ast.Continue):
        return "continue;"
    if isinstance(stmt, ast.Return):
        return "return;" if stmt.value is None else f"return {print_expr(stmt.value)};"
    if isinstance(stmt, ast.Print):
        return f"print({_printables(stmt.args)});"
    if isinstance(stmt, ast.Reject):
        return f"reject({_printables(stmt.args)});"
    if isinstance(stmt, ast.FatalError):
        return f"fatal_error({_printables(stmt.args)});"
    if isinstance(stmt, ast.Skip):
        return ";"
    raise TypeError(f"not a statement node: {stmt!r}")


def print_stmt(stmt: ast.Stmt, depth: int = 0) -> str:
    """Return Stan source for a statement, indented ``depth`` levels, without final newline.

    Raises
    ------
    TypeError
        If ``stmt`` is not a statement node.
    """
    return str(sourced_stmt(stmt, depth))


def sourced_stmt(stmt: ast.Stmt, depth: int = 0) -> SourcedText:
    """:func:`print_stmt`, each printed line with the source line of the statement it was
    printed from (0 for nodes built by hand).

    Raises
    ------
    TypeError
        If ``stmt`` is not a statement node.
    """
    return SourcedText.from_lines(_stmt_lines(stmt, depth))


# --------------------------------------------------------------------------- #
# Programs
# --------------------------------------------------------------------------- #


def _function_lines(fn: ast.FunctionDef, depth: int) -> list[_Line]:
    params = ", ".join(
        ("data " if p.data_only else "") + f"{print_type(p.type)} {p.name}" for p in fn.params
    )
    head = f"{INDENT * depth}{print_type(fn.return_type)} {fn.name}({params})"
    if fn.body is None:
        return [(head + ";", fn.line)]
    return _with_body(head, fn.body, depth, fn.line)


def print_program(program: ast.Program) -> str:
    """Return Stan source for a whole program (ends with a newline).

    Raises
    ------
    TypeError
        If the tree contains something that is not a node where one is expected.
    """
    return str(sourced_program(program)) + "\n"


def sourced_program(program: ast.Program) -> SourcedText:
    """:func:`print_program` without its final newline, each printed line with the source
    line of the statement, function or block it was printed from (0 for nodes built by
    hand).

    Raises
    ------
    TypeError
        If the tree contains something that is not a node where one is expected.
    """
    lines: list[_Line] = []
    for block in program.blocks():
        if isinstance(block, ast.FunctionsBlock):
            lines.append(("functions {", block.line))
            for fn in block.functions:
                lines.extend(_function_lines(fn, 1))
        else:
            lines.append((f"{block.name} {{", block.line))
            lines.extend(_lines(block.stmts, 1))
        lines.append(("}", block.line))
    return SourcedText.from_lines(lines)
