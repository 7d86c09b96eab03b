"""Constrained draws through CmdStan's standalone ``generate_quantities``.

Draws given as arrays (not a CmdStan run's output) are written as the Stan CSV of a
fixed-parameter run (:func:`write_draws_csv`), which CmdStan's standalone
``generate_quantities`` reads as a previous fit.  :func:`generated_column` runs the
executable itself and reads back the one column it needs (through cmdstanpy, both CSV
files would also be parsed whole in Python).  The density programs of the mode split and
a marginalised parameter's draws
(:meth:`pemc_stan.sampling.fit.ExtendedFit.particles`) use them.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cmdstanpy
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from pemc_stan.backend.console import console_error

__all__ = ["generated_at", "generated_column", "stan_to_dotted", "write_draws_csv"]

_CSV_HEADER = """# stan_version_major = 2
# stan_version_minor = 35
# stan_version_patch = 0
# model = {model}
# method = sample
#   sample
#     num_samples = {n}
#     num_warmup = 1
#     save_warmup = false
#     thin = 1
#     adapt
#       engaged = false
#     algorithm = fixed_param
#     num_chains = 1
# id = 1
# random
#   seed = 1
# output
#   sig_figs = 18
"""


def _column_names(name: str, shape: tuple[int, ...]) -> list[tuple[str, tuple[int, ...]]]:
    """Stan CSV names (``a.1.2``, column-major like CmdStan) and indices of one parameter."""
    if not shape:
        return [(name, ())]
    out = []
    for rev in np.ndindex(*shape[::-1]):
        idx = rev[::-1]
        out.append((name + "".join(f".{i + 1}" for i in idx), idx))
    return out


def write_draws_csv(draws: Mapping[str, NDArray[np.float64]], path: Path,
                    name: str = "model") -> int:
    """Write constrained draws as the Stan CSV of a fixed-parameter run; return their number.

    Parameters
    ----------
    draws
        Constrained values per parameter, ``(n, *shape)`` each, in the order of the
        model's ``parameters`` block.
    path
        The file written.
    name
        Model name written in the CSV's comments.

    Raises
    ------
    OSError
        If the file cannot be written.
    """
    names = list(draws)
    n = int(np.shape(draws[names[0]])[0])
    cols: list[str] = []
    values: list[NDArray[np.float64]] = []
    for nm in names:
        arr = np.asarray(draws[nm], dtype=float)
        for col, idx in _column_names(nm, arr.shape[1:]):
            cols.append(col)
            key: tuple[Any, ...] = (slice(None), *idx)
            values.append(arr[key])
    mat = np.column_stack(values) if values else np.zeros((n, 0))
    sampler = ["lp__", "accept_stat__"]  # a fixed_param "run" holding the draws
    lines = [_CSV_HEADER.format(model=name, n=n).rstrip("\n"), ",".join(sampler + cols)]
    zeros = ",".join(["0"] * len(sampler)) + ","
    lines.extend(zeros + ",".join(map(repr, row)) for row in mat.tolist())  # exact
    lines.extend(["# ", "#  Elapsed Time: 0 seconds (Warm-up)",
                  "#                0 seconds (Sampling)", "#                0 seconds (Total)",
                  "# "])
    path.write_text("\n".join(lines) + "\n")
    return n


#: Fewest draws a part of a batch evaluated side by side (:func:`generated_column`):
#: below it, a second process costs more than it saves.
PART_DRAWS_MIN = 5000


def generated_column(model: cmdstanpy.CmdStanModel, data: Mapping[str, Any] | None,
                     draws: Mapping[str, NDArray[np.float64]], column: str, run_dir: Path,
                     name: str = "model", seed: int = 1, parts: int = 1
                     ) -> NDArray[np.float64]:
    """One generated quantity of a compiled model at given parameter values.

    The values are written as a fixed-parameter CmdStan run and the model's
    standalone ``generate_quantities`` is run on it.

    Parameters
    ----------
    model
        The compiled model.
    data
        Its data.
    draws
        Constrained values per parameter, ``(n, *shape)`` each, in the order of
        the model's ``parameters`` block.
    column
        The generated quantity to read (a scalar).
    run_dir
        Where the CSV files go.
    name
        Model name written in the CSV's comments.
    seed
        Seed of the generated quantities' random numbers.
    parts
        Cut the draws into up to this many consecutive parts (of at least
        :data:`PART_DRAWS_MIN` draws), evaluated by as many processes side by side: only
        for a quantity without random numbers (each part would draw other ones).

    Returns
    -------
    ndarray, shape (n,)
        NaN where CmdStan could not evaluate it.

    Raises
    ------
    RuntimeError
        If CmdStan's generate_quantities fails.
    """
    if model.exe_file is None:
        raise RuntimeError(f"the model {model.name} has no executable: compile it first")
    n = int(np.shape(next(iter(draws.values())))[0]) if draws else 0
    if n == 0:
        return np.zeros(0)
    run_dir = Path(run_dir).resolve()  # CmdStan runs in each part's own folder
    data_file = run_dir / "data.json"
    cmdstanpy.write_stan_json(str(data_file), dict(data or {}))
    cuts = np.array_split(np.arange(n), max(1, min(parts, n // PART_DRAWS_MIN)))
    running: list[tuple[subprocess.Popen[bytes], Any, Path, Path, int]] = []
    try:
        for i, rows in enumerate(cuts):
            where = run_dir if len(cuts) == 1 else run_dir / f"part_{i + 1}"
            where.mkdir(exist_ok=True)
            path = where / "draws.csv"
            write_draws_csv({k: np.asarray(v)[rows] for k, v in draws.items()}, path, name)
            output, console = where / "generated.csv", where / "generated.txt"
            command = [str(model.exe_file), "id=1", "random", f"seed={seed}", "data",
                       f"file={data_file}", "output", f"file={output}", "sig_figs=18",
                       "method=generate_quantities", f"fitted_params={path}"]
            out = console.open("w")
            try:
                proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                        cwd=where)
            except OSError:
                out.close()
                raise
            running.append((proc, out, output, console, rows.size))
        values = []
        for proc, out, output, console, size in running:
            code = proc.wait()
            out.close()
            if code != 0:
                raise console_error(f"evaluating {column} with CmdStan's generate_quantities",
                                    console, code)
            values.append(_read_column(output, column, size))
    finally:
        for proc, out, *_ in running:  # a part that failed ends the others
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            out.close()
    return np.concatenate(values) if values else np.zeros(0)


def _read_column(csv_file: Path, column: str, n: int) -> NDArray[np.float64]:
    """One column of a CmdStan output CSV (its comment lines skipped)."""
    try:
        frame = pd.read_csv(csv_file, comment="#", usecols=[column], dtype=float)
    except ValueError as err:  # no such column
        raise RuntimeError(f"{csv_file} has no column {column}") from err
    out = frame[column].to_numpy(dtype=float)
    if out.size != n:
        raise RuntimeError(f"generate_quantities returned {out.size} rows for {n} draws")
    return out


def stan_to_dotted(column: str) -> str:
    """``mu[1,2]`` -> ``mu.1.2`` (the Stan CSV header form of a column name).

    Raises
    ------
    Nothing.
    """
    m = re.fullmatch(r"([^\[]+)\[(.*)\]", column)
    if m is None:
        return column
    return m.group(1) + "." + ".".join(s.strip() for s in m.group(2).split(","))


def generated_at(model: cmdstanpy.CmdStanModel, data: Mapping[str, Any] | None,
                 columns: Mapping[str, NDArray[np.float64]], column: str,
                 name: str = "model", seed: int = 1) -> NDArray[np.float64]:
    """:func:`generated_column` at draws given column by column, in any shape.

    Parameters
    ----------
    columns
        Every parameter column (CmdStan bracket names, ``theta[2]``) in the model's
        order, each an array of one shape.
    model, data, column, name, seed
        As :func:`generated_column`.

    Returns
    -------
    ndarray
        Of the columns' shape.

    Raises
    ------
    RuntimeError
        If CmdStan's generate_quantities fails.
    """
    shape = np.shape(next(iter(columns.values())))
    flat = {stan_to_dotted(c): np.asarray(v, dtype=float).reshape(-1) for c, v in columns.items()}
    with tempfile.TemporaryDirectory(prefix="pemc_gq_") as tmp:
        return generated_column(model, data, flat, column, Path(tmp), name, seed).reshape(shape)
