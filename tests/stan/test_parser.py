"""Unit tests of the parser (``pemc_stan.stan.parser``) and the AST helpers."""

from __future__ import annotations

import dataclasses

import pytest

from pemc_stan.errors import StanProgramError, StanSyntaxError, UnsupportedConstructError
from pemc_stan.stan import ast, vocabulary
from pemc_stan.stan.parser import parse, parse_expression, parse_statement


def sx(node: ast.Node | None) -> str:
    """Render an expression fully parenthesised, to state parse trees briefly."""
    if node is None:
        return ""
    if isinstance(node, (ast.IntLit, ast.RealLit, ast.ImagLit)):
        return node.text
    if isinstance(node, ast.Variable):
        return node.name
    if isinstance(node, ast.BinaryOp):
        return f"({sx(node.left)} {node.op} {sx(node.right)})"
    if isinstance(node, ast.UnaryOp):
        return f"({node.op}{sx(node.operand)})"
    if isinstance(node, ast.Conditional):
        return f"({sx(node.cond)} ? {sx(node.if_true)} : {sx(node.if_false)})"
    if isinstance(node, ast.Transpose):
        return f"({sx(node.operand)})'"
    if isinstance(node, ast.Indexed):
        return f"{sx(node.value)}[{', '.join(sx(i) for i in node.indices)}]"
    if isinstance(node, ast.Slice):
        return f"{sx(node.lower)}:{sx(node.upper)}"
    if isinstance(node, ast.TupleProjection):
        return f"{sx(node.value)}.{node.index}"
    if isinstance(node, ast.Call):
        args = [sx(a) for a in node.args]
        if node.conditional:
            return f"{node.name}({args[0]} | {', '.join(args[1:])})"
        return f"{node.name}({', '.join(args)})"
    if isinstance(node, ast.ArrayLit):
        return "{" + ", ".join(sx(e) for e in node.elements) + "}"
    if isinstance(node, ast.RowVectorLit):
        return "[" + ", ".join(sx(e) for e in node.elements) + "]"
    if isinstance(node, ast.TupleLit):
        return "<" + ", ".join(sx(e) for e in node.elements) + ">"
    if isinstance(node, ast.TargetValue):
        return "target()"
    raise TypeError(node)


# Every entry was checked against stanc 2.35 (--debug-ast).
PRECEDENCE = [
    ("1 + 2 * 3", "(1 + (2 * 3))"),
    ("a - b - c", "((a - b) - c)"),
    ("a / b * c", "((a / b) * c)"),
    ("a ^ b ^ c", "(a ^ (b ^ c))"),
    ("a .^ b ^ c", "(a .^ (b ^ c))"),
    ("-a ^ b", "(-(a ^ b))"),
    ("-a * b", "((-a) * b)"),
    ("a ^ -b", "(a ^ (-b))"),
    ("a ^ -b ^ c", "(a ^ (-(b ^ c)))"),
    ("!a && b", "((!a) && b)"),
    ("a || b && c", "(a || (b && c))"),
    ("a && b == c", "(a && (b == c))"),
    ("a == b != c", "((a == b) != c)"),
    ("a == b < c", "(a == (b < c))"),
    ("a < b <= c", "((a < b) <= c)"),
    ("a < b + c", "(a < (b + c))"),
    ("m * m \\ v", "(m * (m \\ v))"),
    ("m \\ v * 2", "((m \\ v) * 2)"),
    ("6 * 3 %/% 2", "(6 * (3 %/% 2))"),
    ("6 %/% 3 * 2", "((6 %/% 3) * 2)"),
    ("-6 %/% 4", "((-6) %/% 4)"),
    ("a .* b ./ c % d", "(((a .* b) ./ c) % d)"),
    ("a ? b : c ? d : e", "(a ? b : (c ? d : e))"),
    ("a ? b ? c : d : e", "(a ? (b ? c : d) : e)"),
    ("a || b ? c : d", "((a || b) ? c : d)"),
    ("-a'", "(-(a)')"),
    ("a'[1]", "(a)'[1]"),
    ("-a[1]", "(-a[1])"),
    ("a[1]'", "(a[1])'"),
    ("a^b'", "(a ^ (b)')"),
    ("a''", "((a)')'"),
    ("x.1.2", "x.1.2"),
    ("x .1 .2", "x.1.2"),
    ("f(x).2[3]", "f(x).2[3]"),
    ("--a", "(-(-a))"),
    ("+-!a", "(+(-(!a)))"),
    ("a - -b", "(a - (-b))"),
    ("(a + b) * c", "((a + b) * c)"),
]


