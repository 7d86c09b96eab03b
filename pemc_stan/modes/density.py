"""Density programs: ``log gamma(x)`` with every constant, at arbitrary draws, through CmdStan.

``CmdStanModel.log_prob`` drops constants, so a *density program* is built
from the user's program with the front end: its functions block gets the
generated ``pemc_log_density`` (:mod:`pemc_stan.stan.logdensity`), the
transformed parameters and model blocks are dropped and the generated
quantities block becomes ``real pemc_log_gamma = pemc_log_density(...);``.
Constrained draws are written as a Stan CSV and evaluated by CmdStan's
standalone ``generate_quantities`` (one process for a whole batch).

Its parameters are declared without their constraints (a ``simplex[K]`` as a
``vector[K]``, a ``real<lower=0>`` as a ``real``:
:func:`~pemc_stan.stan.declared_types.local_type`): ``generate_quantities`` maps each
draw to the unconstrained scale and back, and through a constraining transform that
round trip loses the small differences at an edge (a simplex whose first component
rounds to 1 comes back with zeros after it, and a Dirichlet density with alpha < 1 is
then +inf).  Unconstrained, both maps are the identity: the density is computed at
the very values given.
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
from pemc_stan.backend.processes import usable_cores
from pemc_stan.backend.standalone import generated_column, write_draws_csv
from pemc_stan.stan import ast
from pemc_stan.stan.declared_types import local_type
from pemc_stan.stan.inputs import StanProgram, read_program
from pemc_stan.stan.logdensity import log_density_functions
from pemc_stan.stan.printer import print_program

__all__ = ["DENSITY_COLUMN", "DensityEvaluator", "GeneratedDensity", "density_program",
           "exact_round_trip", "model_log_density"]

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
    pemc_stan.errors.ReservedPrefixError, UnsupportedConstructError
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
    params = prog.parameters
    if params is not None:
        params = dataclasses.replace(params, stmts=tuple(
            dataclasses.replace(s, type=local_type(s.type)) if isinstance(s, ast.VarDecl) else s
            for s in params.stmts))
    out = dataclasses.replace(prog, functions=ast.FunctionsBlock(tuple(existing) + fns.functions),
                              parameters=params, transformed_parameters=None, model=None,
                              generated_quantities=gq)
    return print_program(out)


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
    pemc_stan.errors.ReservedPrefixError, UnsupportedConstructError
        If the program cannot be rewritten.
    """

    def __init__(self, program: str | StanProgram, data: Mapping[str, Any] | None,
                 name: str = "model", output_dir: str | os.PathLike[str] | None = None) -> None:
        self.program = program
        self.data = dict(data or {})
        self.name = re.sub(r"[^A-Za-z0-9_]", "_", name)
        read = program if isinstance(program, StanProgram) else read_program(program, name)
        self.code = density_program(read, f"{name}.stan")
        self.simplexes = _simplex_parameters(read.tree)
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
        draws = _on_simplex(draws, self.simplexes)
        parts = usable_cores()  # a density draws no random numbers: parts side by side
        if self.output_dir is None:  # nothing to keep: a temporary directory per call
            with tempfile.TemporaryDirectory(prefix="pemc_evidence_") as tmp:
                return generated_column(self.model, self.data, draws, DENSITY_COLUMN,
                                        Path(tmp), f"{self.name}_model", parts=parts)
        run_dir = self.output_dir / f"density_eval_{self._calls}"
        run_dir.mkdir(parents=True, exist_ok=True)
        return generated_column(self.model, self.data, draws, DENSITY_COLUMN, run_dir,
                                f"{self.name}_model", parts=parts)


def exact_round_trip(tree: ast.Program) -> bool:
    """Whether every parameter's Stan transform survives ``generate_quantities``' round
    trip to the unconstrained scale and back at its edges: unconstrained, affine, or
    bounded on one side (``log``/``exp`` of the distance to the bound).  Through the
    others (an interval's logit, a simplex's stick-breaking, a Cholesky factor) a value
    near an edge comes back changed, and a program declaring them evaluates densities
    exactly only as a density program (:func:`density_program`).

    Raises
    ------
    Nothing.
    """
    for _, t in _parameter_elements(tree):
        if not isinstance(t, ast.BasicType) or t.name not in (
                "real", "vector", "row_vector", "matrix"):
            return False
        c = t.constraint
        if isinstance(c, ast.Bounds) and c.lower is not None and c.upper is not None:
            return False
    return True


def _parameter_elements(tree: ast.Program) -> list[tuple[tuple[str, ...], ast.Type]]:
    """Each parameter declaration's names and element type (arrays unwrapped)."""
    out = []
    for stmt in tree.parameters.stmts if tree.parameters is not None else ():
        if isinstance(stmt, ast.VarDecl):
            t = stmt.type
            while isinstance(t, ast.ArrayType):
                t = t.element
            out.append((stmt.names, t))
    return out


def _simplex_parameters(tree: ast.Program) -> frozenset[str]:
    """The parameters declared ``simplex`` (or arrays of simplexes)."""
    return frozenset(name for names, t in _parameter_elements(tree)
                     if isinstance(t, ast.BasicType) and t.name == "simplex" for name in names)


def _on_simplex(draws: Mapping[str, NDArray[np.float64]], names: frozenset[str]
                ) -> Mapping[str, NDArray[np.float64]]:
    """``draws`` with each simplex divided by its sum: draws read from a CSV of few
    significant digits sum to 1 only to within their rounding, which Stan's simplex
    checks (tolerance 1e-8) refuse; the change is within that rounding."""
    if not names & draws.keys():
        return draws
    out = dict(draws)
    for name in names & draws.keys():
        x = np.asarray(draws[name], dtype=float)
        out[name] = x / x.sum(axis=-1, keepdims=True)
    return out


class GeneratedDensity:
    """``log gamma(x)`` (all constants) at constrained draws through an already compiled
    program whose generated quantities compute it in :data:`DENSITY_COLUMN` (continuous
    tempering's own program): no density program to compile.

    Parameters
    ----------
    model : cmdstanpy.CmdStanModel
        The compiled program.
    data : mapping
        Its data.
    fixed : mapping
        The program's parameters after the draws' (in its ``parameters`` block order)
        and the value each takes: ones that do not enter ``log gamma`` (the temperature
        control).
    name : str
        Model name written in the CSV's comments.
    """

    def __init__(self, model: cmdstanpy.CmdStanModel, data: Mapping[str, Any],
                 fixed: Mapping[str, float], name: str = "model") -> None:
        self.model = model
        self.data = dict(data)
        self.fixed = dict(fixed)
        self.name = name

    def log_density(self, draws: Mapping[str, NDArray[np.float64]]) -> NDArray[np.float64]:
        """``log gamma`` at each draw, NaN where CmdStan could not evaluate it.

        Raises
        ------
        RuntimeError
            If CmdStan's generate_quantities fails.
        """
        n = int(np.shape(next(iter(draws.values())))[0]) if draws else 0
        full = {**draws, **{k: np.full(n, v) for k, v in self.fixed.items()}}
        with tempfile.TemporaryDirectory(prefix="pemc_density_") as tmp:
            return generated_column(self.model, self.data, full, DENSITY_COLUMN, Path(tmp),
                                    self.name, parts=usable_cores())


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


