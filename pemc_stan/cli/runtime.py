"""``pemc-stan runtime``: which CmdStan is used; build the compatible runtime."""

from __future__ import annotations

import argparse
from typing import Any

from pemc_stan.backend import runtime
from pemc_stan.cli.errors import ExitCode

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Add the ``runtime`` subcommand."""
    p = sub.add_parser(
        "runtime",
        help="show which CmdStan is used; build the compatible runtime",
        description=(
            "Print which CmdStan installation pemc-stan uses (an explicit path, $CMDSTAN, "
            "cmdstanpy's own, or the compatible runtime built from httpstan), its Stan "
            "version and its path."
        ),
    )
    p.add_argument("--cmdstan", metavar="PATH", help="use this CmdStan installation")
    p.add_argument("--build", action="store_true",
                   help="build the compatible runtime now if it is not built")
    p.add_argument("--rebuild", action="store_true",
                   help="rebuild the compatible runtime from scratch")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> ExitCode:
    """Build (if asked) and describe the CmdStan installation in use.

    Raises
    ------
    CmdStanNotFoundError, RuntimeBuildError
        When no installation can be found or built.
    """
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
