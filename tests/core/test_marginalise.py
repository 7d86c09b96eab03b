"""A parameter used only in comparisons, summed out (:mod:`pemc_stan.core.marginalise`).

What the rewritten program says (stanc accepts it; nothing compiles) and which programs
are left as written; the sampled answers against exact ones are in
``test_marginalise_compiled.py``.
"""

from __future__ import annotations

import pytest
from change_point import CHANGE_POINT

import pemc_stan
from pemc_stan.core.marginalise import marginalise
from pemc_stan.errors import ReservedPrefixError
from pemc_stan.stan.analysis import check_reserved_prefix
from pemc_stan.stan.inputs import read_program


def _rewritten(code: str) -> tuple[str, tuple[str, ...]]:
    program = read_program(code)
    out = marginalise(program)
    return out.text, out.marginalised


def test_a_change_point_is_summed_out_and_drawn_back_in_generated_quantities() -> None:
    program = read_program(CHANGE_POINT)
    out = marginalise(program)
    assert out.marginalised == ("s",) and out.original is program
    assert out.parameter_names == ["mu1", "mu2"]
    text = out.text
    # the model's own statements stay readable: the priors of the others as written, the
    # statements using s inside the generated log density (all constants)
    assert "  mu1 ~ normal(0, 5);\n  mu2 ~ normal(0, 5);" in text
    assert "pemc_lp += normal_lpdf(y[t] | t < s ? mu1 : mu2, 1);" in text
    assert "pemc_lp += uniform_lpdf(s | 0, N);" in text
    assert "target += pemc_marginal_lpdf(pemc_marginal_lower | mu1, mu2, " \
        "pemc_marginal_upper, N, y);" in text
    # the points: its bounds, then t for every t of the loop, clipped to (0, N)
    assert "pemc_marginal_points[pemc_marginal_i] = fmin(fmax(t, 0), N);" in text
    # s comes back with its declared bounds, before the user's generated quantities
    gq = text[text.index("generated quantities {"):]
    assert gq.index("real<lower=0, upper=N> s = pemc_marginal_rng(") < gq.index("real jump")
    check_reserved_prefix(out.tree)  # its own identifiers are not the user's


def test_the_sum_over_a_change_point_is_the_likelihood_of_the_other_parameters() -> None:
    # s's prior integrates out: what is left of the statements summed is p(y | mu1, mu2),
    # so pseudo-extended MCMC tempers towards its base, not the whole posterior (whose
    # hot copies roamed ten prior sds of mu1, 4x the wall time)
    out = marginalise(read_program(CHANGE_POINT))
    kinds = {c.kind for c in out.analysis.contributions}
    assert kinds == {"prior", "likelihood"}
    [summed] = out.analysis.likelihood_contributions()
    assert "pemc_marginal_lpdf" in str(summed.node)
    assert pemc_stan.transform_result(CHANGE_POINT, method="pe").temper == "base"


def test_a_sum_that_holds_another_parameter_s_prior_stays_a_prior_term() -> None:
    # mu1's prior depends on s: the sum is not a likelihood, and tempering only the
    # likelihood would leave mu1 without its prior
    code = CHANGE_POINT.replace("mu1 ~ normal(0, 5);", "mu1 ~ normal(s < 5 ? 0 : 1, 5);")
    out = marginalise(read_program(code))
    assert out.marginalised == ("s",)
    assert "target += log_sum_exp(pemc_marginal_intervals(" in out.text
    assert "pemc_marginal_lpdf" not in out.text
    assert not out.analysis.likelihood_contributions()


def test_points_inside_nested_loops_and_data_vectors_are_collected() -> None:
    code = """
data { int J; int N; array[J] vector[N] x; array[J] vector[N] y; }
parameters { real mu; real<lower=min(x[1]), upper=max(x[1])> c; }
model {
  mu ~ normal(0, 1);
  for (j in 1:J) {
    for (i in 1:N) {
      if (c <= x[j, i]) y[j, i] ~ normal(mu, 1);
      else y[j, i] ~ normal(-mu, 1);
    }
  }
}
"""
    text, names = _rewritten(code)
    assert names == ("c",)
    assert "for (j in 1:J) {\n      for (i in 1:N) {\n        pemc_marginal_i += 1;" in text
    assert "fmin(fmax(x[j, i], min(x[1])), max(x[1]))" in text


