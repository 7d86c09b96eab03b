"""Tests of ``pemc_stan.stan.stanc``: errors come with stanc's own message and location.

Also a differential test of the grammar against stanc's own parser: random
expressions are printed, parsed by stanc (``--debug-ast``, before type
checking) and the trees compared with ours.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pemc_stan.errors import (
    StanProgramError,
    StanSemanticError,
    StanSyntaxError,
)
from pemc_stan.stan import ast
from pemc_stan.stan import stanc as stanc_module
from pemc_stan.stan.parser import parse, parse_expression
from pemc_stan.stan.printer import print_expr, print_program
from pemc_stan.stan.stanc import (
    canonical,
    check_with_stanc,
    parse_stanc_error,
    run_stanc,
    stanc_info,
)

GOOD = """data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  real mu;
  real<lower=0> sigma;
}
model {
  y ~ normal(mu, sigma);
}
"""


def test_check_accepts_a_valid_program() -> None:
    check_with_stanc(GOOD, "good.stan")


def test_a_program_stanc_accepted_is_not_checked_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEMC_STAN_CACHE", str(tmp_path))
    calls: list[str] = []
    real = stanc_module.run_stanc

    def counted(text: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(stanc_module, "run_stanc", counted)
    check_with_stanc(GOOD, "good.stan")
    check_with_stanc(GOOD, "other.stan")
    assert len(calls) == 1
    bad = GOOD.replace("real mu;", "real mu")
    for _ in range(2):  # a rejection is not recorded: its message names the caller's file
        with pytest.raises(StanSyntaxError):
            check_with_stanc(bad, "bad.stan")
    assert len(calls) == 3
    check_with_stanc(GOOD + "\n", "good.stan")  # another program
    assert len(calls) == 4


def test_syntax_error_carries_stancs_message_and_location() -> None:
    text = "parameters {\n  real x\n}\nmodel {\n  x ~ normal(0, 1);\n}\n"
    with pytest.raises(StanSyntaxError) as info:
        check_with_stanc(text, "bad_syntax.stan")
    err = info.value
    assert isinstance(err, StanProgramError)
    assert err.filename == "bad_syntax.stan"
    assert (err.line, err.column) == (3, 0)
    assert err.message.startswith("Syntax error in 'bad_syntax.stan', line 3, column 0")
    assert '";" expected after variable declaration.' in err.message
    assert str(err) == err.message


def test_lexing_error() -> None:
    text = "model {\n  real y = 1 @ 2;\n}\n"
    with pytest.raises(StanSyntaxError) as info:
        parse(text, "lex.stan")
    # stanc places lexing errors one column before the offending character;
    # the error reports stanc's numbers as they are.
    assert (info.value.line, info.value.column) == (2, 12)
    assert info.value.message.startswith("Syntax error in 'lex.stan', line 2, column 12")
    assert "Invalid character found." in info.value.message


def test_lexing_error_at_the_start_of_a_line() -> None:
    """stanc reports column -1 there; that report was taken for a stanc failure
    (StancError "unrecognised report"; found by the front-end fuzz test with real stanc)."""
    report = ("Syntax error in 'm.stan', line 1, column -1, lexing error:\n"
              "   -------------------------------------------------\n"
              "     1:  \x7f\n"
              "         ^\n"
              "   -------------------------------------------------\n\n"
              "Invalid character found.\n")
    err = parse_stanc_error(report)
    assert isinstance(err, StanSyntaxError)
    assert (err.filename, err.line, err.column) == ("m.stan", 1, 0)
    assert err.message == report.strip()
    with pytest.raises(StanSyntaxError, match="Invalid character found") as info:
        check_with_stanc("\x7f\n", "m.stan")
    assert (info.value.line, info.value.column) == (1, 0)


def test_semantic_error_carries_stancs_message_and_location() -> None:
    text = "parameters {\n  real x;\n}\nmodel {\n  y ~ normal(0, 1);\n}\n"
    with pytest.raises(StanSemanticError) as info:
        parse(text, "bad_scope.stan")
    err = info.value
    assert (err.filename, err.line, err.column) == ("bad_scope.stan", 5, 2)
    assert err.message.startswith("Semantic error in 'bad_scope.stan', line 5, column 2")
    assert err.message.rstrip().endswith("Identifier 'y' not in scope.")


def test_type_error() -> None:
    text = "transformed data {\n  int n = 1.5;\n}\n"
    with pytest.raises(StanSemanticError) as info:
        check_with_stanc(text, "t.stan")
    assert info.value.line == 2
    assert "Ill-typed arguments supplied to assignment operator =" in info.value.message


def test_removed_syntax_is_rejected_by_stanc() -> None:
    with pytest.raises(StanSyntaxError):
        check_with_stanc("parameters { real x[3]; }\n")


def test_canonical_and_info() -> None:
    text = "parameters { real<upper=1, lower=0> p; } model { p ~ beta(2, 2); // c\n }"
    out = canonical(text)
    assert "real<lower=0, upper=1> p;" in out and "// c" in out
    assert "// c" not in canonical(text, strip_comments=True)
    info = stanc_info(GOOD)
    assert set(info["parameters"]) == {"mu", "sigma"}
    assert info["inputs"]["y"]["dimensions"] == 1


def test_parse_checks_with_stanc_by_default() -> None:
    program = parse(GOOD, "good.stan")
    assert program.parameters is not None
    printed = print_program(program)
    assert canonical(printed) == canonical(GOOD)


# --------------------------------------------------------------------------- #
# Differential test against stanc's parser
# --------------------------------------------------------------------------- #

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def _sexp(text: str) -> Any:
    """Parse an OCaml S-expression (as printed by --debug-ast) into nested lists."""
    stack: list[list[Any]] = [[]]
    for token in _TOKEN.findall(text):
        if token == "(":
            stack.append([])
        elif token == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token)
    return stack[0][0]


_STANC_OPS = {
    "Plus": "+", "Minus": "-", "Times": "*", "Divide": "/", "Modulo": "%",
    "IntDivide": "%/%", "LDivide": "\\", "EltTimes": ".*", "EltDivide": "./",
    "Pow": "^", "EltPow": ".^", "Or": "||", "And": "&&", "Equals": "==",
    "NEquals": "!=", "Less": "<", "Leq": "<=", "Greater": ">", "Geq": ">=",
    "PMinus": "-", "PPlus": "+", "PNot": "!",
}


def _from_stanc(node: Any) -> Any:
    """Normalise one ``((expr X) (emeta ...))`` of stanc's AST."""
    expr = node[0][1]
    kind = expr[0] if isinstance(expr, list) else expr
    if kind == "Paren":
        return _from_stanc(expr[1])
    if kind == "Variable":
        return ("var", expr[1][0][1])
    if kind in ("IntNumeral", "RealNumeral"):
        return ("lit", expr[1])
    if kind == "ImagNumeral":  # stanc keeps the digits without the "i"
        return ("lit", expr[1] + "i")
    if kind == "BinOp":
        return ("bin", _STANC_OPS[expr[2]], _from_stanc(expr[1]), _from_stanc(expr[3]))
    if kind == "PrefixOp":
        return ("un", _STANC_OPS[expr[1]], _from_stanc(expr[2]))
    if kind == "PostfixOp":
        return ("tr", _from_stanc(expr[1]))
    if kind == "TernaryIf":
        return ("cond", *(_from_stanc(e) for e in expr[1:4]))
    if kind == "TupleProjection":
        return ("proj", _from_stanc(expr[1]), int(expr[2]))
    if kind in ("FunApp", "CondDistApp"):
        return ("call", expr[2][0][1], kind == "CondDistApp",
                tuple(_from_stanc(a) for a in expr[3]))
    if kind in ("ArrayExpr", "RowVectorExpr", "TupleExpr"):
        return (kind, tuple(_from_stanc(e) for e in expr[1]))
    if kind == "GetTarget":
        return ("target",)
    if kind == "Indexed":
        return ("idx", _from_stanc(expr[1]), tuple(_index_from_stanc(i) for i in expr[2]))
    raise AssertionError(f"unexpected stanc expression {kind}")


