"""Evidence needs a proper, normalised prior: flat priors are refused, gaps are measured.

No compilation: the checks run (and refuse) before anything is compiled.
"""

from __future__ import annotations

import math

import pytest

import pemc_stan
from pemc_stan.errors import ImproperPriorError, PriorNormalisationWarning
from pemc_stan.estimators.normalisation import prior_report
from pemc_stan.stan.inputs import read_program

HALF_NORMAL = """
data { int<lower=1> n; vector[n] y; }
parameters { real<lower=0> sigma; }
model { sigma ~ normal(0, 3); y ~ normal(0, sigma); }
"""
DATA = {"n": 3, "y": [0.5, -1.0, 2.0]}


def _no_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("nothing may be compiled")

    monkeypatch.setattr("pemc_stan.run.evidence_sources.compile_model", boom)
    monkeypatch.setattr("pemc_stan.sampling.model.compile_model", boom)


def test_half_normal_without_truncation_is_a_gap_of_log_2() -> None:
    report = prior_report(read_program(HALF_NORMAL), DATA)
    assert report.flat == ()
    (gap,) = report.gaps
    assert gap.parameter == "sigma" and gap.log_gap == pytest.approx(math.log(2), rel=1e-12)
    assert "T[0, ]" in gap.message and "0.5" in gap.message


def test_truncated_or_matching_support_has_no_gap() -> None:
    truncated = HALF_NORMAL.replace("sigma ~ normal(0, 3);", "sigma ~ normal(0, 3) T[0, ];")
    assert prior_report(read_program(truncated), DATA).gaps == ()
    positive = HALF_NORMAL.replace("sigma ~ normal(0, 3);", "sigma ~ exponential(1);")
    assert prior_report(read_program(positive), DATA).gaps == ()


def test_gap_counts_every_element_and_data_bounds() -> None:
    code = """
    data { real lo; }
    parameters { vector<lower=lo>[4] s; }
    model { s ~ normal(1, 2); }
    """
    (gap,) = prior_report(read_program(code), {"lo": 1.0}).gaps
    assert gap.log_gap == pytest.approx(4 * math.log(2))  # the prior is centred on the bound


def test_no_prior_on_a_box_is_a_gap_of_its_volume() -> None:
    code = "parameters { real<lower=-2, upper=3> a; } model { }"
    (gap,) = prior_report(read_program(code), {}).gaps
    assert gap.log_gap == pytest.approx(math.log(5.0)) and "uniform(-2, 3)" in gap.message


def test_flat_priors_are_found_and_priors_through_locals_count() -> None:
    code = """
    data { int N; vector[N] x; vector[N] y; }
    parameters { real a; real b; real<lower=0> s; vector[2] m; }
    model {
      vector[2] lp;
      a ~ normal(0, 1);
      for (k in 1:2) lp[k] = normal_lpdf(m[k] | 0, 1);
      target += sum(lp);
      y ~ normal(a + b * x, s);
    }
    """
    report = prior_report(read_program(code), {"N": 0, "x": [], "y": []})
    assert [name for name, _ in report.flat] == ["b", "s"]


def test_evidence_refuses_a_flat_prior_before_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_compile(monkeypatch)
    code = """
    data { int N; vector[N] y; }
    parameters { real mu; real<lower=0> sigma; }
    model { y ~ normal(mu, sigma); }
    """
    with pytest.raises(ImproperPriorError, match="'mu' \\(line 3\\).*'sigma'") as err:
        pemc_stan.evidence(code, {"N": 2, "y": [0.0, 1.0]})
    assert err.value.parameters == ("mu", "sigma")
    assert "Sampling works" in str(err.value)


def test_evidence_warns_about_the_gap_before_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_compile(monkeypatch)
    with pytest.warns(PriorNormalisationWarning, match="0.693 below"), \
            pytest.raises(AssertionError, match="nothing may be compiled"):
        pemc_stan.evidence(HALF_NORMAL, DATA)
