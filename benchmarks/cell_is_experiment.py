"""Experiment: a tempered run's cells weighed by importance sampling inside each cell.

After CT or PE with ``split_modes='never'`` (tempering alone, defaults), the search's
mode centres cut the base coordinates into cells, and each cell's mass is estimated by
importance sampling with a proposal made for that cell alone
(:func:`pemc_stan.modes.cells.cell_draws`: the run's particles in the cell weighted to
the target, all of them unweighted, and the search's centre with its Pathfinder
covariance).  ``--parts run`` leaves the search's part out, ``--parts search`` the run's
particles: what each source carries.  ``--moments run`` keeps the cells' shares but takes
each cell's moments from the run's particles in it where they hold enough target draws
(a chain follows a curved mode's arm where a cell's proposal may not; the z-scores then
use the cells' standard errors).  ``--cover`` adds the search's covering Gaussian to every
cell's proposal; ``--quadrature`` prints each cell's share and second moments against a
grid quadrature (two coordinates).

Targets: the 20-Gaussian mixture on R^2 (scenario a, the default), or ``--case DIR``, a
validation case in the shared truth format (``model.stan``, ``data.json``, a
``truth.json`` whose ``mean`` and ``sd`` name columns; ``log_z`` when it has one).  The
run's own estimates are printed beside the cells' for a case.

The script prints, per method and seed, the errors against the exact moments and log Z
with their z-scores, the Pareto k of all the cells' weights pooled, how many combined
standard errors the cells' means and second moments lie from the run's own at most (a
cross-check either could make of the other), the run's seconds and the cells' (CmdStan
evaluations included); then the RMSEs and, on the mixture, the accuracy per second
against SMC's figures (bench 20261130T110042Z-5025).  The findings are in
docs/validation.md, "Tempering alone, weighed cell by cell".

    python benchmarks/cell_is_experiment.py --methods ct pe --seeds 1 2 3 4 5
    python benchmarks/cell_is_experiment.py --case \\
        benchmarks/validation_cases/multimodal/ridge_pair_2d --seeds 1 2
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
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import smc_comparison

import pemc_stan
from pemc_stan.estimators import weights as W
from pemc_stan.estimators.stratified import stratified_mean, stratum_log_masses
from pemc_stan.methods.base_density import BaseDensity
from pemc_stan.modes.cells import CELL_DRAWS, CellDraws, cell_draws
from pemc_stan.modes.density import DensityEvaluator

#: SMC's RMSEs of E[X1], E[X2], E[X1^2], E[X2^2], log Z and its mean seconds (b289738 table).
SMC_RMSE = np.array([0.0775, 0.0807, 0.827, 0.988, 0.0457])
SMC_SECONDS = 1.75
#: ``--moments run``: a cell's moments from the run's particles when they hold this many
#: effective target draws.
RUN_CELL_ESS = 50


class Case:
    """A target: program, data, and the exact mean of each column (and second moment
    where its sd is known) and log Z (NaN when unknown)."""

    def __init__(self, folder: Path | None) -> None:
        if folder is None:
            t = smc_comparison.mixture_target("a", "plain", 5.0, 5.0)
            self.program, self.data, self.name = t.program, t.data, "mixture_a"
            mean = dict(zip(("x[1]", "x[2]"), t.mean, strict=True))
            second = dict(zip(("x[1]", "x[2]"), t.second, strict=True))
            self.log_z = 0.0
        else:
            truth = json.loads((folder / "truth.json").read_text())
            if not isinstance(truth.get("mean"), dict):
                raise SystemExit(f"{folder}: truth.json is not in the shared format")
            data_file = folder / "data.json"
            self.program = (folder / "model.stan").read_text()
            self.data = json.loads(data_file.read_text()) if data_file.exists() else {}
            self.name = folder.name
            mean = {c: float(v) for c, v in truth["mean"].items()}
            second = {c: float(s) ** 2 + mean[c] ** 2 for c, s in truth.get("sd", {}).items()}
            self.log_z = float(truth.get("log_z", np.nan))
        self.names = ([f"E[{c}]" for c in mean] + [f"E[{c}^2]" for c in second] + ["log Z"])
        self.columns = list(mean) + list(second)
        self.powers = [1] * len(mean) + [2] * len(second)
        self.exact = np.array([*mean.values(), *second.values(), self.log_z])


def particles(fit: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The run's particles in base coordinates and their log target weights."""
    z = np.asarray(fit.particle_coordinates(), dtype=float)
    with np.errstate(divide="ignore"):
        return z, np.log(fit.target_weights()).reshape(-1)


