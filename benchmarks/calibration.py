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

``--suite`` calibrates instead every error bar of the public multimodal suite: it runs
``benchmarks/validation.py`` (PE and CT, the defaults) on each seed of ``--seeds`` whose
records are missing from ``--suite-results``, then takes, per method, the z-scores
``(estimate - exact) / SE`` of log Z and of every reported moment (means, variances,
probabilities of the cases' ``truth.json``) of the latest record of each case and seed,
prints their spread and the share within 2 (95.4% for honest normal errors; 0.90-0.99
is the target), for all runs and for those the verdict called ok, and draws their
histograms against N(0, 1) (``--png``).  Beside them, the z-scores of log Z and of each
reported ``E[x_i]`` of the field's evidence targets from ``benchmarks/peers.py``'s
records (``--peers-results``; it is not run from here)::

    python benchmarks/calibration.py --suite --seeds 1 10 [--suite-results R] [--png P]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))  # validation.py, run by --suite
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


#: z-scores beyond this are drawn in the histogram's last bins (their count is printed).
Z_CLIP = 6.0


def suite_z(records: list[dict[str, Any]], method: str, seeds: range,
            ok_only: bool = False) -> dict[str, list[float]]:
    """The z-scores of ``method``'s multimodal records in ``seeds`` (the latest record of
    each case and seed): ``{"log Z": [...], "moments": [...]}``, non-finite ones (a
    missing standard error) left out."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for r in records:
        if r.get("kind") == "multimodal" and r.get("method") == method \
                and r.get("seed") in seeds:
            latest[(r["case"], r["seed"])] = r
    out: dict[str, list[float]] = {"log Z": [], "moments": []}
    for r in latest.values():
        if ok_only and r.get("verdict") != "ok":
            continue
        for quantity, z in (r.get("z") or {}).items():
            if z is not None and math.isfinite(z):
                out["log Z" if quantity == "log_z" else "moments"].append(float(z))
    return out


def peers_z(records: list[dict[str, Any]], method: str, seeds: range,
            ok_only: bool = False, means: bool = False) -> list[float]:
    """The log Z z-scores (``means``: those of each reported ``E[x_i]``) of ``method``'s
    records of the field's targets (``benchmarks/peers.py``) in ``seeds``, the latest of
    each target and seed; those without a finite standard error left out."""
    import peers  # benchmarks/ is on sys.path

    out = []
    for r in peers.latest(records, sorted({r["target"] for r in records}), list(seeds)):
        if r.get("sampler") != method or (ok_only and r.get("verdict") != "ok"):
            continue
        if means:
            pairs = zip(r.get("mean_x", []), r.get("mean_x_se", []), r.get("exact_means", []),
                        strict=False)
        else:
            pairs = iter([(r.get("log_z"), r.get("log_z_se"), r["exact"])])
        for est, se, exact in pairs:
            if est is not None and se is not None and math.isfinite(est) \
                    and math.isfinite(se) and se > 0:
                out.append((float(est) - float(exact)) / float(se))
    return out


def z_classes(records: list[dict[str, Any]], peers: list[dict[str, Any]], method: str,
              seeds: range, ok_only: bool = False) -> dict[str, list[float]]:
    """The suite's z-scores by quantity class (:func:`suite_z`), and the targets' log Z
    and means (:func:`peers_z`)."""
    return {**suite_z(records, method, seeds, ok_only),
            "targets' log Z": peers_z(peers, method, seeds, ok_only),
            "targets' means": peers_z(peers, method, seeds, ok_only, means=True)}


def z_summary(z: list[float]) -> str:
    """Count, mean, sd, the share within 2 and the number beyond 4 of z-scores."""
    a = np.asarray(z, dtype=float)
    if a.size < 2:
        return f"{a.size:6d}"
    return (f"{a.size:6d} {np.mean(a):7.2f} {np.std(a, ddof=1):6.2f} "
            f"{np.mean(np.abs(a) <= 2.0):9.1%} {int(np.sum(np.abs(a) > 4.0)):7d}")


def suite_table(records: list[dict[str, Any]], peers: list[dict[str, Any]],
                seeds: range) -> str:
    """Per method and quantity class, the z-scores' summary (all runs, then ok runs)."""
    rows = [f"{'method':<6} {'quantity':<14} {'runs':<4} {'n':>6} {'mean':>7} {'sd':>6} "
            f"{'|z| <= 2':>9} {'|z| > 4':>7}"]
    for method in ("ct", "pe"):
        for ok_only in (False, True):
            zs = z_classes(records, peers, method, seeds, ok_only)
            for quantity, z in zs.items():
                rows.append(f"{method:<6} {quantity:<14} {'ok' if ok_only else 'all':<4} "
                            f"{z_summary(z)}")
    return "\n".join(rows)


