"""``pemc-stan transform``: print (or write) the transformed program; nothing is compiled."""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

from pemc_stan.cli.errors import ExitCode
from pemc_stan.cli.files import MODEL_HELP, model_and_data, read_model
from pemc_stan.cli.options import add_method_options, method_options
from pemc_stan.errors import CliError, OutputPathError
from pemc_stan.methods import registry
from pemc_stan.output.folder import check_output_file, write_text_atomically

logger = logging.getLogger(__name__)

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Add the ``transform`` subcommand."""
    p = sub.add_parser(
        "transform", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="print the transformed Stan program (no compilation)",
        description=textwrap.fill(
            "Rewrite MODEL.stan into the program of a method (pseudo-extended, continuously "
            "tempered, ...) and print it (readable Stan; nothing is compiled).", 79),
        epilog="example: pemc-stan transform model.stan --method pe --n-pseudo 5 -o model_pe.stan")
    p.add_argument("model", metavar="MODEL.stan", help=MODEL_HELP)
    add_method_options(p, required=True)
    p.add_argument("-o", "--output", metavar="OUT.stan",
                   help="write the program to this file (its missing folders are created) "
                        "instead of standard output; a folder is refused")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> ExitCode:
    """Transform and print or write the program.

    Raises
    ------
    OptionsError, StanProgramError, CliError
        For bad options, programs or files.
    OutputPathError
        If ``-o`` names a folder, or a file that cannot be written (before any work).
    """
    model, _ = model_and_data(args)
    spec = registry.get(args.method)
    out = None
    if args.output:  # before any work: a folder, or the input itself, is refused at once
        out = Path(args.output).expanduser()
        if out.exists() and out.resolve() == model.resolve():
            raise CliError(f"-o {args.output} is the input program {model}: writing there "
                           "would replace the user's model with its transformation",
                           "write the transformed program to another file", ExitCode.USAGE)
        check_output_file(out, example=str(out / f"{model.stem}_{spec.short}.stan"),
                          make_parents=True)
    options = spec.build_options(**method_options(args))  # before the program is read
    code = spec.transform_program(read_model(model), options).stan_code
    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputPathError(f"the folder of {out} cannot be created: {exc.strerror}",
                                  "pass a path in a folder you can write to", out) from None
        write_text_atomically(out, code)
        logger.info("wrote %s", out)
    else:
        sys.stdout.write(code if code.endswith("\n") else code + "\n")
    return ExitCode.OK
