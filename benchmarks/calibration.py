"""Calibration of continuous tempering's log Z error bars, run as one pemc-stan batch.

For three models with exact log Z — normal–normal (conjugate), Bayesian linear
regression (conjugate, 20 observations × 3 coefficients) and the bimodal 1-D
mixture (modes 12 sd apart, log Z = 0) — ``--fits`` seeded CT fits each with
the defaults go through :func:`pemc_stan.batch.run` on a local Dask cluster.
For each model the z-scores ``(log Z_hat - log Z) / SE`` are summarised: mean,
sd, and the share of fits whose ±2 SE interval covers the exact value (95.4%
for honest, normal errors), with the verdicts the fits gave themselves.  For the
bimodal mixture the same is printed for E[x] = 1.2 (its error bar depends on how
well the fit weighs the two modes, which log Z alone does not show).

Usage::

    python benchmarks/calibration.py [--fits 100] [--workers 2] [--work-dir DIR]

A rerun with the same work dir resumes (finished fits are skipped).  One line
per model is appended to ``benchmarks/results/calibration.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"


def exact_normal_normal() -> float:
    d = json.loads((MODELS / "normal_normal" / "data.json").read_text())
    y = np.asarray(d["y"], dtype=float)
    n = len(y)
    cov = d["sigma"] ** 2 * np.eye(n) + d["tau0"] ** 2 * np.ones((n, n))
    return float(stats.multivariate_normal(np.full(n, d["mu0"]), cov).logpdf(y))


def exact_linear_regression() -> float:
    d = json.loads((MODELS / "linear_regression" / "full.data.json").read_text())
    x = np.asarray(d["X"], dtype=float)
    y = np.asarray(d["y"], dtype=float)
    cov = d["sigma"] ** 2 * np.eye(len(y)) + d["tau"] ** 2 * x @ x.T
    return float(stats.multivariate_normal(np.zeros(len(y)), cov).logpdf(y))


#: Exact posterior means checked as well: model -> (parameter column, exact mean).
MEANS = {"bimodal_1d": ("x", 0.3 * -3.0 + 0.7 * 3.0)}

CASES = {
    "normal_normal": ("example:normal_normal", None, exact_normal_normal),
    "linear_regression": ("example:linear_regression",
                          str(MODELS / "linear_regression" / "full.data.json"),
                          exact_linear_regression),
    "bimodal_1d": ("example:bimodal_1d", None, lambda: 0.0),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fits", type=int, default=100, help="fits per model (default 100)")
    parser.add_argument("--workers", type=int, default=None,
                        help="local Dask workers (default one per core)")
    parser.add_argument("--scheduler", default=None, help="a Dask scheduler's address")
    parser.add_argument("--work-dir", type=Path, default=Path("calibration_runs"),
                        help="the batch's output folder (default ./calibration_runs)")
    parser.add_argument("--results", type=Path,
                        default=ROOT / "benchmarks" / "results" / "calibration.jsonl")
    args = parser.parse_args(argv)

    from pemc_stan import batch

    tasks = []
    for name, (model, data, _) in CASES.items():
        tasks.append({"name": name, "model": model, "data": data, "method": "ct",
                      "seeds": {"start": 1, "count": args.fits}})
    client = None
    if args.scheduler:
        from distributed import Client

        client = Client(args.scheduler)
    start = time.perf_counter()
    result = batch.run(tasks, client, output_dir=args.work_dir, workers=args.workers,
                       progress=lambda p: print(p, file=sys.stderr, flush=True))
    wall = time.perf_counter() - start
    table = result.table
    import dataclasses

    from pemc_stan.methods.continuous_tempering.options import ContinuousTemperingOptions
    from pemc_stan.output.json_values import json_safe

    ct_defaults = json_safe(dataclasses.asdict(ContinuousTemperingOptions()))
    print(f"calibration of CT log Z standard errors: {args.fits} fits per model, defaults "
          f"(4 chains x 1000 draws), batch wall time {wall:.0f} s "
          f"({len(result.ran)} run now, {len(result.names('skipped'))} from an earlier run)")
    print(f"{'model':<18} {'exact log Z':>12} {'fits':>5} {'z mean':>7} {'z sd':>6} "
          f"{'cover 2SE':>9} {'median SE':>9} {'suspect':>7} {'failed':>6}")
    for name, (_, _, exact_fn) in CASES.items():
        exact = exact_fn()
        rows = table[table["task"].str.startswith(f"{name}-seed")]
        ok = rows[rows["status"].isin(["done", "skipped"])]
        z = ((ok["log_z"] - exact) / ok["log_z_se"]).to_numpy(dtype=float)
        z = z[np.isfinite(z)]
        cover = float(np.mean(np.abs(z) <= 2.0)) if z.size else math.nan
        suspect = int((ok["verdict"] == "suspect").sum())
        line = {"model": name, "exact_log_z": exact, "fits": int(len(ok)),
                "failed": int(len(rows) - len(ok)), "z_mean": float(np.mean(z)),
                "z_sd": float(np.std(z, ddof=1)), "coverage_2se": cover,
                "median_se": float(np.median(ok["log_z_se"])), "suspect": suspect,
                "mean_seconds": float(ok["seconds"].mean()), "ct_defaults": ct_defaults}
        print(f"{name:<18} {exact:>12.4f} {line['fits']:>5} {line['z_mean']:>7.2f} "
              f"{line['z_sd']:>6.2f} {cover:>9.1%} {line['median_se']:>9.4f} {suspect:>7} "
              f"{line['failed']:>6}")
        if name in MEANS:
            column, exact_mean = MEANS[name]
            zm = ((ok[f"mean[{column}]"] - exact_mean) / ok[f"mcse[{column}]"]).to_numpy(
                dtype=float)
            zm = zm[np.isfinite(zm)]
            line.update({f"mean_{column}_exact": exact_mean,
                         f"mean_{column}_z_mean": float(np.mean(zm)),
                         f"mean_{column}_z_sd": float(np.std(zm, ddof=1)),
                         f"mean_{column}_coverage_2se": float(np.mean(np.abs(zm) <= 2.0)),
                         f"mean_{column}_median_mcse": float(np.median(ok[f"mcse[{column}]"])),
                         f"mean_{column}_max_mcse": float(np.max(ok[f"mcse[{column}]"]))})
            print(f"{'  E[' + column + ']':<18} {exact_mean:>12.4f} {len(zm):>5} "
                  f"{np.mean(zm):>7.2f} {np.std(zm, ddof=1):>6.2f} "
                  f"{line[f'mean_{column}_coverage_2se']:>9.1%} "
                  f"{line[f'mean_{column}_median_mcse']:>9.4f}   (largest MCSE "
                  f"{line[f'mean_{column}_max_mcse']:.3f})")
        args.results.parent.mkdir(parents=True, exist_ok=True)
        with args.results.open("a") as f:
            f.write(json.dumps(line) + "\n")
    if client is not None:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
