r"""Table-1-shaped RMSE benchmark: pseudo-extended NUTS vs plain NUTS on the 20-Gaussian mixture.

For each scenario of ``models/gaussian_mixture_20`` and each sampler (plain
NUTS; PE with N = 2, 5, 10), runs ``--seeds`` independent fits and prints the
RMSE over seeds of the estimates of E[X1], E[X2], E[X1^2], E[X2^2] against
the exact moments, the mean number of gradient evaluations per fit (leapfrog
steps, warmup + sampling; a PE gradient covers N copies) and the mean wall
time in seconds.

Defaults follow the paper's experiment (Nemeth et al. 2019, section 4.1 and
their published code): one chain, 50,000 iterations after warm-up, the
uniform box [-10, 10]^2 (part of the model's data), beta on (0.001, 1) with
pi(beta) = g(beta) = 1, and the scale log Z^ = 0 (the mixture is normalised,
so its log Z is known exactly; pass ``--log-scale pilot`` for the Pathfinder
pilot default of :func:`pemc_stan.sample`).  PE expectations are the
self-normalised weighted means over all pseudo-samples (Theorem 2.1).

Documented options that go beyond the paper's set-up and are named in the
table's settings line when used: ``--instrumental a,b`` (g(beta) = Beta(a, b)
instead of the uniform g; ``0.7,1`` puts more of each pseudo-sample's time at
small beta, where it leaves its mode), ``--beta-prior a,b`` (pi(beta); the same
Beta as g, e.g. ``--instrumental 0.5,1 --beta-prior 0.5,1``, keeps the
weight-carrying pseudo-sample hot too) and ``--metric dense_e`` (Stan's dense
mass matrix instead of the diagonal one), ``--noncentring 0.5`` (the PE option:
the pseudo-samples' unconstrained coordinates scaled by beta^(-0.5/2)), with
``--adapt-delta 0.9`` (with the
dense metric and N = 2, Stan's 0.8 let warm-up settle on step sizes 2-3 times
too large in 2 of 13 seeds, which then stayed among a few modes with 5-19%
divergent transitions).  ``--beta-min`` is the PE option ``beta_min`` (its
docstring says how to choose it): the paper's 0.001 suits scenario (a), 0.01
scenario (b).

Every fit's result is appended to ``--results`` (JSON lines) as soon as it
finishes, so a long run can be interrupted and resumed (finished fits are
skipped) and the table printed at any time with ``--report``.

Usage::

    python benchmarks/pe_mixture_benchmark.py --seeds 10 --scenarios a b
    # the recommended settings:
    python benchmarks/pe_mixture_benchmark.py --instrumental 0.5,1 --beta-prior 0.5,1 \
        --metric dense_e --adapt-delta 0.9 --scenarios a
    python benchmarks/pe_mixture_benchmark.py --instrumental 0.5,1 --beta-prior 0.5,1 \
        --metric dense_e --adapt-delta 0.9 --beta-min 0.01 --scenarios b
    python benchmarks/pe_mixture_benchmark.py --report              # seeds 1-10
    python benchmarks/pe_mixture_benchmark.py --report --seeds 20   # seeds 1-20
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from pemc_stan.backend import runtime
from pemc_stan.backend.compile import compile_model
from pemc_stan.methods.pseudo_extended.options import parse_beta_density as beta_density
from pemc_stan.run.pipeline import method_model

ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = ROOT / "models" / "gaussian_mixture_20"
MODEL = MODEL_DIR / "gaussian_mixture_20.stan"
MOMENTS = ("E[X1]", "E[X2]", "E[X1^2]", "E[X2^2]")
#: Table 1 of Nemeth et al. (2019): RMSE over 20 runs of 50,000 iterations.
PAPER = {
    "a": {"HMC": (2.69, 3.96, 24.69, 33.65), "PE N=2": (0.11, 0.10, 1.11, 1.01),
          "PE N=5": (0.04, 0.05, 0.37, 0.45), "PE N=10": (0.03, 0.03, 0.28, 0.23)},
    "b": {"HMC": (0.27, 0.51, 3.12, 4.80), "PE N=2": (0.05, 0.08, 0.46, 0.86),
          "PE N=5": (0.04, 0.02, 0.18, 0.36), "PE N=10": (0.02, 0.02, 0.10, 0.32)},
}


def _grads(fit: Any) -> int:
    return int(fit.draws_pd(vars=["n_leapfrog__"], inc_warmup=True)["n_leapfrog__"].sum())


def run_nuts(data: dict[str, Any], seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """One plain-NUTS fit of the original model."""
    model = compile_model(MODEL)
    t = time.perf_counter()
    fit = model.sample(data=data, chains=args.chains, iter_warmup=args.iter_warmup,
                       iter_sampling=args.iter_sampling, seed=seed, save_warmup=True,
                       show_progress=False, metric=args.metric, adapt_delta=args.adapt_delta)
    secs = time.perf_counter() - t
    x = fit.stan_variable("x")
    est = [x[:, 0].mean(), x[:, 1].mean(), (x[:, 0] ** 2).mean(), (x[:, 1] ** 2).mean()]
    return {"estimates": [float(e) for e in est], "grads": _grads(fit), "seconds": secs,
            "pilot_seconds": 0.0}


def run_pe(data: dict[str, Any], n: int, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """One pseudo-extended fit with ``n`` pseudo-samples."""
    scale = None if args.log_scale == "pilot" else float(args.log_scale)
    pe = method_model(MODEL, data, method="pe", n_pseudo=n, beta_min=args.beta_min, log_scale=scale,
                             noncentring=args.noncentring,
                             instrumental=beta_density(args.instrumental),
                             beta_prior=beta_density(args.beta_prior))
    pe.pe_model()  # compile outside the timings
    t = time.perf_counter()
    log_scale = pe.log_scale(seed)
    pilot = time.perf_counter() - t
    pe.options.log_scale = log_scale
    t = time.perf_counter()
    fit = pe.sample(chains=args.chains, iter_warmup=args.iter_warmup,
                    iter_sampling=args.iter_sampling, seed=seed, save_warmup=True,
                    metric=args.metric, adapt_delta=args.adapt_delta)
    secs = time.perf_counter() - t
    moments: list[Any] = ["x[1]", "x[2]", lambda v: v["x[1]"] ** 2, lambda v: v["x[2]"] ** 2]
    expectations = [fit.expectation(f) for f in moments]
    pooled = [fit.expectation(f, estimator="mixture") for f in moments]
    beta = fit.beta()
    return {"estimates": [float(e.mean) for e in expectations],
            "mcse": [float(e.mcse) for e in expectations],
            "estimates_mixture": [float(e.mean) for e in pooled],
            "mcse_mixture": [float(e.mcse) for e in pooled],
            "grads": _grads(fit.fit), "seconds": secs,
            "pilot_seconds": pilot, "log_scale": log_scale,
            "beta_mean": float(np.mean(beta)), "beta_below_0.1": float(np.mean(beta < 0.1)),
            "weight_ess_mean": float(np.mean(fit.weight_ess()))}


def _load(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["scenario"], r["sampler"], r["seed"], r["settings"])


def _finished(rows: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """Keys of the fits that need no new run.

    PE fits saved before the mixture estimator was recorded are run again
    (same seed and settings); the newer row then replaces the older in the report.
    """
    return {_key(r) for r in rows if r["sampler"] == "NUTS" or "estimates_mixture" in r}


def rmse_and_se(errors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RMSE over seeds (axis 0) of ``errors`` and its standard error.

    The SE comes from the spread of the squared errors (delta method:
    SE(RMSE) = SE(MSE) / (2 RMSE)); with n seeds it is roughly RMSE / sqrt(2 n)
    for Gaussian errors, so 10 seeds pin an RMSE down to about +-22%.
    """
    sq = errors ** 2
    rmse = np.sqrt(sq.mean(axis=0))
    se_mse = sq.std(axis=0, ddof=1) / np.sqrt(len(errors)) if len(errors) > 1 else np.nan * rmse
    return rmse, se_mse / (2 * np.where(rmse > 0, rmse, np.nan))


