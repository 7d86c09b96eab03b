"""The command line, driven as a user would (subprocess) and in-process.

Bad inputs must give exactly two lines on standard error -- the cause and the
remedy -- a specific non-zero exit code and no Python traceback (unless
``--debug``).  The compiled tests run ``sample`` and ``evidence`` on gallery
models and check what they print and write against exact answers.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pemc_stan.cli import ExitCode, main

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"
BIMODAL = MODELS / "bimodal_1d" / "bimodal_1d.stan"
BIMODAL_DATA = MODELS / "bimodal_1d" / "bimodal_1d.data.json"
NORMAL = MODELS / "normal_normal" / "normal_normal.stan"
NORMAL_DATA = MODELS / "normal_normal" / "data.json"
NORMAL_LOG_Z = -31.6322306  # models/normal_normal/README.md


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pemc_stan", *args], capture_output=True, text=True, timeout=900,
        cwd=cwd,
    )


def assert_cause_and_remedy(proc: subprocess.CompletedProcess[str], code: ExitCode,
                            *cause_words: str) -> str:
    """Exit code ``code``; the report is one cause line + one remedy line; no traceback.

    Log lines (``INFO: ...``, e.g. which CmdStan is used) and progress lines
    (``[pemc-stan 00:01] ...``) may precede the report.
    """
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert all(line.startswith(("INFO: ", "WARNING: ", "[pemc-stan ")) for line in lines[:-2]), \
        proc.stderr
    lines = lines[-2:]
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith("pemc-stan: error: "), lines
    assert lines[1].startswith("pemc-stan: remedy: ") and len(lines[1]) > 30, lines
    for word in cause_words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


# --------------------------------------------------------------------------- help / usage


def test_help_lists_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == ExitCode.OK
    out = capsys.readouterr().out
    for command in ("transform", "sample", "evidence", "runtime"):
        assert command in out


@pytest.mark.parametrize("command,expected", [
    ("transform", ["--method", "--n-pseudo", "--base", "-o OUT.stan"]),
    ("sample", ["--data", "--chains", "--iter-warmup", "--iter-sampling", "--seed",
                "--output-dir", "--progress", "estimates.json", ".nc",
                "cmdstan/"]),
    ("evidence", ["--data", "--method", "--chains", "--seed"]),
    ("runtime", ["--cmdstan", "--build"]),
])
def test_each_subcommand_has_help(command: str, expected: list[str],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == ExitCode.OK
    out = capsys.readouterr().out
    for word in expected:
        assert word in out, (command, word)


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == ExitCode.USAGE


def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runtime", "--no-such-option"]) == ExitCode.USAGE
    assert "unrecognized arguments" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["sample", "transform"])
def test_unknown_method_is_one_line_of_cause_and_one_of_remedy(
        command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Not argparse's usage text: the cause, the methods to use instead, exit 2 (usage),
    before any work (the model file does not even exist)."""
    assert main([command, str(tmp_path / "none.stan"), "--method", "foo"]) == ExitCode.USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines == [
        "pemc-stan: error: --method foo is not a method",
        "pemc-stan: remedy: use --method with one of: ct (continuous-tempering), "
        "pe (pseudo-extended)"]


def test_option_of_the_other_method_is_a_usage_error() -> None:
    proc = run_cli("transform", str(BIMODAL), "--method", "ct", "--n-pseudo", "3")
    assert_cause_and_remedy(proc, ExitCode.USAGE, "--n-pseudo", "continuous-tempering")


def test_a_shared_flag_takes_each_methods_own_values(tmp_path: Path) -> None:
    """--temper belongs to PE and CT with different values: each method's are accepted for
    it and refused for the other with the option's own message."""
    out = tmp_path / "pe.stan"
    assert main(["transform", str(BIMODAL), "--method", "pe", "--temper", "base",
                 "-o", str(out)]) == ExitCode.OK
    assert "towards a base density b" in out.read_text()
    assert main(["transform", str(BIMODAL), "--method", "pe", "--temper", "auto",
                 "-o", str(out)]) == ExitCode.OK
    proc = run_cli("transform", str(BIMODAL), "--method", "ct", "--temper", "base")
    assert_cause_and_remedy(proc, ExitCode.USAGE, "--temper base", "'posterior' or "
                            "'likelihood'")


