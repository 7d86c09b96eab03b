"""pemc_stan.sample checks every argument before anything is compiled (no compilation here)."""

from __future__ import annotations

from typing import Any

import pytest

import pemc_stan
from pemc_stan.errors import OptionsError

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

    monkeypatch.setattr("pemc_stan.methods.base.compile_model", boom)


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