@pytest.mark.parametrize(("source", "tree"), PRECEDENCE, ids=[s for s, _ in PRECEDENCE])
def test_precedence_and_associativity(source: str, tree: str) -> None:
    assert sx(parse_expression(source)) == tree


LITERALS = [
    ("1", ast.IntLit, 1),
    ("1_000", ast.IntLit, 1000),
    ("1.", ast.RealLit, 1.0),
    (".5", ast.RealLit, 0.5),
    ("1e10", ast.RealLit, 1e10),
    ("1E-3", ast.RealLit, 1e-3),
    ("2.5e+2", ast.RealLit, 250.0),
    ("1_0.5_0e1_0", ast.RealLit, 10.5e10),
    ("2i", ast.ImagLit, 2j),
    ("1.5e-3i", ast.ImagLit, 1.5e-3j),
    (".5i", ast.ImagLit, 0.5j),
    ("1e2i", ast.ImagLit, 100j),
]


@pytest.mark.parametrize(("source", "cls", "value"), LITERALS, ids=[s for s, _, _ in LITERALS])
def test_numeric_literals_keep_their_text(source: str, cls: type, value: object) -> None:
    lit = parse_expression(source)
    assert type(lit) is cls
    assert lit.text == source  # type: ignore[attr-defined]
    assert lit.value == value  # type: ignore[attr-defined]


def test_real_literal_before_elementwise_operator() -> None:
    assert sx(parse_expression("1.*x")) == "(1. * x)"
    assert sx(parse_expression("a./.5")) == "(a ./ .5)"


INDEXING = [
    ("a[1]", "a[1]"),
    ("a[i, j]", "a[i, j]"),
    ("a[2:]", "a[2:]"),
    ("a[:3]", "a[:3]"),
    ("a[:]", "a[:]"),
    ("a[]", "a[:]"),
    ("a[1, ]", "a[1, :]"),
    ("a[i, :, 2:n]", "a[i, :, 2:n]"),
    ("a[idx]", "a[idx]"),
    ("a[c ? 1 : 2]", "a[(c ? 1 : 2)]"),
    ("a[c ? 1 : 2:3]", "a[(c ? 1 : 2):3]"),
    ("a[1][2]", "a[1][2]"),
]


@pytest.mark.parametrize(("source", "tree"), INDEXING, ids=[s for s, _ in INDEXING])
def test_indexing(source: str, tree: str) -> None:
    assert sx(parse_expression(source)) == tree


def test_calls_and_literals() -> None:
    assert sx(parse_expression("normal_lpdf(y | mu, s)")) == "normal_lpdf(y | mu, s)"
    call = parse_expression("foo_lpmf(y | )")
    assert isinstance(call, ast.Call) and call.conditional and call.args == (ast.Variable("y"),)
    assert parse_expression("f()") == ast.Call("f", ())
    assert sx(parse_expression("{1, 2}")) == "{1, 2}"
    assert sx(parse_expression("[1, 2]")) == "[1, 2]"
    assert sx(parse_expression("[[1, 2], [3, 4]]")) == "[[1, 2], [3, 4]]"
    assert sx(parse_expression("(1, 2.5)")) == "<1, 2.5>"
    assert sx(parse_expression("((1, 2), 3)")) == "<<1, 2>, 3>"
    assert parse_expression("target()") == ast.TargetValue()


def test_parentheses_are_recorded_but_not_compared() -> None:
    inner = parse_expression("(a * b) + c")
    assert isinstance(inner, ast.BinaryOp) and inner.left.parens
    assert inner == parse_expression("a * b + c")
    assert parse_expression("((a))").parens


def test_positions_are_line_and_zero_based_column() -> None:
    program = parse("data {\n  int N;\n}\nmodel {\n  target += N * 2;\n}\n", check=False)
    decl = program.data.stmts[0]  # type: ignore[union-attr]
    assert (decl.line, decl.column) == (2, 2)
    inc = program.model.stmts[0]  # type: ignore[union-attr]
    assert isinstance(inc, ast.TargetIncrement)
    assert (inc.line, inc.column) == (5, 2)
    assert (inc.value.line, inc.value.column) == (5, 12)
    right = inc.value.right  # type: ignore[attr-defined]
    assert (right.line, right.column) == (5, 16)


def test_equality_ignores_positions_and_nodes_are_hashable() -> None:
    a = parse_expression("x + 1")
    b = parse_expression("  x   +    1")
    assert a == b and hash(a) == hash(b)
    assert a.right.column != b.right.column  # type: ignore[attr-defined]
    assert len({a, b}) == 1


