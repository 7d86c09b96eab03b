"""Unit tests of :mod:`pemc_stan.stan.analysis` and :mod:`pemc_stan.stan.symbols` (no C++
compilation, no stanc)."""

from __future__ import annotations

import pytest

from pemc_stan.errors import UnsupportedConstructError
from pemc_stan.stan import ast
from pemc_stan.stan.analysis import (
    ReservedPrefixError,
    analyse,
    check_reserved_prefix,
    compared_only_parameters,
)
from pemc_stan.stan.parser import parse
from pemc_stan.stan.symbols import build_symbol_table, suffix_kind

PROGRAM = """
functions {
  real half_lpdf(real y, real s) { return normal_lpdf(y | 0, s) + log(2); }
  void both_lp(real theta, real obs) {
    theta ~ normal(0, 1);
    obs ~ normal(theta, 1);
  }
  void obs_lp(real obs, real theta) {
    obs ~ normal(theta, 1);
  }
  real ident(real x) { return x; }
}
data {
  int<lower=1> N;
  vector[N] y;
  real z;
}
transformed data {
  real ybar = mean(y);
}
parameters {
  real mu;
  real<lower=0> sigma;
  simplex[3] w;
  array[2] vector<lower=-1, upper=1>[N] v;
}
transformed parameters {
  real mu2 = 2 * mu;
}
model {
  vector[N] m = rep_vector(mu, N);
  real c = ybar + 1;
  real d;
  d = z;
  d += ybar;
  mu ~ normal(0, 10);
  y ~ normal(m, sigma);
  c ~ normal(mu, 1);
  d ~ normal(mu, 1);
  target += normal_lpdf(y | mu2, sigma);
  target += normal_lupdf(z | mu, 1) + normal_lpdf(ybar | mu, 1);
  target += -0.5 * dot_self(y - mu);
  target += half_lpdf(ident(z) | sigma);
  for (n in 1:N) {
    real e = y[n] * mu;
    e ~ normal(0, 1);
  }
  profile("likelihood") {
    target += -log(sigma);
    mu ~ normal(0, 1);
  }
  profile("outer") {
    profile("prior") {
      y ~ normal(0, 100);
    }
  }
  both_lp(mu, z);
  obs_lp(z, mu);
  obs_lp(mu, z);
}
"""


@pytest.fixture(scope="module")
def program() -> ast.Program:
    return parse(PROGRAM, check=False)


def test_suffix_kind() -> None:
    assert suffix_kind("foo_lpdf") == "lpdf"
    assert suffix_kind("foo_lupmf") == "lupmf"
    assert suffix_kind("foo_lp") == "lp"
    assert suffix_kind("foo_rng") == "rng"
    assert suffix_kind("foo_lccdf") == "lccdf"
    assert suffix_kind("foo") is None
    assert suffix_kind("_lp") is None


def test_symbol_table_globals(program: ast.Program) -> None:
    table = build_symbol_table(program)
    assert [s.name for s in table.in_block("data")] == ["N", "y", "z"]
    assert table.block_of("ybar") == "transformed data"
    assert [s.name for s in table.in_block("parameters")] == ["mu", "sigma", "w", "v"]
    assert table.block_of("mu2") == "transformed parameters"
    n = table.lookup("N")
    assert n is not None and isinstance(n.constraint, ast.Bounds)
    w = table.lookup("w")
    assert w is not None and w.base_type_name == "simplex" and len(w.sizes) == 1
    v = table.lookup("v")
    assert v is not None and len(v.sizes) == 2  # array dim + vector size
    assert isinstance(v.constraint, ast.Bounds) and v.constraint.upper is not None
    assert table.lookup("m") is None  # model locals are not global


def test_symbol_table_locals_and_functions(program: ast.Program) -> None:
    table = build_symbol_table(program)
    model_locals = {s.name: s for s in table.locals_of("model")}
    assert {"m", "c", "d", "e", "n"} <= set(model_locals)
    assert model_locals["n"].scope == "loop"
    assert model_locals["e"].depth > 0 and model_locals["m"].depth == 0
    args = [s.name for s in table.locals_of("function both_lp") if s.scope == "argument"]
    assert args == ["theta", "obs"]
    assert table.definition("half_lpdf").suffix == "lpdf"  # type: ignore[union-attr]
    assert table.definition("both_lp").is_void  # type: ignore[union-attr]
    assert table.lp_functions() == ["both_lp", "obs_lp"]


def _kinds(program: ast.Program) -> list[tuple[int, str, str]]:
    return [(c.line, c.kind, c.reason) for c in analyse(program).contributions]


def test_classification(program: ast.Program) -> None:
    lines = PROGRAM.splitlines()
    got = {lines[c.line - 1].strip(): c.kind for c in analyse(program).contributions}
    assert got["mu ~ normal(0, 10);"] == "prior"
    assert got["y ~ normal(m, sigma);"] == "likelihood"
    assert got["c ~ normal(mu, 1);"] == "likelihood"  # c is computed from data only
    assert got["d ~ normal(mu, 1);"] == "likelihood"  # also through compound assignment
    assert got["target += normal_lpdf(y | mu2, sigma);"] == "likelihood"
    assert got["target += normal_lupdf(z | mu, 1) + normal_lpdf(ybar | mu, 1);"] == "likelihood"
    assert got["target += -0.5 * dot_self(y - mu);"] == "prior"  # no identifiable variate
    assert got["target += half_lpdf(ident(z) | sigma);"] == "likelihood"
    assert got["e ~ normal(0, 1);"] == "prior"  # e depends on mu
    assert got["both_lp(mu, z);"] == "prior"  # mixed inside
    assert got["obs_lp(z, mu);"] == "likelihood"
    assert got["obs_lp(mu, z);"] == "prior"


