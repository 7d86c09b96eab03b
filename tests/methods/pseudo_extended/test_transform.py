"""Pseudo-extended transformation: option validation, rejections, stanc acceptance, golden files.

None of these tests compiles C++: stanc (the Stan-to-C++ front end) only
type-checks the generated programs.  Golden files are regenerated only on
purpose: ``PEMC_REGENERATE_GOLDEN=1 pytest tests/methods/pseudo_extended/test_transform.py``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from golden_files import check_golden

from pemc_stan import transform
from pemc_stan.core.base_density import BaseDensity
from pemc_stan.errors import (
    PseudoExtendedWarning,
    ReservedPrefixError,
    StanProgramError,
    UnsupportedBaseError,
    UnsupportedConstructError,
)
from pemc_stan.methods.pseudo_extended.options import PseudoExtendedOptions
from pemc_stan.run.pipeline import transform_result
from pemc_stan.stan.parser import parse
from pemc_stan.stan.stanc import check_with_stanc

pytestmark = pytest.mark.filterwarnings(
    "ignore::pemc_stan.methods.pseudo_extended.transform.PseudoExtendedWarning")

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "stan_corpus"
GOLDEN = ROOT / "tests" / "golden" / "pseudo_extended"

SIMPLE = """
data { int<lower=0> n; array[n] real y; }
parameters { real mu; real<lower=0> sigma; }
model { mu ~ normal(0, 10); sigma ~ exponential(1); y ~ normal(mu, sigma); }
"""


# --------------------------------------------------------------------------- #
# options
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"n_pseudo": 0}, "n_pseudo=0"),
        ({"n_pseudo": -3}, "n_pseudo=-3"),
        ({"n_pseudo": 2.5}, "n_pseudo=2.5"),
        ({"n_pseudo": True}, "n_pseudo=True"),
        ({"n_pseudo": 2, "beta": [0.5, 1.5]}, "1.5 is outside (0, 1]"),
        ({"n_pseudo": 2, "beta": [0.0, 1.0]}, "0.0 is outside (0, 1]"),
        ({"n_pseudo": 3, "beta": [0.5, 1.0]}, "beta has 2 values but n_pseudo=3"),
        ({"beta": "sample"}, "beta='sample'"),
        ({"temper": "prior"}, "temper='prior'"),
        ({"beta_prior": (0.0, 1.0)}, "beta_prior"),
        ({"noncentring": 1.5}, "noncentring=1.5"),
        ({"noncentring": -0.1}, "noncentring=-0.1"),
        ({"instrumental": "cauchy"}, "instrumental='cauchy'"),
        ({"log_scale": float("nan")}, "log_scale=nan"),
        ({"beta_min": 1.0}, "beta_min=1.0"),
        ({"beta_min": -0.1}, "beta_min=-0.1"),
        ({"n_pseudo": 2, "beta": [0.5, 1.0], "beta_prior": (2, 2)}, "fixed ladder"),
    ],
)
def test_options_validation_names_argument_and_value(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        PseudoExtendedOptions(**kwargs).validate()
    assert fragment in str(info.value)


def test_invalid_options_rejected_before_parsing() -> None:
    # the program is not even valid Stan: option errors come first
    with pytest.raises(ValueError, match="n_pseudo=0"):
        transform("this is not stan", method="pe", n_pseudo=0)


def test_valid_options() -> None:
    opts = PseudoExtendedOptions(n_pseudo=3, beta=[0.1, 0.5, 1.0], temper="likelihood")
    assert opts.validate() is opts
    assert opts.fixed_ladder == (0.1, 0.5, 1.0)


# --------------------------------------------------------------------------- #
# rejected programs (before compiling)
# --------------------------------------------------------------------------- #


def test_reserved_prefix_rejected() -> None:
    code = "parameters { real pemc_x; } model { pemc_x ~ normal(0, 1); }"
    with pytest.raises(ReservedPrefixError, match="pemc_x"):
        transform(code, method="pe", n_pseudo=2)


def test_no_parameters_rejected() -> None:
    code = (CORPUS / "blocks_data_gq_only.stan").read_text()
    with pytest.raises(StanProgramError, match="no parameters"):
        transform(code, method="pe", n_pseudo=2)


def test_sample_rejects_bad_input_before_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    import pemc_stan.run.pipeline as sampling

    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("compile_model must not be called")

    monkeypatch.setattr("pemc_stan.sampling.model.compile_model", boom)
    with pytest.raises(ValueError, match="n_pseudo=0"):
        sampling.sample(SIMPLE, {"n": 0, "y": []}, method="pe", n_pseudo=0)
    with pytest.raises(ReservedPrefixError):
        sampling.sample("parameters { real pemc_a; } model { pemc_a ~ std_normal(); }")
    with pytest.raises(StanProgramError, match="no parameters"):
        sampling.sample("data { real y; } model { }")
    with pytest.raises(ValueError, match="outside"):
        sampling.sample(SIMPLE, method="pe", n_pseudo=2, beta=[0.5, 2.0])


def test_unknown_and_unimplemented_methods() -> None:
    with pytest.raises(ValueError, match="method='mcmc'"):
        transform(SIMPLE, method="mcmc")
    # continuous tempering exists now (tests/test_continuous_tempering_transform.py)
    assert "pemc_u" in transform(SIMPLE, method="ct")


# --------------------------------------------------------------------------- #
# structure of the generated program
# --------------------------------------------------------------------------- #


def test_structure_and_metadata() -> None:
    res = transform_result(SIMPLE, method="pe", n_pseudo=4)
    code = res.stan_code
    assert "array[pemc_N] real mu;" in code
    assert "array[pemc_N] real<lower=0> sigma;" in code
    assert "array[pemc_N] real<lower=0, upper=1> pemc_beta;" in code
    assert "target += log_sum_exp(pemc_log_weight);" in code
    assert res.n_in_data and res.data_additions["pemc_N"] == 4
    assert [p.name for p in res.parameters] == ["mu", "sigma"]
    base = BaseDensity(np.zeros(2), np.eye(2), "dense")  # the default tempers towards it
    assert res.data({"n": 1, "y": [0.0]}, log_scale=-1.0, base=base)["pemc_log_scale"] == -1.0
    with pytest.raises(ValueError, match="base=None"):
        res.data({"n": 1, "y": [0.0]}, log_scale=-1.0)
    parse(code)  # the output is in the language pemc-stan parses


def test_fixed_ladder_is_data_and_no_beta_parameter() -> None:
    res = transform_result(SIMPLE, method="pe", n_pseudo=3, beta=[0.2, 0.6, 1.0])
    params = res.stan_code.split("parameters {", 1)[1].split("}", 1)[0]
    assert "pemc_beta" not in params
    assert res.data_additions["pemc_beta"] == [0.2, 0.6, 1.0]


def test_parameter_dependent_bounds_are_unrolled_per_pseudo_sample() -> None:
    code = """