# --------------------------------------------------------------------------- #
# Declarations
# --------------------------------------------------------------------------- #


def test_scalar_and_container_declarations() -> None:
    d = parse_statement("real<lower=0, upper=1> x = 0.5, y, z = x;")
    assert isinstance(d, ast.VarDecl)
    assert d.names == ("x", "y", "z")
    assert d.type == ast.BasicType("real", (), ast.Bounds(ast.IntLit("0"), ast.IntLit("1")))
    assert d.declarators[1].init is None

    d = parse_statement("array[N, M] vector<lower=L, upper=U>[K] v;")
    assert isinstance(d, ast.VarDecl) and isinstance(d.type, ast.ArrayType)
    assert [sx(e) for e in d.type.dims] == ["N", "M"]
    element = d.type.element
    assert isinstance(element, ast.BasicType) and element.name == "vector"
    assert element.sizes == (ast.Variable("K"),)
    assert element.constraint == ast.Bounds(ast.Variable("L"), ast.Variable("U"))


def test_constraint_order_is_normalised() -> None:
    a = parse_statement("real<upper=1, lower=0> x;")
    b = parse_statement("real<lower=0, upper=1> x;")
    assert a == b
    c = parse_statement("real<multiplier=2, offset=1> x;")
    assert c.type.constraint == ast.Affine(ast.IntLit("1"), ast.IntLit("2"))  # type: ignore[attr-defined]
    d = parse_statement("real<multiplier=s> x;")
    assert d.type.constraint == ast.Affine(None, ast.Variable("s"))  # type: ignore[attr-defined]


def test_vectorised_and_expression_bounds() -> None:
    d = parse_statement("vector<lower=-1, upper=[1, 2]'>[2] b;")
    bounds = d.type.constraint  # type: ignore[attr-defined]
    assert sx(bounds.lower) == "(-1)" and sx(bounds.upper) == "([1, 2])'"
    d = parse_statement("real<lower=(a > b ? a : b)> x;")
    assert sx(d.type.constraint.lower) == "((a > b) ? a : b)"  # type: ignore[attr-defined]
    d = parse_statement("matrix<lower=x[1] * 2>[2, 3] m;")
    assert [sx(e) for e in d.type.sizes] == ["2", "3"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("source", "name", "nsizes"),
    [
        ("int n;", "int", 0),
        ("complex z;", "complex", 0),
        ("row_vector[3] r;", "row_vector", 1),
        ("complex_vector[3] v;", "complex_vector", 1),
        ("complex_row_vector[3] v;", "complex_row_vector", 1),
        ("complex_matrix[3, 2] m;", "complex_matrix", 2),
        ("ordered[3] o;", "ordered", 1),
        ("positive_ordered[3] o;", "positive_ordered", 1),
        ("simplex[3] s;", "simplex", 1),
        ("unit_vector[3] u;", "unit_vector", 1),
        ("cholesky_factor_corr[3] L;", "cholesky_factor_corr", 1),
        ("cholesky_factor_cov[3] L;", "cholesky_factor_cov", 1),
        ("cholesky_factor_cov[4, 3] L;", "cholesky_factor_cov", 2),
        ("corr_matrix[3] C;", "corr_matrix", 1),
        ("cov_matrix[3] S;", "cov_matrix", 1),
    ],
)
def test_every_basic_type(source: str, name: str, nsizes: int) -> None:
    d = parse_statement(source)
    assert isinstance(d, ast.VarDecl) and isinstance(d.type, ast.BasicType)
    assert d.type.name == name and len(d.type.sizes) == nsizes


def test_tuple_declarations() -> None:
    d = parse_statement("tuple(real<lower=0>, array[2] simplex[3], tuple(int, vector[n])) t;")
    assert isinstance(d, ast.VarDecl) and isinstance(d.type, ast.TupleType)
    first, second, third = d.type.elements
    assert first == ast.BasicType("real", (), ast.Bounds(ast.IntLit("0"), None))
    assert isinstance(second, ast.ArrayType) and second.element.name == "simplex"  # type: ignore[attr-defined]
    assert isinstance(third, ast.TupleType)
    d = parse_statement("array[3] tuple(real, int) ts;")
    assert isinstance(d.type, ast.ArrayType) and isinstance(d.type.element, ast.TupleType)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- #
# Statements
# --------------------------------------------------------------------------- #