def _index_from_stanc(index: Any) -> Any:
    if index == "All":
        return ("slice", None, None)
    kind = index[0]
    if kind == "Single":
        return _from_stanc(index[1])
    if kind == "Upfrom":
        return ("slice", _from_stanc(index[1]), None)
    if kind == "Downfrom":
        return ("slice", None, _from_stanc(index[1]))
    if kind == "Between":
        return ("slice", _from_stanc(index[1]), _from_stanc(index[2]))
    raise AssertionError(f"unexpected stanc index {kind}")


def _ours(e: ast.Node | None) -> Any:
    if e is None:
        return None
    if isinstance(e, ast.Variable):
        return ("var", e.name)
    if isinstance(e, (ast.IntLit, ast.RealLit, ast.ImagLit)):
        return ("lit", e.text)
    if isinstance(e, ast.BinaryOp):
        return ("bin", e.op, _ours(e.left), _ours(e.right))
    if isinstance(e, ast.UnaryOp):
        return ("un", e.op, _ours(e.operand))
    if isinstance(e, ast.Transpose):
        return ("tr", _ours(e.operand))
    if isinstance(e, ast.Conditional):
        return ("cond", _ours(e.cond), _ours(e.if_true), _ours(e.if_false))
    if isinstance(e, ast.TupleProjection):
        return ("proj", _ours(e.value), e.index)
    if isinstance(e, ast.Call):
        return ("call", e.name, e.conditional, tuple(_ours(a) for a in e.args))
    if isinstance(e, ast.ArrayLit):
        return ("ArrayExpr", tuple(_ours(x) for x in e.elements))
    if isinstance(e, ast.RowVectorLit):
        return ("RowVectorExpr", tuple(_ours(x) for x in e.elements))
    if isinstance(e, ast.TupleLit):
        return ("TupleExpr", tuple(_ours(x) for x in e.elements))
    if isinstance(e, ast.TargetValue):
        return ("target",)
    if isinstance(e, ast.Indexed):
        return ("idx", _ours(e.value), tuple(_ours(i) for i in e.indices))
    if isinstance(e, ast.Slice):
        return ("slice", _ours(e.lower), _ours(e.upper))
    raise AssertionError(e)


