"""Bridge sampling on draws of an unchanged Stan program (the evidence of its density).

:func:`bridge_from_draws` is the estimate behind ``pemc_stan.evidence(...,
estimator="bridge")`` and behind the mode split's masses of the modes
(:mod:`pemc_stan.modes.split`), and of a method's resampled draws
(:func:`resampled_bridge`); the estimator itself is the pure function
:func:`~pemc_stan.estimators.log_z.bridge_sampling`, the densities come from
:class:`~pemc_stan.modes.density.DensityEvaluator`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from pemc_stan.estimators.log_z import EvidenceEstimate, bridge_sampling
from pemc_stan.modes.density import DensityEvaluator
from pemc_stan.stan.constraints import ParameterSpace, parameter_space
from pemc_stan.stan.inputs import StanProgram, read_program

__all__ = ["bridge_from_draws", "bridge_seed", "frame_chain_arrays", "log_target_fn",
           "posterior_setup", "resampled_bridge"]


def bridge_from_draws(program: str | StanProgram, data: Mapping[str, Any] | None,
                      draws: Mapping[str, NDArray[np.float64]], *, name: str = "model",
                      seed: int | None = None, n_proposal: int | None = None,
                      output_dir: str | os.PathLike[str] | None = None,
                      evaluator: DensityEvaluator | None = None, warp: bool = False,
                      region: Callable[[Mapping[str, NDArray[np.float64]]],
                                       NDArray[np.bool_]] | None = None
                      ) -> EvidenceEstimate:
    """Bridge sampling on constrained posterior draws of an unchanged program.

    With ``region``, the estimate is of the density's mass inside that region: the
    proposal's draws outside it count as zero density.  Draws of the density restricted
    to the region are then what the bridge needs (a chain's draws inside it are:
    :func:`pemc_stan.modes.scouts.missed_regions`).  Draws of the whole density that
    seldom leave it serve, with a bias that grows with the share they spend outside and
    with how far the bridge's Gaussian is from their distribution.

    Parameters
    ----------
    program : str or StanProgram
        Stan program text, or the program read once.
    data : mapping or None
        Its data.
    draws : mapping
        Posterior draws per parameter, ``(chains, draws, *shape)``.
    name : str
        Model name (for the compiled density program).
    seed : int, optional
        Seed of the proposal draws.
    n_proposal : int, optional
        Number of proposal draws (default: number of bridge draws).
    output_dir : path, optional
        Where the density evaluations' CSV files go.
    evaluator : DensityEvaluator, optional
        Reuse an existing evaluator (and its compiled model).
    warp : bool
        Warp-3 bridge (see :func:`~pemc_stan.estimators.log_z.bridge_sampling`).
    region : callable, optional
        ``region(values by name, each (N, *shape)) -> (N,) bool``: where the mass is
        counted (default: everywhere).

    Returns
    -------
    EvidenceEstimate
        ``method="bridge_sampling"`` (or ``"bridge_sampling_warp3"``); diagnostics as
        :func:`~pemc_stan.estimators.log_z.bridge_sampling` plus
        ``n_invalid_proposals``.

    Raises
    ------
    UnsupportedConstructError
        If a parameter type or bound is not supported.
    ValueError
        If the draws are malformed or the density is NaN at a posterior draw.
    """
    data = dict(data or {})
    program = read_program(program, name)
    ev = evaluator or DensityEvaluator(program, data, name, output_dir)
    space, flat, u_post = posterior_setup(program, data, draws, name)
    n_chains, n_draws = u_post.shape[:2]
    log_j = space.constrain(u_post.reshape(n_chains * n_draws, -1))[1]
    log_gamma = ev.log_density(flat)
    if not np.all(np.isfinite(log_gamma)):
        bad = int(np.sum(~np.isfinite(log_gamma)))
        raise ValueError(f"the log density is not finite at {bad} posterior draws; are these "
                         "draws of this program with this data?")
    lp_post = (log_gamma + log_j).reshape(n_chains, n_draws)
    invalid = {"n": 0}
    target = log_target_fn(space, ev, region)

    def log_target(u: NDArray[np.float64]) -> NDArray[np.float64]:
        out = target(u)
        invalid["n"] = int(np.sum(~np.isfinite(out)))
        return out

    rng = np.random.default_rng(seed)
    est = bridge_sampling(u_post, lp_post, log_target, rng, n_proposal=n_proposal, warp=warp)
    diag = dict(est.diagnostics)
    diag["n_invalid_proposals"] = invalid["n"]
    diag["dim"] = space.dim
    return EvidenceEstimate(est.log_z, est.std_error, est.method, diag)


def log_target_fn(space: ParameterSpace, ev: DensityEvaluator,
                  region: Callable[[Mapping[str, NDArray[np.float64]]],
                                   NDArray[np.bool_]] | None = None
                  ) -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
    """``u -> log gamma(c(u)) + log|J(u)|`` on the unconstrained scale (one CmdStan call);
    ``-inf`` outside ``region`` when one is given."""

    def log_target(u: NDArray[np.float64]) -> NDArray[np.float64]:
        x, lj = space.constrain(u)
        # values rounded onto a bound (e.g. logistic(40) == 1.0) are outside the support
        ok = np.all(np.isfinite(u), axis=1) & np.isfinite(lj)
        for t in space.transforms:
            ok &= np.all(np.isfinite(t.unconstrain(x[t.name], check=False, params=x)), axis=1)
        if region is not None and np.any(ok):
            ok[ok] = np.asarray(region({k: v[ok] for k, v in x.items()}), dtype=bool)
        out = np.full(u.shape[0], -np.inf)
        if np.any(ok):
            lg = ev.log_density({k: v[ok] for k, v in x.items()})
            out[ok] = np.where(np.isnan(lg), -np.inf, lg) + lj[ok]
        return out

    return log_target


def posterior_setup(
    program: StanProgram, data: Mapping[str, Any], draws: Mapping[str, NDArray[np.float64]],
    name: str,
) -> tuple[ParameterSpace, dict[str, NDArray[np.float64]], NDArray[np.float64]]:
    """(space, flat constrained draws, unconstrained draws (chains, draws, dim))."""
    prog = program.tree
    first = next(iter(draws.values()))
    n_chains, n_draws = first.shape[:2]
    shapes = {k: tuple(v.shape[2:]) for k, v in draws.items()}
    space = parameter_space(prog, data, shapes, f"{name}.stan")
    flat = {k: np.asarray(draws[k], dtype=float).reshape((n_chains * n_draws, *shapes[k]))
            for k in space.names}
    try:
        u = space.unconstrain(flat)
    except ValueError as err:
        raise ValueError(f"{err}. Draws printed with few significant figures can round onto a "
                         "bound (e.g. 0.9999996 -> 1); sample with sig_figs=18") from err
    return space, flat, u.reshape(n_chains, n_draws, -1)


_BRACKET = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[([0-9, ]+)\])?$")


def frame_chain_arrays(frame: pd.DataFrame, names: Sequence[str]
                       ) -> dict[str, NDArray[np.float64]]:
    """Parameter draws ``(chains, draws, *shape)`` from a frame with ``chain__`` and
    cmdstanpy bracket columns (``mu``, ``theta[2]``, ``L[1,2]``)."""
    if "chain__" in frame.columns:
        chain_ids = frame["chain__"].to_numpy()
    else:
        chain_ids = np.ones(len(frame), dtype=int)
    labels = list(dict.fromkeys(chain_ids.tolist()))
    lengths = {int(np.sum(chain_ids == lab)) for lab in labels}
    if len(lengths) != 1:
        raise ValueError(f"chains of unequal length {sorted(lengths)}")
    n_draws = lengths.pop()
    cols: dict[str, list[tuple[tuple[int, ...], str]]] = {nm: [] for nm in names}
    for c in frame.columns:
        m = _BRACKET.match(str(c))
        if m and m.group(1) in cols:
            idx = tuple(int(i) - 1 for i in m.group(2).split(",")) if m.group(2) else ()
            cols[m.group(1)].append((idx, c))
    out = {}
    for nm, entries in cols.items():
        if not entries:
            raise KeyError(f"the draws have no column for parameter {nm!r}")
        shape = tuple(max(i[k] for i, _ in entries) + 1 for k in range(len(entries[0][0])))
        arr = np.empty((len(labels), n_draws, *shape))
        for idx, c in entries:
            vals = frame[c].to_numpy(dtype=float)
            for ci, lab in enumerate(labels):
                key: tuple[Any, ...] = (ci, slice(None), *idx)
                arr[key] = vals[chain_ids == lab]
        out[nm] = arr
    return out


def bridge_seed(seed: int | None) -> int | None:
    """Seed of the bridge's proposal draws on a PE/CT fit's resampled draws.

    The fit resamples with ``numpy.random.default_rng(fit.seed)``; users
    naturally pass the same number to ``pemc_stan.evidence``.  Two generators with
    one seed give dependent streams, whose proposal and resampling errors can
    cancel and make the reported standard error wrong.  The seed is therefore
    mixed with a fixed tag into a different, still reproducible one.
    """
    if seed is None:
        return None
    return int(np.random.SeedSequence([int(seed), 0x6272]).generate_state(1)[0])


def resampled_bridge(fit: Any, data: Mapping[str, Any] | None, *, seed: int | None,
                     evaluator: DensityEvaluator | None = None, n_proposal: int | None = None,
                     output_dir: str | os.PathLike[str] | None = None, warp: bool = False
                     ) -> EvidenceEstimate:
    """``log Z`` by bridge sampling on a method's resampled draws of the original
    parameters (:func:`bridge_from_draws`; the proposal's seed
    from ``seed`` by :func:`bridge_seed`): the normaliser of what the draws hold.

    Raises
    ------
    ValueError
        If the density is not finite at a draw.
    UnsupportedConstructError
        If a parameter type or bound is not supported.
    """
    prog = fit.program
    draws = frame_chain_arrays(fit.resampled_parameters_pd(), prog.parameter_names)
    return bridge_from_draws(prog, data, draws, name=prog.name, seed=bridge_seed(seed),
                             n_proposal=n_proposal, output_dir=output_dir,
                             evaluator=evaluator, warp=warp)