def test_assignments() -> None:
    for op in sorted(vocabulary.ASSIGNMENT_OPERATORS):
        s = parse_statement(f"x[1, 2:3] {op} y;")
        assert isinstance(s, ast.Assign) and s.op == op
        assert sx(s.target) == "x[1, 2:3]"
    s = parse_statement("(a, b.1, c[2]) = f();")
    assert isinstance(s, ast.Assign) and isinstance(s.target, ast.TupleLit)
    assert [sx(t) for t in s.target.elements] == ["a", "b.1", "c[2]"]
    s = parse_statement("jacobian += x;")  # an ordinary variable in 2.35
    assert s == ast.Assign(ast.Variable("jacobian"), "+=", ast.Variable("x"))


def test_tilde_and_truncation() -> None:
    s = parse_statement("y ~ normal(mu, sigma);")
    assert s == ast.Tilde(ast.Variable("y"), "normal", (ast.Variable("mu"), ast.Variable("sigma")))
    s = parse_statement("y ~ normal(0, 1) T[L, U];")
    assert s.truncation == ast.Truncation(ast.Variable("L"), ast.Variable("U"))  # type: ignore[attr-defined]
    s = parse_statement("y ~ normal(0, 1) T[L, ];")
    assert s.truncation == ast.Truncation(ast.Variable("L"), None)  # type: ignore[attr-defined]
    s = parse_statement("y ~ normal(0, 1) T[, U];")
    assert s.truncation == ast.Truncation(None, ast.Variable("U"))  # type: ignore[attr-defined]
    s = parse_statement("a + b ~ std_normal();")
    assert sx(s.arg) == "(a + b)" and s.args == ()  # type: ignore[attr-defined]
    # "T" is a keyword only after a distribution; elsewhere it is a name.
    s = parse_statement("T ~ normal(T, 1);")
    assert s == ast.Tilde(ast.Variable("T"), "normal", (ast.Variable("T"), ast.IntLit("1")))


def test_control_flow() -> None:
    s = parse_statement("if (a) x = 1; else if (b) x = 2; else { x = 3; }")
    assert isinstance(s, ast.If) and isinstance(s.otherwise, ast.If)
    assert isinstance(s.otherwise.otherwise, ast.Block)
    # else binds to the nearest if
    s = parse_statement("if (a) if (b) x = 1; else x = 2;")
    assert isinstance(s, ast.If) and s.otherwise is None
    assert isinstance(s.then, ast.If) and s.then.otherwise is not None
    s = parse_statement("for (i in 1:N) { break; continue; }")
    assert isinstance(s, ast.For) and s.var == "i" and sx(s.upper) == "N"
    assert s.body == ast.Block((ast.Break(), ast.Continue()))
    s = parse_statement("for (x in xs[2:]) ;")
    assert isinstance(s, ast.ForEach) and sx(s.iterable) == "xs[2:]" and s.body == ast.Skip()
    s = parse_statement("while (n > 0) n -= 1;")
    assert isinstance(s, ast.While)
    s = parse_statement('profile("lik") { target += 1; }')
    assert s == ast.Profile("lik", (ast.TargetIncrement(ast.IntLit("1")),))
    assert parse_statement("{ }") == ast.Block(())
    assert parse_statement(";") == ast.Skip()


def test_print_reject_fatal_error_and_return() -> None:
    s = parse_statement('print("x = ", x, " \\\\ {} /* not a comment */");')
    assert s == ast.Print(
        (ast.StringLit("x = "), ast.Variable("x"), ast.StringLit(" \\\\ {} /* not a comment */"))
    )
    assert isinstance(parse_statement('reject("bad");'), ast.Reject)
    assert isinstance(parse_statement('fatal_error("very bad", 1);'), ast.FatalError)
    assert parse_statement("return;") == ast.Return(None)
    assert parse_statement("return (1, x);") == ast.Return(
        ast.TupleLit((ast.IntLit("1"), ast.Variable("x")))
    )
    assert parse_statement("f(x);") == ast.CallStmt(ast.Call("f", (ast.Variable("x"),)))


def test_expression_statement_must_be_a_call() -> None:
    with pytest.raises(StanSyntaxError):
        parse_statement("x + 1;")


# --------------------------------------------------------------------------- #
# Programs and functions
# --------------------------------------------------------------------------- #

