"""Density programs (:mod:`pemc_stan.methods.density`): what is built (nothing compiles)."""

from __future__ import annotations

from pemc_stan.evidence import parameter_names
from pemc_stan.methods.density import _column_names, density_program

PROGRAM = """
data { int N; vector[N] y; }
parameters { real mu; real<lower=0> sigma; }
model { mu ~ normal(0, 1); sigma ~ exponential(1); y ~ normal(mu, sigma); }
generated quantities { real y_rep = normal_rng(mu, sigma); }
"""


def test_density_program_outputs_the_full_log_density() -> None:
    from pemc_stan.stan.parser import parse

    code = density_program(PROGRAM)
    prog = parse(code)  # valid Stan (stanc accepts it)
    assert prog.model is None and prog.transformed_parameters is None
    assert "real pemc_log_gamma = pemc_log_density(mu, sigma, y);" in code
    assert "normal_rng" not in code
    assert parameter_names(PROGRAM) == ["mu", "sigma"]


def test_column_names_are_column_major_like_cmdstan() -> None:
    assert [c for c, _ in _column_names("a", ())] == ["a"]
    assert [c for c, _ in _column_names("m", (2, 3))] == [
        "m.1.1", "m.2.1", "m.1.2", "m.2.2", "m.1.3", "m.2.3"]