def test_profile_override(program: ast.Program) -> None:
    lines = PROGRAM.splitlines()
    by_line = {}
    for c in analyse(program).contributions:
        by_line.setdefault(lines[c.line - 1].strip(), []).append(c)
    assert by_line["target += -log(sigma);"][0].kind == "likelihood"
    assert by_line["target += -log(sigma);"][0].reason == "profile override"
    # the second "mu ~ normal(0, 1);" is inside profile("likelihood")
    assert [c.kind for c in by_line["mu ~ normal(0, 1);"]] == ["likelihood"]
    assert by_line["y ~ normal(0, 100);"][0].kind == "prior"  # nested profile("prior")


def test_dependencies(program: ast.Program) -> None:
    analysis = analyse(program)
    model = analysis.local_deps("model")
    assert model["m"].on_parameters and ("parameters", "mu") in model["m"].variables
    assert model["c"].data_only and model["c"].blocks == {"transformed data"}
    assert model["d"].data_only and model["d"].names == {"z", "ybar"}
    assert model["e"].on_parameters
    deps = analysis.expr_deps(parse_expr("mu2 + ybar"))
    assert deps.blocks == {"transformed parameters", "transformed data"}
    assert deps.on_parameters
    assert analysis.expr_deps(parse_expr("target() + 1")).target


def test_statement_dependencies(program: ast.Program) -> None:
    analysis = analyse(program)
    assert program.model is not None
    first = program.model.stmts[0]
    assert analysis.stmt_deps(first).names == {"mu", "N"}


def test_adds_to_target(program: ast.Program) -> None:
    analysis = analyse(program)
    assert analysis.function_adds_to_target("both_lp")
    assert program.model is not None
    decl = program.model.stmts[0]
    assert not analysis.adds_to_target(decl)
    assert analysis.adds_to_target(program.model.stmts[-1])


def test_transitive_lp_functions() -> None:
    text = """
functions {
  void inner_lp(real x) { x ~ normal(0, 1); }
  void outer_lp(real x) { inner_lp(x); }
  void nothing_lp(real x) { print(x); }
}
data { real z; }
parameters { real mu; }
model {
  outer_lp(z);
  outer_lp(mu);
  nothing_lp(mu);
}
"""
    analysis = analyse(parse(text, check=False))
    kinds = [(c.node.line, c.kind) for c in analysis.contributions]
    assert kinds == [(10, "likelihood"), (11, "prior")]
    assert analysis.function_adds_to_target("outer_lp")
    assert not analysis.function_adds_to_target("nothing_lp")


def parse_expr(text: str) -> ast.Expr:
    from pemc_stan.stan.parser import parse_expression

    return parse_expression(text)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("parameters { real pemc_mu; } model { pemc_mu ~ normal(0, 1); }", "pemc_mu"),
        ("parameters { real mu; } model { real pemc_x = mu; mu ~ normal(pemc_x, 1); }",
         "pemc_x"),
        ("functions { real pemc_f(real x) { return x; } } parameters { real mu; } "
         "model { mu ~ normal(0, 1); }", "pemc_f"),
        ("functions { real f(real pemc_a) { return pemc_a; } } parameters { real mu; } "
         "model { mu ~ normal(0, 1); }", "pemc_a"),
        ("parameters { real mu; } model { for (pemc_i in 1:2) mu ~ normal(0, 1); }", "pemc_i"),
    ],
)
def test_reserved_prefix(text: str, name: str) -> None:
    program = parse(text, check=False)
    with pytest.raises(ReservedPrefixError) as info:
        check_reserved_prefix(program, "m.stan")
    err = info.value
    assert isinstance(err, UnsupportedConstructError)
    assert name in str(err) and "pemc_" in str(err)
    assert err.line == 1 and err.column > 0
    assert f"line {err.line}, column {err.column}" in str(err)


def test_reserved_prefix_accepts_other_names() -> None:
    program = parse("parameters { real mu_pemc; real pemc; } model { mu_pemc ~ normal(0, 1); }",
                    check=False)
    check_reserved_prefix(program)


CHANGE_POINT = """
data { int N; vector[N] y; }
parameters { real mu1; real mu2; real<lower=0, upper=N> s; real<lower=0> tau; }
model {
  s ~ uniform(0, N);
  mu1 ~ normal(0, 5);
  mu2 ~ normal(0, 5);
  tau ~ exponential(1);
  for (t in 1:N)
    y[t] ~ normal(t < s ? mu1 : mu2, 1);
  if (tau > 3) target += -tau;
}
"""


def test_a_parameter_used_only_in_comparisons_is_found_with_its_line() -> None:
    """``s`` enters the density only through ``t < s`` (its own prior aside): flat between
    the data's times.  ``mu1``/``mu2`` are compared nowhere; ``tau`` is compared (line 11)
    but also used as a value, so the density has a gradient along it."""
    assert compared_only_parameters(parse(CHANGE_POINT, check=False)) == [("s", 10)]
    smooth = CHANGE_POINT.replace("t < s ? mu1 : mu2", "mu1 + (mu2 - mu1) * inv_logit(t - s)")
    assert compared_only_parameters(parse(smooth, check=False)) == []
    assert compared_only_parameters(parse("model { }", check=False)) == []