@pytest.mark.parametrize("model", [
    # used inside arithmetic: its points would not be the other side's values
    "s ~ uniform(0, N); for (t in 1:N) y[t] ~ normal(t < 2 * s ? mu : -mu, 1);",
    # a prior that is not constant along it
    "s ~ normal(5, 2); for (t in 1:N) y[t] ~ normal(t < s ? mu : -mu, 1);",
    # the other side depends on a parameter
    "for (t in 1:N) y[t] ~ normal(t * mu < s ? mu : -mu, 1);",
    # a while loop
    "int t = 1; while (t <= N) { y[t] ~ normal(t < s ? mu : -mu, 1); t += 1; }",
])
def test_other_uses_leave_the_program_as_written(model: str) -> None:
    code = ("data { int N; vector[N] y; } parameters { real mu; real<lower=0, upper=N> s; }"
            f" model {{ mu ~ normal(0, 1); {model} }}")
    text, names = _rewritten(code)
    assert names == () and "pemc_" not in text


@pytest.mark.parametrize("code", [
    # the only parameter: nothing would be left to sample
    "data { int N; vector[N] y; } parameters { real<lower=0, upper=N> s; }"
    " model { for (t in 1:N) y[t] ~ normal(t < s ? 1 : -1, 1); }",
    # unbounded above
    "data { int N; vector[N] y; } parameters { real mu; real<lower=0> s; }"
    " model { mu ~ normal(0, 1); for (t in 1:N) y[t] ~ normal(t < s ? mu : -mu, 1); }",
    # two change points
    "data { int N; vector[N] y; } parameters { real mu; real<lower=0, upper=N> s1;"
    " real<lower=0, upper=N> s2; } model { mu ~ normal(0, 1);"
    " for (t in 1:N) y[t] ~ normal(t < s1 ? mu : t < s2 ? 0 : -mu, 1); }",
])
def test_programs_it_cannot_sum_exactly_are_left_as_written(code: str) -> None:
    assert _rewritten(code)[1] == ()


def test_the_methods_sample_the_summed_program_unless_told_not_to() -> None:
    for method in ("ct", "pe"):
        result = pemc_stan.transform_result(CHANGE_POINT, method=method)
        assert result.program.marginalised == ("s",)
        assert "pemc_marginal_intervals(" in result.stan_code
        assert "real<lower=0, upper=N> s;" not in result.stan_code
        kept = pemc_stan.transform_result(CHANGE_POINT, method=method, marginalise="none")
        assert kept.program.marginalised == ()
        assert "real<lower=0, upper=N> s;" in kept.stan_code


def test_a_user_s_reserved_identifier_is_still_rejected() -> None:
    code = CHANGE_POINT.replace("real mu1;", "real pemc_mu1;").replace(
        "mu1 ~", "pemc_mu1 ~").replace("? mu1", "? pemc_mu1").replace("- mu1", "- pemc_mu1")
    with pytest.raises(ReservedPrefixError, match="pemc_mu1"):
        pemc_stan.transform_result(code, method="ct")


def test_a_local_the_comparisons_fill_goes_into_the_summed_density_with_its_statements() -> None:
    code = """
data { int<lower=1> T; array[T] int<lower=0> y; }
parameters { real<lower=0> early; real<lower=0> late; real<lower=0, upper=T> s; }
model {
  vector[T] rate;
  early ~ gamma(2, 1);
  for (t in 1:T)
    rate[t] = t < s ? early : late;
  late ~ gamma(2, 1);
  y ~ poisson(rate);
}
"""
    text, names = _rewritten(code)
    assert names == ("s",)
    density = text[text.index("real pemc_marginal_log_density("):text.index("return pemc_lp;")]
    assert "vector[T] rate;" in density and "poisson_lpmf(y | rate)" in density
    assert "gamma" not in density  # the priors of the others stay in the model block
    model = text[text.index("model {"):text.index("generated quantities {")]
    # the sum stands where the first of its statements stood (here the local's declaration)
    assert model.index("pemc_marginal_lpdf") < model.index("early ~ gamma(2, 1);") \
        < model.index("late ~ gamma(2, 1);")