parameters { real<lower=0> tau; real<lower=-tau, upper=tau> x; }
model { tau ~ exponential(1); x ~ normal(0, 1); }
"""
    res = transform_result(code, method="pe", n_pseudo=3)
    assert not res.n_in_data
    for k in (1, 2, 3):
        assert f"real<lower=-tau[{k}], upper=tau[{k}]> pemc_x_{k};" in res.stan_code
    assert "int pemc_N = 3;" in res.stan_code
    check_with_stanc(res.stan_code)


def test_heavy_tailed_prior_warns_and_suggests_likelihood_tempering() -> None:
    code = (CORPUS / "eight_schools_centered.stan").read_text()
    with pytest.warns(PseudoExtendedWarning, match="temper='likelihood'"):
        transform(code, method="pe", n_pseudo=2, temper="posterior")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PseudoExtendedWarning)
        transform(code, method="pe", n_pseudo=2, temper="likelihood")
        # the default tempers towards the pilot's base (proper for every beta), no warning
        assert "towards a base density b" in transform(code, method="pe", n_pseudo=2)


def test_uniform_g_in_several_dimensions_warns_improper() -> None:
    paper = {"temper": "posterior", "beta_prior": "uniform", "instrumental": "uniform",
             "beta_min": 0.0}
    with pytest.warns(PseudoExtendedWarning, match="improper"):
        transform(SIMPLE, method="pe", n_pseudo=2, **paper)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PseudoExtendedWarning)
        code = transform(SIMPLE, method="pe", n_pseudo=2, beta_min=0.05, beta_prior="uniform",
                         instrumental="uniform")
        transform(SIMPLE, method="pe", n_pseudo=2)  # the defaults are proper by construction
        transform(SIMPLE, method="pe", n_pseudo=2, temper="likelihood")
        transform(SIMPLE, method="pe", n_pseudo=2, instrumental=(3, 1))
    assert "real<lower=0.05, upper=1> pemc_beta;" in code


def test_bounded_support_does_not_warn_improper() -> None:
    boxed = """
