"""Validation benchmark: plain NUTS, pseudo-extended MCMC and continuous tempering, defaults only.

Runs every case of ``../shared/validation/`` and the project's own multimodal cases
(``benchmarks/validation_cases/``, same format) as a user with an unchanged model would
(``pemc_stan.sample(model, data, method=...)`` with no option set; plain NUTS through
cmdstanpy) and prints one table: per case and method, the error against the reference,
the wall time relative to NUTS on the same case, and the fit's own verdict
(``fit.check()``; for plain NUTS: R-hat > 1.01 or divergences).

Errors
------
posteriordb (20 models with reference posteriors)
    ``max |mean - ref mean| / ref sd`` over the reference's parameters, the means
    taken from the draws (resampled draws for PE and CT, which carry transformed
    parameters too).  Within 0.3 counts as a match.
multimodal (exact answers; ``make_cases.py`` writes them first)
    ``bimodal_4d``: P(x1 < 0) (mode mass, exact 0.2486) in its own standard errors;
    ``label_switching_2``: E[mu1] and E[mu2] (equal by symmetry) in their standard
    errors; ``funnel_5d``: E[v] = 0 and E[v^2] = sd(v)^2 = 9 in standard errors;
    ``half_normal_scale``: log Z of the model as written; the cases in the shared truth
    format (``mean``, ``sd`` and ``prob`` keyed by column: ``far_modes_2d``,
    ``mixture_grid_2d``, ``periodic_phase`` and any new one) are scored generically by
    :func:`generic_quantities`: every mean, variance and probability in its standard
    errors, with caps of 0.1 sd, 0.2 sd^2 and 0.05.  Every multimodal case also
    reports ``log Z`` in its own standard errors where the method gives one (CT: eq 20;
    NUTS and PE: bridge sampling on the draws).  Expectations are each method's own
    estimator with its own MCSE (NUTS: the draws' mean, ArviZ ESS; PE and CT: the fit's
    weighted estimate).  Within 4 standard errors counts as a match, and only with a
    standard error below ``SE_CAP`` (0.05 for a mode mass, 0.15 for log Z): stuck chains
    inflate an error bar until it covers anything, which is no match.

A run that misses its bound with an ``ok`` verdict is a *silent failure*, the worst
outcome; the table marks it ``SILENT``.

Every run is appended to ``--results`` (JSON lines) as it finishes; finished runs are
skipped on a rerun, and ``--report`` prints the table from the file.

Usage::

    python benchmarks/validation.py                         # everything, seed 1
    python benchmarks/validation.py --cases funnel_5d arK-arK --methods ct
    python benchmarks/validation.py --report
    python benchmarks/validation.py --workers 2    # (case, method) jobs on a local Dask cluster
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import math
import re
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
VALIDATION = ROOT.parent / "shared" / "validation"
RESULTS = ROOT / "benchmarks" / "results" / "validation.jsonl"
#: The project's own multimodal cases (``validation_cases/make_cases.py``), scored as the
#: shared ones (the shared truth.json format).
OWN_CASES = ROOT / "benchmarks" / "validation_cases"
METHODS = ("nuts", "pe", "ct")
MATCH_SD = 0.3  # posteriordb: max |mean - ref| / ref sd
MATCH_SE = 4.0  # multimodal: standard errors
#: A multimodal estimate counts only with a standard error below these: an estimate whose
#: error bar is wide enough to cover anything (stuck chains inflate it) is no match.
SE_CAP = {"p_x1_negative": 0.05, "mean_mu1": 0.5, "mean_mu2": 0.5, "mean_v": 0.3,
          "sd_v": 2.0, "log_z": 0.15}
#: Caps of the shared truth format's quantities (every case whose truth.json has ``mean``,
#: ``sd`` and ``prob`` keyed by column): a probability 0.05 (as a mode mass above), a mean
#: 0.1 of the exact sd, a variance 0.2 of the exact variance.
PROB_SE_CAP, MEAN_SE_CAP_SD, VAR_SE_CAP_VAR = 0.05, 0.1, 0.2
_CONDITION = re.compile(r"^\s*(?P<name>[^<>]+?)\s*(?P<op>[<>])\s*(?P<value>[-+0-9.eE]+)\s*$")


def generic_quantities(truth: dict[str, Any]) -> list[tuple[str, Any, float, float]]:
    """``(key, f, exact, SE cap)`` of every quantity of a truth.json in the shared format:
    ``f`` maps a column accessor ``v`` (column -> values) to the values whose mean is the
    quantity.  ``mean``: E[x]; ``sd``: E[(x - exact mean)^2] against sd^2; ``prob``: the
    share of draws meeting ``NAME < NUMBER`` or ``NAME > NUMBER``.

    Raises
    ------
    ValueError
        For a condition that is not ``NAME < NUMBER`` or ``NAME > NUMBER``.
    """
    out: list[tuple[str, Any, float, float]] = []
    means, sds = truth.get("mean", {}), truth.get("sd", {})
    for name, mean in means.items():
        cap = MEAN_SE_CAP_SD * float(sds[name]) if name in sds else math.inf
        out.append((f"mean[{name}]", lambda v, n=name: v(n), float(mean), cap))
    for name, sd in sds.items():
        centre = float(means.get(name, 0.0))
        out.append((f"var[{name}]", lambda v, n=name, c=centre: (v(n) - c) ** 2,
                    float(sd) ** 2, VAR_SE_CAP_VAR * float(sd) ** 2))
    for condition, prob in truth.get("prob", {}).items():
        m = _CONDITION.match(condition)
        if m is None:
            raise ValueError(f"truth.json condition {condition!r}: expected 'NAME < NUMBER' "
                             "or 'NAME > NUMBER'")
        name, op, value = m["name"], m["op"], float(m["value"])
        out.append((f"P({condition.strip()})",
                    lambda v, n=name, o=op, x=value: (v(n) < x if o == "<" else v(n) > x
                                                      ).astype(float),
                    float(prob), PROB_SE_CAP))
    return out


def cases(root: Path) -> dict[str, dict[str, Any]]:
    """Every validation case: kind, program, data, reference or truth."""
    out: dict[str, dict[str, Any]] = {}
    pdb = root / "posteriordb"  # absent from a folder of variants (case_variants.py)
    for folder in sorted(pdb.iterdir()) if pdb.is_dir() else []:
        if (folder / "model.stan").is_file():
            out[folder.name] = {"kind": "posteriordb", "folder": folder,
                                "reference": json.loads((folder / "reference.json").read_text())}
    multi = root / "multimodal"
    if not (multi / "bimodal_4d" / "truth.json").is_file() and (multi / "make_cases.py").is_file():
        subprocess.run([sys.executable, str(multi / "make_cases.py")], check=True,
                       cwd=str(multi), capture_output=True)
    own = OWN_CASES / "multimodal"
    if not own.is_dir():
        subprocess.run([sys.executable, str(OWN_CASES / "make_cases.py")], check=True,
                       cwd=str(OWN_CASES), capture_output=True)
    for folder in [*sorted(multi.iterdir()), *sorted(own.iterdir())]:
        if (folder / "truth.json").is_file():
            out[folder.name] = {"kind": "multimodal", "folder": folder,
                                "truth": json.loads((folder / "truth.json").read_text())}
    return out


def _data(folder: Path) -> dict[str, Any]:
    path = folder / "data.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _z(value: float, truth: float, se: float) -> float:
    if not (math.isfinite(value) and math.isfinite(se)) or se <= 0:
        return math.inf
    return (value - truth) / se


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    """Mean of draws shaped (chains, draws) and its MCSE (ArviZ bulk ESS)."""
    import arviz as az

    ess = float(az.ess(np.asarray(x, dtype=float), method="mean"))
    return float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(max(ess, 1.0)))


def _by_chain(frame: Any, column: str) -> np.ndarray:
    chains = sorted(frame["chain__"].unique())
    return np.stack([frame.loc[frame["chain__"] == c, column].to_numpy() for c in chains])


def nuts_expectation(frame: Any) -> Any:
    """``f -> (mean, MCSE)`` over plain NUTS draws (``f`` maps column -> (chains, draws))."""
    def expect(f: Any) -> tuple[float, float]:
        return _mean_se(np.asarray(f(lambda c: _by_chain(frame, c)), dtype=float))
    return expect


def fit_expectation(fit: Any, run: bool = False) -> Any:
    """``f -> (mean, MCSE)`` by the fit's estimate and its standard error (``run``: the
    run's own, ``run_expectation``, where the fit's estimate is its cells')."""
    def expect(f: Any) -> tuple[float, float]:
        estimate = fit.run_expectation if run else fit.expectation
        est = estimate(lambda v: f(lambda c: v[c]))
        return float(est.mean), float(est.mcse)
    return expect


