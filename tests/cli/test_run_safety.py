"""Nothing lost, nothing left running: interrupts, concurrent runs, output paths, bad data.

The compiled tests drive ``pemc-stan`` as a user would, in its own process
group (``start_new_session``): after SIGINT or SIGTERM to the Python process no
process of that group may survive (CmdStan, make, the compiler), the run's
temporary folders (``TMPDIR`` points into the test's folder) must be gone and
its partial CSVs kept where the message says.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from pemc_stan.backend.processes import descendants
from pemc_stan.cli import ExitCode

ROOT = Path(__file__).resolve().parents[2]
BIMODAL = ROOT / "models" / "bimodal_1d" / "bimodal_1d.stan"
BIMODAL_DATA = ROOT / "models" / "bimodal_1d" / "bimodal_1d.data.json"


def _default_sigint() -> None:
    """Ctrl-C as in a terminal: a test run launched in the background (``cmd &`` in a
    non-interactive shell) ignores SIGINT, and a child inherits that and never sees it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args: list[str], tmp: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, TMPDIR=str(tmp))
    return subprocess.Popen([sys.executable, "-m", "pemc_stan", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _wait_for_child(proc: subprocess.Popen[str], matches: Callable[[str], bool],
                    timeout: float = 600) -> list[int]:
    """The pids of ``proc``'s descendants whose command line matches, once there are any."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for p in descendants(proc.pid) if matches(_cmdline(p))]
        if found:
            return found
        if proc.poll() is not None:
            raise AssertionError(f"pemc-stan ended first: {proc.communicate()}")
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("no such child process appeared")


def _group_is_empty(pgid: int) -> bool:
    """No process of the group is left (a zombie's parent, PID 1, is given 5 s to reap it)."""
    deadline = time.monotonic() + 5.0
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def _group(pgid: int) -> list[str]:
    """The processes of a process group (for failure messages)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    found.append(f"{entry.name}: {_cmdline(int(entry.name))[:200]}")
            except OSError:
                pass
    return found


def _assert_nothing_left(proc: subprocess.Popen[str], seen: list[int], tmp: Path) -> None:
    assert _group_is_empty(proc.pid), _group(proc.pid)
    assert not any((Path("/proc") / str(p)).exists() for p in seen)
    assert sorted(p.name for p in tmp.iterdir()) == [], "temporary folders left behind"


def _interrupt(proc: subprocess.Popen[str], sig: signal.Signals, tmp: Path,
               matches: Callable[[str], bool], settle: float = 0.0) -> str:
    """Signal pemc-stan once a matching child runs; check it ended cleanly; its stderr."""
    seen = _wait_for_child(proc, matches)
    time.sleep(settle)
    seen = list(descendants(proc.pid)) or seen
    os.kill(proc.pid, sig)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == (ExitCode.INTERRUPTED if sig == signal.SIGINT else 128 + sig)
    assert "pemc-stan: interrupted" in stderr and "Traceback" not in stderr
    _assert_nothing_left(proc, seen, tmp)
    return stderr


@pytest.mark.compiled
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_ends_cmdstan_and_keeps_its_partial_draws(
        cmdstan_installation: object, tmp_path: Path, sig: signal.Signals) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out"
    proc = _start(["sample", str(BIMODAL), "--data", str(BIMODAL_DATA), "--method", "pe",
                   "--chains", "2", "--iter-warmup", "200", "--iter-sampling", "2000000",
                   "--seed", "3", "--output-dir", str(out)], tmp)
    stderr = _interrupt(proc, sig, tmp, lambda cmd: "method=sample" in cmd, settle=1.0)
    assert f"pemc-stan: interrupted: partial output in {out / 'partial-run'}" in stderr
    csvs = sorted((out / "partial-run" / "cmdstan").glob("*.csv"))
    assert csvs, list(out.rglob("*"))
    assert not (out / "estimates.json").exists()


@pytest.mark.compiled
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_compile_ends_make_and_the_compiler(
        cmdstan_installation: object, tmp_path: Path, sig: signal.Signals) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # a program never compiled before: the cache key ignores comments, so the new number
    # is in the code
    stan = tmp_path / "fresh.stan"
    stan.write_text(f"parameters {{ real x; }}\n"
                    f"model {{ x ~ normal({uuid.uuid4().int % 10**9}e-12, 1); }}\n")
    proc = _start(["sample", str(stan), "--method", "pe", "--output-dir",
                   str(tmp_path / "out")], tmp)
    _interrupt(proc, sig, tmp, lambda cmd: any(w in cmd for w in ("cc1plus", "g++", "clang")))


@pytest.mark.compiled
def test_two_runs_into_one_folder_give_one_result_and_one_clear_error(
        cmdstan_installation: object, tmp_path: Path) -> None:
    import arviz as az

    out = tmp_path / "out"
    first = _start(["sample", str(BIMODAL), "--data", str(BIMODAL_DATA), "--method", "pe",
                    "--chains", "2", "--iter-warmup", "300", "--iter-sampling", "300000",
                    "--seed", "4", "--output-dir", str(out)], tmp_path)
    lock = out / ".pemc-stan.lock"
    deadline = time.monotonic() + 120
    while not (lock.is_file() and f"pid {first.pid}" in lock.read_text()):
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.05)
    second = subprocess.run([sys.executable, "-m", "pemc_stan", "sample", str(BIMODAL),
                             "--data", str(BIMODAL_DATA), "--output-dir", str(out),
                             "--overwrite"], capture_output=True, text=True, timeout=300)
    assert first.poll() is None, "the first run ended before the second tried: lengthen it"
    assert second.returncode == ExitCode.OUTPUT, second.stderr
    assert (f"the output folder {out} is in use by another pemc-stan run "
            f"(pid {first.pid}") in second.stderr
    assert "pemc-stan: remedy: wait for that run to finish" in second.stderr
    _, stderr = first.communicate(timeout=600)
    assert first.returncode in (ExitCode.OK, ExitCode.SUSPECT,
                ExitCode.SUSPECT_FINAL), stderr
    estimates = json.loads((out / "estimates.json").read_text())
    assert estimates["sampler"]["iter_sampling"] == 300000
    idata = az.from_netcdf(str(out / "bimodal_1d.nc"))
    assert idata.posterior.sizes["draw"] > 0
    # one CSV file per chain of the judged run (two chains asked for; a run that split
    # the two modes runs two chains at each)
    assert len(list((out / "cmdstan").glob("*.csv"))) == idata.posterior.sizes["chain"]
    assert not (out / "partial-run").exists()
    # a third run without --overwrite keeps these results
    third = subprocess.run([sys.executable, "-m", "pemc_stan", "sample", str(BIMODAL),
                            "--data", str(BIMODAL_DATA), "--output-dir", str(out)],
                           capture_output=True, text=True, timeout=300)
    assert third.returncode == ExitCode.OUTPUT
    assert "holds the results of an earlier run" in third.stderr and "--overwrite" in third.stderr
    assert json.loads((out / "estimates.json").read_text()) == estimates


# ------------------------------------------------------------------ checks before any work


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pemc_stan", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def _report(proc: subprocess.CompletedProcess[str], code: ExitCode) -> tuple[str, str]:
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("pemc-stan: ")]
    assert len(lines) == 2, proc.stderr
    return lines[0], lines[1]


@pytest.mark.parametrize(("where", "fragment"), [
    ("/proc/pemc-out", "cannot be created in /proc"),
    ("FILE", "is a file, not a folder"),
    ("FILE/sub", "is a file"),
])
def test_unusable_output_folders_are_named_before_compiling(tmp_path: Path, where: str,
                                                            fragment: str) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    path = where.replace("FILE", str(a_file))
    cause, remedy = _report(_cli("sample", str(BIMODAL), "--data", str(BIMODAL_DATA),
                                 "--output-dir", path), ExitCode.OUTPUT)
    assert fragment in cause and path.split("/sub")[0] in cause
    assert "folder" in remedy


def test_an_unwritable_evidence_json_is_refused_before_any_work(tmp_path: Path) -> None:
    proc = _cli("evidence", str(BIMODAL), "--data", str(BIMODAL_DATA), "--json",
                "/proc/pemc-estimate.json")
    cause, _ = _report(proc, ExitCode.OUTPUT)
    assert "/proc" in cause and "not writable" in cause
    assert "log Z" not in proc.stdout


def test_a_string_in_the_data_is_named_before_compiling(tmp_path: Path) -> None:
    data = json.loads(BIMODAL_DATA.read_text())
    data["mu1"] = "abc"
    path = tmp_path / "strings.json"
    path.write_text(json.dumps(data))
    cause, remedy = _report(_cli("sample", str(BIMODAL), "--data", str(path), "--output-dir",
                                 str(tmp_path / "out")), ExitCode.DATA)
    assert "mu1 in strings.json is 'abc' (a string)" in cause and "line 5" in cause
    assert '"mu1"' in remedy
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("flags", "code", "fragment"), [
    (["--chains", "0"], ExitCode.USAGE, "--chains 0"),
    (["--seed", "-1"], ExitCode.USAGE, "--seed -1"),
    (["--adapt-delta", "1.5"], ExitCode.USAGE, "--adapt-delta 1.5"),
    (["--iter-warmup", "-5"], ExitCode.USAGE, "--iter-warmup -5"),
    (["--iter-sampling", "0"], ExitCode.USAGE, "--iter-sampling 0"),
    (["--data", "REAL_FOR_INT"], ExitCode.DATA, "N in real_for_int.json is 2.5 (a real number)"),
])
def test_every_early_check_fires_before_anything_is_compiled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        flags: list[str], code: ExitCode, fragment: str) -> None:
    from pemc_stan.cli import main

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("compile_model was called")

    monkeypatch.setattr("pemc_stan.sampling.model.compile_model", never)
    stan = tmp_path / "counts.stan"
    stan.write_text("data { int<lower=0> N; array[N] real y; }\nparameters { real mu; }\n"
                    "model { mu ~ normal(0, 5); y ~ normal(mu, 1); }\n")
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"N": 2, "y": [0.1, 0.2]}))
    bad = tmp_path / "real_for_int.json"
    bad.write_text(json.dumps({"N": 2.5, "y": [0.1, 0.2]}))
    flags = [str(bad) if f == "REAL_FOR_INT" else f for f in flags]
    data = [] if "--data" in flags else ["--data", str(good)]
    assert main(["sample", str(stan), *data, *flags, "--output-dir",
                 str(tmp_path / "out")]) == code
    err = capsys.readouterr().err
    assert fragment in err, err
    assert not (tmp_path / "out").exists()
