"""Unit tests of the printer (``pemc_stan.stan.printer``)."""

from __future__ import annotations

import dataclasses

import pytest

from pemc_stan.stan import ast
from pemc_stan.stan.parser import parse, parse_expression, parse_statement
from pemc_stan.stan.printer import print_expr, print_program, print_stmt, print_type
from pemc_stan.stan.stanc import canonical

a, b, c, v = (ast.Variable(n) for n in "abcv")
one, two = ast.IntLit("1"), ast.IntLit("2")


def bop(op: str, left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
    return ast.BinaryOp(op, left, right)


MINIMAL_PARENS = [
    (bop("+", a, bop("*", b, c)), "a + b * c"),
    (bop("*", bop("+", a, b), c), "(a + b) * c"),
    (bop("-", bop("-", a, b), c), "a - b - c"),
    (bop("-", a, bop("-", b, c)), "a - (b - c)"),
    (bop("^", a, bop("^", b, c)), "a ^ b ^ c"),
    (bop("^", bop("^", a, b), c), "(a ^ b) ^ c"),
    (ast.UnaryOp("-", bop("^", a, b)), "-a ^ b"),
    (bop("^", ast.UnaryOp("-", a), b), "(-a) ^ b"),
    (bop("^", a, ast.UnaryOp("-", b)), "a ^ -b"),
    (bop("^", a, bop("*", b, c)), "a ^ (b * c)"),
    (bop("*", ast.UnaryOp("-", a), b), "-a * b"),
    (ast.UnaryOp("-", bop("*", a, b)), "-(a * b)"),
    (ast.UnaryOp("-", ast.UnaryOp("-", a)), "- -a"),
    (bop("-", a, ast.UnaryOp("-", b)), "a - -b"),
    (bop("*", a, bop("\\", b, c)), "a * b \\ c"),
    (bop("\\", bop("*", a, b), c), "(a * b) \\ c"),
    (bop("%/%", ast.UnaryOp("-", a), b), "-a %/% b"),
    (bop("&&", bop("||", a, b), c), "(a || b) && c"),
    (bop("||", a, bop("&&", b, c)), "a || b && c"),
    (bop("==", bop("<", a, b), c), "a < b == c"),
    (bop("<", a, bop("<", b, c)), "a < (b < c)"),
    (ast.Conditional(a, b, ast.Conditional(c, one, two)), "a ? b : c ? 1 : 2"),
    (ast.Conditional(ast.Conditional(a, b, c), one, two), "(a ? b : c) ? 1 : 2"),
    (ast.Conditional(a, ast.Conditional(b, c, one), two), "a ? b ? c : 1 : 2"),
    (bop("+", ast.Conditional(a, b, c), one), "(a ? b : c) + 1"),
    (ast.Transpose(bop("+", a, b)), "(a + b)'"),
    (ast.UnaryOp("-", ast.Transpose(a)), "-a'"),
    (ast.Indexed(ast.Transpose(v), (one,)), "(v')[1]"),
    (ast.Indexed(bop("*", a, b), (one,)), "(a * b)[1]"),
    (ast.TupleProjection(ast.TupleProjection(a, 1), 2), "a.1.2"),
    (ast.TupleProjection(one, 2), "(1).2"),
    (ast.Indexed(a, (ast.Slice(), ast.Slice(one, None), ast.Slice(None, two),
                     ast.Slice(one, two), c)),
     "a[:, 1:, :2, 1:2, c]"),
    (ast.Call("normal_lpdf", (a, b, c), conditional=True), "normal_lpdf(a | b, c)"),
    (ast.Call("poisson_lpmf", (a,), conditional=True), "poisson_lpmf(a |)"),
    (ast.Call("f", ()), "f()"),
    (ast.ArrayLit((one, two)), "{1, 2}"),
    (ast.RowVectorLit((ast.RowVectorLit((one, two)), ast.RowVectorLit((two, one)))),
     "[[1, 2], [2, 1]]"),
    (ast.TupleLit((one, ast.TupleLit((a, b)))), "(1, (a, b))"),
    (ast.TargetValue(), "target()"),
]


@pytest.mark.parametrize(("expr", "text"), MINIMAL_PARENS, ids=[t for _, t in MINIMAL_PARENS])
def test_minimal_parentheses(expr: ast.Expr, text: str) -> None:
    assert print_expr(expr) == text
    assert parse_expression(text) == expr


def test_source_parentheses_are_kept() -> None:
    assert print_expr(parse_expression("(a * b) + c")) == "(a * b) + c"
    assert print_expr(parse_expression("((a))")) == "(a)"
    e = dataclasses.replace(bop("+", a, b), parens=True)
    assert print_expr(e) == "(a + b)"


def test_literals_are_printed_verbatim() -> None:
    for text in ["1_000", "1.", ".5", "1E-3", "2.5e+2", "2i", "1.5e-3i"]:
        assert print_expr(parse_expression(text)) == text


def test_types() -> None:
    t = ast.ArrayType(
        ast.BasicType("vector", (ast.Variable("K"),), ast.Bounds(ast.UnaryOp("-", one), None)),
        (ast.Variable("N"), ast.Variable("M")),
    )
    assert print_type(t) == "array[N, M] vector<lower=-1>[K]"
    assert (print_type(ast.BasicType("real", (), ast.Affine(a, b)))
            == "real<offset=a, multiplier=b>")
    assert print_type(ast.BasicType("real", (), ast.Affine(None, b))) == "real<multiplier=b>"
    # comparisons in bounds need parentheses, or ">" would close the bracket
    assert (print_type(ast.BasicType("real", (), ast.Bounds(bop(">", a, b), None)))
            == "real<lower=(a > b)>")
    assert print_type(ast.UnsizedArrayType(ast.BasicType("int"), 3)) == "array[,,] int"
    assert (print_type(ast.TupleType((ast.BasicType("real"),
                                      ast.UnsizedArrayType(ast.BasicType("vector"), 1))))
            == "tuple(real, array[] vector)")
    assert print_type(ast.VoidType()) == "void"
    assert (print_type(ast.BasicType("cholesky_factor_cov", (one, two)))
            == "cholesky_factor_cov[1, 2]")


def test_statements_layout() -> None:
    text = ("if (a) { x = 1; } else if (b) x = 2; "
            "else { for (i in 1:n) { y[i] ~ normal(0, 1) T[0, ]; } }")
    assert print_stmt(parse_statement(text)) == (
        "if (a) {\n"
        "  x = 1;\n"
        "} else if (b)\n"
        "  x = 2;\n"
        "else {\n"
        "  for (i in 1:n) {\n"
        "    y[i] ~ normal(0, 1) T[0,];\n"
        "  }\n"
        "}"
    )
    assert print_stmt(parse_statement("while (1) ;"), depth=1) == "  while (1)\n    ;"
    assert print_stmt(parse_statement('profile("a b") { }')) == 'profile("a b") {\n}'
    assert print_stmt(parse_statement("real x = 1, y;")) == "real x = 1, y;"
    assert print_stmt(parse_statement("(a, b) = f();")) == "(a, b) = f();"
    assert print_stmt(parse_statement("y ~ normal(0, 1) T[, u];")) == "y ~ normal(0, 1) T[, u];"
    assert print_stmt(parse_statement('print("a\\\\b", x);')) == 'print("a\\\\b", x);'


def test_dangling_else_is_braced() -> None:
    inner = ast.If(a, ast.Break())
    stmt = ast.If(b, inner, ast.Continue())
    text = print_stmt(stmt)
    assert parse_statement(text) == ast.If(b, ast.Block((inner,)), ast.Continue())
    loop = ast.If(b, ast.For("i", one, two, inner), ast.Continue())
    assert parse_statement(print_stmt(loop)).otherwise == ast.Continue()  # type: ignore[attr-defined]


PROGRAM = """functions {
  real twice(data real x) {
    return 2 * x;
  }
  void hello(array[,] int n);
}
data {
  int<lower=0> N;
  array[N] real y;
}
parameters {
  real mu;
  real<lower=0> sigma;
}
model {
  y ~ normal(mu, sigma);
}
generated quantities {
  real yrep = normal_rng(twice(mu), sigma);
}
"""


def test_program_layout_is_stable() -> None:
    assert print_program(parse(PROGRAM, check=False)) == PROGRAM


def test_empty_blocks() -> None:
    assert print_program(parse("data { } model { }", check=False)) == "data {\n}\nmodel {\n}\n"
    assert print_program(ast.Program()) == "\n"


SOURCES = [
    # stanc must accept the printed program and give it the same canonical form
    "transformed data { real a = 1; real b = 2; real x = (a * b) + -a ^ b - (-a) ^ b; "
    "int i = 7 %/% 2 * 3 % 2; tuple(real, tuple(int, real)) t = (1.5, (2, 3.5)); "
    "real y = t.2.2; vector[2] v = [1, 2]'; real w = (v')[1]; complex z = 2i + .5 - 1E-3i; }",
    "functions { real f_lpdf(real y, real m) { return -(y - m) ^ 2; } "
    "real g_lpmf(int n) { return 0; } } parameters { real mu; } "
    "model { target += f_lpdf(1 | mu) + g_lpmf(1 |); 1 ~ f(mu); mu ~ normal(0, 1) T[-10, ]; }",
    "data { int N; } transformed data { array[N] int xs; int s = 0; "
    "for (x in xs) if (x > 0) if (x > 1) s += x; else s -= x; "
    "while (s > 10) { s = s %/% 2; if (s == 3) break; else continue; } }",
]


@pytest.mark.parametrize("source", SOURCES)
def test_stanc_accepts_printed_programs(source: str) -> None:
    program = parse(source)
    printed = print_program(program)
    assert canonical(printed, strip_comments=True) == canonical(source, strip_comments=True)