PROGRAM = """
// a comment
functions {
  real twice(data real x);
  real twice(data real x) { return 2 * x; }
  void hello_lp(array[,] int n, tuple(real, array[] vector) t) { target += 1; }
  tuple(real, int) pair() { return (1.0, 2); }
  array[] real noop(array[] real x) { return x; }
}
data { int<lower=0> N; ; array[N] real y; }
transformed data { real m = mean(y); /* block
comment */ }
parameters { real mu; real<lower=0> sigma; }
transformed parameters { real s2 = sigma ^ 2; }
model { y ~ normal(mu, sigma); }
generated quantities { real yrep = normal_rng(mu, sigma); }
"""


def test_program_structure() -> None:
    p = parse(PROGRAM, check=False)
    assert [b.name for b in p.blocks() if isinstance(b, ast.ProgramBlock)] == [
        "data", "transformed data", "parameters", "transformed parameters", "model",
        "generated quantities",
    ]
    fns = p.functions.functions  # type: ignore[union-attr]
    assert [f.name for f in fns] == ["twice", "twice", "hello_lp", "pair", "noop"]
    assert fns[0].body is None and fns[1].body is not None
    assert fns[0].params == (ast.Param(ast.BasicType("real"), "x", True),)
    assert isinstance(fns[2].return_type, ast.VoidType)
    n, t = fns[2].params
    assert n.type == ast.UnsizedArrayType(ast.BasicType("int"), 2) and not n.data_only
    assert t.type == ast.TupleType(
        (ast.BasicType("real"), ast.UnsizedArrayType(ast.BasicType("vector"), 1))
    )
    assert fns[3].return_type == ast.TupleType((ast.BasicType("real"), ast.BasicType("int")))
    assert p.data.stmts[1] == ast.Skip()  # type: ignore[union-attr]


def test_absent_and_empty_blocks_differ() -> None:
    p = parse("model { }", check=False)
    assert p.model == ast.ProgramBlock("model", ())
    assert p.data is None and p.functions is None
    assert parse("", check=False) == ast.Program()


def test_transformed_and_generated_are_block_keywords_only() -> None:
    p = parse("transformed  data { }\ngenerated\nquantities { }", check=False)
    assert p.transformed_data is not None and p.generated_quantities is not None


def test_no_lark_objects_leak() -> None:
    import lark

    p = parse(PROGRAM, check=False)
    for node in ast.walk(p):
        assert isinstance(node, ast.Node)
        for f in dataclasses.fields(node):
            value = getattr(node, f.name)
            items = value if isinstance(value, tuple) else (value,)
            for item in items:
                assert not isinstance(item, (lark.Tree, lark.Token)), (node, f.name)


# --------------------------------------------------------------------------- #
# Errors
# --------------------------------------------------------------------------- #


def test_syntax_error_without_stanc() -> None:
    with pytest.raises(StanSyntaxError) as info:
        parse("model {\n  x ~ normal(0, 1)\n}\n", "m.stan", check=False)
    err = info.value
    assert isinstance(err, StanProgramError)
    assert (err.filename, err.line, err.column) == ("m.stan", 3, 0)


def test_include_is_unsupported() -> None:
    with pytest.raises(UnsupportedConstructError) as info:
        parse("functions {\n  #include lib.stan\n}\n", "m.stan", check=False)
    assert info.value.construct == "#include"
    assert (info.value.line, info.value.column) == (2, 2)


def test_gap_in_grammar_is_reported_as_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    """When stanc accepted a program our grammar rejects, the error says so."""
    import pemc_stan.stan.stanc

    monkeypatch.setattr(pemc_stan.stan.stanc, "check_with_stanc", lambda text, filename: None)
    with pytest.raises(UnsupportedConstructError) as info:
        parse("model {\n  real x = 1 @ 2;\n}\n", "m.stan")
    assert (info.value.line, info.value.column) == (2, 13)
    assert "'@'" in info.value.construct


def test_lone_surrogate_is_a_syntax_error_before_stanc() -> None:
    """Text decoded from bytes that are not UTF-8 (errors="surrogateescape") holds lone
    surrogates; stanc cannot be given it (found by the front-end fuzz test: a
    UnicodeEncodeError from run_stanc)."""
    bad = b"parameters {\n  real x\xe9;\n}\n".decode("utf-8", errors="surrogateescape")
    for check in (True, False):
        with pytest.raises(StanSyntaxError, match="lone surrogate.*UTF-8") as info:
            parse(bad, "m.stan", check=check)
        assert (info.value.filename, info.value.line, info.value.column) == ("m.stan", 2, 8)


