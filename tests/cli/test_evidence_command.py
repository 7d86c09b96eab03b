"""``pemc-stan evidence``: ``--estimator``, and ``--method`` as its deprecated alias (in-process,
nothing compiles: every case fails on the estimator before any run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pemc_stan.cli import ExitCode, main
from pemc_stan.cli.evidence import METHOD_DEPRECATED

ROOT = Path(__file__).resolve().parents[2]
NORMAL = ROOT / "models" / "normal_normal" / "normal_normal.stan"
NORMAL_DATA = ROOT / "models" / "normal_normal" / "data.json"


def _evidence(*flags: str) -> list[str]:
    return ["evidence", str(NORMAL), "--data", str(NORMAL_DATA), *flags]


def test_help_lists_estimator_and_the_deprecated_method(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    assert main(["evidence", "--help"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "--estimator ESTIMATOR" in out and "--method METHOD" in out
    assert "deprecated" in out


def test_unknown_estimator_is_a_usage_error_without_a_deprecation_warning(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_evidence("--estimator", "magic")) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "--estimator magic" in err  # the command line's spelling
    assert METHOD_DEPRECATED not in err


def test_method_still_names_the_estimator_and_warns_once(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert main(_evidence("--method", "magic")) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count(METHOD_DEPRECATED) == 1
    assert "--estimator magic" in err  # the value went to the estimator


def test_estimator_and_method_together_are_a_usage_error(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert main(_evidence("--estimator", "bridge", "--method", "is")) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "both name the estimator" in err and "--estimator alone" in err