def cells_of(fit: Any, density: DensityEvaluator, parts: str, seed: int, cover: bool,
             n: int = CELL_DRAWS) -> CellDraws | None:
    """The cells' importance draws after ``fit`` (``parts``: all, run or search; ``cover``:
    every cell's proposal also gets the search's covering Gaussian, twice as wide, with
    Student-t tails of 3 degrees of freedom, as the wide checks draw from)."""
    search = fit.search
    z, lw = particles(fit)
    if parts == "search":
        z, lw = z[:0], lw[:0]
    covariances = None if parts == "run" else search.covariances
    wide = BaseDensity(search.base.mean, 4.0 * search.base.cov, "dense", df=3.0)
    return cell_draws(fit.result.coordinates, density, fit.data, search.base, search.centres,
                      covariances, z, lw, seed, n, cover=wide if cover else None)


def quadrature(case: Case, fit: Any, density: DensityEvaluator, draws: CellDraws) -> None:
    """Print each cell's share and second moments, the cells' estimates against a grid
    quadrature of the density (two coordinates only, the grid 12 exact sds around the
    exact mean, 801 x 801 points)."""
    cols = [c for c, p in zip(case.columns, case.powers, strict=True) if p == 1]
    sd = {c: np.sqrt(case.exact[len(cols) + i] - case.exact[i] ** 2) for i, c in enumerate(cols)}
    axes = [np.linspace(case.exact[i] - 12 * sd[c], case.exact[i] + 12 * sd[c], 801)
            for i, c in enumerate(cols)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)
    log_p = np.asarray(density.log_density({"x": grid}), dtype=float)
    p = np.exp(log_p - logsumexp(log_p))
    z, _ = fit.result.coordinates.forward({"x": grid}, fit.data)
    cell = fit.search.base.nearest_centre(z, fit.search.centres)
    log_m = stratum_log_masses(draws.log_u, draws.strata)
    shares = np.exp(log_m - logsumexp(log_m))
    for k in range(len(shares)):
        inside = cell == k
        own = draws.strata == k
        text = [f"cell {k}: share {shares[k]:.3f} (quadrature {p[inside].sum():.3f})"]
        for i, c in enumerate(cols):
            exact = float(p[inside] @ grid[inside, i] ** 2 / p[inside].sum())
            est = stratified_mean(draws.values[c][own] ** 2, draws.log_u[own], draws.strata[own])
            text.append(f"E[{c}^2] {float(est.mean):.3f} +- {float(est.std_error):.3f} "
                        f"(quadrature {exact:.3f})")
        print("    " + "; ".join(text))


def run_moments(case: Case, fit: Any, draws: CellDraws) -> NDArray[np.float64]:
    """The cells' shares with each cell's moments from the run's particles in it where
    they hold :data:`RUN_CELL_ESS` effective target draws, else from the cell's
    importance draws (``--moments run``; estimates only, no standard errors)."""
    z, lw = particles(fit)
    lab = fit.search.base.nearest_centre(z, fit.search.centres)
    log_m = stratum_log_masses(draws.log_u, draws.strata)
    share = np.exp(log_m - logsumexp(log_m))
    out = []
    for c, p in zip(case.columns, case.powers, strict=True):
        run_values = fit.particles(c).reshape(-1) ** p
        total = 0.0
        for k in np.flatnonzero(share > 0):
            inside = lab == k
            if np.any(inside) and W.ess(lw[inside]) >= RUN_CELL_ESS:
                total += share[k] * float(W.weighted_mean(run_values[inside], lw[inside]).mean)
            else:
                own = draws.strata == k
                total += share[k] * float(stratified_mean(draws.values[c][own] ** p,
                                                          draws.log_u[own],
                                                          draws.strata[own]).mean)
        out.append(total)
    return np.array(out)


