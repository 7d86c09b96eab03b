"""Every exception and warning pemc-stan raises.

Hierarchy::

    PemcStanError                  every error pemc-stan raises on purpose
    ├── StancError                 stanc could not be run or answered nonsense
    ├── StanProgramError           something is wrong with a Stan program
    │   ├── StanSyntaxError        stanc rejected it: syntax (parsing/lexing) error
    │   ├── StanSemanticError      stanc rejected it: semantic (type, scope) error
    │   └── UnsupportedConstructError
    │       │                      stanc accepted it but pemc-stan cannot handle a
    │       │                      construct in it
    │       ├── ReservedPrefixError        an identifier uses the prefix pemc_
    │       ├── UnsupportedBaseError       no CT base density for a parameter
    │       └── UnevaluableExpressionError a size or bound not computable from data
    │   └── ImproperPriorError     evidence of a program with a flat, improper prior
    ├── OptionsError (ValueError)  an invalid option, keyword or argument value
    ├── DataError (ValueError)     data that do not match the data block
    ├── StanCompileError           stanc or the C++ compiler failed
    ├── CmdStanNotFoundError       no CmdStan installation could be found or built
    ├── RuntimeBuildError          building the compatible runtime failed
    ├── CmdStanRunError (RuntimeError)
    │                              CmdStan failed; carries the lines of its console
    │                              that say why
    ├── OutputPathError            an output folder or file that cannot be used
    │   └── OutputFolderBusyError  another run holds the output folder's lock
    └── CliError                   a command-line error with its exit code

    Interrupted (KeyboardInterrupt) the run was stopped by SIGTERM or SIGHUP

    PemcStanWarning (UserWarning)  every warning: settings likely to work badly
                                   (PseudoExtendedWarning, ContinuousTemperingWarning),
                                   fits that look problematic (*DiagnosticWarning),
                                   disagreeing evidence estimates

A :class:`StanProgramError` knows where the problem is (``filename``, ``line``
1-based, ``column`` 0-based as stanc counts columns) and carries ``message``;
for errors reported by stanc, ``message`` is stanc's own report, verbatim.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import warnings
from pathlib import Path

logger = logging.getLogger(__name__)

_PACKAGE = str(Path(__file__).resolve().parent) + os.sep


class PemcStanError(Exception):
    """Base class of every error pemc-stan raises on purpose."""


class StancError(PemcStanError):
    """stanc failed for a reason other than an error in the program.

    For example it could not be started, crashed, or reported an error in a
    format pemc-stan does not recognise (the output is in the message).
    """


class StanProgramError(PemcStanError):
    """An error in a Stan program, located in its source.

    Attributes
    ----------
    filename
        Name of the program as used in messages.
    line
        1-based line of the error (0 when unknown).
    column
        0-based column of the error, as stanc reports it (0 when unknown).
    message
        The full report; for errors found by stanc, stanc's message verbatim.
    """

    def __init__(self, message: str, filename: str = "<string>", line: int = 0, column: int = 0):
        super().__init__(message)
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column

    def __str__(self) -> str:
        return self.message


class StanSyntaxError(StanProgramError):
    """stanc (or pemc-stan's parser, when stanc was not consulted) found a syntax error."""


class StanSemanticError(StanProgramError):
    """stanc found a semantic error (types, scopes, signatures, ...)."""


class UnsupportedConstructError(StanProgramError):
    """The program is valid Stan but uses a construct pemc-stan cannot handle.

    Attributes
    ----------
    construct
        Short description of the construct (e.g. ``"#include"`` or the
        unexpected token).
    """

    def __init__(
        self,
        message: str,
        filename: str = "<string>",
        line: int = 0,
        column: int = 0,
        construct: str = "",
    ):
        super().__init__(message, filename, line, column)
        self.construct = construct


class ImproperPriorError(StanProgramError):
    """The evidence of a program whose prior is improper (a parameter with none) is undefined.

    Attributes
    ----------
    parameters
        The parameters without a prior.
    """

    def __init__(self, message: str, parameters: tuple[str, ...], filename: str = "<string>",
                 line: int = 0) -> None:
        super().__init__(message, filename, line)
        self.parameters = parameters


class OptionsError(PemcStanError, ValueError):
    """An invalid option, keyword or argument value (raised before anything is compiled).

    Attributes
    ----------
    argument
        The option's name (``"n_pseudo"``, ``"chains"``, ...).
    value
        The value given.
    expected
        What was expected, in words.
    """

    def __init__(self, argument: str, value: object, expected: str, *,
                 message: str | None = None) -> None:
        self.argument = argument
        self.value = value
        self.expected = expected
        super().__init__(message or f"{argument}={value!r} is invalid; expected {expected}")


class DataError(PemcStanError, ValueError):
    """The data do not match the program's data block, or cannot be read.

    Attributes
    ----------
    variable
        The data variable concerned ("" when the whole file is unreadable).
    remedy
        What to do, one line.
    """

    def __init__(self, message: str, remedy: str, variable: str = "") -> None:
        super().__init__(message)
        self.remedy = remedy
        self.variable = variable


class ReservedPrefixError(UnsupportedConstructError):
    """An identifier of the user's program starts with the reserved prefix ``pemc_``."""


class StanCompileError(PemcStanError):
    """stanc or the C++ compiler rejected a program.

    Attributes
    ----------
    stan_file
        The file that was compiled.
    console
        The command and everything stanc / the compiler printed.
    """

    def __init__(self, message: str, stan_file: Path, console: str):
        super().__init__(message)
        self.stan_file = stan_file
        self.console = console


class CmdStanNotFoundError(PemcStanError):
    """No usable CmdStan installation and none could be built."""


class RuntimeBuildError(PemcStanError):
    """Building the CmdStan-compatible installation failed.

    Attributes
    ----------
    command
        The command that failed.
    output
        What it printed (stdout and stderr).
    log_file
        Where the full build log was saved.
    """

    def __init__(self, message: str, command: list[str], output: str, log_file: Path | None):
        super().__init__(message)
        self.command = command
        self.output = output
        self.log_file = log_file


class UnsupportedBaseError(UnsupportedConstructError):
    """A parameter type or bound the continuous-tempering base density cannot handle."""


class UnevaluableExpressionError(UnsupportedConstructError):
    """An expression that cannot be computed from the data alone.

    Attributes
    ----------
    missing
        The name of a variable that is not in the data ("" for other reasons).
    reason
        Why, in a few words (``"'K' is not in the data"``).
    """

    def __init__(self, message: str, line: int = 0, column: int = 0, construct: str = "",
                 missing: str = "", reason: str = "") -> None:
        super().__init__(message, line=line, column=column, construct=construct)
        self.missing = missing
        self.reason = reason


class PemcStanWarning(UserWarning):
    """Base class of every warning pemc-stan issues."""


class FitSuspectWarning(PemcStanWarning):
    """A fit's verdict is suspect: its estimates may be wrong (the reasons are in the message)."""


class PriorNormalisationWarning(PemcStanWarning):
    """The prior as written does not integrate to one on the support: log Z is of the model
    as written, off the evidence with the normalised prior by the stated amount."""


class PseudoExtendedWarning(PemcStanWarning):
    """A pseudo-extended setting that is likely to work badly."""


class PseudoExtendedDiagnosticWarning(PemcStanWarning):
    """The pseudo-extended weights or temperatures look problematic."""


class ContinuousTemperingDiagnosticWarning(PemcStanWarning):
    """The continuous-tempering run looks problematic."""


class ContinuousTemperingWarning(PemcStanWarning):
    """A continuous-tempering setting that is likely to work badly."""


class EvidenceDisagreementWarning(PemcStanWarning):
    """Two evidence estimates differ by more than their standard errors allow."""


class CliError(PemcStanError):
    """An error the command line reports as cause + remedy with a given exit code.

    Attributes
    ----------
    cause, remedy
        One line each.
    code
        The exit code (a :class:`pemc_stan.cli.ExitCode`).
    """

    def __init__(self, cause: str, remedy: str, code: int) -> None:
        super().__init__(cause)
        self.cause = cause
        self.remedy = remedy
        self.code = code


class CmdStanRunError(PemcStanError, RuntimeError):
    """CmdStan (sampling, Pathfinder, generated quantities) exited with an error.

    Attributes
    ----------
    reason
        The lines of CmdStan's console output that say what went wrong
        (repeated lines collapsed with a count); never empty.
    console
        The console file the lines were read from, if known.
    """

    def __init__(self, message: str, reason: str, console: Path | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.console = console


class UnevaluableDensityError(CmdStanRunError):
    """The model's log density fails (an exception, a NaN) wherever CmdStan starts, so
    no approximation of the posterior -- and no sampler -- can run.

    Attributes
    ----------
    remedy
        What to do, one line.
    data_problem
        Whether a NaN or infinite value in the data is the likely cause.
    """

    def __init__(self, message: str, reason: str, remedy: str,
                 data_problem: bool = False) -> None:
        super().__init__(message, reason)
        self.remedy = remedy
        self.data_problem = data_problem


class OutputPathError(PemcStanError):
    """An output folder or file cannot be used: what is wrong with the path, and what to do.

    Attributes
    ----------
    path
        The path concerned.
    remedy
        What to do, one line.
    """

    def __init__(self, message: str, remedy: str, path: Path) -> None:
        super().__init__(message)
        self.remedy = remedy
        self.path = path


class OutputFolderBusyError(OutputPathError):
    """Another pemc-stan run is writing into the output folder (it holds the folder's lock)."""


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal other than SIGINT (SIGTERM, SIGHUP).

    A subclass of ``KeyboardInterrupt``, so that it is handled as Ctrl-C is:
    child processes ended, temporary folders removed, partial output kept.

    Attributes
    ----------
    signum
        The signal's number; the command line exits with ``128 + signum``.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def emit_warning(message: str, category: type[Warning], stacklevel: int = 2) -> None:
    """Warn on one channel: ``warnings.warn`` (what a Python user sees, and what the
    warnings filter governs), pointing at the first caller outside pemc-stan (at least
    ``stacklevel`` frames up, as for ``warnings.warn``); the text is also logged, at
    DEBUG: a log record at WARNING would print the message a second time where logging
    is not configured, and would show it where the warnings filter hides it.

    Raises
    ------
    Nothing (unless the warnings filter turns warnings into errors).
    """
    level, frame = 2, sys._getframe(1)
    while frame.f_back is not None and (level < stacklevel + 1
                                        or frame.f_code.co_filename.startswith(_PACKAGE)):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
    logger.debug("warned: %s", message)
