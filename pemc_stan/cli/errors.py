"""Exit codes, and every error turned into one line of cause and one of remedy."""

from __future__ import annotations

import enum
import re
from pathlib import Path

from pemc_stan.backend.console import is_cmdstan_failure, run_error
from pemc_stan.errors import (
    CliError,
    CmdStanNotFoundError,
    CmdStanRunError,
    DataError,
    OptionsError,
    OutputPathError,
    PemcStanError,
    ReservedPrefixError,
    RuntimeBuildError,
    StanCompileError,
    StanProgramError,
    StanSemanticError,
    StanSyntaxError,
    UnevaluableDensityError,
    UnsupportedConstructError,
)

__all__ = ["ExitCode", "describe_error", "cmdstan_error"]


class ExitCode(enum.IntEnum):
    """Process exit codes of ``pemc-stan``."""

    OK = 0
    ERROR = 1
    USAGE = 2
    MISSING_FILE = 3
    STAN_PROGRAM = 4
    DATA = 5
    UNSUPPORTED = 6
    RUNTIME = 7
    SUSPECT = 8
    OUTPUT = 9
    BATCH_FAILED = 10
    SUSPECT_FINAL = 11
    INTERRUPTED = 130


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _stanc_reason(message: str) -> str:
    """The explanation stanc gives after its code excerpt, on one line."""
    parts = [p for p in re.split(r"\n\s*-{5,}\s*\n", message) if p.strip()]
    tail = parts[-1] if len(parts) > 1 else message.splitlines()[-1]
    return _one_line(tail)


def cmdstan_error(exc: RuntimeError, data_path: Path | None) -> CliError | RuntimeError:
    """Map a cmdstanpy failure to a data error when CmdStan rejected the data.

    Raises
    ------
    Nothing (returns ``exc`` itself when it is not about the data).
    """
    if isinstance(exc, UnevaluableDensityError):
        return CliError(_one_line(str(exc)), exc.remedy,
                        ExitCode.DATA if exc.data_problem else ExitCode.RUNTIME)
    text = str(exc.reason) if isinstance(exc, CmdStanRunError) else str(exc)
    data_words = ("data initialization", "Error in data or transformed data",
                  "variable does not exist", "mismatch in dimension",
                  "mismatch in number", "variable name=", "but must be", "must be in the")
    if not any(w in text for w in data_words):
        return exc
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    detail = next((ln for ln in lines if ln.startswith("Exception")),
                  next((ln for ln in lines if "variable" in ln or "must be" in ln), lines[0]))
    detail = re.sub(r"^(Error|Exception):\s*", "", detail)
    detail = re.sub(r"^[\w:]*_model(_namespace)?::[\w]+:\s*", "", detail)  # C++ scope
    detail = re.sub(r"\s*\(in '[^']*', line \d+.*\)\s*$", "", detail)  # generated file
    where = data_path.name if data_path is not None else "the data"
    return CliError(f"CmdStan rejected {where}: {_one_line(detail)}",
                    f"fix the value in {where} so it satisfies the data block's declaration "
                    "(sizes and bounds)", ExitCode.DATA)


def describe_error(exc: BaseException) -> tuple[str, str, ExitCode]:
    """One line of cause, one line of remedy and the exit code for an exception.

    Raises
    ------
    Nothing.
    """
    if isinstance(exc, CliError):
        return exc.cause, exc.remedy, ExitCode(exc.code)
    if isinstance(exc, DataError):
        return _one_line(str(exc)), exc.remedy, ExitCode.DATA
    if isinstance(exc, FileNotFoundError):
        name = exc.filename or str(exc)
        return (f"file not found: {name}",
                f"check the path (relative paths start at {Path.cwd()})", ExitCode.MISSING_FILE)
    if isinstance(exc, OutputPathError):
        return _one_line(str(exc)), exc.remedy, ExitCode.OUTPUT
    if isinstance(exc, CmdStanRunError) or is_cmdstan_failure(exc):
        failure = run_error(exc)  # type: ignore[arg-type]
        where = (f"; CmdStan's output is in {failure.console}" if failure.console is not None
                 else "")
        return (f"CmdStan failed: {'; '.join(failure.reason.splitlines())}",
                f"rerun with --debug to see CmdStan's full output{where}", ExitCode.RUNTIME)
    if isinstance(exc, (StanSyntaxError, StanSemanticError)):
        kind = "syntax" if isinstance(exc, StanSyntaxError) else "semantic"
        return (f"Stan {kind} error in {exc.filename}, line {exc.line}, column {exc.column}: "
                f"{_stanc_reason(exc.message)}",
                f"fix {exc.filename} at line {exc.line}, column {exc.column} (--debug shows "
                "stanc's full report)", ExitCode.STAN_PROGRAM)
    if isinstance(exc, UnsupportedConstructError):
        first = _one_line(exc.message.splitlines()[0]) if exc.message else type(exc).__name__
        if isinstance(exc, ReservedPrefixError):
            remedy = "rename the identifiers that start with 'pemc_' (the prefix is reserved)"
        else:
            remedy = ("rewrite that construct in plain Stan, or sample this model with "
                      "cmdstanpy directly")
        return f"unsupported construct: {first}", remedy, ExitCode.UNSUPPORTED
    if isinstance(exc, StanProgramError):
        return (_one_line(str(exc)), "fix the Stan program (--debug shows the details)",
                ExitCode.STAN_PROGRAM)
    if isinstance(exc, StanCompileError):
        console = [ln.strip() for ln in exc.console.splitlines() if ln.strip()]
        last = next((ln for ln in reversed(console) if "rror" in ln), console[-1] if console
                    else "")
        return (f"compiling {exc.stan_file.name} failed: {_one_line(last)}",
                "rerun with --debug to see the compiler output; check that g++ and make work",
                ExitCode.STAN_PROGRAM)
    if isinstance(exc, (CmdStanNotFoundError, RuntimeBuildError)):
        text = _one_line(str(exc))
        cause, sep, remedy = text.partition("; ")
        if not sep:
            remedy = "run 'pemc-stan runtime --build', or set CMDSTAN to a CmdStan installation"
        return cause, remedy, ExitCode.RUNTIME
    if isinstance(exc, NotImplementedError):
        text = _one_line(str(exc))
        cause, sep, remedy = text.partition("; ")
        return cause, remedy if sep else "use --method pseudo-extended", ExitCode.UNSUPPORTED
    if isinstance(exc, (OptionsError, ValueError)):
        text = _one_line(str(exc))
        return text, "see 'pemc-stan COMMAND --help' for the accepted values", ExitCode.USAGE
    if isinstance(exc, PemcStanError):
        return _one_line(str(exc)), "rerun with --debug for details", ExitCode.ERROR
    return (f"{type(exc).__name__}: {_one_line(str(exc))}",
            "rerun with --debug for the traceback and report it if it looks like a bug",
            ExitCode.ERROR)
