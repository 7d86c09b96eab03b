"""cmdstanpy's sampling options in ``pemc-stan sample`` and ``pemc-stan evidence``.

The flags are derived from :class:`pemc_stan.run.pipeline.SamplerArgs` (one field, one flag,
its default written once), checked by ``SamplerArgs.validate`` before any work, and reach
CmdStan through the methods' runs.  The fast tests never compile; the ``compiled`` ones
read what CmdStan recorded in its CSV files.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import pemc_stan
from pemc_stan.cli import ExitCode, build_parser, main
from pemc_stan.cli.options import add_sampler_options, flag_of, sampler_options
from pemc_stan.core.options import cli_fields
from pemc_stan.errors import OptionsError
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.run.pipeline import (
    SamplerArgs,
    check_inits,
    nuts_fields,
    parse_inits,
    transform_result,
)
from pemc_stan.sampling.model import Found

ROOT = Path(__file__).resolve().parents[2]
NORMAL = ROOT / "models" / "normal_normal" / "normal_normal.stan"
NORMAL_DATA = ROOT / "models" / "normal_normal" / "data.json"

#: cmdstanpy's names, as issue #37 asks for them
CMDSTANPY_FLAGS = ("--chains", "--iter-warmup", "--iter-sampling", "--seed", "--adapt-delta",
                   "--max-treedepth", "--metric", "--thin", "--parallel-chains", "--inits",
                   "--refresh")

MODEL = """
parameters { real mu; vector[2] z; real<lower=0> s; }
model { mu ~ normal(0, 1); z ~ normal(mu, 1); s ~ exponential(1); }
"""


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main([command, "--help"]) == ExitCode.OK
    return capsys.readouterr().out


# --------------------------------------------------------------------------- flags


@pytest.mark.parametrize("command", ["sample", "evidence"])
def test_help_lists_cmdstanpys_options(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _help(command, capsys)
    for flag in CMDSTANPY_FLAGS:
        assert flag in out, (command, flag)
    assert "diag_e" in out and "dense_e" in out and "unit_e" in out
    assert "R|FILE.json" in out


def test_flags_are_derived_from_the_dataclass_with_its_defaults() -> None:
    parser = argparse.ArgumentParser()
    add_sampler_options(parser)
    flags = {a.dest: a for a in parser._actions if a.dest != "help"}
    fields = list(cli_fields(SamplerArgs))
    assert [f.name for f in fields] == list(flags)
    for f in fields:
        action = flags[f.name]
        assert action.option_strings == [flag_of(f.name)]
        assert action.default is None  # "not given": the dataclass's default applies
        if f.default is not None:
            assert action.help is not None and f"(default {f.default})" in action.help
    assert set(nuts_fields()) == {"adapt_delta", "max_treedepth", "metric", "thin",
                                  "parallel_chains", "inits", "refresh"}
    assert not {"show_progress", "extra", "budget"} & set(flags)


def test_flags_not_given_keep_the_dataclass_defaults() -> None:
    args = build_parser().parse_args(["sample", "m.stan"])
    assert sampler_options(args) == {}
    assert SamplerArgs(**sampler_options(args)) == SamplerArgs()


def test_flags_given_become_cmdstanpy_keywords() -> None:
    args = build_parser().parse_args([
        "sample", "m.stan", "--chains", "2", "--max-treedepth", "7", "--metric", "dense_e",
        "--thin", "3", "--parallel-chains", "1", "--inits", "0.5", "--refresh", "50",
        "--adapt-delta", "0.95", "--seed", "11"])
    sampler = SamplerArgs(**sampler_options(args)).validate()
    assert (sampler.chains, sampler.seed) == (2, 11)
    assert sampler.cmdstan_kwargs() == {"adapt_delta": 0.95, "max_treedepth": 7,
                                        "metric": "dense_e", "thin": 3, "parallel_chains": 1,
                                        "inits": 0.5, "refresh": 50}


def test_inits_text_is_a_number_or_a_path() -> None:
    assert parse_inits("0") == 0.0 and parse_inits("1.5") == 1.5
    assert parse_inits("inits.json") == "inits.json"
    assert parse_inits("inf") == "inf"  # not a radius: read as a (missing) file


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"thin": 0}, "thin=0"), ({"max_treedepth": 0}, "max_treedepth=0"),
    ({"parallel_chains": 0}, "parallel_chains=0"), ({"refresh": 0}, "refresh=0"),
    ({"metric": "euclid"}, "metric='euclid'"), ({"adapt_delta": 1.0}, "adapt_delta=1.0"),
    ({"inits": -1.0}, "inits=-1.0"), ({"inits": True}, "inits=True"),
    ({"inits": [{"mu": 1.0}]}, "one entry per chain"),
])
def test_bad_values_are_named(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(OptionsError, match=named.replace("[", r"\[")) as err:
        SamplerArgs(**kwargs).validate()
    assert "expected" in str(err.value)


def test_inits_file_must_hold_a_json_object(tmp_path: Path) -> None:
    bad = tmp_path / "inits.json"
    bad.write_text("[1, 2]")
    with pytest.raises(OptionsError, match="holds a JSON list; expected a JSON object"):
        SamplerArgs(inits=str(bad)).validate()
    bad.write_text("{mu: 1")
    with pytest.raises(OptionsError, match="is not JSON"):
        SamplerArgs(inits=str(bad)).validate()
    with pytest.raises(OptionsError, match="cannot be read"):
        SamplerArgs(inits=str(tmp_path / "missing.json")).validate()
    good = tmp_path / "good.json"
    good.write_text('{"mu": 0.5}')
    assert SamplerArgs(inits=good).validate().cmdstan_kwargs() == {"inits": str(good)}


def test_python_keywords_fill_the_fields_and_may_not_be_given_twice() -> None:
    extra = {"adapt_delta": 0.9, "thin": 2, "step_size": 0.1}
    sampler = SamplerArgs(extra=extra).validate()
    assert (sampler.adapt_delta, sampler.thin, sampler.extra) == (0.9, 2, {"step_size": 0.1})
    assert extra == {"adapt_delta": 0.9, "thin": 2, "step_size": 0.1}  # the caller's dict
    assert sampler.cmdstan_kwargs() == {"adapt_delta": 0.9, "thin": 2, "step_size": 0.1}
    with pytest.raises(OptionsError, match="thin given once"):
        SamplerArgs(thin=3, extra={"thin": 2}).validate()


def test_a_bad_flag_is_a_usage_error_before_any_work(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["sample", str(NORMAL), "--data", str(NORMAL_DATA), "--thin", "0",
                 "--output-dir", str(out)]) == ExitCode.USAGE
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "--thin 0" in err[0] and err[1].startswith("pemc-stan: remedy: ")
    assert not out.exists()


def test_a_missing_inits_file_is_a_missing_file(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    assert main(["sample", str(NORMAL), "--data", str(NORMAL_DATA), "--inits",
                 str(tmp_path / "nowhere.json")]) == ExitCode.MISSING_FILE
    assert "inits file" in capsys.readouterr().err


# --------------------------------------------------------------------------- inits and methods


def test_inits_for_the_model_do_not_fit_the_pseudo_extended_program() -> None:
    """PE holds N copies of each parameter: the model's values fail before compiling, with
    both declarations and what to give instead; values for the PE program pass."""
    result = transform_result(MODEL, "pe", n_pseudo=3)
    with pytest.raises(OptionsError, match=r"mu with shape \[\].*array\[.*\] real mu "
                       r"\(shape \[3\]; the model: real mu\).*a number R") as err:
        check_inits(result, {}, {"mu": 0.5})
    assert err.value.argument == "inits"
    check_inits(result, {}, {"mu": [0.1, 0.2, 0.3], "z": [[0, 1]] * 3})
    check_inits(result, {}, 1.5)  # a radius fits every program
    check_inits(result, {}, {"not_a_parameter": 1})  # CmdStan ignores it


def test_inits_for_the_model_fit_the_continuously_tempered_program(tmp_path: Path) -> None:
    result = transform_result(MODEL, "ct")
    path = tmp_path / "inits.json"
    path.write_text(json.dumps({"mu": 0.5, "z": [0, 1], "s": 1.0}))
    check_inits(result, {}, str(path))
    check_inits(result, {}, [{"mu": 0.5}, {"mu": -0.5}])
    with pytest.raises(OptionsError, match=r"z with shape \[3\].*vector\[2\] z"):
        check_inits(result, {}, {"z": [0, 1, 2]})


def test_inits_naming_a_parameter_the_program_renamed_fail() -> None:
    """PE unrolls a parameter whose bound refers to another parameter into copies
    ``pemc_<name>_<k>``: values under the model's name would be ignored by CmdStan."""
    code = ("parameters { real mu; real<lower=mu> s; }\n"
            "model { mu ~ normal(0, 1); s ~ normal(mu + 1, 1); }\n")
    result = transform_result(code, "pe", n_pseudo=2)
    with pytest.raises(OptionsError, match="the pe program has no parameter s"):
        check_inits(result, {}, {"s": 1.0})


