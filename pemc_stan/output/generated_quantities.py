"""Transformed parameters and generated quantities of resampled draws.

Both methods end with draws of the ORIGINAL parameters (resampled by weight);
their transformed parameters and generated quantities come from CmdStan's
standalone ``generate_quantities`` run on those draws.  Stan's standalone
generated quantities (``stan::services::standalone_generate``) write only the
generated quantities block: the transformed parameters are computed but not
written, and cmdstanpy takes them from the fit the draws came from -- which for
resampled draws holds only parameters.  So when the program has transformed
parameters, the draws are run through a *reporting program*: the original
program whose generated quantities block starts with a copy of every
transformed parameter, ``pemc_tp_<name> = <name>;``.  Its output columns are
renamed back, giving parameters, transformed parameters and generated
quantities in Stan's order.  The reporting program is compiled through the
same content-hash cache; programs without transformed parameters use the
original program unchanged.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import cmdstanpy
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from pemc_stan.backend.compile import compile_model
from pemc_stan.backend.standalone import stan_to_dotted
from pemc_stan.stan import ast
from pemc_stan.stan.declared_types import local_type
from pemc_stan.stan.inputs import StanProgram
from pemc_stan.stan.printer import print_program

logger = logging.getLogger(__name__)

__all__ = ["SAMPLER_COLUMNS", "TP_PREFIX", "reporting_program", "recompute_quantities",
           "write_resampled_csvs"]

#: NUTS columns of a Stan CSV file, in CmdStan's order.
SAMPLER_COLUMNS = ("lp__", "accept_stat__", "stepsize__", "treedepth__", "n_leapfrog__",
                   "divergent__", "energy__")

#: Prefix of the generated-quantity copies of transformed parameters.
TP_PREFIX = "pemc_tp_"

_INDEX_COLUMNS = ("chain__", "iter__", "draw__")


def _tparam_decls(program: ast.Program) -> list[ast.VarDecl]:
    block = program.transformed_parameters
    if block is None:
        return []
    return [s for s in block.stmts if isinstance(s, ast.VarDecl)]


def write_resampled_csvs(
    template_csvs: Sequence[str],
    params: pd.DataFrame,
    sampler_names: Sequence[str],
    sampler_values: Sequence[NDArray[np.float64]],
    out_dir: Path,
) -> list[str]:
    """Write resampled parameter draws as Stan CSV files, one per chain.

    Each file keeps the configuration comments of the run's own CSV file (so
    CmdStan and cmdstanpy read it as that run's output) with the header and
    rows replaced by the sampler columns and the original parameters.

    Parameters
    ----------
    template_csvs
        The run's CSV files, one per chain.
    params
        ``chain__`` (1-based) and the parameter columns (bracket names).
    sampler_names
        Sampler column names to write first (e.g. :data:`SAMPLER_COLUMNS`).
    sampler_values
        Per chain, an array (draws, len(sampler_names)) of their values.
    out_dir
        Where the files go (``resampled_<chain>.csv``).

    Returns
    -------
    list of str

    Raises
    ------
    OSError
        If a file cannot be read or written.
    """
    columns = [c for c in params.columns if c not in _INDEX_COLUMNS]
    header = ",".join(list(sampler_names) + [stan_to_dotted(c) for c in columns])
    files = []
    for chain, src in enumerate(template_csvs):
        values = params.loc[params["chain__"] == chain + 1, columns].to_numpy()
        samp = sampler_values[chain]
        out: list[str] = []
        header_done = False
        row = 0
        for line in Path(src).read_text().splitlines():
            if line.startswith("#") or not line.strip():
                out.append(line)  # configuration, adaptation and timing comments stay put
            elif not header_done:
                out.append(header)
                header_done = True
            elif row < len(values):  # each draw row of the run becomes a resampled row
                out.append(",".join([repr(float(v)) for v in samp[row]]
                                    + [repr(float(v)) for v in values[row]]))
                row += 1
        path = out_dir / f"resampled_{chain + 1}.csv"
        path.write_text("\n".join(out) + "\n")
        files.append(str(path))
    return files


def reporting_program(program: ast.Program) -> ast.Program | None:
    """The program whose generated quantities also output the transformed parameters.

    Parameters
    ----------
    program
        The user's (original) program.

    Returns
    -------
    ast.Program or None
        None when the program declares no transformed parameters (the original
        then reports everything).

    Raises
    ------
    Nothing.
    """
    decls = _tparam_decls(program)
    if not decls:
        return None
    copies: list[ast.Stmt] = []
    for decl in decls:
        for name in decl.names:
            copies.append(ast.VarDecl(local_type(decl.type),
                                      (ast.Declarator(TP_PREFIX + name, ast.Variable(name)),)))
    gq = program.generated_quantities
    stmts = tuple(copies) + (gq.stmts if gq is not None else ())
    new_gq = ast.ProgramBlock("generated quantities", stmts)
    return ast.Program(program.functions, program.data, program.transformed_data,
                       program.parameters, program.transformed_parameters, program.model,
                       new_gq)


def recompute_quantities(
    program: StanProgram,
    data: Mapping[str, Any] | None,
    params: pd.DataFrame,
    write_csvs: Callable[[pd.DataFrame, Path], list[str]],
    original_model: Callable[[], cmdstanpy.CmdStanModel],
    seed: int | None,
    out_dir: str | os.PathLike[str],
) -> pd.DataFrame:
    """Parameters, transformed parameters and generated quantities of resampled draws.

    Parameters
    ----------
    program
        The user's program (its name labels the compiled reporting program).
    data
        The user's data.
    params
        Resampled parameter draws: ``chain__``, ``iter__``, ``draw__`` and the
        parameter columns (CmdStan bracket names).
    write_csvs
        Writes ``params`` as Stan CSV files (one per chain) into a folder and
        returns their paths.
    original_model
        Returns the compiled original program (used when there are no
        transformed parameters).
    seed
        Seed of the generated quantities' random numbers.
    out_dir
        Folder for the CSV files and CmdStan's output.

    Returns
    -------
    pandas.DataFrame
        ``params`` followed by the transformed parameters and generated quantities.

    Raises
    ------
    RuntimeError
        If CmdStan's generate_quantities fails.
    """
    name = program.name
    tree = program.tree
    report = reporting_program(tree)
    if report is None and not (tree.generated_quantities is not None
                               and tree.generated_quantities.stmts):
        return params
    model = (original_model() if report is None
             else compile_model(print_program(report), name=f"{name}_report"))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csvs = write_csvs(params, out)
    gq = model.generate_quantities(data=dict(data) if data else None, previous_fit=csvs,
                                   seed=seed, gq_output_dir=str(out / "gq"))
    gq_df = gq.draws_pd(inc_sample=False)
    renamed = {c: c[len(TP_PREFIX):] for c in gq_df.columns if c.startswith(TP_PREFIX)}
    gq_df = gq_df.rename(columns=renamed)
    extra = [c for c in gq_df.columns if c not in params.columns and c not in _INDEX_COLUMNS]
    tps = [c for c in extra if c in renamed.values()]
    rest = [c for c in extra if c not in renamed.values()]
    return pd.concat([params.reset_index(drop=True), gq_df[tps + rest].reset_index(drop=True)],
                     axis=1)
