"""The command line's stage lines: one when a stage starts, never repeated."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from pemc_stan.backend.progress import StageLines, stage
from pemc_stan.cli.console import configure_logging

ROOT = Path(__file__).resolve().parents[2]


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_each_stage_is_one_line_and_a_long_one_is_not_repeated(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Fake stages and a fake clock: a line when each starts, with the time since the
    command started; a stage that runs for minutes adds no line (a redirected run's log
    would fill with them)."""
    stream, clock = io.StringIO(), _Clock()
    log = logging.getLogger("pemc_stan.backend.progress")
    handler = StageLines(stream, clock=clock)
    monkeypatch.setattr(log, "handlers", [handler])
    monkeypatch.setattr(log, "propagate", False)
    caplog.set_level(logging.INFO, logger=log.name)
    monkeypatch.setattr("pemc_stan.backend.progress.time.monotonic", clock)
    with stage("CT round 2 of 3"):
        clock.now += 42
        with stage("sampling 4 chains x 1000 draws"):
            clock.now += 300
    assert stream.getvalue().splitlines() == [
        "[pemc-stan 00:00] CT round 2 of 3",
        "[pemc-stan 00:42] CT round 2 of 3: sampling 4 chains x 1000 draws",
    ]


def test_off_a_terminal_the_command_line_prints_stage_lines(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Standard error captured by pytest is no terminal: stage lines; ``--quiet`` shows
    none."""
    log = logging.getLogger("pemc_stan.backend.progress")
    saved = (list(log.handlers), log.propagate, list(logging.getLogger("pemc_stan").handlers),
             logging.getLogger("pemc_stan").level, logging.getLogger("pemc_stan").propagate)
    try:
        configure_logging(debug=False, quiet=False)
        [handler] = log.handlers
        assert isinstance(handler, StageLines)
        with stage("pilot: mode search"):
            pass
        configure_logging(debug=False, quiet=True)
        with stage("not shown"):
            pass
    finally:
        for h in log.handlers:
            h.close()
        log.handlers[:] = saved[0]
        log.propagate = saved[1]
        root = logging.getLogger("pemc_stan")
        root.handlers[:], root.level, root.propagate = saved[2], saved[3], saved[4]
    err = capsys.readouterr().err
    assert "[pemc-stan 00:00] pilot: mode search\n" in err
    assert "not shown" not in err and "INFO" not in err


@pytest.mark.compiled
def test_sample_prints_its_stages_when_standard_error_is_no_terminal(
        cmdstan_installation: object, tmp_path: Path) -> None:
    import subprocess
    import sys

    bimodal = ROOT / "models" / "bimodal_1d"
    proc = subprocess.run(
        [sys.executable, "-m", "pemc_stan", "sample", str(bimodal / "bimodal_1d.stan"),
         "--data", str(bimodal / "bimodal_1d.data.json"), "--method", "ct",
         "--split-modes", "never", "--chains", "2",
         "--iter-warmup", "300", "--iter-sampling", "300", "--seed", "1", "--budget", "1",
         "--output-dir", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 8, 11), proc.stderr
    stages = [ln for ln in proc.stderr.splitlines() if ln.startswith("[pemc-stan ")]
    assert any("pilot: mode search" in ln for ln in stages), proc.stderr
    assert any("CT round 1 of " in ln and "sampling 2 chains x " in ln for ln in stages), stages
    assert "cmdstanpy" not in proc.stderr and "Chain [1]" not in proc.stderr, proc.stderr


def test_message_shapes_are_stans_messages_without_their_numbers_or_prefixes() -> None:
    from pemc_stan.backend.console import message_shapes

    text = ("Rejecting initial value:\n  Error evaluating the log probability at the initial "
            "value.\nException: normal_lpdf: Scale parameter is -0.25, but must be positive! "
            "(in 'm.stan', line 7, column 2 to column 20)\nIteration: 1 / 2000")
    assert message_shapes(text) == ["normal_lpdf: Scale parameter is #, but must be positive! "
                                     "(in 'm.stan', line #, column # to column #)"]
    assert message_shapes("Chain [1] start processing") == []