def test_invalid_option_value_is_a_usage_error() -> None:
    proc = run_cli("transform", str(BIMODAL), "--method", "pe", "--n-pseudo", "0")
    assert_cause_and_remedy(proc, ExitCode.USAGE, "--n-pseudo 0")  # the CLI's spelling


def test_runtime_with_bad_cmdstan_path(tmp_path: Path) -> None:
    proc = run_cli("runtime", "--cmdstan", str(tmp_path / "nowhere"))
    assert_cause_and_remedy(proc, ExitCode.RUNTIME, "does not exist")


# --------------------------------------------------------------------------- transform


def test_transform_prints_readable_pseudo_extended_program() -> None:
    from pemc_stan.run.pipeline import transform
    from pemc_stan.stan.parser import parse

    proc = run_cli("transform", str(BIMODAL), "--method", "pseudo-extended", "--n-pseudo", "5")
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert proc.stdout == transform(BIMODAL, method="pe", n_pseudo=5) + "\n" or \
        proc.stdout == transform(BIMODAL, method="pe", n_pseudo=5)
    program = parse(proc.stdout)  # valid Stan (stanc accepts it)
    assert program.parameters is not None and "pemc_beta" in proc.stdout
    short = run_cli("transform", str(BIMODAL), "--method", "pe", "--n-pseudo", "5")
    assert short.stdout == proc.stdout


def test_transform_noncentring_flag() -> None:
    from pemc_stan.run.pipeline import transform

    proc = run_cli("transform", str(BIMODAL), "--method", "pe", "--n-pseudo", "3",
                   "--beta-min", "0.01", "--noncentring", "0.5")
    assert proc.returncode == ExitCode.OK, proc.stderr
    expected = transform(BIMODAL, method="pe", n_pseudo=3, beta_min=0.01, noncentring=0.5)
    assert proc.stdout.rstrip("\n") == expected.rstrip("\n")
    assert "pemc_raw_x" in proc.stdout
    bad = run_cli("transform", str(BIMODAL), "--method", "pe", "--noncentring", "2")
    assert bad.returncode != ExitCode.OK and "--noncentring 2" in bad.stderr


