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
import logging
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cmdstanpy
import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from pemc_stan.backend.compile import compile_model
from pemc_stan.backend.console import is_cmdstan_failure, run_error
from pemc_stan.errors import PemcStanError
from pemc_stan.inputs import StanProgram, read_program
from pemc_stan.methods.base_density import BaseDensity
from pemc_stan.stan import ast
from pemc_stan.stan.logdensity import log_density_functions
from pemc_stan.stan.printer import print_program

logger = logging.getLogger(__name__)

__all__ = ["DENSITY_COLUMN", "WIDE_DRAWS", "WIDE_SPREADS", "DensityEvaluator", "density_program",
           "generated_column", "model_log_density", "wide_log_weights", "write_draws_csv"]

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


#: Importance sampling around found modes (:func:`wide_log_weights`) draws from their
#: covering Gaussian, half with its standard deviations as they are (among the modes
#: found) and half doubled (beyond them) ...
WIDE_SPREADS = (1.0, 2.0)
#: ... this many draws at a time (in 2-D, 100,000 densities take about 0.7 s).
WIDE_DRAWS = 100_000


#: A mode's Gaussian in the wide sampler's proposal (:func:`wide_log_weights`) has the
#: standard deviations of the mode's draws times this: a little wider than the mode, so
#: that its tails and the error of its fitted covariance keep the weights even.
WIDE_MODE_SPREAD = 1.25

#: Gaussians fitted to the modes' draws, ``(log weight, mean, covariance)`` each in base
#: coordinates (the weights need not be normalised).
ModeGaussians = list[tuple[float, NDArray[np.float64], NDArray[np.float64]]]


def _proposal(base: BaseDensity, modes: ModeGaussians | None
              ) -> tuple[list[BaseDensity], NDArray[np.float64]]:
    """The wide sampler's mixture: its parts and their log weights.  The covering
    Gaussian with its standard deviations times each of :data:`WIDE_SPREADS` (equal
    parts); with ``modes``, half the weight goes to them instead (the fitted
    covariances times :data:`WIDE_MODE_SPREAD` squared)."""
    mean, cov = np.asarray(base.mean, dtype=float), np.asarray(base.cov, dtype=float)
    parts = [BaseDensity(mean, s**2 * cov, "dense") for s in WIDE_SPREADS]
    log_w = np.full(len(parts), -np.log(len(parts)))
    if modes:
        lm = np.array([m[0] for m in modes], dtype=float)
        parts += [BaseDensity(np.asarray(m[1], dtype=float),
                              WIDE_MODE_SPREAD**2 * np.asarray(m[2], dtype=float), "dense")
                  for m in modes]
        log_w = np.concatenate([log_w, lm - logsumexp(lm)]) - np.log(2.0)
    return parts, log_w


#: A draw of the wide sampler is unexplained by the modes found where the target's
#: density is more than this many times ``Z`` times their fitted mixture's ...
UNEXPLAINED_RATIO = 100.0
#: ... and this many of them, resampled by weight, start Pathfinder again
#: (:func:`unexplained_starts`) ...
UNEXPLAINED_STARTS = 16
#: ... chosen among this many of the heaviest draws.
UNEXPLAINED_CANDIDATES = 5_000


def unexplained_starts(z: NDArray[np.float64], log_weights: NDArray[np.float64], log_z: float,
                       base: BaseDensity, modes: ModeGaussians, rng: np.random.Generator,
                       n: int = UNEXPLAINED_STARTS) -> NDArray[np.float64]:
    """Up to ``n`` of the wide sampler's draws ``z`` (log weights ``log gamma - log q``,
    proposal :func:`_proposal` of ``base`` and ``modes``) where ``gamma`` exceeds ``Z``
    times the modes' normalised mixture by :data:`UNEXPLAINED_RATIO`, drawn without
    replacement in proportion to their weights, so that each mode the search missed
    gets starts in proportion to its mass.  Shape (0, D) when there are none.

    Raises
    ------
    Nothing.
    """
    empty = np.empty((0, z.shape[1]))
    finite = np.flatnonzero(np.isfinite(log_weights))
    if not modes or finite.size == 0 or not np.isfinite(log_z):
        return empty
    top = finite[np.argsort(-log_weights[finite], kind="stable")[:UNEXPLAINED_CANDIDATES]]
    parts, log_pi = _proposal(base, modes)
    try:
        dens = np.array([q.log_density_z(z[top]) for q in parts]) + log_pi[:, None]
    except np.linalg.LinAlgError:
        return empty
    k = len(WIDE_SPREADS)
    log_m = logsumexp(dens[k:], axis=0) + np.log(2.0)  # the modes' half, normalised
    log_rho = log_weights[top] + logsumexp(dens, axis=0) - log_z - log_m
    cand = top[log_rho > np.log(UNEXPLAINED_RATIO)]
    if cand.size == 0:
        return empty
    p = np.exp(log_weights[cand] - logsumexp(log_weights[cand]))
    pick = rng.choice(cand.size, size=min(n, int(np.count_nonzero(p))), replace=False, p=p)
    return np.asarray(z[cand[pick]], dtype=float)


def wide_log_weights(coords: Any, base: BaseDensity, evaluator: DensityEvaluator,
                     data: Mapping[str, Any] | None, seed: int | None, n: int = WIDE_DRAWS,
                     modes: ModeGaussians | None = None
                     ) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """``log gamma(x(z)) + log|dx/dz| - log q(z)`` of ``n`` draws ``z`` of ``q`` (base
    coordinates), and the draws: ``q`` is the equal mixture of the Gaussian ``base``
    with its standard deviations times each of :data:`WIDE_SPREADS`, and with
    ``modes`` (Gaussians fitted to the found modes' draws) the defensive mixture of
    that and of them, half each.  Its estimate of ``Z`` is unbiased either way; when
    the modes hold all the mass, their half keeps the weights nearly even (on the
    mixture on R^2 one batch then reached the precision eight batches of the covering
    Gaussians alone did not), and a mode missing from them is still reached by the
    covering half.  ``-inf`` where the density is not finite.  None when the draws
    cannot be evaluated (the split is then judged without them).

    Raises
    ------
    Nothing.
    """
    rng = np.random.default_rng(seed)
    try:
        parts, log_w = _proposal(base, modes)
        counts = rng.multinomial(n, np.exp(log_w - logsumexp(log_w)))
        z = np.concatenate([q.sample_z(int(m), rng) for q, m in zip(parts, counts, strict=True)])
        log_q = logsumexp([q.log_density_z(z) + w for q, w in zip(parts, log_w, strict=True)],
                          axis=0)
        x = coords.inverse(z, data)
        ok = np.ones(n, dtype=bool)
        for v in x.values():
            ok &= np.all(np.isfinite(np.asarray(v, dtype=float).reshape(n, -1)), axis=1)
        lw = np.full(n, -np.inf)
        if np.any(ok):
            kept = {k: np.asarray(v)[ok] for k, v in x.items()}
            _, log_dz_dx = coords.forward(kept, data)
            lw[ok] = evaluator.log_density(kept) - log_dz_dx - log_q[ok]
    except (ValueError, RuntimeError, PemcStanError, np.linalg.LinAlgError) as exc:
        logger.info("importance sampling around the modes failed: %s", exc)
        return None
    return np.where(np.isnan(lw), -np.inf, lw), z