def test_user_inits_start_the_first_run_and_follow_ups_continue(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's inits and NUTS arguments reach the method's run; a follow-up gets them
    all but the inits (it continues from where the run ended)."""
    calls: dict[str, dict[str, Any]] = {}

    class Fit:
        run_seed: int | None = None
        later_checks: tuple[Any, ...] = ()

        def gradients(self) -> int:
            return 0

    def fake_sample(self: Any, **kwargs: Any) -> Fit:
        calls["sample"] = kwargs
        return Fit()

    def fake_follow_up(model: Any, fit: Fit, **kwargs: Any) -> Fit:
        calls["follow_up"] = kwargs
        return fit

    spec = pemc_stan.methods.registry.get("ct")
    monkeypatch.setattr(spec.model, "search_modes", lambda self, seed: Found())
    monkeypatch.setattr(spec.model, "sample", fake_sample)
    monkeypatch.setattr("pemc_stan.run.conductor.follow_up", fake_follow_up)
    fit = pemc_stan.sample(MODEL, method="ct", chains=2, seed=3, inits={"mu": 0.5}, thin=2,
                           metric="dense_e", max_treedepth=6, refresh=10, parallel_chains=1,
                           adapt_delta=0.9, step_size=0.5)
    nuts = {"thin": 2, "metric": "dense_e", "max_treedepth": 6, "refresh": 10,
            "parallel_chains": 1, "adapt_delta": 0.9, "step_size": 0.5}
    assert calls["sample"] == {"chains": 2, "iter_warmup": 1000, "iter_sampling": 1000,
                               "seed": 3, "output_dir": None, "show_progress": False,
                               "inits": {"mu": 0.5}, "found": Found(), **nuts}
    follow = calls["follow_up"]
    assert "inits" not in follow and {k: follow[k] for k in nuts} == nuts
    assert fit.run_seed == 3


def test_model_shaped_inits_fail_pseudo_extended_sampling_before_compiling(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("nothing may be compiled")

    monkeypatch.setattr("pemc_stan.sampling.model.compile_model", boom)
    with pytest.raises(OptionsError, match="the pe program declares"):
        pemc_stan.sample(MODEL, method="pe", inits={"mu": 0.5})


# --------------------------------------------------------------------------- evidence


def _fake_evidence(calls: list[dict[str, Any]]) -> Any:
    def fake(program: Any, data: Any, **kwargs: Any) -> EvidenceEstimate:
        calls.append(kwargs)
        return EvidenceEstimate(-1.0, 0.1, "ct", {"seed": kwargs["seed"], "verdict": "ok"})

    return fake


def test_evidence_takes_the_methods_and_the_samplers_options(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr("pemc_stan.cli.evidence.evidence", _fake_evidence(calls))
    assert main(["evidence", str(NORMAL), "--data", str(NORMAL_DATA), "--estimator", "ct",
                 "--bootstrap-rounds", "2", "--adapt-delta", "0.9", "--thin", "2",
                 "--max-treedepth", "8", "--chains", "2"]) == ExitCode.OK
    [kwargs] = calls
    seed = kwargs.pop("seed")
    assert isinstance(seed, int) and 0 <= seed < 2**31
    assert kwargs == {"chains": 2, "iter_warmup": 1000, "iter_sampling": 1000,
                      "adapt_delta": 0.9, "thin": 2, "max_treedepth": 8,
                      "bootstrap_rounds": 2, "estimator": "ct"}
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("log Z = ")
    assert out[1] == f"seed: {seed} (drawn; pass --seed {seed} to repeat)"


@pytest.mark.parametrize(("flags", "words"), [
    (["--n-pseudo", "3"], ["--n-pseudo", "bridge estimator runs none"]),
    (["--estimator", "is", "--bootstrap-rounds", "2"], ["--bootstrap-rounds", "is estimator"]),
    (["--estimator", "ct", "--n-pseudo", "3"], ["n_pseudo", "continuous-tempering"]),
    (["--estimator", "ct", "--bootstrap-rounds", "-1"], ["--bootstrap-rounds -1"]),
])
def test_evidence_refuses_method_options_it_cannot_use(
        flags: list[str], words: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr("pemc_stan.cli.evidence.evidence", _fake_evidence(calls))
    assert main(["evidence", str(NORMAL), "--data", str(NORMAL_DATA), *flags]) == \
        ExitCode.USAGE
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    for word in words:
        assert word in err[0], (word, err)
    assert not calls


# --------------------------------------------------------------------------- CmdStan


def _config(csv: Path) -> str:
    return "\n".join(line for line in csv.read_text().splitlines() if line.startswith("#"))


@pytest.mark.compiled
@pytest.mark.parametrize("method", ["ct", "pe"])
def test_sampler_flags_reach_cmdstan_and_thinned_draws_are_weighted(
        method: str, cmdstan_installation: object, tmp_path: Path) -> None:
    """What CmdStan recorded is what was asked for; weights, estimates and the
    InferenceData hold the thinned draws (chains x ceil(iter_sampling / thin))."""
    import arviz as az

    out = tmp_path / method
    flags = ["--thin", "3", "--max-treedepth", "6", "--metric", "dense_e", "--inits", "0.5",
             "--refresh", "100", "--parallel-chains", "1", "--adapt-delta", "0.9"]
    assert main(["sample", str(NORMAL), "--data", str(NORMAL_DATA), "--method", method,
                 "--chains", "2", "--iter-warmup", "300", "--iter-sampling", "301",
                 "--seed", "4", "--budget", "1", "--output-dir", str(out), *flags]
                ) in (ExitCode.OK, ExitCode.SUSPECT,
                ExitCode.SUSPECT_FINAL)
    csvs = sorted((out / "cmdstan").rglob("*.csv"))
    assert csvs
    for csv in csvs:
        config = _config(csv)
        for setting in ("thin = 3", "max_depth = 6", "metric = dense_e", "init = 0.5",
                        "refresh = 100", "delta = 0.9"):
            assert setting in config, (csv.name, setting)
    kept = 101  # iterations 0, 3, ..., 300
    idata = az.from_netcdf(str(out / "normal_normal.nc"))
    assert idata.posterior.sizes["draw"] == kept
    assert idata.sample_stats["log_weight"].sizes["draw"] == kept
    estimates = json.loads((out / "estimates.json").read_text())
    asked = {"chains": 2, "iter_warmup": 300, "iter_sampling": 301, "seed": 4,
             "adapt_delta": 0.9, "max_treedepth": 6, "metric": "dense_e", "thin": 3,
             "parallel_chains": 1, "inits": 0.5, "refresh": 100}
    assert estimates["requested"] == asked
    # the judged run's own settings, as its CSV files record them, and where they are
    judged = estimates["sampler"]
    assert {k: judged[k] for k in asked if k != "chains"} == {
        k: v for k, v in asked.items() if k != "chains"}
    assert (out / judged["csv_folder"]).is_dir() and judged["chains"] >= 2
    mu = estimates["expectations"]["mu"]
    assert mu["mcse"] > 0 and abs(mu["mean"]) < 10


def test_sampler_args_fields_are_a_dataclass() -> None:
    """Guard: SamplerArgs stays the one dataclass both front doors and the CLI build."""
    assert dataclasses.is_dataclass(SamplerArgs)
    names = [f.name for f in dataclasses.fields(SamplerArgs)]
    assert names[:7] == ["chains", "iter_warmup", "iter_sampling", "seed", "show_progress",
                         "extra", "budget"]  # positional order kept
