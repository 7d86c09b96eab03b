"""Property tests: random syntax trees survive printing and re-parsing.

Hypothesis builds random expressions, types, statements and programs as AST
nodes (not text); each is printed and parsed back, and the result must equal
the original (``parse(print(x)) == x``).  The trees need not type-check: this
tests the grammar, the printer's parenthesisation and layout, not Stan's
semantics.  Random ``parens`` flags check that redundant parentheses are
harmless.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pemc_stan.stan import ast, vocabulary
from pemc_stan.stan.parser import parse, parse_expression, parse_statement
from pemc_stan.stan.printer import print_expr, print_program, print_stmt

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
#: Fewer examples for the big trees (types, statements, programs): they are
#: slow to generate, and each example already exercises many constructs.
BIG = settings(SETTINGS, max_examples=60)

# --------------------------------------------------------------------------- #
# Leaves
# --------------------------------------------------------------------------- #

names = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    vocabulary.is_valid_identifier
)
_digits = st.from_regex(r"[0-9]{1,3}(_[0-9]{1,2})?", fullmatch=True)
_exponent = st.from_regex(r"[eE][+-]?[0-9]{1,2}", fullmatch=True)


@st.composite
def real_texts(draw: st.DrawFn) -> str:
    form = draw(st.sampled_from(["d.d", "d.", ".d", "de", "d.de", ".de"]))
    d1, d2, e = draw(_digits), draw(_digits), draw(_exponent)
    return {
        "d.d": f"{d1}.{d2}",
        "d.": f"{d1}.",
        ".d": f".{d2}",
        "de": f"{d1}{e}",
        "d.de": f"{d1}.{d2}{e}",
        ".de": f".{d2}{e}",
    }[form]


int_lits = _digits.map(ast.IntLit)
real_lits = real_texts().map(ast.RealLit)
imag_lits = st.one_of(_digits, real_texts()).map(lambda t: ast.ImagLit(t + "i"))
variables = names.map(ast.Variable)
leaves: st.SearchStrategy[ast.Expr] = st.one_of(
    int_lits, real_lits, imag_lits, variables, st.just(ast.TargetValue())
)

BINARY = sorted(vocabulary.BINARY_OPERATORS)
UNARY = sorted(vocabulary.UNARY_OPERATORS)


def _slices(exprs: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.IndexItem]:
    optional = st.none() | exprs
    return st.one_of(exprs, st.builds(ast.Slice, optional, optional))


def _extend(exprs: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    some = st.lists(exprs, min_size=1, max_size=3).map(tuple)
    return st.one_of(
        st.builds(ast.BinaryOp, st.sampled_from(BINARY), exprs, exprs),
        st.builds(ast.UnaryOp, st.sampled_from(UNARY), exprs),
        st.builds(ast.Conditional, exprs, exprs, exprs),
        st.builds(ast.Transpose, exprs),
        st.builds(
            ast.Indexed, exprs, st.lists(_slices(exprs), min_size=1, max_size=3).map(tuple)
        ),
        st.builds(ast.TupleProjection, exprs, st.integers(1, 12)),
        st.builds(ast.Call, names, st.lists(exprs, max_size=3).map(tuple), st.just(False)),
        st.builds(ast.Call, names, some, st.just(True)),
        st.builds(ast.ArrayLit, some),
        st.builds(ast.RowVectorLit, st.lists(exprs, max_size=3).map(tuple)),
        st.builds(ast.TupleLit, st.lists(exprs, min_size=2, max_size=3).map(tuple)),
    )


@st.composite
def _maybe_parens(draw: st.DrawFn, exprs: st.SearchStrategy[ast.Expr]) -> ast.Expr:
    expr = draw(exprs)
    if draw(st.integers(0, 9)) == 0:
        return dataclasses.replace(expr, parens=True)
    return expr


expressions: st.SearchStrategy[ast.Expr] = st.recursive(
    leaves, lambda inner: _maybe_parens(_extend(inner)), max_leaves=12
)

# --------------------------------------------------------------------------- #
# Types
# --------------------------------------------------------------------------- #

small_exprs = st.recursive(leaves, _extend, max_leaves=4)
_opt = st.none() | small_exprs
constraints = st.one_of(
    st.none(),
    st.builds(ast.Bounds, _opt, _opt).filter(lambda b: b.lower or b.upper),
    st.builds(ast.Affine, _opt, _opt).filter(lambda a: a.offset or a.multiplier),
)


@st.composite
def basic_types(draw: st.DrawFn) -> ast.BasicType:
    kind = draw(st.sampled_from(["scalar", "vector", "matrix", "cvector", "cmatrix", "chol"]))
    if kind == "scalar":
        name = draw(st.sampled_from(sorted(vocabulary.SCALAR_TYPES)))
        constraint = draw(constraints)
        if name == "int" and isinstance(constraint, ast.Affine):
            constraint = None
        return ast.BasicType(name, (), constraint)
    if kind == "vector":
        name = draw(st.sampled_from(sorted(vocabulary.VECTOR_TYPES)))
        return ast.BasicType(name, (draw(small_exprs),), draw(constraints))
    if kind == "matrix":
        name = draw(st.sampled_from(sorted(vocabulary.MATRIX_TYPES)))
        return ast.BasicType(name, (draw(small_exprs), draw(small_exprs)), draw(constraints))
    if kind == "cvector":
        name = draw(st.sampled_from(sorted(vocabulary.CONSTRAINED_VECTOR_TYPES)))
        return ast.BasicType(name, (draw(small_exprs),))
    if kind == "cmatrix":
        name = draw(st.sampled_from(sorted(vocabulary.CONSTRAINED_MATRIX_TYPES)))
        return ast.BasicType(name, (draw(small_exprs),))
    sizes = draw(st.lists(small_exprs, min_size=1, max_size=2))
    return ast.BasicType("cholesky_factor_cov", tuple(sizes))


sized_elements: st.SearchStrategy[ast.Type] = st.recursive(
    basic_types(),
    lambda inner: st.builds(
        ast.TupleType,
        st.lists(
            st.one_of(
                inner,
                st.builds(
                    ast.ArrayType, inner, st.lists(small_exprs, min_size=1, max_size=2).map(tuple)
                ),
            ),
            min_size=2,
            max_size=3,
        ).map(tuple),
    ),
    max_leaves=4,
)
sized_types: st.SearchStrategy[ast.Type] = st.one_of(
    sized_elements,
    st.builds(
        ast.ArrayType, sized_elements, st.lists(small_exprs, min_size=1, max_size=3).map(tuple)
    ),
)

_unsized_basic = st.sampled_from(
    sorted(vocabulary.SCALAR_TYPES | vocabulary.VECTOR_TYPES | vocabulary.MATRIX_TYPES)
).map(ast.BasicType)
unsized_types: st.SearchStrategy[ast.Type] = st.recursive(
    _unsized_basic,
    lambda inner: st.one_of(
        st.builds(
            ast.UnsizedArrayType,
            inner.filter(lambda t: not isinstance(t, ast.UnsizedArrayType)),
            st.integers(1, 3),
        ),
        st.builds(ast.TupleType, st.lists(inner, min_size=2, max_size=3).map(tuple)),
    ),
    max_leaves=4,
)

# --------------------------------------------------------------------------- #
# Statements
# --------------------------------------------------------------------------- #

lvalue_bases = st.recursive(
    variables,
    lambda inner: st.one_of(
        st.builds(
            ast.Indexed, inner, st.lists(_slices(small_exprs), min_size=1, max_size=2).map(tuple)
        ),
        st.builds(ast.TupleProjection, inner, st.integers(1, 4)),
    ),
    max_leaves=3,
)
lvalues = st.one_of(
    lvalue_bases,
    st.builds(ast.TupleLit, st.lists(lvalue_bases, min_size=2, max_size=3).map(tuple)),
)
printables = st.lists(
    st.one_of(expressions, st.from_regex(r'[^"\n\r]{0,10}', fullmatch=True).map(ast.StringLit)),
    min_size=1,
    max_size=3,
).map(tuple)
declarators = st.builds(ast.Declarator, names, st.none() | expressions)
_opt_expr = st.none() | expressions

simple_statements: st.SearchStrategy[ast.Stmt] = st.one_of(
    st.builds(
        ast.VarDecl, sized_types, st.lists(declarators, min_size=1, max_size=3).map(tuple)
    ),
    st.builds(
        ast.Assign, lvalue_bases, st.sampled_from(sorted(vocabulary.ASSIGNMENT_OPERATORS)),
        expressions,
    ),
    st.builds(ast.Assign, lvalues, st.just("="), expressions),
    st.builds(
        ast.Tilde,
        expressions,
        names,
        st.lists(expressions, max_size=3).map(tuple),
        st.none() | st.builds(ast.Truncation, _opt_expr, _opt_expr),
    ),
    st.builds(ast.TargetIncrement, expressions),
    st.builds(
        ast.CallStmt, st.builds(ast.Call, names, st.lists(expressions, max_size=3).map(tuple))
    ),
    st.builds(ast.Break),
    st.builds(ast.Continue),
    st.builds(ast.Return, _opt_expr),
    st.builds(ast.Print, printables),
    st.builds(ast.Reject, printables),
    st.builds(ast.FatalError, printables),
    st.builds(ast.Skip),
)


def _undangle(stmt: ast.If) -> ast.If:
    """Braces an ``if`` without ``else`` under an ``if`` with ``else`` (as the printer does)."""
    from pemc_stan.stan.printer import _dangles

    if stmt.otherwise is not None and _dangles(stmt.then):
        return dataclasses.replace(stmt, then=ast.Block((stmt.then,)))
    return stmt


def _compound(stmts: st.SearchStrategy[ast.Stmt]) -> st.SearchStrategy[ast.Stmt]:
    bodies = st.lists(stmts, max_size=3).map(tuple)
    return st.one_of(
        st.builds(ast.Block, bodies),
        st.builds(ast.If, expressions, stmts, st.none() | stmts).map(_undangle),
        st.builds(ast.While, expressions, stmts),
        st.builds(ast.For, names, expressions, expressions, stmts),
        st.builds(ast.ForEach, names, expressions, stmts),
        st.builds(ast.Profile, st.from_regex(r"[A-Za-z0-9_ ]{0,8}", fullmatch=True), bodies),
    )


statements: st.SearchStrategy[ast.Stmt] = st.recursive(simple_statements, _compound, max_leaves=6)

params = st.builds(ast.Param, unsized_types, names, st.booleans())
functions = st.builds(
    ast.FunctionDef,
    st.one_of(st.just(ast.VoidType()), unsized_types),
    names,
    st.lists(params, max_size=3).map(tuple),
    st.none() | st.builds(ast.Block, st.lists(statements, max_size=3).map(tuple)),
)


def _blocks(name: str) -> st.SearchStrategy[ast.ProgramBlock | None]:
    return st.none() | st.builds(
        ast.ProgramBlock, st.just(name), st.lists(statements, max_size=3).map(tuple)
    )


programs = st.builds(
    ast.Program,
    st.none() | st.builds(ast.FunctionsBlock, st.lists(functions, max_size=2).map(tuple)),
    *(_blocks(stan_name) for _, stan_name in vocabulary.BLOCK_NAMES[1:]),
)

# --------------------------------------------------------------------------- #
# Properties
# --------------------------------------------------------------------------- #


@SETTINGS
@given(expressions)
def test_expression_roundtrip(expr: ast.Expr) -> None:
    text = print_expr(expr)
    assert parse_expression(text) == expr, text


@SETTINGS
@given(expressions)
def test_printing_is_idempotent(expr: ast.Expr) -> None:
    text = print_expr(expr)
    assert print_expr(parse_expression(text)) == text


@BIG
@given(sized_types, st.lists(declarators, min_size=1, max_size=2).map(tuple))
def test_declaration_roundtrip(type_: ast.Type, decls: tuple[ast.Declarator, ...]) -> None:
    stmt = ast.VarDecl(type_, decls)
    text = print_stmt(stmt)
    assert parse_statement(text) == stmt, text


@BIG
@given(statements)
def test_statement_roundtrip(stmt: ast.Stmt) -> None:
    text = print_stmt(stmt)
    assert parse_statement(text) == stmt, text


@settings(SETTINGS, max_examples=30)
@given(programs)
def test_program_roundtrip(program: ast.Program) -> None:
    text = print_program(program)
    assert parse(text, check=False) == program, text