def test_transform_writes_output_file(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "bimodal_ct.stan"
    proc = run_cli("transform", str(BIMODAL), "--method", "ct", "-o", str(out))
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert proc.stdout == ""
    text = out.read_text()
    assert "pemc_log_zeta" in text and "inv_logit" in text
    long = run_cli("transform", str(BIMODAL), "--method", "continuous-tempering")
    assert long.stdout.rstrip("\n") == text.rstrip("\n")


def test_transform_to_a_folder_is_refused_in_one_line_before_any_work(tmp_path: Path) -> None:
    proc = run_cli("transform", str(BIMODAL), "--method", "pe", "-o", str(tmp_path))
    cause = assert_cause_and_remedy(proc, ExitCode.OUTPUT, str(tmp_path), "is a folder")
    assert "IsADirectoryError" not in proc.stderr and "bug" not in proc.stderr, cause
    assert "bimodal_1d_pe.stan" in proc.stderr  # the remedy names a file in the folder
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    proc = run_cli("transform", str(BIMODAL), "--method", "pe", "-o",
                   str(blocker / "x" / "out.stan"))
    assert_cause_and_remedy(proc, ExitCode.OUTPUT, str(blocker), "is a file")


def test_an_undefined_log_z_is_printed_with_its_reason_not_as_a_number(
        capsys: pytest.CaptureFixture[str]) -> None:
    from types import SimpleNamespace

    import pandas as pd

    from pemc_stan.cli.sample import _print_report
    from pemc_stan.output.diagnostics import Verdict
    from pemc_stan.run.pipeline import SamplerArgs

    reason = "m: log Z needs a proper prior, but 'mu' (line 3) has no prior statement"
    saved = SimpleNamespace(table=pd.DataFrame({"mean": [0.1]}, index=["mu"]),
                            diagnostics={"messages": []}, verdict=Verdict(), files=(),
                            folder=Path("out"), estimates={"cost": None},
                            log_z={"log_z": None, "std_error": None, "undefined": reason})
    _print_report("continuous tempering", Path("m.stan"),
                  SamplerArgs(chains=2, iter_sampling=10, seed=1), True, saved, (2, 20))
    out = capsys.readouterr().out
    assert f"log Z: undefined ({reason})" in out and "log Z =" not in out
    # the header names the judged run's draws (here a follow-up's 20), not the request
    assert "continuous tempering fit of m.stan: 2 chains x 20 draws" in out


# --------------------------------------------------------------------------- bad input


def test_missing_model_file(tmp_path: Path) -> None:
    for command in (["transform", "--method", "pe"], ["sample"], ["evidence"]):
        proc = run_cli(command[0], str(tmp_path / "nope.stan"), *command[1:])
        assert_cause_and_remedy(proc, ExitCode.MISSING_FILE, "nope.stan", "does not exist")


def test_missing_data_file(tmp_path: Path) -> None:
    proc = run_cli("sample", str(BIMODAL), "--data", str(tmp_path / "nodata.json"))
    assert_cause_and_remedy(proc, ExitCode.MISSING_FILE, "nodata.json")


def test_stan_syntax_error_gives_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.stan"
    bad.write_text("parameters { real x; }\nmodel {\n  x ~ normal(0, 1)\n}\n")
    for command in (["transform", "--method", "pe"], ["sample"]):
        proc = run_cli(command[0], str(bad), *command[1:])
        cause = assert_cause_and_remedy(proc, ExitCode.STAN_PROGRAM, "bad.stan",
                                        "line 4, column 0", "syntax error")
        assert "Ill-formed" in cause  # stanc's own explanation
    debug = run_cli("--debug", "transform", str(bad), "--method", "pe")
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_stan_semantic_error(tmp_path: Path) -> None:
    bad = tmp_path / "undeclared.stan"
    bad.write_text("parameters { real x; }\nmodel {\n  x ~ normal(mu, 1);\n}\n")
    proc = run_cli("transform", str(bad), "--method", "pe")
    assert_cause_and_remedy(proc, ExitCode.STAN_PROGRAM, "line 3, column 13",
                            "Identifier 'mu' not in scope")


def test_unsupported_construct(tmp_path: Path) -> None:
    reserved = tmp_path / "reserved.stan"
    reserved.write_text("parameters { real pemc_x; }\nmodel { pemc_x ~ normal(0, 1); }\n")
    proc = run_cli("transform", str(reserved), "--method", "pe")
    assert_cause_and_remedy(proc, ExitCode.UNSUPPORTED, "unsupported construct", "pemc_x")
    lp_while = tmp_path / "lp_while.stan"
    lp_while.write_text(
        "functions {\n  real f_lp(real x) {\n    target += -0.5 * x ^ 2;\n    return 1;\n  }\n}\n"
        "parameters {\n  real x;\n}\nmodel {\n  int k = 0;\n"
        "  while (f_lp(x) > k && k < 1) {\n    k += 1;\n  }\n}\n")
    proc = run_cli("sample", str(lp_while))
    assert_cause_and_remedy(proc, ExitCode.UNSUPPORTED, "line 12, column 2",
                            "_lp function in a while condition")


def test_data_missing_variable(tmp_path: Path) -> None:
    data = tmp_path / "partial.json"
    data.write_text(json.dumps({"w": 0.3, "mu1": -3.0, "sigma": 0.5}))
    proc = run_cli("sample", str(BIMODAL), "--data", str(data))
    assert_cause_and_remedy(proc, ExitCode.DATA, "partial.json", "'mu2'", "real mu2")
    proc = run_cli("sample", str(BIMODAL))  # no data at all
    assert_cause_and_remedy(proc, ExitCode.DATA, "declares data (w, mu1, mu2, sigma)",
                            "no data file")


def test_data_wrong_size(tmp_path: Path) -> None:
    data = json.loads(NORMAL_DATA.read_text())
    data["y"] = data["y"][:-1]
    path = tmp_path / "short.json"
    path.write_text(json.dumps(data))
    proc = run_cli("sample", str(NORMAL), "--data", str(path))
    assert_cause_and_remedy(proc, ExitCode.DATA, "'y'", "(19,)", "(20,)", "vector[N] y")


def test_data_not_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"w": 0.3,')
    proc = run_cli("sample", str(BIMODAL), "--data", str(path))
    assert_cause_and_remedy(proc, ExitCode.DATA, "broken.json", "not valid JSON")


# --------------------------------------------------------------------------- compiled


@pytest.mark.compiled
def test_runtime_reports_installation(cmdstan_installation: object) -> None:
    proc = run_cli("runtime")
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert "CmdStan in use:" in proc.stdout
    assert "version: 2." in proc.stdout
    assert "path:" in proc.stdout


def test_data_violating_a_bound_is_reported_before_compiling(tmp_path: Path) -> None:
    data = json.loads(BIMODAL_DATA.read_text())
    data["w"] = 1.5  # declared real<lower=0, upper=1> w
    path = tmp_path / "outside.json"
    path.write_text(json.dumps(data))
    proc = run_cli("sample", str(BIMODAL), "--data", str(path), "--method", "pe",
                   "--log-scale", "0", "--chains", "1", "--iter-warmup", "10",
                   "--iter-sampling", "10",
                   "--output-dir", str(tmp_path / "out"))
    assert_cause_and_remedy(proc, ExitCode.DATA, "w in outside.json is 1.5, outside the bounds "
                            "of 'real<lower=0, upper=1> w'", "line 4")
    assert not (tmp_path / "out" / "partial-run").exists()


@pytest.mark.compiled
def test_data_cmdstan_rejects_is_reported_with_cmdstans_reason(cmdstan_installation: object,
                                                               tmp_path: Path) -> None:
    """A constraint only CmdStan checks (a simplex): its own message, not an empty cause."""
    stan = tmp_path / "simplex_data.stan"
    stan.write_text("data { simplex[2] p; }\nparameters { real x; }\n"
                    "model { x ~ normal(p[1], 1); }\n")
    path = tmp_path / "bad_simplex.json"
    path.write_text(json.dumps({"p": [0.5, 0.6]}))
    proc = run_cli("sample", str(stan), "--data", str(path), "--method", "pe", "--log-scale",
                   "0", "--chains", "1", "--iter-warmup", "10", "--iter-sampling", "10",
                   "--output-dir", str(tmp_path / "out"))
    cause = assert_cause_and_remedy(proc, ExitCode.DATA, "bad_simplex.json", "p", "simplex")
    assert "_pe.stan" not in cause  # no reference to the generated program


@pytest.mark.compiled
def test_a_nan_the_density_uses_ends_the_run_naming_the_value_and_stans_line(
        cmdstan_installation: object, tmp_path: Path) -> None:
    """The data check only warns (a model may skip NaN values); when the density is NaN
    wherever CmdStan starts, the run stops after two approximations failed alike, with
    Stan's message, the model's line and the data's NaN, not cmdstanpy's command line."""
    data = json.loads(NORMAL_DATA.read_text())
    data["y"][4] = "NaN"
    path = tmp_path / "gap.json"
    path.write_text(json.dumps(data))
    proc = run_cli("sample", str(NORMAL), "--data", str(path), "--method", "ct",
                   "--output-dir", str(tmp_path / "out"), "--seed", "3")
    cause = assert_cause_and_remedy(proc, ExitCode.DATA, "y[5] (NaN)", "normal_normal.stan",
                                    "line 15", "cannot be evaluated")
    assert "Command '" not in proc.stderr and "_ct.stan" not in cause
    assert proc.stderr.count("y[5] in gap.json is NaN") == 1  # the data check's warning
    assert "approximation of the base" not in proc.stderr.split("advi")[-1]  # no third try


@pytest.mark.compiled
def test_sample_pseudo_extended_bimodal(cmdstan_installation: object, tmp_path: Path) -> None:
    """E[x] = 1.2 on the bimodal gallery model, and every output agrees with the others."""
    import arviz as az
    import pandas as pd

    out = tmp_path / "pe"
    proc = run_cli("sample", str(BIMODAL), "--data", str(BIMODAL_DATA), "--method", "pe",
                   "--n-pseudo", "5", "--log-scale", "0", "--chains", "2",
                   "--iter-warmup", "500", "--iter-sampling", "3000", "--seed", "21",
                   "--output-dir", str(out))
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert "Traceback" not in proc.stderr
    for word in ("r_hat", "ess_bulk", "mcse", "weight_ess_mean", "beta_quantiles"):
        assert word in proc.stdout, word
    assert {p.name for p in out.iterdir()} >= {"bimodal_1d.nc", "estimates.json", "cmdstan"}
    # each draw kept once: the whole folder within twice what CmdStan itself wrote
    cmdstan_bytes = sum(f.stat().st_size for f in (out / "cmdstan").iterdir() if f.is_file())
    folder_bytes = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    assert folder_bytes <= 2 * cmdstan_bytes, (folder_bytes, cmdstan_bytes)
    assert len(list((out / "cmdstan").glob("*.csv"))) == 2
    estimates = json.loads((out / "estimates.json").read_text())
    assert estimates["method"] == "pseudo_extended"
    assert estimates["options"]["n_pseudo"] == 5 and estimates["log_scale"] == 0.0
    x = estimates["expectations"]["x"]
    assert abs(x["mean"] - 1.2) < 4 * x["mcse"], x  # exact E[x] = 0.3 * -3 + 0.7 * 3
    # informative: E[x] = 6 P(x > 0) - 3, so an MCSE of 0.25 is 0.042 on the mass (4 MCSE
    # below 0.2): equal masses (E[x] = 0) and a one-mode answer (-3 or 3) cannot pass
    assert x["mcse"] < 0.25

    idata = az.from_netcdf(str(out / "bimodal_1d.nc"))
    assert {"posterior", "sample_stats", "extended_posterior"} <= set(idata.groups())
    assert idata.posterior.attrs["pemc_method"] == "pseudo_extended"
    lw = idata.sample_stats["log_weight"].values
    assert lw.shape == (2, 3000, 5)
    # the log weights in the NetCDF file are the generated program's, as CmdStan wrote them
    csv = pd.read_csv(sorted((out / "cmdstan").glob("*_1.csv"))[0], comment="#")
    np.testing.assert_allclose(lw[0], csv[[f"pemc_log_weight.{k}" for k in range(1, 6)]],
                               rtol=1e-10, atol=1e-11)  # CmdStan writes 12 digits
    # estimates.json's E[x] is the eq-3 weighted mean of the pseudo-samples in the NetCDF file
    w = np.exp(lw - lw.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    copies = idata.extended_posterior["x"].values  # (chain, draw, pseudo)
    assert float(np.mean(np.sum(w * copies, axis=-1))) == pytest.approx(x["mean"], rel=1e-9)
    # the resampled posterior holds draws from both modes, in about the right proportion
    left = float(np.mean(idata.posterior["x"].values < 0))
    assert 0.05 < left < 0.6
    # draws kept once (#76): the nc's extended draws do not repeat sample_stats' beta and
    # weights, no generated-quantities folder repeats the posterior
    assert not set(idata.extended_posterior.data_vars) & {"pemc_beta", "pemc_log_weight"}
    assert not (out / "gq").exists()


@pytest.mark.compiled
def test_sample_and_evidence_continuous_tempering_normal_normal(cmdstan_installation: object,
                                                                tmp_path: Path) -> None:
    """CT (tempering) through the CLI: log Z against the exact evidence, then the evidence
    command."""
    out = tmp_path / "ct"
    proc = run_cli("sample", str(NORMAL), "--data", str(NORMAL_DATA), "--method", "ct",
                   "--split-modes", "never", "--chains", "2", "--iter-warmup", "400",
                   "--iter-sampling", "600", "--seed", "5", "--output-dir", str(out))
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert "log Z = " in proc.stdout
    estimates = json.loads((out / "estimates.json").read_text())
    assert estimates["method"] == "continuous_tempering"
    log_z = estimates["log_z"]
    assert abs(log_z["log_z"] - NORMAL_LOG_Z) < 4 * log_z["std_error"], log_z
    assert 0 < log_z["std_error"] < 0.15  # an error of log 2 cannot hide in 4 SE
    # exact posterior mean of mu: precision-weighted (models/normal_normal/README.md)
    data = json.loads(NORMAL_DATA.read_text())
    precision = 1 / data["tau0"] ** 2 + data["N"] / data["sigma"] ** 2
    exact_mean = (data["mu0"] / data["tau0"] ** 2 + sum(data["y"]) / data["sigma"] ** 2) / precision
    mu = estimates["expectations"]["mu"]
    assert abs(mu["mean"] - exact_mean) < 4 * mu["mcse"], (mu, exact_mean)
    import arviz as az

    stats = az.from_netcdf(str(out / "normal_normal.nc")).sample_stats
    assert {"beta", "delta", "log_weight", "weight"} <= set(stats.data_vars)
    assert stats["beta"].shape == (2, 600) and bool(((stats["beta"] >= 0)
                                                     & (stats["beta"] <= 1)).all())

    ev = run_cli("evidence", str(NORMAL), "--data", str(NORMAL_DATA), "--method", "ct",
                 "--chains", "2", "--iter-warmup", "400", "--iter-sampling", "600",
                 "--seed", "6", "--json", str(tmp_path / "ev.json"))
    assert ev.returncode == ExitCode.OK, ev.stderr
    assert ev.stdout.startswith("log Z = ")
    result = json.loads((tmp_path / "ev.json").read_text())
    assert math.isfinite(result["log_z"]) and 0 < result["std_error"] < 0.15
    assert abs(result["log_z"] - NORMAL_LOG_Z) < 4 * result["std_error"], result


@pytest.mark.compiled
def test_the_readme_main_command_finds_both_modes(cmdstan_installation: object,
                                                  tmp_path: Path) -> None:
    """The README's main command, defaults only: E[x] = 1.2 (one mode gives -3 or 3) within
    3 standard errors, a standard error below 0.2 (0.29-0.37 before CT's post-stratification
    and beta bias; the issue's 0.15 holds on seeds 1-5 at 0.11-0.14 and on 95 of 100 seeds in
    benchmarks/calibration.py, too close to the bound for one fixed-seed test) and a log Z
    whose error bar excludes log 0.7 (one mode)."""
    out = tmp_path / "bimodal_ct"
    proc = run_cli("sample", "example:bimodal_1d", "--method", "ct", "--seed", "1",
                   "--output-dir", str(out))
    # ok, or suspect with a named reason: the same seed has given either (bulk ESS of the
    # resampled draws 94-250 around the check's 100) between machines and loads
    assert proc.returncode in (ExitCode.OK, ExitCode.SUSPECT,
                ExitCode.SUSPECT_FINAL), proc.stderr
    assert (proc.returncode == ExitCode.OK) == ("SUSPECT" not in proc.stdout + proc.stderr)
    estimates = json.loads((out / "estimates.json").read_text())
    x = estimates["expectations"]["x"]
    assert abs(x["mean"] - 1.2) < 3 * x["mcse"] and x["mcse"] < 0.2, x
    log_z = estimates["log_z"]
    assert abs(log_z["log_z"]) < 4 * log_z["std_error"] < abs(math.log(0.7)), log_z


def test_evidence_unknown_estimator_is_a_usage_error() -> None:
    proc = run_cli("evidence", str(NORMAL), "--data", str(NORMAL_DATA), "--method", "magic")
    assert_cause_and_remedy(proc, ExitCode.USAGE, "magic")


def test_transform_refuses_to_overwrite_its_input(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m.stan"
    text = "parameters { real x; } model { x ~ normal(0, 1); }\n"
    model.write_text(text)
    assert main(["transform", str(model), "--method", "pe", "-o", str(model)]) == ExitCode.USAGE
    assert model.read_text() == text
    assert "is the input program" in capsys.readouterr().err
    out = tmp_path / "sub" / "m_pe.stan"
    assert main(["transform", str(model), "--method", "pe", "-o", str(out)]) == ExitCode.OK
    assert "pemc_beta" in out.read_text() and model.read_text() == text


def test_quiet_and_verbose_after_the_subcommand(tmp_path: Path) -> None:
    model = tmp_path / "m.stan"
    model.write_text("parameters { real x; } model { x ~ normal(0, 1); }\n")
    for flags in (["--quiet"], ["--verbose"], ["--debug"]):
        assert main(["transform", str(model), "--method", "ct", *flags]) == ExitCode.OK, flags
    assert main(["--quiet", "transform", str(model), "--method", "ct"]) == ExitCode.OK


def test_cmdstanpys_spellings_of_the_flags_are_accepted() -> None:
    from pemc_stan.cli import build_parser
    from pemc_stan.cli.parsing import parse

    args = parse(build_parser(), ["sample", "m.stan", "--iter_sampling", "500",
                                  "--adapt_delta=0.9", "--max_treedepth", "12"])
    assert (args.iter_sampling, args.adapt_delta, args.max_treedepth) == (500, 0.9, 12)
    # a word that spells no flag is left alone, and so is everything after "--"
    from pemc_stan.cli.parsing import cmdstanpy_spellings

    assert cmdstanpy_spellings(build_parser(), ["--no_such", "--", "--iter_sampling"]) == [
        "--no_such", "--", "--iter_sampling"]


def test_an_unknown_flag_is_one_line_and_its_remedy_names_the_nearest(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sample", "m.stan", "--iter_samplng", "5"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "pemc-stan: error: unrecognized arguments: --iter_samplng 5",
        "pemc-stan: remedy: did you mean --iter-sampling? `pemc-stan sample --help` lists "
        "its options"]


def test_every_argument_error_ends_with_a_remedy(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["sample", "m.stan", "--metric", "bad"], ["sample"],
                 ["sample", "m.stan", "--chains", "four"]):
        assert main(argv) == ExitCode.USAGE, argv
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 2 and "usage:" not in err, err
        assert "pemc-stan: remedy: " in err and "`pemc-stan sample --help` lists its options" \
            in err, err
        assert "did you mean" not in err, err


def test_a_density_nan_everywhere_from_the_data_is_a_data_error_not_a_rejected_file() -> None:
    from pemc_stan.cli.errors import ExitCode, cmdstan_error, describe_error
    from pemc_stan.errors import UnevaluableDensityError

    # Stan's "but must be not nan" would otherwise read as CmdStan rejecting the file
    exc = UnevaluableDensityError(
        "the log density of m cannot be evaluated where CmdStan starts (pathfinder, advi "
        "failed alike): normal_lpdf: Random variable[2] is nan, but must be not nan!; the "
        "data hold y[2] (NaN)", "normal_lpdf: Random variable[2] is nan, but must be not nan!",
        "replace or leave out the NaN and infinite values in the data", data_problem=True)
    cause, remedy, code = describe_error(cmdstan_error(exc, Path("d.json")))
    assert code == ExitCode.DATA and "rejected" not in cause and "y[2] (NaN)" in cause
    assert remedy.startswith("replace or leave out")
    model_fault = UnevaluableDensityError("the log density of m cannot be evaluated", "r", "fix")
    assert describe_error(cmdstan_error(model_fault, None))[2] == ExitCode.RUNTIME


_REJECTING = """\
data { int<lower=1> N; vector[N] y; }
parameters { real mu; real<lower=0> sigma; }
model {
  if (sigma > 4) reject("sigma is beyond this model's range: ", sigma);
  mu ~ normal(0, 5);
  sigma ~ normal(0, 3);
  y ~ normal(mu, sigma);
}
"""


@pytest.mark.compiled
def test_each_stan_message_is_said_once_in_a_tempered_run(cmdstan_installation: object,
                                                           tmp_path: Path) -> None:
    """#76 'each Stan message once': a model that rejects proposals in every round of a
    tempered run (the hot chains reach sigma > 4) has Stan's message said once in all the
    command line prints, told in the user's line, beside its count."""
    model = tmp_path / "rejecting.stan"
    model.write_text(_REJECTING)
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"N": 5, "y": [0.3, -1.2, 0.8, 1.9, -0.4]}))
    proc = run_cli("sample", str(model), "--data", str(data), "--method", "ct",
                   "--split-modes", "never", "--chains", "2", "--iter-warmup", "300",
                   "--iter-sampling", "300", "--seed", "3", "--no-plots",
                   "--output-dir", str(tmp_path / "out"))
    assert proc.returncode in (ExitCode.OK, ExitCode.SUSPECT, ExitCode.SUSPECT_FINAL), proc.stderr
    said = proc.stdout + proc.stderr
    assert said.count("sigma is beyond this model's range") == 1, said
    assert "rejecting.stan, line 4" in said, said
