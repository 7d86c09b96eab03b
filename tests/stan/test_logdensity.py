"""Unit tests of :mod:`pemc_stan.stan.logdensity` (stanc only, no C++ compilation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pemc_stan.errors import ReservedPrefixError, UnsupportedConstructError
from pemc_stan.stan import ast
from pemc_stan.stan.logdensity import add_log_density_functions, log_density_functions
from pemc_stan.stan.parser import parse
from pemc_stan.stan.printer import print_program, print_stmt
from pemc_stan.stan.stanc import check_with_stanc

CORPUS = Path(__file__).resolve().parents[1] / "stan_corpus"


def _has_parameters_and_model(program: ast.Program) -> bool:
    return program.parameters is not None and bool(program.parameters.stmts)


def _corpus() -> list[Path]:
    out = []
    for path in sorted(CORPUS.glob("*.stan")):
        if _has_parameters_and_model(parse(path.read_text(), path.name, check=False)):
            out.append(path)
    return out


CORPUS_PROGRAMS = _corpus()


def _body(fn: ast.FunctionDef) -> str:
    assert fn.body is not None
    return print_stmt(fn.body)


def _functions(text: str) -> str:
    functions = log_density_functions(parse(text, check=False))
    return print_program(ast.Program(functions=ast.FunctionsBlock(functions.functions)))


def test_corpus_is_large() -> None:
    assert len(CORPUS_PROGRAMS) >= 60


@pytest.mark.parametrize("path", CORPUS_PROGRAMS, ids=[p.stem for p in CORPUS_PROGRAMS])
def test_corpus_rewrite_accepted_by_stanc(path: Path) -> None:
    program = parse(path.read_text(), path.name, check=False)
    rewritten = add_log_density_functions(program, path.name)
    text = print_program(rewritten)
    check_with_stanc(text, path.name)
    # the original program is unchanged, the functions come last
    assert rewritten.model == program.model
    assert rewritten.functions is not None
    names = [f.name for f in rewritten.functions.functions]
    assert names[-3:] == ["pemc_log_density", "pemc_log_prior", "pemc_log_likelihood"]


def test_signature_and_call() -> None:
    text = """
data { int N; vector[N] y; real unused; array[N] int k; }
transformed data { real s = sd(y); }
parameters {
  real mu; simplex[3] w; array[2] cholesky_factor_corr[3] L; tuple(real, vector[2]) t;
  real<lower=0> lambda;
}
model {
  y ~ normal(mu, s);
  k ~ poisson(lambda);
  w ~ dirichlet(rep_vector(1, 3));
}
"""
    f = log_density_functions(parse(text, check=False))
    assert f.parameters == ("mu", "w", "L", "t", "lambda")
    assert f.data == ("y", "k", "s")  # declaration order, unused data (N, unused) left out
    head = print_program(ast.Program(functions=ast.FunctionsBlock((f.density,)))).splitlines()[1]
    assert head.strip().startswith(
        "real pemc_log_density(real mu, vector w, array[] matrix L, tuple(real, vector) t, "
        "real lambda, data vector y, data array[] int k, data real s)")
    assert f.call() == "pemc_log_density(mu, w, L, t, lambda, y, k, s)"
    assert f.call("prior", {"mu": "mu_pemc_1"}) == \
        "pemc_log_prior(mu_pemc_1, w, L, t, lambda, y, k, s)"
    assert f.call("likelihood", ["a", "b", "c", "d", "e"], {"y": "y2"}) == \
        "pemc_log_likelihood(a, b, c, d, e, y2, k, s)"
    with pytest.raises(ValueError):
        f.call("nonsense")
    with pytest.raises(ValueError):
        f.call("density", ["a"])
    body = _body(f.density)
    assert "pemc_lp += normal_lpdf(y | mu, s);" in body
    assert "pemc_lp += poisson_lpmf(k | lambda);" in body
    assert "pemc_lp += dirichlet_lpdf(w | rep_vector(1, 3));" in body
    assert "return pemc_lp;" in body
    prior, likelihood = _body(f.prior), _body(f.likelihood)
    assert "normal_lpdf" not in prior and "dirichlet_lpdf" in prior
    assert "normal_lpdf" in likelihood and "dirichlet_lpdf" not in likelihood


def test_lupdf_and_target() -> None:
    text = """
