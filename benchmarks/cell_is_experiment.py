"""Experiment: a tempered run's cells weighed by importance sampling inside each cell.

On the 20-Gaussian mixture (scenario a), after CT or PE with ``split_modes='never'``
(tempering alone, defaults), the search's mode centres cut the plane into cells
(nearest centre, as the strata do).  Each cell's mass ``Z_k = int_cell gamma`` is
estimated by importance sampling with a proposal made for that cell alone, the equal
mixture of up to three Student-t parts (5 degrees of freedom, covariances doubled):

* ``target``: the run's draws in the cell weighted to the target (CT's ``w_1``, PE's
  copy weights), where they hold two effective draws or more;
* ``spread``: every draw of the run in the cell, unweighted, at any temperature (the
  cell as the chains crossed it, also where they hardly stayed at beta = 1);
* ``pathfinder``: the search's centre with the covariance of that mode's Pathfinder
  draws (``ModeSearch.covariances``: the importance-weighted covariance of the path the
  centre comes from);
* ``laplace``: instead, the inverse of the density's negative Hessian at the centre
  (central differences through CmdStan).

Draws that fall outside the cell weigh nothing, so each ``Z_k`` is unbiased whatever the
proposal; ``E[f] = sum_k Z_k E_k[f] / sum_k Z_k``.  Unlike the run's post-stratified
shares, nothing here counts how often a chain entered a mode: a cell needs only draws
enough to place the proposal.  ``--parts`` drops parts to see what each one carries.

``--case DIR`` runs a validation case of two coordinates ``vector[2] x`` instead
(``model.stan``, ``data.json`` and a ``truth.json`` with ``mean``, ``sd`` and ``log_z``),
and prints the run's own estimates' errors beside the cells' (touching modes, a
heavy-tailed mode, a curved one: where cells cut through mass).

The script prints, per method and seed, the errors against the exact moments and
log Z with their z-scores, the largest Pareto k of a cell's weights and the k of all the
weights pooled, how many combined standard errors the cells' moments lie from the run's
own at most (a cross-check either could make of the other), the run's seconds
and the importance sampling's seconds (CmdStan evaluations included), then the RMSEs and
accuracy per second against SMC's figures (bench 20261130T110042Z-5025).  The findings
are in docs/validation.md, "Tempering alone, weighed cell by cell".

    python benchmarks/cell_is_experiment.py --methods ct pe --seeds 1 2 3 4 5
    python benchmarks/cell_is_experiment.py --case \
        benchmarks/validation_cases/multimodal/ridge_pair_2d
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import smc_comparison

import pemc_stan
from pemc_stan.estimators import weights as W
from pemc_stan.estimators.stratified import (
    stratified_log_z,
    stratified_mean,
    stratum_log_weights,
)
from pemc_stan.modes.density import DensityEvaluator

#: SMC's RMSEs of E[X1], E[X2], E[X1^2], E[X2^2], log Z and its mean seconds (b289738 table).
SMC_RMSE = np.array([0.0775, 0.0807, 0.827, 0.988, 0.0457])
SMC_SECONDS = 1.75
DRAWS_PER_CELL = 4000
DF = 5.0
INFLATE = 2.0
STEP = 1e-3


def nearest(x: NDArray[np.float64], centres: NDArray[np.float64]) -> NDArray[np.intp]:
    """The index of the nearest centre for each row of ``x``."""
    return np.argmin(((x[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)


def run_draws(fit: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Every draw of ``x`` the run made (PE: every copy) and its log weight to the target."""
    dim = np.atleast_2d(fit.search.centres).shape[1]
    x = np.stack([fit.particles(f"x[{d + 1}]").ravel() for d in range(dim)], axis=-1)
    if type(fit).__name__ == "ContinuousTemperingFit":
        return x, fit.bias.log_w_pair(fit.delta().ravel())[1]
    return x, np.asarray(fit.particle_log_weights(), dtype=float).ravel()