def report(rows: list[dict[str, Any]]) -> None:
    """Print the Table-1-shaped RMSE tables of the saved results.

    One table per settings line and scenario with the per-draw (Theorem 2.1)
    PE estimates, and, for each whose PE fits all recorded them, a second
    one with the pooled mixture estimates of the same fits
    (``PseudoExtendedFit.expectation(..., estimator="mixture")``).  Under each
    table, every PE row is compared with the paper cell by cell: our RMSE +-
    its standard error over seeds, then '<=' or '>' the paper's.
    """
    latest = {_key(r): r for r in rows}  # a fit run twice (two processes) counts once
    _report_table(list(latest.values()), "")
    pe = [r for r in latest.values() if r["sampler"] != "NUTS"]
    complete = ({(r["settings"], r["scenario"]) for r in pe}
                - {(r["settings"], r["scenario"]) for r in pe if "estimates_mixture" not in r})
    mixed = [dict(r, estimates=r["estimates_mixture"], mcse=r["mcse_mixture"])
             if r["sampler"] != "NUTS" else r
             for r in latest.values() if (r["settings"], r["scenario"]) in complete]
    if mixed:
        _report_table(mixed, ", PE estimator=mixture")


def _report_table(rows: list[dict[str, Any]], label: str) -> None:
    """One Table-1-shaped table per (settings, scenario) of ``rows`` (one row per fit)."""
    exact_all = json.loads((MODEL_DIR / "exact_moments.json").read_text())
    latest = {_key(r): r for r in rows}
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in latest.values():
        groups.setdefault((r["settings"], r["scenario"], r["sampler"]), []).append(r)
    order = {"NUTS": 0, "PE N=2": 1, "PE N=5": 2, "PE N=10": 3}
    keys = sorted(groups, key=lambda k: (k[0], k[1], order.get(k[2], 9), k[2]))
    for i, (settings, sc, sampler) in enumerate(keys):
        if i == 0 or keys[i - 1][:2] != (settings, sc):
            print(f"\nScenario ({sc}) [{settings}{label}]")
            print(f"{'sampler':<9}{'seeds':>6}" + "".join(f"{m:>9}" for m in MOMENTS)
                  + f"{'grad evals':>12}{'seconds':>9}   paper RMSE")
            comparisons: list[str] = []
            met = cells = 0
        rs = groups[(settings, sc, sampler)]
        exact = np.array([exact_all[sc][m] for m in MOMENTS])
        rmse, se = rmse_and_se(np.array([r["estimates"] for r in rs]) - exact)
        paper = PAPER[sc].get("HMC" if sampler == "NUTS" else sampler)
        print(f"{sampler:<9}{len(rs):>6}" + "".join(f"{v:>9.3f}" for v in rmse)
              + f"{np.mean([r['grads'] for r in rs]):>12.0f}"
              + f"{np.mean([r['seconds'] for r in rs]):>9.1f}   "
              + ("" if paper is None else " ".join(f"{p:.2f}" for p in paper)))
        if paper is not None and sampler != "NUTS":
            # The paper reports two decimals: compare with the rounded RMSE.
            ok = [round(float(v), 2) <= p for v, p in zip(rmse, paper, strict=True)]
            met, cells = met + sum(ok), cells + len(ok)
            comparisons.append(f"{sampler:<9}" + "  ".join(
                f"{v:.3f}+-{e:.3f} {'<=' if k else '> '} {p:.2f}"
                for v, e, p, k in zip(rmse, se, paper, ok, strict=True)))
            if all("mcse" in r for r in rs):
                # The runs' own MCSEs predict the true RMSE with less noise.
                rms_mcse = np.sqrt(np.mean(np.array([r["mcse"] for r in rs]) ** 2, axis=0))
                comparisons.append(f"{'':<9}expected RMSE from the runs' MCSEs: "
                                   + " / ".join(f"{v:.3f}" for v in rms_mcse))
        if i + 1 == len(keys) or keys[i + 1][:2] != (settings, sc):
            if comparisons:
                print(f"vs paper (RMSE +- SE over seeds): {met} of {cells} cells at or below")
                print("\n".join(comparisons))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--scenarios", nargs="+", default=["a", "b"])
    parser.add_argument("--samplers", nargs="+", default=["NUTS", "5", "2", "10"],
                        help="'NUTS' and/or numbers of pseudo-samples")
    parser.add_argument("--chains", type=int, default=1)
    parser.add_argument("--iter-warmup", type=int, default=1000)
    parser.add_argument("--iter-sampling", type=int, default=50_000)
    parser.add_argument("--beta-min", type=float, default=0.001)
    parser.add_argument("--instrumental", default="uniform",
                        help="g(beta): 'uniform' (the paper's) or 'a,b' for Beta(a, b)")
    parser.add_argument("--beta-prior", default="uniform",
                        help="pi(beta): 'uniform' (the paper's) or 'a,b' for Beta(a, b)")
    parser.add_argument("--metric", default="diag_e", choices=["diag_e", "dense_e"],
                        help="NUTS metric (Stan's default diag_e; the paper used diag_e)")
    parser.add_argument("--adapt-delta", type=float, default=0.8,
                        help="NUTS target acceptance rate (Stan's default 0.8)")
    parser.add_argument("--noncentring", type=float, default=0.0,
                        help="PE option noncentring (partial non-centring exponent; default 0)")
    parser.add_argument("--log-scale", default="0",
                        help="log Z offset: a number (default 0, exact) or 'pilot'")
    parser.add_argument("--results", type=Path,
                        default=ROOT / "benchmarks" / "results" / "pe_mixture.jsonl")
    parser.add_argument("--report", action="store_true",
                        help="only print the saved table (fits with seeds in --first-seed .. "
                             "--first-seed + --seeds - 1)")
    args = parser.parse_args(argv)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    if args.report:
        report([r for r in _load(args.results) if r["seed"] in seeds])
        return 0
    logging.getLogger("cmdstanpy").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    runtime.activate()
    settings = (f"{args.chains} chain(s) x {args.iter_warmup} warmup + {args.iter_sampling} "
                f"sampling, beta_min={args.beta_min}, log_scale={args.log_scale}")
    if args.metric != "diag_e":
        settings += f", metric={args.metric}"
    if args.adapt_delta != 0.8:
        settings += f", adapt_delta={args.adapt_delta}"
    if args.noncentring:
        settings += f", noncentring={args.noncentring}"
    for name in ("instrumental", "beta_prior"):  # named only when not the paper's choice
        if getattr(args, name) != "uniform":
            settings += f", {name}=Beta({getattr(args, name)})"
    args.results.parent.mkdir(parents=True, exist_ok=True)
    done = _finished(_load(args.results))
    for sc in args.scenarios:
        data = json.loads((MODEL_DIR / f"scenario_{sc}.data.json").read_text())
        for sampler in args.samplers:
            label = "NUTS" if sampler == "NUTS" else f"PE N={int(sampler)}"
            for seed in seeds:
                row = {"scenario": sc, "sampler": label, "seed": seed, "settings": settings}
                done |= _finished(_load(args.results))  # other processes may share the file
                if _key(row) in done:
                    continue
                if sampler == "NUTS":
                    row.update(run_nuts(data, seed, args))
                else:
                    row.update(run_pe(data, int(sampler), seed, args))
                with args.results.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
                print(f"scenario {sc} {label} seed {seed}: {row['seconds']:.1f} s", flush=True)
    report([r for r in _load(args.results) if r["settings"] == settings and r["seed"] in seeds])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
