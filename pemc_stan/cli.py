"""The ``pemc-stan`` command line.

Every subcommand returns an :class:`ExitCode`; errors are reported as one line
of cause and one line of remedy, with the Python traceback only under
``--debug``.
"""

from __future__ import annotations

import argparse
import enum
import logging
import sys
from collections.abc import Callable, Sequence

from pemc_stan import __version__, runtime
from pemc_stan.errors import PemcStanError

logger = logging.getLogger(__name__)


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
    INTERRUPTED = 130


def _cmd_runtime(args: argparse.Namespace) -> ExitCode:
    if args.build or args.rebuild:
        path = runtime.build_compatible(force=args.rebuild, show_progress=True)
        print(f"compatible runtime: {path}")
    installation = runtime.resolve(args.cmdstan, build=True, show_progress=True)
    print(f"CmdStan in use: {installation.describe()}")
    print(f"  kind:    {installation.kind}")
    print(f"  version: {installation.version}")
    print(f"  path:    {installation.path}")
    print(f"  stanc:   {installation.stanc}")
    return ExitCode.OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``pemc-stan`` with all subcommands."""
    parser = argparse.ArgumentParser(
        prog="pemc-stan",
        description="Pseudo-extended and continuously tempered MCMC for Stan programs.",
    )
    parser.add_argument("--version", action="version", version=f"pemc-stan {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logging")
    parser.add_argument("--quiet", action="store_true", help="only warnings and errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p_runtime = sub.add_parser(
        "runtime",
        help="show which CmdStan is used; build the compatible runtime",
        description=(
            "Print which CmdStan installation pemc-stan uses (an explicit path, $CMDSTAN, "
            "cmdstanpy's own, or the compatible runtime built from httpstan), its Stan "
            "version and its path."
        ),
    )
    p_runtime.add_argument("--cmdstan", metavar="PATH", help="use this CmdStan installation")
    p_runtime.add_argument(
        "--build", action="store_true", help="build the compatible runtime now if it is not built"
    )
    p_runtime.add_argument(
        "--rebuild", action="store_true", help="rebuild the compatible runtime from scratch"
    )
    p_runtime.set_defaults(handler=_cmd_runtime)
    return parser


def _configure_logging(debug: bool, quiet: bool) -> None:
    level = logging.DEBUG if debug else logging.WARNING if quiet else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    root = logging.getLogger("pemc_stan")
    root.handlers[:] = [handler]
    root.setLevel(level)
    if not debug:
        logging.getLogger("cmdstanpy").setLevel(logging.WARNING)


def _error_code(exc: BaseException) -> ExitCode:
    if isinstance(exc, FileNotFoundError):
        return ExitCode.MISSING_FILE
    if isinstance(exc, (runtime.CmdStanNotFoundError, runtime.RuntimeBuildError)):
        return ExitCode.RUNTIME
    return ExitCode.ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``pemc-stan`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help / usage errors
        return int(exc.code or 0) if exc.code in (0, None) else int(ExitCode.USAGE)
    _configure_logging(args.debug, args.quiet)
    handler: Callable[[argparse.Namespace], ExitCode] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return int(ExitCode.USAGE)
    try:
        return int(handler(args))
    except KeyboardInterrupt:
        print("pemc-stan: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except (PemcStanError, FileNotFoundError, ValueError) as exc:
        if args.debug:
            raise
        message = str(exc).strip() or type(exc).__name__
        print(f"pemc-stan: error: {message}", file=sys.stderr)
        return int(_error_code(exc))