def measure(case: dict[str, Any], frame: Any, log_z: Any, expect: Any) -> dict[str, Any]:
    """Errors of one run against the case's reference (see the module docstring).

    ``frame``: draws with ``chain__`` and bracket-named columns (resampled for PE/CT), for
    posteriordb; ``expect``: ``f -> (mean, MCSE)`` by the method's own estimator, for the
    multimodal cases; ``log_z``: an EvidenceEstimate or None.
    """
    out: dict[str, Any] = {}
    if case["kind"] == "posteriordb":
        worst, worst_name = 0.0, ""
        for name, ref in case["reference"]["parameters"].items():
            if name not in frame.columns:
                continue
            err = abs(float(frame[name].mean()) - ref["mean"]) / ref["sd"]
            if err > worst:
                worst, worst_name = err, name
        out.update(error=worst, worst=worst_name, match=bool(worst <= MATCH_SD))
        return out
    truth, name = case["truth"], case["folder"].name
    zs: dict[str, float] = {}
    ses: dict[str, float] = {}
    caps = dict(SE_CAP)

    def record(key: str, value: float, se: float, exact: float) -> None:
        out[key], ses[key], zs[key] = value, se, _z(value, exact, se)

    if isinstance(truth.get("mean"), dict):  # the shared format: scored generically
        for key, f, exact, cap in generic_quantities(truth):
            caps[key] = cap
            record(key, *expect(f), exact)
    elif name == "bimodal_4d":
        record("p_x1_negative", *expect(lambda v: (v("x[1]") < 0).astype(float)),
               truth["p_x1_negative"])
    elif name == "label_switching_2":
        for j in (1, 2):
            record(f"mean_mu{j}", *expect(lambda v, j=j: v(f"mu[{j}]")), truth["mean"][j - 1])
    elif name == "funnel_5d":
        record("mean_v", *expect(lambda v: v("v")), 0.0)
        record("sd_v", *expect(lambda v: v("v") ** 2), 9.0)  # E[v^2] = sd(v)^2 = 9
    if log_z is not None:
        record("log_z", float(log_z.log_z), float(log_z.std_error), truth["log_z"])
    out["z"], out["se"] = zs, ses
    worst = max((abs(z) for z in zs.values()), default=math.inf)
    capped = all(ses[k] <= caps[k] for k in ses)
    out.update(error=worst, match=bool(worst <= MATCH_SE and capped))
    return out