data { real y; }
parameters { real mu; }
model {
  target += normal_lupdf(y | mu, 1);
  target += std_normal_lupdf(mu);
  real t = target();
}
"""
    body = _body(log_density_functions(parse(text, check=False)).density)
    assert "pemc_lp += normal_lpdf(y | mu, 1);" in body
    assert "pemc_lp += std_normal_lpdf(mu);" in body
    assert "real t = pemc_lp;" in body
    assert "target" not in body.replace("pemc_target", "")
    # with target() read, the parts keep both accumulators
    prior = _body(log_density_functions(parse(text, check=False)).prior)
    assert "real t = (pemc_lp_prior + pemc_lp_likelihood);" in prior
    assert "pemc_lp_likelihood += normal_lpdf(y | mu, 1);" in prior
    assert prior.rstrip("}\n ").endswith("return pemc_lp_prior;")


def test_user_distribution_suffix() -> None:
    text = """
functions {
  real mydens_lpdf(real y, real mu) { return -square(y - mu); }
  real mycount_lpmf(int k, real mu) { return -square(k - mu); }
}
data { real y; int k; }
parameters { real mu; }
model {
  y ~ mydens(mu);
  k ~ mycount(mu);
  target += mydens_lupdf(y | mu) + mycount_lupmf(k | mu);
}
"""
    body = _body(log_density_functions(parse(text, check=False)).density)
    assert "pemc_lp += mydens_lpdf(y | mu);" in body
    assert "pemc_lp += mycount_lpmf(k | mu);" in body
    assert "pemc_lp += mydens_lpdf(y | mu) + mycount_lpmf(k | mu);" in body


def test_truncation_continuous() -> None:
    text = """
data { real y; real L; real U; }
parameters { real mu; }
model {
  y ~ normal(mu, 1) T[L, U];
  y ~ normal(mu, 1) T[L, ];
  y ~ normal(mu, 1) T[, U];
}
"""
    body = _body(log_density_functions(parse(text, check=False)).density)
    expected = """\
  pemc_lp += normal_lpdf(y | mu, 1);
  if (y < L)
    pemc_lp += negative_infinity();
  else if (y > U)
    pemc_lp += negative_infinity();
  else
    pemc_lp += -log_diff_exp(normal_lcdf(U | mu, 1), normal_lcdf(L | mu, 1));
  pemc_lp += normal_lpdf(y | mu, 1);
  if (y < L)
    pemc_lp += negative_infinity();
  else
    pemc_lp += -normal_lccdf(L | mu, 1);
  pemc_lp += normal_lpdf(y | mu, 1);
  if (y > U)
    pemc_lp += negative_infinity();
  else
    pemc_lp += -normal_lcdf(U | mu, 1);
"""
    assert expected in body


def test_truncation_of_a_container_variate() -> None:
    text = """
data { int N; vector[N] y; array[N] int g; }
parameters { real mu; vector[N] m; }
model {
  y ~ normal(mu, 1) T[0, ];
  y[g] ~ normal(mu, 1) T[, 3];
  for (n in 1:N) y[n] ~ normal(mu, 1) T[0, ];
}
"""
    body = _body(log_density_functions(parse(text, check=False)).density)
    assert "if (min(y) < 0)" in body
    assert "pemc_lp += -(normal_lccdf(0 | mu, 1) * size(y));" in body
    assert "if (max(y[g]) > 3)" in body
    assert "pemc_lp += -(normal_lcdf(3 | mu, 1) * size(y[g]));" in body
    assert "if (y[n] < 0)" in body  # an element stays scalar
    vector_args = text.replace("y ~ normal(mu, 1) T[0, ];", "y ~ normal(m, 1) T[0, ];")
    with pytest.raises(UnsupportedConstructError, match="loop over elements"):
        log_density_functions(parse(vector_args, check=False))


def test_truncation_discrete() -> None:
    text = """
data { int k; }
parameters { real<lower=0> lambda; }
model {
  k ~ poisson(lambda) T[1, 10];
  k ~ poisson(lambda) T[1, ];
  k ~ poisson(lambda) T[, 10];
}
"""
    body = _body(log_density_functions(parse(text, check=False)).density)
    assert "-log_diff_exp(poisson_lcdf(10 | lambda), poisson_lcdf((1 - 1) | lambda))" in body
    assert "pemc_lp += -poisson_lccdf((1 - 1) | lambda);" in body
    assert "pemc_lp += -poisson_lcdf(10 | lambda);" in body
    assert body.count("if (k < 1)") == 2 and body.count("if (k > 10)") == 2


def test_lp_functions() -> None:
    text = """
