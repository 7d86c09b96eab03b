"""The ``pemc-stan`` command line.

Subcommands, one module each: ``transform`` (print the transformed program),
``sample`` (run a method and write its results), ``report`` (rebuild a run's
pictures and report.html), ``evidence`` (estimate log Z)
and ``runtime``.  Method flags are derived from the registered methods'
options (:mod:`pemc_stan.cli.options`).  Every subcommand returns an
:class:`~pemc_stan.cli.errors.ExitCode`; errors are reported as one line of
cause and one line of remedy::

    pemc-stan: error: <what went wrong>
    pemc-stan: remedy: <what to do>

with the Python traceback only under ``--debug``; a usage error also prints the
subcommand's usage line, and names the nearest flag to an unknown one
(:mod:`pemc_stan.cli.parsing`, which also accepts cmdstanpy's ``--iter_sampling``).
Only the command line configures logging.  An interrupted command (SIGINT, SIGTERM, SIGHUP) ends the
CmdStan, make and compiler processes it started, removes its temporary
folders, keeps partial output (named in the message) and exits with 130
(SIGINT) or 128 + the signal's number.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from pemc_stan._version import __version__
from pemc_stan.backend.processes import adopt_orphans, ending_children
from pemc_stan.cli import batch, evidence, report, runtime, sample, transform
from pemc_stan.cli.console import cli_words, configure_logging, use_flags
from pemc_stan.cli.errors import ExitCode, describe_error
from pemc_stan.cli.parsing import CommandParser, all_option_strings, parse
from pemc_stan.errors import CliError, Interrupted

__all__ = ["main", "build_parser", "ExitCode", "describe_error"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``pemc-stan`` with all subcommands (built per call, so that
    methods registered at run time get their flags).

    Raises
    ------
    Nothing.
    """
    parser = CommandParser(
        prog="pemc-stan",
        description="Pseudo-extended and continuously tempered MCMC for Stan programs.",
    )
    parser.add_argument("--version", action="version", version=f"pemc-stan {__version__}")
    _add_verbosity(parser, False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in (transform, sample, report, evidence, batch, runtime):
        command.add_parser(sub)
    for p in sub.choices.values():  # the same flags after the subcommand
        _add_verbosity(p, argparse.SUPPRESS)
    return parser


def _add_verbosity(p: argparse.ArgumentParser, default: object) -> None:
    """``--debug``, ``--quiet`` and ``--verbose``; after the subcommand their default is
    SUPPRESS, so that a flag given before it is not reset."""
    p.add_argument("--debug", action="store_true", default=default,
                   help="show tracebacks and debug logging")
    p.add_argument("--quiet", action="store_true", default=default,
                   help="only warnings and errors")
    p.add_argument("--verbose", action="store_true", default=default,
                   help="also the progress of every step (debug logging, exit codes unchanged)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``pemc-stan`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    Raises
    ------
    Nothing without ``--debug`` (errors become exit codes); with ``--debug``
    the original exception propagates.
    """
    parser = build_parser()
    try:
        args = parse(parser, argv)
    except SystemExit as exc:  # argparse exits on --help / usage errors
        return int(exc.code or 0) if exc.code in (0, None) else int(ExitCode.USAGE)
    except CliError as exc:  # a value checked as it is parsed (--method): before any work
        print(f"pemc-stan: error: {exc.cause}", file=sys.stderr)
        print(f"pemc-stan: remedy: {exc.remedy}", file=sys.stderr)
        return int(exc.code)
    configure_logging(args.debug or args.verbose, args.quiet)
    use_flags(all_option_strings(parser))
    handler: Callable[[argparse.Namespace], ExitCode] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return int(ExitCode.USAGE)
    adopt_orphans()  # a killed make's compiler jobs stay ours, to be ended
    try:
        with ending_children():
            return int(handler(args))
    except KeyboardInterrupt as exc:  # SIGINT; Interrupted for SIGTERM and SIGHUP
        partial = getattr(exc, "partial", None)
        detail = f": partial output in {partial}" if partial and os.path.isdir(partial) else ""
        print(f"pemc-stan: interrupted{detail}", file=sys.stderr)
        if isinstance(exc, Interrupted):
            return 128 + exc.signum
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:
        if args.debug:
            raise
        cause, remedy, code = describe_error(exc)
        print(f"pemc-stan: error: {cli_words(cause)}", file=sys.stderr)
        print(f"pemc-stan: remedy: {cli_words(remedy)}", file=sys.stderr)
        return int(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
