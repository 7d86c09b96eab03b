"""Density programs: ``log gamma(x)`` with every constant, at arbitrary draws, through CmdStan.

``CmdStanModel.log_prob`` drops constants, so a *density program* is built
from the user's program with the front end: its functions block gets the
generated ``pemc_log_density`` (:mod:`pemc_stan.stan.logdensity`), the
transformed parameters and model blocks are dropped and the generated
quantities block becomes ``real pemc_log_gamma = pemc_log_density(...);``.
Constrained draws are written as a Stan CSV and evaluated by CmdStan's
standalone ``generate_quantities`` (one process for a whole batch).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cmdstanpy
import numpy as np
from numpy.typing import NDArray

from pemc_stan.backend.compile import compile_model
from pemc_stan.backend.console import is_cmdstan_failure, run_error
from pemc_stan.inputs import StanProgram, read_program
from pemc_stan.stan import ast
from pemc_stan.stan.logdensity import log_density_functions
from pemc_stan.stan.printer import print_program

__all__ = ["DENSITY_COLUMN", "DensityEvaluator", "density_program", "generated_column",
           "model_log_density", "write_draws_csv"]

#: Generated quantity of the density program holding ``log gamma`` (all constants).
DENSITY_COLUMN = "pemc_log_gamma"


def density_program(program: str | ast.Program | StanProgram, filename: str = "<string>") -> str:
    """Stan source of the density program of ``program`` (see module docstring).

    Parameters
    ----------
    program : str, ast.Program or StanProgram
        The user's program (text, or parsed: not parsed again).
    filename : str
        Name for error messages.

    Returns
    -------
    str
        A program with the user's functions, data, transformed data and
        parameters blocks, the generated log-density functions and a
        generated quantities block with ``real pemc_log_gamma``.

    Raises
    ------
    pemc_stan.stan.analysis.ReservedPrefixError, UnsupportedConstructError
        As :func:`pemc_stan.stan.logdensity.log_density_functions`.
    """
    if isinstance(program, StanProgram):
        prog = program.tree
    elif isinstance(program, ast.Program):
        prog = program
    else:
        prog = read_program(program, filename.removesuffix(".stan")).tree
    fns = log_density_functions(prog, filename)
    existing = prog.functions.functions if prog.functions is not None else ()
    gq = ast.ProgramBlock("generated quantities", (
        ast.VarDecl(ast.BasicType("real"),
                    (ast.Declarator(DENSITY_COLUMN, fns.call_expr("density")),)),
    ))
    out = dataclasses.replace(prog, functions=ast.FunctionsBlock(tuple(existing) + fns.functions),
                              transformed_parameters=None, model=None, generated_quantities=gq)
    return print_program(out)


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


class DensityEvaluator:
    """Evaluates ``log gamma(x)`` (all constants) at constrained draws through CmdStan.

    Parameters
    ----------
    program : str or StanProgram
        The user's Stan program (text, or read: not parsed again).
    data : mapping or None
        Its data.
    name : str
        Model name (the density program is compiled as ``<name>_pemc_density``).
    output_dir : path, optional
        Where the CSV files of each evaluation are kept (by default they go
        to a temporary directory removed after each evaluation).

    Raises
    ------
    pemc_stan.stan.analysis.ReservedPrefixError, UnsupportedConstructError
        If the program cannot be rewritten.
    """

    def __init__(self, program: str | StanProgram, data: Mapping[str, Any] | None,
                 name: str = "model", output_dir: str | os.PathLike[str] | None = None) -> None:
        self.program = program
        self.data = dict(data or {})
        self.name = re.sub(r"[^A-Za-z0-9_]", "_", name)
        self.code = density_program(program, f"{name}.stan")
        self.output_dir = Path(output_dir) if output_dir else None
        self._model: cmdstanpy.CmdStanModel | None = None
        self._calls = 0

    @property
    def model(self) -> cmdstanpy.CmdStanModel:
        """The compiled density program (content-hash cached)."""
        if self._model is None:
            self._model = compile_model(self.code, name=f"{self.name}_pemc_density")
        return self._model

    def log_density(self, draws: Mapping[str, NDArray[np.float64]]) -> NDArray[np.float64]:
        """``log gamma`` at each draw.

        Parameters
        ----------
        draws : mapping
            Constrained values per parameter, ``(n, *shape)`` each.

        Returns
        -------
        ndarray, shape (n,)
            NaN where CmdStan could not evaluate the density.

        Raises
        ------
        RuntimeError
            If CmdStan's generate_quantities fails.
        """
        self._calls += 1
        if self.output_dir is None:  # nothing to keep: a temporary directory per call
            with tempfile.TemporaryDirectory(prefix="pemc_evidence_") as tmp:
                return generated_column(self.model, self.data, draws, DENSITY_COLUMN,
                                        Path(tmp), f"{self.name}_model")
        run_dir = self.output_dir / f"density_eval_{self._calls}"
        run_dir.mkdir(parents=True, exist_ok=True)
        return generated_column(self.model, self.data, draws, DENSITY_COLUMN, run_dir,
                                f"{self.name}_model")


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
    zeros = ",".join(["0"] * len(sampler))
    lines.extend(zeros + "," + ",".join(repr(float(v)) for v in row) for row in mat)
    lines.extend(["# ", "#  Elapsed Time: 0 seconds (Warm-up)",
                  "#                0 seconds (Sampling)", "#                0 seconds (Total)",
                  "# "])
    path.write_text("\n".join(lines) + "\n")
    return n


def model_log_density(model: cmdstanpy.CmdStanModel, data: Mapping[str, Any] | None,
                      draws: Mapping[str, NDArray[np.float64]]) -> NDArray[np.float64]:
    """``log gamma(x)`` up to one additive constant at constrained draws of a compiled model.

    CmdStan's ``log_prob`` method without the Jacobian (it drops the constants of ``~``
    statements: enough to compare densities of one model; :class:`DensityEvaluator`
    keeps them), all draws in one run.

    Parameters
    ----------
    model
        The compiled model.
    data
        Its data.
    draws
        Constrained values per parameter, ``(n, *shape)`` each, in the order of the
        model's ``parameters`` block.

    Returns
    -------
    ndarray, shape (n,)

    Raises
    ------
    RuntimeError
        If CmdStan fails (for example when the density throws at one of the draws).
    """
    with tempfile.TemporaryDirectory(prefix="pemc_log_prob_") as tmp:
        path = Path(tmp) / "draws.csv"
        n = write_draws_csv(draws, path)
        frame = model.log_prob(str(path), data=dict(data) if data else None, jacobian=False,
                               sig_figs=18)
    out = np.asarray(frame["lp__"], dtype=float)
    if out.size != n:
        raise RuntimeError(f"CmdStan's log_prob returned {out.size} rows for {n} draws")
    return out


def generated_column(model: cmdstanpy.CmdStanModel, data: Mapping[str, Any] | None,
                     draws: Mapping[str, NDArray[np.float64]], column: str, run_dir: Path,
                     name: str = "model") -> NDArray[np.float64]:
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

    Returns
    -------
    ndarray, shape (n,)
        NaN where CmdStan could not evaluate it.

    Raises
    ------
    RuntimeError
        If CmdStan's generate_quantities fails.
    """
    path = run_dir / "draws.csv"
    n = write_draws_csv(draws, path, name)
    try:
        gq = model.generate_quantities(data=dict(data) if data else None,
                                       previous_fit=[str(path)], seed=1,
                                       gq_output_dir=str(run_dir / "gq"), sig_figs=18)
    except RuntimeError as err:
        if not is_cmdstan_failure(err):
            raise
        raise run_error(err, f"evaluating {column} with CmdStan's generate_quantities") from err
    return _read_column(gq.runset.csv_files[0], column, n)


def _read_column(csv_file: str, column: str, n: int) -> NDArray[np.float64]:
    header: list[str] | None = None
    rows: list[str] = []
    for line in Path(csv_file).read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        if header is None:
            header = line.split(",")
        else:
            rows.append(line)
    if header is None or column not in header:
        raise RuntimeError(f"{csv_file} has no column {column}")
    j = header.index(column)
    out = np.array([float(r.split(",")[j]) for r in rows])
    if out.size != n:
        raise RuntimeError(f"generate_quantities returned {out.size} rows for {n} draws")
    return out