def estimates(case: Case, draws: CellDraws) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The cells' estimates of the case's quantities and their standard errors."""
    est, se = [], []
    for c, p in zip(case.columns, case.powers, strict=True):
        m = draws.mean(draws.values[c] ** p)
        est.append(float(m.mean))
        se.append(float(m.std_error))
    log_z, log_z_se = draws.log_z()
    return np.array([*est, log_z]), np.array([*se, log_z_se])


def errors_text(names: list[str], err: NDArray[np.float64], se: NDArray[np.float64]) -> str:
    """``name error (z)`` for each quantity with an exact value."""
    return ", ".join(f"{n} {e:+.4f} ({e / s:+.1f})"
                     for n, e, s in zip(names, err, se, strict=False) if np.isfinite(e))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["ct", "pe"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--parts", default="all", choices=["all", "run", "search"])
    parser.add_argument("--case", type=Path, default=None)
    parser.add_argument("--moments", default="cells", choices=["cells", "run"])
    parser.add_argument("--cover", action="store_true")
    parser.add_argument("--draws", type=int, default=CELL_DRAWS, help="draws per cell")
    parser.add_argument("--quadrature", action="store_true")
    args = parser.parse_args(argv)
    case = Case(args.case)
    density = DensityEvaluator(case.program, case.data, name=case.name)
    density.model  # compiled outside the timings  # noqa: B018
    for method in args.methods:
        errors, seconds = [], []
        for seed in args.seeds:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = pemc_stan.sample(case.program, case.data, method=method,
                                       split_modes="never", seed=seed)
            run_s = time.perf_counter() - t0
            if fit.search is None or fit.search.centres is None:
                print(f"{method} seed {seed}: no search centres: no cells")
                continue
            t1 = time.perf_counter()
            draws = cells_of(fit, density, args.parts, seed, args.cover, args.draws)
            cells_s = time.perf_counter() - t1
            if draws is None:
                print(f"{method} seed {seed}: the cells could not be drawn")
                continue
            est, se = estimates(case, draws)
            if args.moments == "run":
                est = np.array([*run_moments(case, fit, draws), est[-1]])
            own = [fit.run_expectation(lambda v, c=c, p=p: v[c] ** p)
                   for c, p in zip(case.columns, case.powers, strict=True)]
            own_est = np.array([float(o.mean) for o in own])
            own_se = np.array([float(o.mcse) for o in own])
            apart = np.max(np.abs(est[:-1] - own_est) / np.hypot(se[:-1], own_se))
            errors.append(est - case.exact)
            seconds.append(run_s + cells_s)
            if args.case is not None:
                verdict = "ok" if fit.check().ok else "suspect"
                print(f"{method} seed {seed}: the run's own, {verdict}: "
                      + errors_text(case.names, own_est - case.exact[:-1], own_se))
            print(f"{method} seed {seed}: {draws.cells} cells, pooled k {draws.pooled_k():.2f}, "
                  f"{apart:.1f} combined errors from the run's own; run {run_s:.1f} s, cells "
                  f"{cells_s:.2f} s; errors (z) " + errors_text(case.names, est - case.exact, se),
                  flush=True)
            if args.quadrature:
                quadrature(case, fit, density, draws)
        if not errors:
            continue
        rmse = np.sqrt(np.mean(np.square(errors), axis=0))
        print(f"{method}: mean {np.mean(seconds):.2f} s; RMSE "
              + ", ".join(f"{n} {r:.4f}" for n, r in zip(case.names, rmse, strict=True)
                          if np.isfinite(r)))
        if args.case is None:
            ratio = SMC_RMSE**2 * SMC_SECONDS / (rmse**2 * np.mean(seconds))
            print(f"{method}: accuracy per second / SMC's "
                  + ", ".join(f"{n} {r:.3g}" for n, r in zip(case.names, ratio, strict=True)),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