def run_nuts(case: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from pemc_stan.backend.compile import compile_model

    folder = case["folder"]
    model = compile_model(folder / "model.stan")
    data = _data(folder)
    start = time.perf_counter()
    fit = model.sample(data=data or None, chains=args.chains, iter_warmup=args.iter_warmup,
                       iter_sampling=args.iter_sampling, seed=args.seed, show_progress=False,
                       show_console=False)
    seconds = time.perf_counter() - start
    frame = fit.draws_pd()
    frame["chain__"] = frame["chain__"].astype(int)
    log_z = None
    if case["kind"] == "multimodal":
        import pemc_stan

        log_z = pemc_stan.evidence(fit, data=data, program=str(folder / "model.stan"),
                                   estimator="bridge", seed=args.seed)
    summary = fit.summary()
    rhat = float(np.nanmax(summary["R_hat"].to_numpy())) if "R_hat" in summary else math.nan
    divergences = int(np.sum(fit.method_variables()["divergent__"]))
    reasons = []
    if rhat > 1.01:
        reasons.append(f"R-hat {rhat:.3f} > 1.01")
    if divergences:
        reasons.append(f"{divergences} divergent transitions")
    return {"seconds": seconds, "verdict": "suspect" if reasons else "ok",
            "reasons": reasons, **measure(case, frame, log_z, nuts_expectation(frame))}


def run_method(case: dict[str, Any], method: str, args: argparse.Namespace) -> dict[str, Any]:
    import pemc_stan
    from pemc_stan.modes.density import DensityEvaluator
    from pemc_stan.run.pipeline import method_model
    from pemc_stan.stan.inputs import read_program

    folder = case["folder"]
    data = _data(folder)
    program = read_program(folder / "model.stan")
    warm = method_model(program, data, method=method)  # compile outside the timed run
    warm.method_model()
    warm.original_model()
    _ = DensityEvaluator(warm.program, data, program.name).model  # the mode split's bridge
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pemc_stan.sample(program, data=data, method=method, chains=args.chains,
                               iter_warmup=args.iter_warmup, iter_sampling=args.iter_sampling,
                               seed=args.seed)
    seconds = time.perf_counter() - start
    frame = fit.resampled_draws_pd()
    log_z = None
    if case["kind"] == "multimodal":
        log_z = fit.log_z() or pemc_stan.evidence(fit, estimator="bridge", seed=args.seed)
    verdict = fit.check()
    nuts = fit.nuts_counts()
    estimate = fit.diagnostics(warn=False).get("estimate", {})
    if estimate.get("estimate") == "cells" and case["kind"] == "multimodal":
        # the run's own estimate beside the cells', for the record
        estimate["run_own"] = measure(case, frame, fit.run_log_z(),
                                      fit_expectation(fit, run=True))
    return {"seconds": seconds, "verdict": "ok" if verdict.ok else "suspect",
            "estimate": estimate,
            "reasons": [str(r) for r in verdict.reasons],
            "sampling": fit.output_extras().settings.get("sampling", method),
            "treedepth_share": nuts.max_treedepth_hits / max(nuts.transitions, 1),
            "divergent_share": nuts.divergences / max(nuts.transitions, 1),
            "follow_up": fit.follow_up.describe() if fit.follow_up is not None else [],
            "stage_seconds": fit.follow_up.seconds if fit.follow_up is not None else {},
            **measure(case, frame, log_z, fit_expectation(fit))}


def load(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run_time(record: dict[str, Any]) -> datetime.datetime | None:
    """When the record's run started (its ``run`` id), or None for older records."""
    try:
        return datetime.datetime.fromisoformat(str(record["run"]))
    except (KeyError, ValueError):
        return None


def _nuts_of_same_run(records: list[dict[str, Any]], seed: int) -> dict[int, dict[str, Any]]:
    """For each record (by ``id``), the NUTS record of the same case it is timed against.

    A wall-time ratio is only meaningful between runs made side by side: the NUTS record
    of the same run (``run`` field) when there is one, else the case's NUTS record of the
    run nearest in time (a method re-run alone is timed against the NUTS run made just
    before or after it on the same machine, not one from hours earlier), else, for
    records without a run time, the case's latest NUTS record written before it (a
    serial run writes NUTS first for each case).
    """
    by_run: dict[tuple[str, str], dict[str, Any]] = {}
    timed: dict[str, list[tuple[datetime.datetime, dict[str, Any]]]] = {}
    before: dict[str, dict[str, Any]] = {}
    out: dict[int, dict[str, Any]] = {}
    for r in records:
        if r.get("seed") == seed and r["method"] == "nuts" and "run" in r:
            by_run[(r["case"], r["run"])] = r
            when = _run_time(r)
            if when is not None:
                timed.setdefault(r["case"], []).append((when, r))
    for r in records:
        if r.get("seed") != seed:
            continue
        if r["method"] == "nuts":
            before[r["case"]] = r
        nuts = by_run.get((r["case"], r.get("run", "")))
        when = _run_time(r)
        if nuts is None and when is not None and timed.get(r["case"]):
            nuts = min(timed[r["case"]], key=lambda t: abs((t[0] - when).total_seconds()))[1]
        nuts = nuts or before.get(r["case"])
        if nuts is not None:
            out[id(r)] = nuts
    return out


def report(records: list[dict[str, Any]], seed: int) -> str:
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        if r.get("seed") == seed:
            latest[(r["case"], r["method"])] = r
    paired = _nuts_of_same_run(records, seed)
    lines = []
    header = f"{'case':44s} " + " ".join(f"{m:>30s}" for m in METHODS)
    lines.append(header)
    counts: dict[str, dict[str, Any]] = {
        m: {"match": 0, "suspect": 0, "silent": 0, "false_alarm": 0, "runs": 0,
            "ratio": {}} for m in METHODS}
    names = sorted({c for c, _ in latest}, key=lambda c: (not c[0].islower(), c))
    for kind in ("posteriordb", "multimodal"):
        for case in names:
            rows = [latest.get((case, m)) for m in METHODS]
            if not any(r and r.get("kind") == kind for r in rows):
                continue
            cells = []
            for m, r in zip(METHODS, rows, strict=True):
                if r is None:
                    cells.append(f"{'-':>30s}")
                    continue
                c = counts[m]
                c["runs"] += 1
                if "failure" in r:
                    cells.append(f"{'ERROR ' + r['failure'][:23]:>30s}")
                    c["suspect"] += 1
                    continue
                match, suspect = r["match"], r["verdict"] != "ok"
                c["match"] += match
                c["suspect"] += suspect
                c["silent"] += (not match) and not suspect
                c["false_alarm"] += match and suspect
                nuts = paired.get(id(r))
                ratio = (r["seconds"] / nuts["seconds"]) if nuts and "seconds" in nuts \
                    and nuts.get("seconds") else math.nan
                if m != "nuts" and math.isfinite(ratio):
                    c["ratio"].setdefault(kind, []).append(ratio)
                err = r["error"]
                unit = "sd" if kind == "posteriordb" else "se"
                flag = "" if match else (" SILENT" if not suspect else " miss")
                verdict = "ok" if not suspect else "susp"
                cells.append(f"{err:7.2f}{unit} {ratio:5.1f}x {verdict:>4s}{flag:>7s}")
            lines.append(f"{case:44s} " + " ".join(cells))
    lines.append("")
    for m in METHODS:
        c = counts[m]
        # one median per kind: posteriordb's NUTS runs take seconds to minutes, the
        # multimodal cases' under a second, so a pooled median would say little
        meds = ", ".join(f"{kind} {float(np.median(x)):.2f}x" for kind, x in c["ratio"].items())
        lines.append(f"{m}: {c['match']}/{c['runs']} within bounds, {c['suspect']} suspect, "
                     f"{c['silent']} silent failures, {c['false_alarm']} suspect within bounds"
                     + (f", median wall time against NUTS: {meds}" if meds else ""))
    return "\n".join(lines)


def run_job(case: dict[str, Any], name: str, method: str,
            args: argparse.Namespace) -> dict[str, Any]:
    """One (case, method) run as a record (here, or as a task on a Dask worker)."""
    logging.getLogger("cmdstanpy").setLevel(logging.ERROR)
    record: dict[str, Any] = {"case": name, "kind": case["kind"], "method": method,
                              "run": args.run, "seed": args.seed, "chains": args.chains,
                              "iter_warmup": args.iter_warmup,
                              "iter_sampling": args.iter_sampling}
    try:
        result = (run_nuts(case, args) if method == "nuts" else run_method(case, method, args))
        record.update(result)
    except Exception as exc:
        record["failure"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        record["traceback"] = traceback.format_exc()[-2000:]
    return record


def _write(args: argparse.Namespace, record: dict[str, Any]) -> None:
    with args.results.open("a") as fh:
        fh.write(json.dumps(record, default=str) + "\n")
    shown = record.get("failure") or (
        f"error {record['error']:.3f} verdict {record['verdict']} {record['seconds']:.1f}s")
    print(f"{record['case']:44s} {record['method']:5s} {shown}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="*", default=None, help="case names (default: all)")
    p.add_argument("--methods", nargs="*", default=list(METHODS), choices=METHODS)
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--iter-warmup", type=int, default=1000)
    p.add_argument("--iter-sampling", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--validation", type=Path, default=VALIDATION)
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--rerun", action="store_true", help="run finished cases again")
    p.add_argument("--report", action="store_true", help="print the table and stop")
    p.add_argument("--workers", type=int, default=None,
                   help="run the (case, method) jobs on a local Dask cluster of this many "
                        "workers (pemc-stan[distributed])")
    p.add_argument("--scheduler", default=None, help="or on the Dask scheduler at ADDRESS")
    args = p.parse_args(argv)
    args.run = time.strftime("%Y-%m-%dT%H:%M:%S")  # records of one invocation: one run
    if args.report:
        print(report(load(args.results), args.seed))
        return 0
    logging.getLogger("cmdstanpy").setLevel(logging.ERROR)
    from pemc_stan.backend import runtime

    runtime.activate(show_progress=True)
    all_cases = cases(args.validation)
    chosen = args.cases or list(all_cases)
    done = {(r["case"], r["method"]) for r in load(args.results) if r.get("seed") == args.seed
            and r.get("chains") == args.chains and r.get("iter_sampling") == args.iter_sampling}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    jobs = []
    for name in chosen:
        for method in ("nuts", *[m for m in args.methods if m != "nuts"]):
            if method not in args.methods and (name, "nuts") in done:
                continue
            if (name, method) in done and not args.rerun:
                continue
            jobs.append((name, method))
            done.add((name, method))
    if args.workers is None and args.scheduler is None:
        for name, method in jobs:
            _write(args, run_job(all_cases[name], name, method, args))
    else:  # one Dask task per (case, method); NUTS and the methods side by side on workers
        from distributed import Client, LocalCluster, as_completed

        cluster = None if args.scheduler else LocalCluster(
            n_workers=args.workers, threads_per_worker=1, dashboard_address=":0")
        with Client(args.scheduler or cluster) as client:
            futures = [client.submit(run_job, all_cases[n], n, m, args, pure=False)
                       for n, m in jobs]
            for future in as_completed(futures):
                _write(args, future.result())
        if cluster is not None:
            cluster.close()
    print(report(load(args.results), args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
