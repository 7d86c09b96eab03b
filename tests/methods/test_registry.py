"""The method registry: a third method added from this file alone, and nothing else naming methods.

``PowerPosterior`` is a complete method in about 50 lines: a fixed-beta power
posterior ``gamma(x)^beta`` (the target multiplied into the log density by a
data ``beta``): options, a transformation and a registry entry, with the
shared model and fit classes (no class of its own is needed to serve as a
key).  It is registered here and run through ``pemc_stan.transform``,
``pemc_stan.sample``, ``to_inference_data`` and ``pemc-stan transform`` with no
edit to any module of the package.
"""

from __future__ import annotations

import ast as pyast
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pemc_stan
from pemc_stan.cli import main
from pemc_stan.core.options import MethodOptions, check_number, option
from pemc_stan.core.result import TransformResult
from pemc_stan.core.templates import block_text, functions_text, prepare_program
from pemc_stan.errors import OptionsError
from pemc_stan.methods import registry
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.sampling.model import MethodModel
from pemc_stan.stan.inputs import StanProgram
from pemc_stan.stan.logdensity import log_density_functions
from pemc_stan.stan.printer import print_stmt

PACKAGE = Path(pemc_stan.__file__).resolve().parent

# --------------------------------------------------------------------------- the third method


@dataclass
class PowerOptions(MethodOptions):
    """Options of the power posterior."""

    power: float = option(0.5, "the fixed inverse temperature beta in (0, 1]", metavar="B")

    def validate(self) -> PowerOptions:
        check_number("power", self.power, 0.0, 1.0, low_open=True)
        return self


@dataclass(frozen=True, kw_only=True)
class PowerResult(TransformResult):
    """The power-posterior program; its data add ``pemc_power``."""

    def data(self, user_data: Any, **values: Any) -> dict[str, Any]:
        return {**dict(user_data or {}), "pemc_power": float(self.options.power)}


def transform_power(program: Any, options: PowerOptions) -> PowerResult:
    prepared: StanProgram = prepare_program(program, None, "power-posterior")
    tree = prepared.tree
    density = log_density_functions(tree, prepared.name)
    params = "\n".join(print_stmt(s, 1) for s in tree.parameters.stmts)  # type: ignore[union-attr]
    code = (f"// power posterior of {prepared.name}: gamma(x)^pemc_power\n"
            f"functions {{\n{functions_text(tree, density.functions)}\n}}\n"
            f"data {{\n{block_text(tree.data)}\n  real<lower=0, upper=1> pemc_power;\n}}\n"
            f"transformed data {{\n{block_text(tree.transformed_data)}\n}}\n"
            f"parameters {{\n{params}\n}}\n"
            f"model {{\n  target += pemc_power * {density.call('density')};\n}}\n")
    return PowerResult(stan_code=code, options=options, program=prepared)


POWER = registry.Method(name="power_posterior", short="power", label="power-posterior",
                        summary="a fixed-beta power posterior (test method)",
                        options=PowerOptions, transform=transform_power)

NORMAL = "parameters { real mu; } model { mu ~ normal(1, 2); }"


@pytest.fixture()
def power_method() -> Iterator[registry.Method]:
    registry.register(POWER)
    try:
        yield POWER
    finally:
        registry.unregister(POWER.name)


def test_third_method_transforms_and_validates_its_options(power_method: registry.Method
                                                           ) -> None:
    code = pemc_stan.transform(NORMAL, method="power", power=0.25)
    assert "target += pemc_power * pemc_log_density(mu);" in code
    assert pemc_stan.transform(NORMAL, method="power_posterior", options=PowerOptions(0.3)) \
        == code  # the power is data: one program for every beta
    with pytest.raises(OptionsError, match="power=1.5"):
        pemc_stan.transform(NORMAL, method="power", power=1.5)
    with pytest.raises(OptionsError, match="it is a pseudo-extended option"):
        pemc_stan.transform(NORMAL, method="power", n_pseudo=3)
    with pytest.raises(OptionsError, match="power"):
        pemc_stan.transform(NORMAL, method="pe", power=0.5)