def _stanc_tree(expr_text: str) -> Any:
    """stanc's parse of ``expr_text`` (inside a print statement), normalised."""
    proc = run_stanc(f"transformed data {{\n  print({expr_text});\n}}\n", "diff.stan",
                     ("--debug-ast",))
    assert not proc.stderr.startswith("Syntax error"), proc.stderr
    program = _sexp(proc.stdout)
    td = next(item for item in program if item[0] == "transformeddatablock")
    stmt = td[1][0][0][1][0][0][1]  # stmts -> first stmt -> (stmt (Print ...))
    assert stmt[0] == "Print"
    printable = stmt[1][0]
    assert printable[0] == "PExpr"
    return _from_stanc(printable[1])


# Hand-written cases, the same as test_parser's precedence table plus a few more.
STANC_CASES = [
    "1 + 2 * 3", "a - b - c", "a ^ b ^ c", "-a ^ b", "-a * b", "a ^ -b ^ c",
    "!a && b || c", "a == b != c < d", "a < b <= c > d >= e", "m * m \\ v",
    "m \\ v * 2", "6 * 3 %/% 2", "-6 %/% 4", "a .* b ./ c % d", "a ? b : c ? d : e",
    "a ? b ? c : d : e", "a || b ? c : d", "-a'", "-a[1]", "a[1]'", "a ^ b'",
    "a''", "x.1.2", "f(x).2[3]", "--a", "+-!a", "a - -b", "(a + b) * c",
    "a[2:, :3, :, i]", "a[c ? 1 : 2:3]", "normal_lpdf(y | mu, s)", "f()",
    "{1, 2}[1]", "[1, 2]'", "(1, 2.5).2", "target()", "2i * .5 + 1.e3",
    "a .^ b .^ -c", "(v')[1]",
]


@pytest.mark.parametrize("text", STANC_CASES)
def test_our_parse_agrees_with_stancs(text: str) -> None:
    assert _ours(parse_expression(text)) == _stanc_tree(text)


def _random_expressions() -> st.SearchStrategy[ast.Expr]:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_roundtrip_hypothesis import expressions

    def stanc_parsable(e: ast.Expr) -> bool:
        # stanc's grammar rejects an empty row vector "[]"; ours allows it.
        return not any(isinstance(n, ast.RowVectorLit) and not n.elements for n in ast.walk(e))

    return expressions.filter(stanc_parsable)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_random_expressions())
def test_random_expressions_agree_with_stanc(expr: ast.Expr) -> None:
    text = print_expr(expr)
    assert _ours(expr) == _stanc_tree(text), text