parameters {
  vector<lower=-10, upper=10>[2] x;
  simplex[3] theta;
}
model {
  x ~ normal(0, 1);
}
"""
    paper = {"temper": "posterior", "beta_prior": "uniform", "instrumental": "uniform",
             "beta_min": 0.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error", PseudoExtendedWarning)
        transform(boxed, method="pe", n_pseudo=2, **paper)
    half_open = boxed.replace("<lower=-10, upper=10>", "<lower=-10>")
    with pytest.warns(PseudoExtendedWarning, match="improper"):
        transform(half_open, method="pe", n_pseudo=2, **paper)


def test_accepts_path() -> None:
    path = CORPUS / "conj_beta_binomial.stan"
    assert transform(path, method="pe", n_pseudo=2) == transform(str(path), method="pe", n_pseudo=2)


# --------------------------------------------------------------------------- #
# stanc accepts the transformed corpus
# --------------------------------------------------------------------------- #


def _corpus_with_parameters() -> list[Path]:
    out = []
    for path in sorted(CORPUS.glob("*.stan")):
        prog = parse(path.read_text())
        if prog.parameters is not None and prog.parameters.stmts:
            out.append(path)
    return out


@pytest.mark.parametrize("path", _corpus_with_parameters(), ids=lambda p: p.stem)
def test_stanc_accepts_transformed_corpus(path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PseudoExtendedWarning)
        check_with_stanc(transform(path, method="pe", n_pseudo=3), path.name)
        check_with_stanc(transform(path, method="pe", n_pseudo=2, temper="likelihood",
                                   beta=[0.3, 1.0]), path.name)
        check_with_stanc(transform(path, method="pe", n_pseudo=1, beta_prior=(2, 1),
                                   instrumental=(1, 2)), path.name)


# --------------------------------------------------------------------------- #
# golden files
# --------------------------------------------------------------------------- #

GOLDEN_CASES = {
    "bimodal_1d_n3": (ROOT / "models" / "bimodal_1d" / "bimodal_1d.stan", {"n_pseudo": 3}),
    "conj_beta_binomial_likelihood_beta22": (
        CORPUS / "conj_beta_binomial.stan",
        {"n_pseudo": 2, "temper": "likelihood", "beta_prior": (2, 2), "instrumental": (2, 2)}),
    "decl_bounds_expressions_n2": (CORPUS / "decl_bounds_expressions.stan", {"n_pseudo": 2}),
    "gaussian_mixture_20_noncentring05": (
        ROOT / "models" / "gaussian_mixture_20" / "gaussian_mixture_20.stan",
        {"n_pseudo": 2, "beta_min": 0.001, "noncentring": 0.5}),
    "decl_bounds_expressions_base_n2": (CORPUS / "decl_bounds_expressions.stan",
                                        {"n_pseudo": 2, "temper": "base"}),
    "eight_schools_noncentered_ladder": (
        CORPUS / "eight_schools_noncentered.stan",
        {"n_pseudo": 3, "beta": [0.25, 0.5, 1.0], "temper": "likelihood"}),
}


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden(case: str) -> None:
    path, options = GOLDEN_CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PseudoExtendedWarning)
        code = transform(path, method="pe", **options)
    golden = GOLDEN / f"{case}.stan"
    check_golden(golden, code)
    if options.get("temper") == "base":  # no default corpus program is base-tempered
        check_with_stanc(code)


def test_likelihood_tempering_without_likelihood_warns() -> None:
    code = "parameters { real x; } model { x ~ normal(0, 1); }"
    with pytest.warns(PseudoExtendedWarning, match="nothing is tempered"):
        transform(code, method="pe", n_pseudo=2, temper="likelihood")


# --------------------------------------------------------------------------- #
# partial non-centring
# --------------------------------------------------------------------------- #

NONCENTRED = """
data { real L; }
parameters {
  real<lower=0> s; real<upper=L + 1> t; vector[2] v; matrix<lower=-1, upper=2>[2, 2] m;
}
model { s ~ exponential(1); t ~ normal(0, 1); v ~ normal(0, 1); to_vector(m) ~ normal(0, 1); }
"""


def test_noncentring_moves_raw_coordinates_and_keeps_the_parameters() -> None:
    res = transform_result(NONCENTRED, method="pe", n_pseudo=3, beta_min=0.05, noncentring=0.5)
    code = res.stan_code
    params = code[code.index("\nparameters {"):code.index("\ntransformed parameters {")]
    for name, free in (("s", "real"), ("t", "real"), ("v", "vector[2]"), ("m", "matrix[2, 2]")):
        assert f"array[pemc_N] {free} pemc_raw_{name};" in params
    tp = code[code.index("\ntransformed parameters {"):code.index("\nmodel {")]
    assert "array[pemc_N] real<upper=L + 1> t;" in tp  # Stan still checks the constraints
    assert "real pemc_scale = pow(pemc_beta[pemc_k], -0.25);" in tp
    assert "t[pemc_k] = (L + 1) - exp(pemc_u);" in tp  # bound expressions keep their precedence
    assert "m[pemc_k] = (-1) + (2 - (-1)) * inv_logit(pemc_u);" in tp
    assert "target += pemc_log_jacobian;" in code
    assert [p.name for p in res.parameters] == ["s", "t", "v", "m"]
    check_with_stanc(code)
    # off by default: the program is unchanged
    assert "pemc_raw" not in transform(NONCENTRED, method="pe", n_pseudo=3, beta_min=0.05)


@pytest.mark.parametrize(("decl", "what"), [
    ("simplex[3] s;", "parameter 's' is declared 'simplex[3]'"),
    ("array[2] real s;", "parameter 's' is declared 'array[2] real'"),
    ("real<offset=1, multiplier=2> s;", "parameter 's' is declared 'real<offset=1"),
    ("real<lower=0> a; real<lower=a> s;", "the bounds of parameter 's' depend on other"),
])
def test_noncentring_rejects_unsupported_parameters(decl: str, what: str) -> None:
    from pemc_stan.errors import UnsupportedConstructError

    program = f"parameters {{\n  {decl}\n}}\nmodel {{ s ~ normal(0, 1); }}\n"
    with pytest.raises(UnsupportedConstructError, match="line 2") as info:
        transform(program, method="pe", n_pseudo=2, beta_min=0.1, noncentring=0.5)
    assert what in str(info.value) and "noncentring=0" in str(info.value)


# --------------------------------------------------------------------------- #
# Tempering towards a base density (the default without proper priors)
# --------------------------------------------------------------------------- #

FLAT_REGRESSION = """
data { int<lower=1> n; vector[n] x; vector[n] y; }
parameters { real a; real b; real<lower=0> sigma; }
model { y ~ normal(a + b * x, sigma); }
"""


def test_auto_tempers_towards_a_base_when_a_prior_is_flat() -> None:
    """Flat priors: gamma^beta of a regression is not integrable for beta < (d + 1)/n, so
    the default tempers towards the base (proper for every beta); so do proper priors with
    a likelihood (the prior is a long bridge from a posterior the data dominate); explicit
    'posterior' and 'likelihood' are kept."""
    res = transform_result(FLAT_REGRESSION, method="pe", n_pseudo=2)
    assert res.temper == "base"
    assert [b.name for b in res.coordinates.blocks] == ["a", "b", "sigma"]
    code = res.stan_code
    assert "towards a base density b" in code
    assert "array[pemc_N] real<lower=0, upper=1> pemc_beta;" in code  # no beta_min needed
    assert "pemc_log_tempered[pemc_k] = pemc_log_density(" in code
    assert "- pemc_log_prior_x[pemc_k] - pemc_log_scale;" in code
    assert "pemc_z[pemc_pos:(pemc_pos + pemc_n - 1)] = pemc_base_lower(" in code
    assert "pemc_beta_a" not in code and "pemc_g_a" not in code  # uniform g
    check_with_stanc(code)
    proper = FLAT_REGRESSION.replace("model {", "model { a ~ normal(0, 5); b ~ normal(0, 5); "
                                     "sigma ~ exponential(1);")
    assert transform_result(proper, method="pe").temper == "base"
    assert transform_result(proper, method="pe", temper="likelihood").temper == "likelihood"
    assert transform_result(FLAT_REGRESSION, method="pe", temper="posterior").temper == \
        "posterior"


def test_auto_tempers_towards_a_base_without_a_proper_likelihood_split() -> None:
    """With no likelihood terms the whole density is tempered unless that is improper or
    sends hot copies up a funnel: a heavy-tailed prior (Cauchy: gamma^beta not integrable
    for beta <= 1/2) or a hierarchical normal prior (non-centred) then tempers towards
    the base; a light-tailed mixture keeps whole-posterior tempering."""
    heavy = ("parameters { real m; real<lower=0> s; } "
             "model { s ~ cauchy(0, 2.5); m ~ normal(0, 1); target += -square(m - s); }")
    assert transform_result(heavy, method="pe").temper == "base"
    funnel = ("parameters { real v; vector[4] z; } "
              "model { v ~ normal(0, 3); z ~ normal(0, exp(v / 2)); }")
    res = transform_result(funnel, method="pe")
    assert res.temper == "base" and [nc.name for nc in res.noncentred] == ["z"]
    check_with_stanc(res.stan_code)
    # reparameterize='none': the declarations as written, and nothing to push up
    as_written = transform_result(funnel, method="pe", reparameterize="none")
    assert as_written.noncentred == () and as_written.temper == "posterior"
    assert "vector[4] z;" in as_written.stan_code or "array[pemc_N] vector[4] z;" in \
        as_written.stan_code
    mixture = ("parameters { real x; } "
               "model { target += log_mix(0.3, normal_lpdf(x | -3, 1), normal_lpdf(x | 3, 1)); }")
    assert transform_result(mixture, method="pe").temper == "posterior"


def test_base_tempering_falls_back_where_no_base_exists() -> None:
    """A unit vector has no base density, nor (here) a bound on a container parameter:
    'auto' tempers the whole posterior there; an explicit temper='base' is refused with the
    parameter's name and line.  Bounds on scalar parameters map copy k with copy k's bound."""
    unit = "parameters { unit_vector[3] u; real m; } model { m ~ normal(u[1], 1); }"
    assert transform_result(unit, method="pe").temper == "posterior"
    with pytest.raises(UnsupportedBaseError, match="unit_vector"):
        transform_result(unit, method="pe", temper="base")
    nested = ("parameters { vector<lower=0>[2] tau; real<lower=-tau[1], upper=tau[2]> x; }\n"
              "model { x ~ normal(0, 1); }")
    assert transform_result(nested, method="pe").temper == "posterior"
    with pytest.raises(UnsupportedConstructError, match="line 1: the bounds of parameter 'x'"):
        transform_result(nested, method="pe", temper="base")
    scalar = ("parameters { real<lower=0> tau; real<lower=-tau, upper=tau> x; }\n"
              "model { x ~ normal(0, 1); }")
    res = transform_result(scalar, method="pe", n_pseudo=2)
    assert res.temper == "base" and not res.n_in_data
    for k in (1, 2):
        assert (f"pemc_base_interval([pemc_x_{k}]', -tau[{k}], tau[{k}])" in res.stan_code)
    check_with_stanc(res.stan_code)


def test_base_tempering_data_needs_a_base_of_the_right_size() -> None:
    res = transform_result(FLAT_REGRESSION, method="pe", n_pseudo=2)
    data = {"n": 3, "x": [0.0, 1.0, 2.0], "y": [0.1, 0.9, 2.2]}
    with pytest.raises(ValueError, match="base=None"):
        res.data(data, log_scale=0.0)
    with pytest.raises(ValueError, match="has 2 coordinates"):
        res.data(data, log_scale=0.0, base=BaseDensity(np.zeros(2), np.eye(2), "dense"))
    mean = np.array([1.0, -2.0, 3.0])
    cov = np.array([[4.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, 1.0]])
    out = res.data(data, log_scale=0.0, base=BaseDensity(mean, cov, "dense"))
    assert out["pemc_D"] == 3 and out["pemc_N"] == 2 and out["pemc_log_scale"] == 0.0
    np.testing.assert_allclose(out["pemc_base_mean"], mean)
    chol = np.asarray(out["pemc_base_chol"])  # lower triangular, chol chol' = cov
    np.testing.assert_allclose(chol, np.tril(chol))
    np.testing.assert_allclose(chol @ chol.T, cov, rtol=1e-12)