def laplace_covariances(density: DensityEvaluator, centres: NDArray[np.float64]
                        ) -> list[NDArray[np.float64] | None]:
    """``(-H)^-1`` at each centre by central differences (None where not positive definite)."""
    dim = centres.shape[1]
    e = np.eye(dim) * STEP
    pts = [c + a * e[i] + b * e[j] for c in centres for i in range(dim) for j in range(dim)
           for a in (1, -1) for b in (1, -1)]
    lg = density.log_density({"x": np.array(pts)}).reshape(len(centres), dim, dim, 2, 2)
    out: list[NDArray[np.float64] | None] = []
    for v in lg:
        h = (v[:, :, 0, 0] - v[:, :, 0, 1] - v[:, :, 1, 0] + v[:, :, 1, 1]) / (4 * STEP**2)
        h = (h + h.T) / 2
        try:
            cov = np.linalg.inv(-h)
            np.linalg.cholesky(cov)
            out.append(cov)
        except np.linalg.LinAlgError:
            out.append(None)
    return out


def proposals(x: NDArray[np.float64], lw: NDArray[np.float64], centre: NDArray[np.float64],
              laplace: NDArray[np.float64] | None, parts: set[str], rng: np.random.Generator
              ) -> list[Any]:
    """The cell's Student-t parts (see the module docstring)."""
    out = []
    if "target" in parts and x.shape[0] > x.shape[1] + 1:
        p = np.exp(lw - logsumexp(lw))
        if 1 / np.sum(p**2) >= max(2, x.shape[1] + 1):  # a covariance needs D + 1
            m = p @ x
            cov = ((x - m).T * p) @ (x - m) + 1e-9 * np.eye(x.shape[1])
            out.append(stats.multivariate_t(m, INFLATE * cov, df=DF, seed=rng))
    if "spread" in parts and x.shape[0] > x.shape[1] + 1:
        cov = np.atleast_2d(np.cov(x.T)) + 1e-9 * np.eye(x.shape[1])
        out.append(stats.multivariate_t(x.mean(0), INFLATE * cov, df=DF, seed=rng))
    if laplace is not None:  # the search's mode: its Hessian's or its Pathfinder draws'
        out.append(stats.multivariate_t(centre, INFLATE * laplace, df=DF, seed=rng))
    return out


