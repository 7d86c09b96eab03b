"""Non-centring hierarchical normal priors by offset/multiplier (fast; stanc checks the output)."""

from __future__ import annotations

import dataclasses

import pytest

from pemc_stan.stan.parser import parse
from pemc_stan.stan.printer import print_program, print_stmt
from pemc_stan.stan.reparameterize import noncentre
from pemc_stan.stan.stanc import check_with_stanc

EIGHT_SCHOOLS = """
data { int<lower=0> J; vector[J] y; vector<lower=0>[J] sigma; }
parameters { real mu; real<lower=0> tau; vector[J] theta; }
model {
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  theta ~ normal(mu, tau);
  y ~ normal(theta, sigma);
}
"""


def _declarations(program: str) -> tuple[list[str], list[str]]:
    tree = parse(program)
    block, done = noncentre(tree)
    assert block is not None
    return [print_stmt(s) for s in block.stmts], [nc.name for nc in done]


def test_eight_schools_theta_gets_the_priors_location_and_scale() -> None:
    decls, names = _declarations(EIGHT_SCHOOLS)
    assert names == ["theta"]
    assert decls == ["real mu;", "real<lower=0> tau;",
                     "vector<offset=mu, multiplier=tau>[J] theta;"]


def test_the_funnel_and_the_lpdf_form() -> None:
    funnel = ("parameters { real v; vector[4] z; } "
              "model { v ~ normal(0, 3); target += normal_lpdf(z | 0, exp(v / 2)); }")
    decls, names = _declarations(funnel)
    assert names == ["z"]
    assert decls[1] == "vector<multiplier=exp(v / 2)>[4] z;"  # a zero location: no offset
    tree = parse(funnel)
    _, done = noncentre(tree)
    assert "z / exp(v / 2)" in done[0].describe() and "line 1" in done[0].describe()


@pytest.mark.parametrize("program", [
    # the scale is data: no funnel
    "data { real s; } parameters { real m; vector[3] x; } "
    "model { m ~ normal(0, 1); x ~ normal(m, s); }",
    # bounded: offset/multiplier cannot be combined with bounds
    "parameters { real<lower=0> t; vector<lower=0>[3] x; } "
    "model { t ~ normal(0, 1); x ~ normal(0, t); }",
    # a second density of x (a likelihood term on the parameter itself)
    "parameters { real<lower=0> t; vector[3] x; } "
    "model { t ~ normal(0, 1); x ~ normal(0, t); x ~ student_t(3, 0, 1); }",
    # the prior inside a loop, element by element
    "parameters { real<lower=0> t; vector[3] x; } "
    "model { t ~ normal(0, 1); for (i in 1:3) x[i] ~ normal(0, t); }",
    # the scale is declared after x (a declaration may use earlier parameters only)
    "parameters { vector[3] x; real<lower=0> t; } "
    "model { t ~ normal(0, 1); x ~ normal(0, t); }",
    # the scale is a transformed parameter
    "parameters { real v; vector[3] x; } transformed parameters { real t = exp(v); } "
    "model { v ~ normal(0, 1); x ~ normal(0, t); }",
    # a matrix product of containers is not elementwise
    "data { matrix[3, 3] X; } parameters { vector[3] b; real<lower=0> t; vector[3] x; } "
    "model { b ~ normal(0, 1); t ~ normal(0, 1); x ~ normal(X * b, t); }",
    # a row_vector location for a vector parameter (normal() accepts it, an offset does not)
    "parameters { row_vector[3] m; real<lower=0> t; vector[3] x; } "
    "model { m ~ normal(0, 1); t ~ normal(0, 1); x ~ normal(m, t); }",
    # arrays and truncation are left alone
    "parameters { real<lower=0> t; array[3] real x; } "
    "model { t ~ normal(0, 1); x ~ normal(0, t); }",
    "parameters { real<lower=0> t; real x; } "
    "model { t ~ normal(0, 1); x ~ normal(0, t) T[-5, 5]; }",
    # a user function in the scale
    "functions { real f(real a) { return exp(a); } } parameters { real v; real x; } "
    "model { v ~ normal(0, 1); x ~ normal(0, f(v)); }",
])
def test_what_does_not_clearly_qualify_is_left_as_written(program: str) -> None:
    tree = parse(program)
    block, done = noncentre(tree)
    assert done == () and block is tree.parameters


@pytest.mark.parametrize("program", [
    # container locations or scales: the base's Python mirror evaluates offsets and
    # multipliers with the draws along a leading axis, which containers would clash with
    "data { int J; vector<lower=0>[J] s; } parameters { real mu; real<lower=0> tau; "
    "vector[J] theta; } model { mu ~ normal(0, 5); tau ~ normal(0, 5); "
    "theta ~ normal(mu, tau * s); }",
    "data { int J; vector[J] m; } parameters { real<lower=0> tau; vector[J] theta; } "
    "model { tau ~ normal(0, 5); theta ~ normal(m, tau); }",
    # indexing a parameter
    "parameters { vector<lower=0>[2] sigma; vector[3] x; } "
    "model { sigma ~ normal(0, 1); x ~ normal(0, sigma[2]); }",
    # transformed data (not in the data the mirror evaluates with)
    "transformed data { real c = 2; } parameters { real<lower=0> t; real x; } "
    "model { t ~ normal(0, 1); x ~ normal(0, c * t); }",
    # a function the mirror cannot evaluate
    "parameters { real v; real x; } model { v ~ normal(0, 1); x ~ normal(0, cbrt(exp(v))); }",
])
def test_what_the_base_mirror_cannot_evaluate_per_draw_is_left_alone(program: str) -> None:
    tree = parse(program)
    block, done = noncentre(tree)
    assert done == () and block is tree.parameters


def test_several_parameters_with_scalar_arithmetic_and_functions() -> None:
    program = """
    data { real s0; }
    parameters { real<lower=0> t; real<lower=0> s; vector[3] x; real w; }
    model {
      t ~ normal(0, 1); s ~ normal(0, 1);
      x ~ normal(-t, pow(s, 2) * s0 + inv_logit(t));
      w ~ normal(t, s);
    }
    """
    decls, names = _declarations(program)
    assert names == ["x", "w"]
    assert "vector<offset=-t, multiplier=pow(s, 2) * s0 + inv_logit(t)>[3] x;" in decls
    assert "real<offset=t, multiplier=s> w;" in decls


def test_every_allowed_function_is_one_the_evaluator_computes() -> None:
    from pemc_stan.stan import evaluate
    from pemc_stan.stan.reparameterize import EVALUABLE_CALLS

    assert EVALUABLE_CALLS[1] <= set(evaluate._UNARY)
    assert EVALUABLE_CALLS[2] <= set(evaluate._BINARY)
    assert EVALUABLE_CALLS[0] <= set(evaluate._CONSTANTS)


def test_the_rewritten_program_is_valid_stan() -> None:
    """stanc accepts the program with the rewritten declarations (types and scoping)."""
    for program in (EIGHT_SCHOOLS, "data { int K; real c; } parameters { real m; real v; "
                    "row_vector[K] x; } model { m ~ normal(0, 1); v ~ normal(0, 1); "
                    "x ~ normal(exp(m) * c, exp(v / 2)); }"):
        tree = parse(program)
        block, done = noncentre(tree)
        assert done
        check_with_stanc(print_program(dataclasses.replace(tree, parameters=block)))