@pytest.mark.parametrize("nested", [
    "(" * 3000 + "1" + ")" * 3000,
    "-" * 3000 + "1",
    " + ".join(["1"] * 3000),
    "2 ^ " * 3000 + "2",
    "exp(" * 3000 + "1" + ")" * 3000,
    "x" + "[1]" * 3000,
])
def test_too_deep_nesting_is_unsupported_not_a_recursion_error(nested: str) -> None:
    """Found by the front-end fuzz test: RecursionError, or Lark's VisitError around one."""
    text = f"parameters {{\n  real x;\n}}\nmodel {{\n  x ~ normal({nested}, 1);\n}}\n"
    with pytest.raises(UnsupportedConstructError, match="nested too deeply") as info:
        parse(text, "deep.stan", check=False)
    err = info.value
    assert (err.filename, err.line, err.construct) == ("deep.stan", 5, "deep nesting")


def test_too_deep_statements_name_the_line() -> None:
    text = "model {\n" + "{\n" * 3000 + "}\n" * 3000 + "}\n"
    with pytest.raises(UnsupportedConstructError, match="deep.stan, line 3001") as info:
        parse(text, "deep.stan", check=False)
    assert info.value.line == 3001


def test_tuple_index_with_thousands_of_digits() -> None:
    """Found by the front-end fuzz test: int() refuses more than 4300 digits (VisitError)."""
    with pytest.raises(StanSyntaxError, match="tuple index has 5000 digits") as info:
        parse("model {\n  real y = x." + "9" * 5000 + ";\n}\n", "t.stan", check=False)
    assert (info.value.filename, info.value.line, info.value.column) == ("t.stan", 2, 12)


# --------------------------------------------------------------------------- #
# Traversal helpers
# --------------------------------------------------------------------------- #


def test_children_and_walk() -> None:
    e = parse_expression("f(a, b[1]) + 2")
    assert [type(c).__name__ for c in ast.children(e)] == ["Call", "IntLit"]
    names = [n.name for n in ast.walk(e) if isinstance(n, ast.Variable)]
    assert names == ["a", "b"]
    p = parse(PROGRAM, check=False)
    assert sum(isinstance(n, ast.FunctionDef) for n in ast.walk(p)) == 5


def test_transform_renames_variables_and_keeps_the_rest() -> None:
    s = parse_statement("target += normal_lpdf(y | mu, sigma) + mu;")

    def rename(node: ast.Node) -> ast.Node:
        if isinstance(node, ast.Variable) and node.name == "mu":
            return dataclasses.replace(node, name="theta")
        return node

    out = ast.transform(s, rename)
    assert out == parse_statement("target += normal_lpdf(y | theta, sigma) + theta;")
    assert (out.line, out.column) == (s.line, s.column)
    same = ast.transform(s, lambda n: n)
    assert same is s  # nothing changed, nothing rebuilt


def test_map_children_replaces_direct_children_only() -> None:
    e = parse_expression("a + b * c")
    out = ast.map_children(e, lambda c: ast.IntLit("0") if isinstance(c, ast.Variable) else c)
    assert sx(out) == "(0 + (b * c))"


def test_identifiers() -> None:
    assert vocabulary.is_valid_identifier("mu_1")
    for bad in ("for", "lower", "array", "tuple", "x__", "_x", "1x", "true", "transformed"):
        assert not vocabulary.is_valid_identifier(bad), bad


def test_the_grammars_tables_are_built_once_and_read_back(
        tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new process reads the LALR tables from the cache folder (whole, under a key of
    the grammar): the parser read back parses as the one built."""
    from lark import Token

    from pemc_stan.stan import parser as P

    monkeypatch.setenv("PEMC_STAN_CACHE", str(tmp_path))
    built = P.grammar.__wrapped__()  # type: ignore[attr-defined]
    tables = list((tmp_path / "grammar").iterdir())
    assert [t.suffix for t in tables] == [".lark"]  # no partial file left
    stamp = tables[0].stat().st_mtime_ns
    read = P.grammar.__wrapped__()  # type: ignore[attr-defined]
    assert tables[0].stat().st_mtime_ns == stamp  # read, not written again
    text = "data { int N; }\nparameters { real<lower=0> s; }\nmodel { s ~ exponential(N); }"
    trees = [g.parse(text, start="start") for g in (read, built)]
    assert trees[0] == trees[1] and trees[0].meta.end_line == 3  # positions kept too
    tokens = [[(t.line, t.column) for t in tree.scan_values(lambda v: isinstance(v, Token))]
              for tree in trees]
    assert tokens[0] == tokens[1] and len(tokens[0]) == 10