@pytest.mark.parametrize("model", [
    # a rejection in one interval would reject every draw of the sum
    "mu ~ normal(0, 1); if (mu > 0 && s > N - 1) reject(\"no\");"
    " for (t in 1:N) y[t] ~ normal(t < s ? mu : -mu, 1);",
    # target() read by a statement left in the model block
    "for (t in 1:N) y[t] ~ normal(t < s ? mu : -mu, 1); target += 0.5 * target();",
    # a vectorised prior: its bounds are not points
    "mu ~ normal(0, 1); s ~ uniform(y, y + 1); for (t in 1:N) y[t] ~ normal(t < s ? mu : -mu, 1);",
    # an index that may be out of range where a parameter's condition guards it
    "mu ~ normal(0, 1); for (t in 1:N) { if (mu > 0) y[t] ~ normal(y[t - 1] < s ? mu : -mu, 1); }",
])
def test_sums_that_would_not_be_exact_leave_the_program_as_written(model: str) -> None:
    code = ("data { int N; vector[N] y; } parameters { real mu; real<lower=0, upper=N> s; }"
            f" model {{ {model} }}")
    assert _rewritten(code)[1] == ()


def test_another_declaration_using_it_leaves_the_program_as_written() -> None:
    code = ("data { int N; vector[N] y; } parameters { real<lower=0, upper=N> s; real<lower=s> z; }"
            " model { z ~ normal(0, 1); for (t in 1:N) y[t] ~ normal(t < s ? z : -z, 1); }")
    assert _rewritten(code)[1] == ()


def test_a_data_condition_around_a_comparison_is_copied_with_the_loops() -> None:
    code = ("data { int N; vector[N] x; vector[N] y; } parameters { real mu; "
            "real<lower=0, upper=10> s; } model { mu ~ normal(0, 1); for (t in 1:N) "
            "{ if (t > 1) y[t] ~ normal(x[t - 1] < s ? mu : -mu, 1); else y[t] ~ normal(0, 1); } }")
    text, names = _rewritten(code)
    assert names == ("s",)
    assert "for (t in 1:N) {\n      if (t > 1) {\n        pemc_marginal_i += 1;" in text


def test_a_local_declared_with_the_comparison_moves_with_its_readers() -> None:
    code = ("data { int N; vector[N] y; real t0; }"
            " parameters { real mu; real<lower=0, upper=N> s; }"
            " model { real m = t0 < s ? 1 : 0; real a, b; b = m; a = 1;"
            " mu ~ normal(a * b, 1); y ~ normal(mu, 1); }")
    text, names = _rewritten(code)
    assert names == ("s",)
    density = text[text.index("real pemc_marginal_log_density("):text.index("return pemc_lp;")]
    assert "normal_lpdf(mu | a * b, 1)" in density and "normal_lpdf(y | mu, 1)" not in density


def test_the_verdict_is_told_why_a_compared_only_parameter_was_kept() -> None:
    from pemc_stan.core.marginalise import refusal

    assert refusal(read_program(CHANGE_POINT).tree) == ""  # it would be summed out
    loop = ("data { int N; vector[N] y; } parameters { real mu; real<lower=0, upper=N> s; }"
            " model { int t = 1; while (t <= N) { y[t] ~ normal(t < s ? mu : -mu, 1); t += 1; } }")
    assert refusal(read_program(loop).tree) == "a while loop uses it"
    two = ("data { int N; vector[N] y; } parameters { real mu; real<lower=0, upper=N> s1;"
           " real<lower=0, upper=N> s2; } model { mu ~ normal(0, 1);"
           " for (t in 1:N) y[t] ~ normal(t < s1 ? mu : t < s2 ? 0 : -mu, 1); }")
    assert refusal(read_program(two).tree).startswith("2 parameters are used only")
