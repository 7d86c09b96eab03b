"""The command line, driven as a user would (subprocess) and in-process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pemc_stan.cli import ExitCode, main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pemc_stan", *args], capture_output=True, text=True, timeout=900
    )


def test_help_lists_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == ExitCode.OK
    assert "runtime" in capsys.readouterr().out


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == ExitCode.USAGE


def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runtime", "--no-such-option"]) == ExitCode.USAGE
    assert "unrecognized arguments" in capsys.readouterr().err


def test_runtime_with_bad_cmdstan_path_is_one_line(tmp_path: Path) -> None:
    proc = run_cli("runtime", "--cmdstan", str(tmp_path / "nowhere"))
    assert proc.returncode == ExitCode.RUNTIME
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "does not exist" in lines[0]


@pytest.mark.compiled
def test_runtime_reports_installation(cmdstan_installation: object) -> None:
    proc = run_cli("runtime")
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert "CmdStan in use:" in proc.stdout
    assert "version: 2." in proc.stdout
    assert "path:" in proc.stdout
