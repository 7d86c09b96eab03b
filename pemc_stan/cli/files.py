"""The model and data files of a command: paths, or bundled examples, read and checked."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pemc_stan.cli.errors import ExitCode
from pemc_stan.errors import CliError, DataError
from pemc_stan.stan.examples import example, is_example
from pemc_stan.stan.inputs import StanProgram, read_program
from pemc_stan.stan.inputs import read_data as read_inputs_data

__all__ = ["MODEL_HELP", "model_and_data", "existing_file", "read_model", "read_data"]

MODEL_HELP = ("the Stan program, or a bundled example: example:NAME (its data is used "
              "unless --data is given; example:NAME/DATA picks one of its data files), e.g. "
              "example:bimodal_1d")


def existing_file(path: str, what: str) -> Path:
    """``path`` as a Path, if it is an existing file.

    Raises
    ------
    CliError
        With :attr:`ExitCode.MISSING_FILE` otherwise.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        where = "is a directory" if p.is_dir() else "does not exist"
        raise CliError(f"{what} {path} {where}",
                       f"check the path (relative paths start at {Path.cwd()})",
                       ExitCode.MISSING_FILE)
    return p


def model_and_data(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """The Stan file and data file of a command: paths, or ``example:NAME[/DATA]``.

    Raises
    ------
    CliError
        With :attr:`ExitCode.MISSING_FILE` for a missing file or an unknown example.
    """
    data_arg = getattr(args, "data", None)
    if is_example(args.model):
        try:
            stan, default_data = example(args.model)
        except (KeyError, FileNotFoundError) as exc:
            raise CliError(str(exc.args[0]), "pass one of the example names listed, or a "
                           ".stan file", ExitCode.MISSING_FILE) from None
        data = existing_file(data_arg, "data file") if data_arg else default_data
        return stan, data
    model = existing_file(args.model, "Stan file")
    return model, (existing_file(data_arg, "data file") if data_arg else None)


def read_model(path: Path) -> StanProgram:
    """Read and parse the model once (stanc's errors name the file, line and column).

    Raises
    ------
    StanProgramError
        For an invalid program.
    """
    return read_program(path)


def read_data(program: StanProgram, model: Path, data_path: Path | None) -> dict[str, Any]:
    """Read ``--data`` (if given) and check it against the data block.

    Raises
    ------
    DataError
        For unreadable or mismatching data, or data the program needs but no
        ``--data`` was given.
    """
    if data_path is None:
        needed = [n for s in (program.tree.data.stmts if program.tree.data else ())
                  for n in getattr(s, "names", ())]
        if needed:
            shown = ", ".join(needed[:6]) + (", ..." if len(needed) > 6 else "")
            raise DataError(f"{model.name} declares data ({shown}) but no data file was given",
                            "pass --data DATA.json with a value for each data variable")
        return {}
    return read_inputs_data(program, data_path)