functions {
  void prior_lp(real x) { x ~ normal(0, 1); }
  real value_lp(real x) { target += -x; return target(); }
}
parameters { real mu; }
model {
  prior_lp(mu);
  real v = value_lp(mu) + 1;
}
"""
    out = _functions(text)
    assert "real pemc_prior_lpacc(real x, real pemc_target) {" in out
    assert "pemc_lp += normal_lpdf(x | 0, 1);" in out
    assert "tuple(real, real) pemc_value_lpacc(real x, real pemc_target) {" in out
    assert "return ((pemc_target + pemc_lp), pemc_lp);" in out
    assert "pemc_lp += pemc_prior_lpacc(mu, pemc_lp);" in out
    assert "tuple(real, real) pemc_lpcall_1 = pemc_value_lpacc(mu, pemc_lp);" in out
    assert "pemc_lp += pemc_lpcall_1.2;" in out
    assert "real v = pemc_lpcall_1.1 + 1;" in out
    program = add_log_density_functions(parse(text, check=False))
    check_with_stanc(print_program(program))


def test_transformed_parameters_constraints() -> None:
    text = """
data { int N; vector[N] lo; }
parameters { real mu; vector[N] z; }
transformed parameters {
  real<lower=0> s = exp(mu);
  vector<lower=lo>[N] v = lo + exp(z);
  array[2] real<lower=-1, upper=1> r = {tanh(mu), tanh(-mu)};
  simplex[N] w = softmax(z);
  ordered[N] o = sort_asc(z);
  cov_matrix[2] S = diag_matrix(rep_vector(s, 2));
  cholesky_factor_corr[2] Lc = cholesky_decompose([[1, 0.5], [0.5, 1]]);
  cholesky_factor_cov[3, 2] Lv = [[1, 0], [0.5, s], [1, 2]];
}
model { mu ~ normal(0, 1); z ~ normal(0, 1); }
"""
    program = parse(text, check=False)
    body = _body(log_density_functions(program).density)
    assert "real s = exp(mu);" in body
    assert "vector[N] w = softmax(z);" in body
    assert "matrix[2, 2] S" in body
    assert "if (!(s >= 0))\n    return negative_infinity();" in body
    assert "min(v - lo) >= 0" in body
    assert "for (pemc_i1 in 1:size(r))" in body
    assert "abs(sum(w) - 1) <= 1e-8" in body
    assert "eigenvalues_sym(S)" in body
    assert "matrix[3, 2] Lv" in body and "matrix[2, 2] Lc" in body
    assert "max(abs(Lc[pemc_i1, (pemc_i1 + 1):cols(Lc)])) != 0" in body
    assert "rows_dot_self(Lc)" in body and "min(diagonal(Lv)) > 0" in body
    check_with_stanc(print_program(add_log_density_functions(program)))


def test_reserved_prefix_rejected() -> None:
    program = parse("parameters { real pemc_mu; } model { pemc_mu ~ normal(0, 1); }",
                    check=False)
    with pytest.raises(ReservedPrefixError, match="pemc_mu"):
        log_density_functions(program, "m.stan")


def test_unsupported_lp_call_under_conditional() -> None:
    text = """
functions { real v_lp(real x) { target += x; return x; } }
parameters { real mu; }
model { real a = mu > 0 ? v_lp(mu) : 0; }
"""
    with pytest.raises(UnsupportedConstructError, match="v_lp") as info:
        log_density_functions(parse(text, check=False))
    assert info.value.line == 4


def test_unsupported_container_lp_in_expression() -> None:
    text = """
functions { vector v_lp(vector x) { target += sum(x); return x; } }
parameters { vector[2] mu; }
model { vector[2] a = v_lp(mu); }
"""
    with pytest.raises(UnsupportedConstructError, match="v_lp"):
        log_density_functions(parse(text, check=False))


def test_program_without_functions_block_gets_one() -> None:
    program = parse("parameters { real mu; } model { mu ~ normal(0, 1); }", check=False)
    assert program.functions is None
    rewritten = add_log_density_functions(program)
    assert rewritten.functions is not None and len(rewritten.functions.functions) == 3


def test_hoisted_lp_call_keeps_its_classification() -> None:
    text = """
functions { real obs_lp(real y, real mu) { y ~ normal(mu, 1); return 0; } }
data { real y; }
parameters { real mu; }
model {
  real a = obs_lp(y, mu + normal_lupdf(y | 0, 1));
  mu ~ normal(0, 1);
}
"""
    f = log_density_functions(parse(text, check=False))
    likelihood, prior = _body(f.likelihood), _body(f.prior)
    assert "pemc_lp += pemc_lpcall_1.2;" in likelihood
    assert "normal_lpdf(y | 0, 1)" in likelihood
    assert "pemc_lpcall_1 = pemc_obs_lpacc" in prior  # value still needed
    assert "pemc_lp += pemc_lpcall_1.2;" not in prior
    assert "pemc_lp += normal_lpdf(mu | 0, 1);" in prior
