"""The CT model's own density program (nothing compiles)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.methods.continuous_tempering.model import ContinuousTemperingModel
from pemc_stan.run.pipeline import transform_result


@pytest.mark.parametrize("declaration", [
    "real<lower=0, upper=1> x;", "simplex[3] x;", "ordered[2] x;", "cov_matrix[2] x;",
])
def test_the_ct_program_does_not_evaluate_densities_its_round_trip_would_change(
        declaration: str) -> None:
    """Through ``generate_quantities`` a value near an edge of these types comes back
    changed (the density program, whose parameters are unconstrained, evaluates them):
    the CT program offers no density of its own for them."""
    result = transform_result(f"parameters {{ {declaration} }} model {{ }}", method="ct")
    d = result.coordinates.dim({})
    fit = SimpleNamespace(log_zeta=0.0, base=BaseDensity(np.zeros(d), np.eye(d), "dense"),
                          bias=None)
    assert ContinuousTemperingModel(result, {}).own_density(fit) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("declaration", ["real x;", "real<lower=0> x;", "vector<upper=2>[2] x;",
                                         "real<offset=1, multiplier=2> x;"])
def test_the_ct_program_evaluates_densities_its_round_trip_keeps(
        declaration: str, monkeypatch: pytest.MonkeyPatch) -> None:
    result = transform_result(f"parameters {{ {declaration} }} model {{ }}", method="ct")
    compiled = object()
    monkeypatch.setattr(ContinuousTemperingModel, "method_model", lambda self: compiled)
    d = result.coordinates.dim({})
    fit = SimpleNamespace(log_zeta=0.0, base=BaseDensity(np.zeros(d), np.eye(d), "dense"),
                          bias=None)
    own = ContinuousTemperingModel(result, {}).own_density(fit)  # type: ignore[arg-type]
    assert own is not None and own.model is compiled


def test_likelihood_tempering_is_gated_by_the_declared_types_too() -> None:
    """Tempering the likelihood keeps no base coordinates; the gate reads the program's
    parameter declarations, not them."""
    program = ("data { int N; array[N] int<lower=1, upper=3> y; } parameters { simplex[3] th; } "
               "model { th ~ dirichlet(rep_vector(0.5, 3)); y ~ categorical(th); }")
    result = transform_result(program, method="ct", temper="likelihood")
    fit = SimpleNamespace(log_zeta=0.0, base=None, bias=None)
    assert ContinuousTemperingModel(result, {"N": 2, "y": [1, 3]}).own_density(fit) is None  # type: ignore[arg-type]
