"""Source lines carried through the printer, blocks located in rendered text, and CmdStan's
locations told in the user's lines."""

from __future__ import annotations

import pickle

import pytest

from pemc_stan.stan import ast
from pemc_stan.stan.line_map import LineMap, SourcedText, locate_blocks
from pemc_stan.stan.parser import parse
from pemc_stan.stan.printer import print_program, sourced_program, sourced_stmt

PROGRAM = """\
functions {
  real twice(real a) {
    return 2 * a;
  }
}
data {
  int N;
  vector[N] y;
}
parameters {
  real mu;
  real<lower=0> sigma;
}
model {
  mu ~ normal(0, 10);
  if (N > 2) {
    y ~ normal(mu, sigma);
  } else if (N > 1) {
    target += normal_lpdf(y | twice(mu), sigma);
  } else {
    sigma ~ exponential(1);
  }
  for (n in 1:N)
    target += -0.5 * square(y[n]);
}
"""


def test_every_printed_line_names_the_line_it_was_printed_from() -> None:
    """A program in the printer's own layout prints back line by line onto itself (a
    closing brace names the line of the statement it closes)."""
    text = sourced_program(parse(PROGRAM))
    assert str(text) + "\n" == print_program(parse(PROGRAM)) == PROGRAM
    lines = PROGRAM.splitlines()
    assert len(text.sources) == len(lines)
    for number, (line, source) in enumerate(zip(lines, text.sources, strict=True), 1):
        if line.strip() == "}":
            opening = lines[source - 1]
            assert opening.endswith("{") and len(opening) - len(opening.lstrip()) == (
                len(line) - len(line.lstrip())), (number, source)
        else:
            assert source == number, (number, line, source)


def test_statements_built_by_hand_have_no_source() -> None:
    stmt = ast.Block((ast.Print((ast.StringLit("hi"),)),))
    printed = sourced_stmt(stmt, 1)
    assert printed == "  {\n    print(\"hi\");\n  }"
    assert printed.sources == (0, 0, 0)


def test_sourced_text_joins_and_pickles() -> None:
    a = SourcedText("x;\ny;", (3, 4))
    joined = SourcedText.join([a, "// note", SourcedText("", ())])
    assert joined == "x;\ny;\n// note\n" and joined.sources == (3, 4, 0, 0)
    again = pickle.loads(pickle.dumps(a))
    assert again == a and again.sources == (3, 4)
    with pytest.raises(ValueError, match="2 source lines for a text of 1 lines"):
        SourcedText("x;", (1, 2))


def test_blocks_are_found_wherever_the_template_put_them() -> None:
    data = SourcedText("  int N;\n  vector[N] y;", (7, 8))
    body = SourcedText("    lp += f(y);", (15,))
    text = ("// header\ndata {\n  int N;\n  vector[N] y;\n}\nfunctions {\n  real g() {\n"
            "      lp += f(y);\n  }\n  real h() {\n    lp += f(y);\n  }\n}\n")
    sources = locate_blocks(text, [body, data])
    assert len(sources) == len(text.split("\n"))
    assert [i + 1 for i, s in enumerate(sources) if s] == [3, 4, 8, 11]  # indented, twice
    assert (sources[2], sources[3], sources[7]) == (7, 8, 15)
    assert locate_blocks("a\nb\n", [SourcedText("c", (1,))]) == (0, 0, 0)


LINE_MAP = LineMap((0,) * 14 + (7,) + (0,) * 80, "model.stan")


@pytest.mark.parametrize(("message", "expected"), [
    ("Scale parameter is 0, but must be positive! (in 'model_ct.stan', line 15, column 4 "
     "to column 30)",
     "Scale parameter is 0, but must be positive! (in your model.stan, line 7; generated "
     "program line 15)"),
    ("x is 3 (in 'model_ct.stan', line 15, column 6 to column 36) (in 'model_ct.stan', line "
     "80, column 2 to column 96)",
     "x is 3 (in your model.stan, line 7; generated program line 15)"),
    ("bad (in 'model_ct.stan', line 80, column 2 to line 81, column 5)",
     "bad (in the generated program model_ct.stan, line 80, column 2 to line 81, column 5)"),
    ("from the original (in 'model.stan', line 15, column 2 to column 9)",
     "from the original (in 'model.stan', line 15, column 2 to column 9)"),
])
def test_cmdstan_locations_are_told_in_the_users_lines(message: str, expected: str) -> None:
    assert LINE_MAP.rewrite(message, "model_ct.stan") == expected


def test_locations_on_each_line_are_rewritten_apart() -> None:
    text = ("a (in 'model_ct.stan', line 15, column 1 to column 2)\n"
            "\tb (in 'model_ct.stan', line 3, column 1 to column 2)")
    assert LINE_MAP.rewrite(text, "model_ct.stan").splitlines() == [
        "a (in your model.stan, line 7; generated program line 15)",
        "\tb (in the generated program model_ct.stan, line 3, column 1 to column 2)"]
    assert LineMap((5,), "").rewrite("(in 'g.stan', line 1, column 0)", "g.stan") == (
        "(in your program, line 5; generated program line 1)")
    assert LINE_MAP.user_line(0) is None and LINE_MAP.user_line(10_000) is None
