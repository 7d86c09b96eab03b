"""CmdStan's reasons found in cmdstanpy's errors and console files; repeats collapsed."""

from __future__ import annotations

import logging
from pathlib import Path

from pemc_stan.backend.console import (
    collapse_cmdstanpy_messages,
    collapse_repeats,
    is_cmdstan_failure,
    run_error,
)
from pemc_stan.errors import CmdStanRunError


def _cmdstanpy_message(errors: str, console: Path) -> str:
    return (f"Error during sampling:\n{errors}\nCommand and output files:\n"
            "RunSet: chains=1, chain_ids=[1], num_processes=1\n cmd (chain 1):\n\t['m', "
            "'method=sample']\n retcodes=[1]\n per-chain output files (showing chain 1 "
            f"only):\n csv_file:\n\t/tmp/m.csv\n console_msgs (if any):\n\t{console}\n"
            "Consider re-running with show_console=True if the above output is unclear!")


def test_the_reason_in_the_message_is_kept(tmp_path: Path) -> None:
    console = tmp_path / "m-stdout.txt"
    exc = RuntimeError(_cmdstanpy_message(
        "Error reading data file: Variable: mu1, error: string values not allowed.", console))
    assert is_cmdstan_failure(exc)
    failure = run_error(exc, "sampling")
    assert isinstance(failure, CmdStanRunError) and isinstance(failure, RuntimeError)
    assert failure.reason == ("Error reading data file: Variable: mu1, error: string values "
                              "not allowed.")
    assert failure.console == console
    assert str(failure).startswith("sampling failed: Error reading data file")


def test_an_empty_cause_is_read_from_the_console_file(tmp_path: Path) -> None:
    console = tmp_path / "m-stdout.txt"
    console.write_text("method = sample (Default)\n  num_samples = 1000 (Default)\n"
                       "Iteration:    1 / 2000 [  0%]  (Warmup)\n"
                       "Unrecoverable error evaluating the log probability at the initial "
                       "value.\np is not a valid simplex. sum(p) = 1.1, but should be 1\n")
    failure = run_error(RuntimeError(_cmdstanpy_message("", console)))
    assert failure.reason.splitlines() == [
        "Unrecoverable error evaluating the log probability at the initial value.",
        "p is not a valid simplex. sum(p) = 1.1, but should be 1"]


def test_without_any_reason_the_return_code_is_named(tmp_path: Path) -> None:
    failure = run_error(RuntimeError(_cmdstanpy_message("", tmp_path / "missing.txt")))
    assert failure.reason == "CmdStan exited with return code(s) 1"
    assert not is_cmdstan_failure(RuntimeError("3 row(s) of log-weights are all -inf"))


def test_repeated_lines_are_collapsed_with_a_count() -> None:
    lines = ["Informational Message: rejected"] * 400 + ["Exception: normal_lpdf: nan"]
    assert collapse_repeats(lines) == ["Informational Message: rejected [repeated 400 times]",
                                       "Exception: normal_lpdf: nan"]


def test_cmdstanpy_warnings_are_collapsed(caplog: object) -> None:
    import cmdstanpy.utils

    collapse_cmdstanpy_messages()
    collapse_cmdstanpy_messages()  # idempotent
    log = cmdstanpy.utils.get_logger()
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Keep()
    log.addHandler(handler)
    try:
        log.warning("Non-fatal error during sampling:\n%s", "\n".join(["same line"] * 400))
    finally:
        log.removeHandler(handler)
    assert records == ["Non-fatal error during sampling:\nsame line [repeated 400 times]"]


def test_a_console_path_with_spaces(tmp_path: Path) -> None:
    console = tmp_path / "my runs" / "m-stdout.txt"
    console.parent.mkdir()
    console.write_text("Iteration: 1\nRejecting initial value: log density is nan\n")
    failure = run_error(RuntimeError(_cmdstanpy_message("", console)))
    assert failure.console == console
    assert failure.reason == "Rejecting initial value: log density is nan"