def test_third_method_on_the_command_line(power_method: registry.Method, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    stan = tmp_path / "normal.stan"
    stan.write_text(NORMAL)
    assert main(["transform", str(stan), "--method", "power", "--power", "0.25"]) == 0
    assert "target += pemc_power * pemc_log_density(mu);" in capsys.readouterr().out
    assert main(["transform", str(stan), "--method", "power", "--n-pseudo", "3"]) == 2
    assert ("n_pseudo (--n-pseudo) is not an option of method 'power-posterior'"
            in capsys.readouterr().err)


@pytest.mark.compiled
def test_third_method_samples_and_converts(power_method: registry.Method,
                                           cmdstan_installation: Any) -> None:
    beta = 0.25  # gamma(mu)^beta of N(1, 2^2) is N(1, 4^2)
    fit = pemc_stan.sample(NORMAL, method="power", power=beta, chains=4, iter_sampling=2000,
                           seed=3)
    assert type(fit) is ExtendedFit and fit.method == "power_posterior"
    mean = fit.expectation("mu")
    assert abs(mean.mean - 1.0) < 4 * mean.mcse
    assert mean.mcse < 0.25
    second = fit.expectation(lambda v: (v["mu"] - 1.0) ** 2)
    assert abs(second.mean - 16.0) < 4 * second.mcse
    idata = fit.to_inference_data()
    assert idata.posterior["mu"].shape == (4, 2000)
    assert idata.posterior.attrs["pemc_method"] == "power_posterior"
    assert json_options(idata) == {"power": beta}
    assert "pemc_power" not in idata.extended_posterior  # data, not a draw
    np.testing.assert_allclose(idata.posterior["mu"].values, fit.particles("mu")[..., 0])


def json_options(idata: Any) -> Any:
    import json

    return json.loads(idata.posterior.attrs["pemc_options"])


# --------------------------------------------------------------------------- no method names


def _method_spellings() -> set[str]:
    return {s for m in registry.methods() for s in m.spellings()}


def _outside_the_methods() -> Iterator[Path]:
    own = {PACKAGE / "methods" / "registry.py"}
    own_dirs = {PACKAGE / "methods" / m.name for m in registry.methods()}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in own or any(d in path.parents for d in own_dirs):
            continue
        yield path


def test_no_code_outside_the_methods_names_a_method() -> None:
    """No string literal equal to a method's name, no ``hasattr``/``__name__`` type tests."""
    spellings = _method_spellings()
    found = []
    for path in _outside_the_methods():
        tree = pyast.parse(path.read_text(), str(path))
        for node in pyast.walk(tree):
            if isinstance(node, pyast.Constant) and isinstance(node.value, str) \
                    and node.value.lower() in spellings:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
            if isinstance(node, pyast.Compare):  # type(fit).__name__ == ..., fit.method == ...
                text = pyast.unparse(node)
                if ("type(" in text and "__name__" in text) or ".method ==" in text \
                        or ".method in" in text:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {text}")
    assert not found, "method names outside the registry and the methods:\n" + "\n".join(found)


def test_the_scan_sees_a_method_name() -> None:
    """The scan above fails on code like what it forbids."""
    spellings = _method_spellings()
    snippet = 'if fit.method == "continuous_tempering":\n    pass\n'
    consts = [n.value for n in pyast.walk(pyast.parse(snippet))
              if isinstance(n, pyast.Constant) and isinstance(n.value, str)]
    assert any(c in spellings for c in consts)
    assert len(list(_outside_the_methods())) > 20


# --------------------------------------------------------------------------- settled once


@pytest.mark.compiled
def test_sample_settles_method_options_and_program_once(monkeypatch: pytest.MonkeyPatch,
                                                        cmdstan_installation: Any) -> None:
    """One ``sample()`` looks the method up once, validates its options once and parses the
    user's program once; the summary, InferenceData and evidence downstream parse nothing."""
    import pemc_stan.stan.parser as parser
    from pemc_stan.methods.pseudo_extended import PseudoExtendedOptions

    parses: list[str] = []
    lookups: list[object] = []
    validations: list[object] = []
    real_run, real_get = parser._run, registry.get
    real_validate = PseudoExtendedOptions.validate

    def counting_run(text: str, start: str, filename: str, stanc_accepted: bool) -> Any:
        if start == "start":
            parses.append(filename)
        return real_run(text, start, filename, stanc_accepted)

    def counting_get(method: Any) -> registry.Method:
        lookups.append(method)
        return real_get(method)

    def counting_validate(self: PseudoExtendedOptions) -> PseudoExtendedOptions:
        validations.append(self)
        return real_validate(self)

    monkeypatch.setattr(parser, "_run", counting_run)
    monkeypatch.setattr(registry, "get", counting_get)
    monkeypatch.setattr(PseudoExtendedOptions, "validate", counting_validate)
    code = ("data { int N; vector[N] y; } parameters { real mu; real<lower=0> s; } "
            "model { s ~ exponential(1); mu ~ normal(0, 5); y ~ normal(mu, s); } "
            "generated quantities { real y_rep = normal_rng(mu, s); }")
    fit = pemc_stan.sample(code, {"N": 3, "y": [0.1, -0.4, 0.9]}, method="pe", log_scale=0.0,
                           chains=1, iter_warmup=200, iter_sampling=100, seed=1)
    assert (len(lookups), len(validations), len(parses)) == (1, 1, 1), (lookups, parses)
    assert fit.result.method is real_get("pe") and fit.method == "pseudo_extended"
    fit.summary()
    fit.to_inference_data()
    pemc_stan.evidence(fit, estimator="bridge", seed=1)
    assert parses == ["model"], parses
    assert math.isfinite(fit.expectation("mu").mean)


def test_no_method_overrides_a_private_method_of_the_shared_classes() -> None:
    """A method supplies the public hooks of ``FitHooks`` (and its own helpers); it never
    replaces a private method of ExtendedFit or MethodModel."""
    from pemc_stan.sampling.hooks import FitHooks

    found = []
    for m in registry.methods():
        for cls, shared in ((m.fit, ExtendedFit), (m.model, MethodModel)):
            found += [f"{cls.__name__}.{name}" for name in vars(cls)
                      if name.startswith("_") and not name.startswith("__")
                      and hasattr(shared, name)]
    assert not found, found
    # the hooks a method may supply are the shared fit's public methods
    hooks = {n for n in vars(FitHooks) if not n.startswith("_")}
    assert hooks <= {n for n in vars(ExtendedFit) if not n.startswith("_")}
