"""pemc_stan.sample checks every argument before anything is compiled (no compilation here)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import pemc_stan
from pemc_stan.errors import OptionsError, UnsupportedConstructError
from pemc_stan.methods import registry
from pemc_stan.stan.inputs import read_program

SIMPLE = """
data { int<lower=0> n; array[n] real y; }
parameters { real mu; }
model { mu ~ normal(0, 1); y ~ normal(mu, 1); }
"""
DATA = {"n": 1, "y": [0.5]}


@pytest.fixture()
def no_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("nothing may be compiled")

    monkeypatch.setattr("pemc_stan.sampling.model.compile_model", boom)


@pytest.mark.parametrize(("kwargs", "argument"), [
    ({"chains": 0}, "chains=0"), ({"chains": "2"}, "chains='2'"), ({"seed": -1}, "seed=-1"),
    ({"seed": 2**33}, "seed="), ({"iter_warmup": -5}, "iter_warmup=-5"),
    ({"iter_sampling": 0}, "iter_sampling=0"), ({"adapt_delta": 1.5}, "adapt_delta=1.5"),
    ({"chainz": 2}, "chainz=2"), ({"max_treedepth": 0}, "max_treedepth=0"),
    ({"show_progress": "yes"}, "show_progress='yes'"),
])
@pytest.mark.parametrize("method", ["pe", "ct"])
def test_bad_sampler_arguments_are_named(no_compile: None, method: str, kwargs: dict[str, Any],
                                         argument: str) -> None:
    with pytest.raises(OptionsError, match=argument.replace("(", r"\(")) as err:
        pemc_stan.sample(SIMPLE, DATA, method=method, **kwargs)
    assert isinstance(err.value, ValueError) and "expected" in str(err.value)


def test_bad_model_and_data_types_are_named(no_compile: None) -> None:
    with pytest.raises(OptionsError, match="model=None"):
        pemc_stan.sample(None, DATA)
    with pytest.raises(OptionsError, match="data=42.*a dict of data values"):
        pemc_stan.sample(SIMPLE, 42)


def test_program_too_deep_for_the_transformation_names_its_deepest_line() -> None:
    """A program the parser reads but the analysis, transformation or printer recurses too
    deeply on (found by the front-end fuzz test: RecursionError) is an unsupported
    construct, located at its most deeply nested node."""
    def too_deep(program: object, options: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    text = "parameters {\n  real mu;\n}\nmodel {\n  mu ~ normal(exp(exp(exp(0))), 1);\n}\n"
    program = read_program(text, "simple")
    for method in registry.methods():
        spec = dataclasses.replace(method, transform=too_deep)
        with pytest.raises(UnsupportedConstructError, match="nested too deeply") as info:
            spec.transform_program(program, method.build_options())
        err = info.value
        assert (err.filename, err.line, err.column) == ("simple", 5, 26)
        assert err.construct == "deep nesting"


def test_deep_nesting_through_transform() -> None:
    deep = "(" * 3000 + "mu" + ")" * 3000
    for method in registry.methods():
        with pytest.raises(UnsupportedConstructError, match="nested too deeply"):
            pemc_stan.transform(SIMPLE.replace("normal(0, 1)", f"normal({deep}, 1)"),
                                method=method.name)