def cell_estimate(fit: Any, density: DensityEvaluator, parts: set[str], seed: int
                  ) -> tuple[NDArray[np.float64], NDArray[np.float64], tuple[float, float], int]:
    """Estimates of each E[X_d], then each E[X_d^2], and log Z
    (:mod:`pemc_stan.estimators.stratified`); their standard errors; the largest Pareto
    k of a cell's weights and the k of all the weights pooled; the number of cells."""
    rng = np.random.default_rng(seed)
    centres = np.atleast_2d(np.asarray(fit.search.centres, dtype=float))
    x, lw = run_draws(fit)
    lab = nearest(x, centres)
    laplace: list[NDArray[np.float64] | None] = [None] * len(centres)
    if "laplace" in parts:
        laplace = laplace_covariances(density, centres)
    elif "pathfinder" in parts:
        laplace = list(np.asarray(fit.search.covariances, dtype=float).reshape(
            len(centres), centres.shape[1], centres.shape[1]))
    ys, lqs, cells = [], [], []
    for k in range(len(centres)):
        qs = proposals(x[lab == k], lw[lab == k], centres[k], laplace[k], parts, rng)
        if not qs:
            continue
        y = np.concatenate([q.rvs(DRAWS_PER_CELL // len(qs)) for q in qs])
        ys.append(y)
        lqs.append(logsumexp([q.logpdf(y) for q in qs], axis=0) - np.log(len(qs)))
        cells.append(np.full(y.shape[0], k))
    y, lq, cell = np.concatenate(ys), np.concatenate(lqs), np.concatenate(cells)
    lg = density.log_density({"x": y})
    inside = nearest(y, centres) == cell
    lu = stratum_log_weights(lg, lq, inside, cell)
    kmax = max((float(W.pareto_smooth(lu[(cell == k) & inside])[1]) for k in np.unique(cell)
                if np.sum((cell == k) & inside) > 50), default=np.nan)
    pooled_k = float(W.pareto_smooth(lu[np.isfinite(lu)])[1])
    moments = stratified_mean(np.concatenate([y, y**2], axis=1), lu, cell)
    log_z, log_z_se = stratified_log_z(lu, cell)
    est = [*moments.mean, log_z]
    se = [*moments.std_error, log_z_se]
    return np.array(est), np.array(se), (kmax, pooled_k), len(centres)


def errors_text(names: list[str], err: NDArray[np.float64], se: NDArray[np.float64]) -> str:
    """``name error (z)`` for each quantity."""
    return ", ".join(f"{n} {e:+.4f} ({e / s:+.1f})"
                     for n, e, s in zip(names, err, se, strict=False))


def case_target(folder: Path | None) -> tuple[str, dict[str, Any], NDArray[np.float64], str]:
    """Program, data, exact E[x1], E[x2], E[x1^2], E[x2^2], log Z and a name: the
    mixture on R^2, or a validation case's folder."""
    if folder is None:
        t = smc_comparison.mixture_target("a", "plain", 5.0, 5.0)
        return t.program, t.data, np.array([*t.mean, *t.second, 0.0]), "mixture_a"
    truth = json.loads((folder / "truth.json").read_text())
    dim = sum(1 for c in truth["mean"] if c.startswith("x["))
    mean = np.array([truth["mean"][f"x[{d + 1}]"] for d in range(dim)])
    sd = np.array([truth["sd"][f"x[{d + 1}]"] for d in range(dim)])
    data_file = folder / "data.json"
    data = json.loads(data_file.read_text()) if data_file.exists() else {}
    return ((folder / "model.stan").read_text(), data,
            np.array([*mean, *(sd**2 + mean**2), truth["log_z"]]), folder.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["ct", "pe"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--parts", nargs="+", default=["target", "spread", "pathfinder"],
                        choices=["target", "spread", "pathfinder", "laplace"])
    parser.add_argument("--case", type=Path, default=None)
    args = parser.parse_args(argv)
    program, data, exact, name = case_target(args.case)
    density = DensityEvaluator(program, data, name=name)
    dim = (exact.size - 1) // 2
    density.log_density({"x": np.zeros((1, dim))})  # compile outside the timings
    names = ([f"E[X{d + 1}]" for d in range(dim)] + [f"E[X{d + 1}^2]" for d in range(dim)]
             + ["log Z"])
    for method in args.methods:
        errors, seconds = [], []
        for seed in args.seeds:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = pemc_stan.sample(program, data, method=method,
                                       split_modes="never", seed=seed)
            run_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            est, se, (kmax, pooled_k), cells = cell_estimate(fit, density, set(args.parts),
                                                             seed)
            is_s = time.perf_counter() - t1
            err = est - exact
            errors.append(err)
            cols = [f"x[{d + 1}]" for d in range(dim)]
            own = [fit.expectation(c) for c in cols]
            own += [fit.expectation(lambda d, c=c: d[c] ** 2) for c in cols]
            own_est = np.array([float(o.mean) for o in own])
            own_se = np.array([float(o.mcse) for o in own])
            apart = np.max(np.abs(est[:-1] - own_est) / np.hypot(se[:-1], own_se))
            if args.case is not None:
                verdict = "ok" if fit.check().ok else "suspect"
                print(f"{method} seed {seed}: the run's own, {verdict}: "
                      + errors_text(names, own_est - exact[:-1], own_se))
            seconds.append(run_s + is_s)
            print(f"{method} seed {seed}: {cells} cells, largest k {kmax:.2f}, pooled k "
                  f"{pooled_k:.2f}, {apart:.1f} combined errors from the run's own; run "
                  f"{run_s:.1f} s, cells {is_s:.2f} s; errors (z) " + errors_text(names, err, se),
                  flush=True)
        rmse = np.sqrt(np.mean(np.square(errors), axis=0))
        print(f"{method}: mean {np.mean(seconds):.2f} s; RMSE "
              + ", ".join(f"{n} {r:.4f}" for n, r in zip(names, rmse, strict=True)))
        if args.case is not None:
            continue
        ratio = SMC_RMSE**2 * SMC_SECONDS / (rmse**2 * np.mean(seconds))
        print(f"{method}: accuracy per second / SMC's "
              + ", ".join(f"{n} {r:.3g}" for n, r in zip(names, ratio, strict=True)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
