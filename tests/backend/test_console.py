"""CmdStan's reasons found in cmdstanpy's errors and console files; repeats collapsed; cmdstanpy's
records routed to pemc-stan's logger, told in the user's lines."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from pemc_stan.backend.console import (
    CMDSTANPY_LOGGER,
    collapse_cmdstanpy_messages,
    collapse_repeats,
    condense,
    console_error,
    failure_reason,
    is_cmdstan_failure,
    rewriting_messages,
    routed_cmdstanpy_logging,
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


def test_a_run_without_cmdstanpy_reads_its_reason_from_its_console(tmp_path: Path) -> None:
    console = tmp_path / "generated.txt"
    console.write_text("method = generate_quantities\n  fitted_params = d.csv\n"
                       "Error reading fitted param names from sample csv file d.csv\n")
    failure = console_error("evaluating g", console, 70)
    assert failure.reason == "Error reading fitted param names from sample csv file d.csv"
    assert str(failure).startswith("evaluating g failed: Error reading fitted param names")
    assert failure.console == console
    quiet = console_error("evaluating g", tmp_path / "missing.txt", 70)
    assert quiet.reason == "CmdStan exited with return code 70"


def test_repeated_lines_are_collapsed_with_a_count() -> None:
    lines = ["Informational Message: rejected"] * 400 + ["Exception: normal_lpdf: nan"]
    assert collapse_repeats(lines) == ["Informational Message: rejected [repeated 400 times]",
                                       "Exception: normal_lpdf: nan"]


def test_cmdstanpy_warnings_are_collapsed(caplog: object) -> None:
    import cmdstanpy.utils

    collapse_cmdstanpy_messages()
    collapse_cmdstanpy_messages()  # idempotent
    with _records(cmdstanpy.utils.get_logger()) as records:
        cmdstanpy.utils.get_logger().warning("Non-fatal error during sampling:\n%s",
                                             "\n".join(["same line"] * 400))
    assert records == ["Non-fatal error during sampling:\nsame line [repeated 400 times]"]


@contextlib.contextmanager
def _records(log: logging.Logger) -> Iterator[list[str]]:
    """The messages ``log`` passes to its handlers within the block."""
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Keep()
    log.addHandler(handler)
    try:
        yield records
    finally:
        log.removeHandler(handler)


def test_cmdstanpys_error_line_for_an_interrupted_chain_is_left_out() -> None:
    """Ctrl-C ends the chains with SIGINT; cmdstanpy then logs "error: code '-2' Unknown
    error -2", which pemc-stan's own one line replaces. Other exit codes are kept."""
    import cmdstanpy.utils

    collapse_cmdstanpy_messages()
    log = cmdstanpy.utils.get_logger()
    with _records(log) as records:
        for code in (-2, -15, -1, -9, 70):
            log.error("%s error: code '%d' %s", "CmdStan", code, "x")
    assert records == ["CmdStan error: code '-9' x", "CmdStan error: code '70' x"]


def test_a_console_path_with_spaces(tmp_path: Path) -> None:
    console = tmp_path / "my runs" / "m-stdout.txt"
    console.parent.mkdir()
    console.write_text("Iteration: 1\nRejecting initial value: log density is nan\n")
    failure = run_error(RuntimeError(_cmdstanpy_message("", console)))
    assert failure.console == console
    assert failure.reason == "Rejecting initial value: log density is nan"


def test_alike_lines_are_condensed_with_a_count() -> None:
    lines = ["Exception: x is too large: 1.52 (in 'm.stan', line 7, column 4 to column 9)",
             "Exception: x is too large: 2.07 (in 'm.stan', line 7, column 4 to column 9)",
             "Exception: scale is nan", "Exception: scale is nan"]
    assert condense(lines) == [
        "Exception: x is too large: 1.52 (in 'm.stan', line 7, column 4 to column 9) "
        "[and 1 alike]", "Exception: scale is nan [repeated 2 times]"]