def suite_png(records: list[dict[str, Any]], peers: list[dict[str, Any]], seeds: range,
              path: Path) -> None:
    """Histograms of the z-scores (per method and quantity class, every run and the ok
    ones) against the N(0, 1) density."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    classes = ("log Z", "moments", "targets' log Z", "targets' means")
    fig, axes = plt.subplots(2, len(classes), figsize=(20, 7), sharex=True)
    bins = np.linspace(-Z_CLIP, Z_CLIP, 49)
    grid = np.linspace(-Z_CLIP, Z_CLIP, 400)
    for row, method in enumerate(("ct", "pe")):
        every = z_classes(records, peers, method, seeds)
        ok = z_classes(records, peers, method, seeds, True)
        for col, quantity in enumerate(classes):
            ax = axes[row, col]
            for z, label, style in ((every[quantity], "every run", "step"),
                                    (ok[quantity], "verdict ok", "stepfilled")):
                a = np.clip(np.asarray(z, dtype=float), -Z_CLIP, Z_CLIP)
                if a.size:
                    inside = np.mean(np.abs(np.asarray(z)) <= 2.0)
                    ax.hist(a, bins=bins, density=True, histtype=style,
                            alpha=0.45 if style == "stepfilled" else 1.0,
                            label=f"{label}: {a.size}, {inside:.1%} within 2")
            ax.plot(grid, stats.norm.pdf(grid), "k--", lw=1, label="N(0, 1)")
            label = (quantity.removeprefix("targets' ") + ", the field's targets"
                     if quantity.startswith("targets'") else f"{quantity}, the suite")
            ax.set_title(f"{method.upper()}: {label}, seeds {seeds.start}-{seeds.stop - 1}",
                         fontsize=10)
            ax.legend(fontsize=8)
            if row == 1:
                ax.set_xlabel(f"(estimate - exact) / SE, clipped to +-{Z_CLIP:g}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def suite(args: argparse.Namespace) -> int:
    """Run the multimodal suite on the seeds missing from the results, then summarise."""
    import validation

    seeds = range(args.seeds[0], args.seeds[1] + 1)
    names = sorted(n for n, c in validation.cases(args.validation).items()
                   if c["kind"] == "multimodal")
    for seed in seeds:
        have = {(r["case"], r["method"]) for r in validation.load(args.suite_results)
                if r.get("seed") == seed} if args.suite_results.is_file() else set()
        todo = [n for n in names if (n, "ct") not in have or (n, "pe") not in have]
        if todo:
            print(f"seed {seed}: running {len(todo)} case(s)", file=sys.stderr, flush=True)
            validation.main(["--validation", str(args.validation), "--seed", str(seed),
                             "--methods", "pe", "ct", "--results", str(args.suite_results),
                             "--cases", *todo])
    records = validation.load(args.suite_results)
    peers = validation.load(args.peers_results) if args.peers_results.is_file() else []
    print(f"calibration of the multimodal suite's error bars ({len(names)} cases, seeds "
          f"{seeds.start}-{seeds.stop - 1}, the defaults; z = (estimate - exact) / SE; "
          f"log Z and every reported moment) and of log Z and E[x] on the field's targets "
          f"(records of benchmarks/peers.py)")
    print(suite_table(records, peers, seeds))
    if args.png is not None:
        suite_png(records, peers, seeds, args.png)
        print(f"histograms: {args.png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="store_true",
                        help="calibrate the multimodal suite's error bars instead")
    parser.add_argument("--seeds", type=int, nargs=2, default=[1, 10], metavar=("FIRST", "LAST"),
                        help="--suite: the seeds (default 1 10)")
    parser.add_argument("--suite-results", type=Path,
                        default=ROOT / "benchmarks" / "results" / "validation.jsonl",
                        help="--suite: the validation records read and appended to")
    parser.add_argument("--peers-results", type=Path,
                        default=ROOT / "benchmarks" / "results" / "peers.jsonl",
                        help="--suite: the records of benchmarks/peers.py read beside them")
    parser.add_argument("--validation", type=Path, default=ROOT.parent / "shared" / "validation",
                        help="--suite: the shared validation folder")
    parser.add_argument("--png", type=Path,
                        default=ROOT / "benchmarks" / "results" / "calibration.png",
                        help="--suite: the histograms' PNG")
    parser.add_argument("--fits", type=int, default=100, help="fits per model (default 100)")
    parser.add_argument("--workers", type=int, default=None,
                        help="local Dask workers (default one per core)")
    parser.add_argument("--scheduler", default=None, help="a Dask scheduler's address")
    parser.add_argument("--work-dir", type=Path, default=Path("calibration_runs"),
                        help="the batch's output folder (default ./calibration_runs)")
    parser.add_argument("--results", type=Path,
                        default=ROOT / "benchmarks" / "results" / "calibration.jsonl")
    args = parser.parse_args(argv)
    if args.suite:
        return suite(args)

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