def test_the_reason_is_told_through_the_rewrite(tmp_path: Path) -> None:
    exc = RuntimeError(_cmdstanpy_message(
        "Exception: bad (in 'm_ct.stan', line 9, column 2 to column 5)", tmp_path / "c.txt"))
    failure = run_error(exc, "sampling", lambda text: text.replace("'m_ct.stan'", "'m.stan'"))
    assert failure.reason == "Exception: bad (in 'm.stan', line 9, column 2 to column 5)"
    assert "m_ct.stan" not in str(failure)
    with rewriting_messages(lambda text: text.replace("bad", "told")):
        assert run_error(failure).reason.startswith("Exception: told")  # a new error
        assert run_error(exc).reason.startswith("Exception: told")
    assert run_error(failure) is failure  # nothing to rewrite: the error itself


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_cmdstanpy_records_go_to_the_library_logger_and_its_setup_comes_back(
        caplog: pytest.LogCaptureFixture) -> None:
    """Within the block cmdstanpy's chatter is DEBUG logging of pemc-stan; CmdStan's
    non-fatal messages are one warning per kind, in the user's lines; afterwards the
    user's own handler, level and propagation are as they were."""
    import cmdstanpy.utils

    log = cmdstanpy.utils.get_logger()
    mine = _Keep()
    log.addHandler(mine)
    before = (list(log.handlers), log.level, log.propagate)
    log.setLevel(logging.INFO)
    log.propagate = True
    caplog.set_level(logging.DEBUG, logger="pemc_stan")
    nonfatal = ("Non-fatal error during sampling:\n"
                "Exception: x is too large: 1.6 (in 'm_ct.stan', line 15, column 4 to "
                "column 9)\n\tException: x is too large: 2.5 (in 'm_ct.stan', line 15, "
                "column 4 to column 9)\n"
                "Consider re-running with show_console=True if the above output is unclear!")
    try:
        with routed_cmdstanpy_logging(), rewriting_messages(
                lambda t: t.replace("(in 'm_ct.stan', line 15, column 4 to column 9)",
                                    "(in your m.stan, line 7; generated program line 15)")):
            with routed_cmdstanpy_logging():  # nested: one routing
                log.info("Chain [1] start processing")
            log.warning(nonfatal)
            log.warning(nonfatal.replace("2.5", "3.5"))  # the same kinds again
            log.warning("Some chains may have failed to converge.")
        assert (list(log.handlers), log.propagate) == ([*before[0]], True)
        assert log.level == logging.INFO
        log.info("after the block")
    finally:
        log.removeHandler(mine)
        log.setLevel(before[1])
        log.propagate = before[2]
    assert mine.messages == ["after the block"]
    routed = [(r.levelno, r.getMessage()) for r in caplog.records
              if r.name == CMDSTANPY_LOGGER]
    assert routed[0] == (logging.DEBUG, "Chain [1] start processing")
    assert routed[1][1].startswith("Stan rejected some proposals during sampling: ")
    assert "Non-fatal" not in routed[1][1]  # cmdstanpy's words, not pemc-stan's
    assert routed[1] == (logging.WARNING, routed[1][1].split("\n")[0] + "\n  Exception: x is "
                         "too large: 1.6 (in your m.stan, line 7; generated program line 15) "
                         "[and 1 alike]")
    assert [level for level, _ in routed[2:]] == [logging.DEBUG, logging.DEBUG]


@pytest.mark.compiled
def test_sampling_prints_nothing_but_warnings(cmdstan_installation: object,
                                              capfd: pytest.CaptureFixture[str]) -> None:
    """cmdstanpy's INFO chatter (about 50 lines for this call) is debug logging of pemc-stan,
    which has no handlers: nothing is printed."""
    import pemc_stan

    models = Path(__file__).resolve().parents[2] / "models" / "bimodal_1d"
    pemc_stan.sample(models / "bimodal_1d.stan", data=models / "bimodal_1d.data.json",
                     method="ct", chains=4, seed=1)
    out, err = capfd.readouterr()
    assert "INFO" not in out + err, out + err
    assert "cmdstanpy" not in out + err, out + err


def test_stans_repeated_exception_prefix_is_said_once() -> None:
    from pemc_stan.backend.console import rewrite_message

    text = "Exception: Exception: normal_lpdf: Scale parameter is 0, but must be positive!"
    assert rewrite_message(text) == "Exception: normal_lpdf: Scale parameter is 0, but must be " \
        "positive!"


def test_a_logged_failure_is_cmdstans_reason_in_one_line_never_the_command(
        tmp_path: Path) -> None:
    exc = RuntimeError(_cmdstanpy_message(
        "Error in 'model.stan', line 3: log_prob is nan\nfurther detail", tmp_path / "c.txt"))
    said = failure_reason(exc)
    assert "log_prob is nan" in said and "\n" not in said
    assert "cmd (chain" not in said and "method=sample" not in said and "RunSet" not in said
    assert len(failure_reason(exc, 20)) == 20
    assert failure_reason(ValueError("  two\nlines ")) == "two lines"
    assert failure_reason(ValueError()) == "ValueError"


def test_a_message_told_in_stans_words_then_in_the_users_lines_is_said_once(
        caplog: pytest.LogCaptureFixture) -> None:
    """#76 'each Stan message once': the split runs the user's own program (Stan's
    "(in 'm.stan', line 9, column 2 to column 29)"), the tempered run the generated one,
    whose message the rewrite tells in the user's lines ("(in your m.stan, line 9;
    generated program line 98)"): the same message, said once."""
    import cmdstanpy.utils

    log = cmdstanpy.utils.get_logger()
    caplog.set_level(logging.DEBUG, logger="pemc_stan")
    stan = ("Non-fatal error during sampling:\nException: lub_constrain: lb is 2, but must "
            "be less than 2.000000 (in 'm.stan', line 9, column 2 to column 29)\n")
    told = ("Non-fatal error during sampling:\nException: lub_constrain: lb is 2, but must "
            "be less than 2.000000 (in your m.stan, line 9; generated program line 98)\n")
    other = ("Non-fatal error during sampling:\nException: normal_lpdf: Scale parameter is "
             "0, but must be positive! (in your m.stan, line 24; generated program line 20)\n")
    with routed_cmdstanpy_logging():
        for message in (stan, told, other):
            log.warning(message)
    said = [r.getMessage() for r in caplog.records
            if r.name == CMDSTANPY_LOGGER and r.levelno == logging.WARNING]
    assert len(said) == 2 and "lub_constrain" in said[0] and "normal_lpdf" in said[1], said
    assert sum(m.count("lub_constrain") for m in said) == 1
