"""How often the verdict flags a good fit: the false-alarm rate of each reason.

Models whose answers are exact (normal–normal: log Z and the posterior mean in closed
form; the 0.3 / 0.7 bimodal mixture: log Z = 0, P(x < 0) = 0.3) are sampled with the
defaults of each method over ``--seeds`` seeds, one fit at a time.  A fit is *right*
when every checked quantity is within 4 of its standard errors of the exact value and
every standard error is within the tests' caps (a mass 0.05, log Z log(2)/4, a mean 0.1
posterior sd); the verdict of a right fit should be ok, so each reason it names on a
right fit is a false alarm.  A fit within its error bars but above a cap is
*imprecise*: flagging it is no false alarm.  Printed: per model and method, the right,
imprecise and flagged fits, and the share of right fits each reason flagged.

Usage::

    python benchmarks/false_alarms.py [--seeds 20] [--methods ct pe]
        [--models normal_normal bimodal_1d]

One line per model and method is appended to ``benchmarks/results/false_alarms.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import pemc_stan
from pemc_stan.stan.examples import example

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "false_alarms.jsonl"


def _normal_normal_exact(data: dict[str, Any]) -> dict[str, float]:
    y = np.asarray(data["y"], dtype=float)
    n, mu0, tau0, sigma = len(y), data["mu0"], data["tau0"], data["sigma"]
    prec = 1 / tau0**2 + n / sigma**2
    cov = sigma**2 * np.eye(n) + tau0**2
    r = y - mu0
    log_z = -0.5 * (n * math.log(2 * math.pi) + np.linalg.slogdet(cov)[1]
                    + r @ np.linalg.solve(cov, r))
    return {"log_z": float(log_z), "mu": float((mu0 / tau0**2 + y.sum() / sigma**2) / prec),
            "mu_sd": float(prec ** -0.5)}


#: model -> (exact answers from the data, {quantity: function of the fit giving an estimate})
CHECKS: dict[str, tuple[Callable[[dict[str, Any]], dict[str, float]],
                        dict[str, Callable[[Any], Any]]]] = {
    "normal_normal": (_normal_normal_exact, {"mu": lambda fit: fit.expectation("mu")}),
    "bimodal_1d": (lambda data: {"log_z": 0.0, "p_left": float(data["w"])},
                   {"p_left": lambda fit: fit.expectation(
                       lambda v: (v["x"] < 0).astype(float))}),
}


#: The largest standard error of a checked quantity for a fit to count as right (as the
#: tests' caps): a mode's mass 0.05, log Z log(2) / 4; a mean, 0.1 of its posterior sd.
SE_CAPS = {"p_left": 0.05, "log_z": math.log(2) / 4}


def _z(value: float, exact: float, se: float) -> float:
    if se > 0:
        return abs(value - exact) / se
    return 0.0 if value == exact else math.inf


def _errors(fit: Any, model: str, data: dict[str, Any]) -> tuple[dict[str, float], bool]:
    """|estimate - exact| / standard error of every checked quantity (log Z when the fit
    has its own estimate), and whether every standard error is within its cap."""
    exact_of, estimators = CHECKS[model]
    exact = exact_of(data)
    caps = {**SE_CAPS, "mu": 0.1 * exact.get("mu_sd", math.inf)}
    out, precise = {}, True
    for name, estimate in estimators.items():
        e = estimate(fit)
        out[name] = _z(e.mean, exact[name], e.mcse)
        precise &= bool(e.mcse < caps[name])
    log_z = fit.log_z()
    if log_z is not None and "log_z" in exact:
        out["log_z"] = _z(log_z.log_z, exact["log_z"], log_z.std_error)
        precise &= bool(log_z.std_error < caps["log_z"])
    return out, precise


def run(model: str, method: str, seeds: list[int]) -> dict[str, Any]:
    program, data_path = example(f"example:{model}")
    data = json.loads(Path(data_path).read_text())
    right = flagged = imprecise = 0
    alarms: Counter[str] = Counter()
    reasons_wrong: Counter[str] = Counter()
    started = time.perf_counter()
    for seed in seeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = pemc_stan.sample(program, data, method=method, seed=seed)
            verdict = fit.check()
            errors, precise = _errors(fit, model, data)
        ok_answer = all(z < 4 for z in errors.values())
        names = list(verdict.names())
        flagged += not verdict.ok
        if ok_answer and precise:
            right += 1
            alarms.update(names)
        elif ok_answer:  # within its error bars, but the bars are too wide to tell
            imprecise += 1
        else:
            reasons_wrong.update(names or ["(none: a silent failure)"])
        detail = "; ".join(str(r) for r in verdict.reasons)
        print(f"  {model:<14} {method:<3} seed {seed:>3}: "
              + " ".join(f"{k} {v:.1f}se" for k, v in errors.items())
              + f"  {'ok' if verdict.ok else 'suspect: ' + detail}", flush=True)
    return {"model": model, "method": method, "seeds": len(seeds), "right": right,
            "imprecise": imprecise, "flagged": flagged, "false_alarms": dict(alarms),
            "reasons_on_wrong_fits": dict(reasons_wrong),
            "seconds": round(time.perf_counter() - started, 1),
            "pemc_stan": pemc_stan.__version__}


def _table(records: list[dict[str, Any]]) -> str:
    lines = [f"{'model':<14} {'method':<6} {'right':>7} {'imprecise':>9} {'flagged':>8}  "
             "false alarms per reason (share of right fits)"]
    for r in records:
        rates = ", ".join(f"{k} {v}/{r['right']}" for k, v in sorted(r["false_alarms"].items()))
        wrong = r["seeds"] - r["right"] - r["imprecise"]
        lines.append(f"{r['model']:<14} {r['method']:<6} {r['right']:>3}/{r['seeds']:<3} "
                     f"{r['imprecise']:>5}/{r['seeds']:<3} "
                     f"{r['flagged']:>4}/{r['seeds']:<3}  {rates or 'none'}"
                     + (f"  [wrong fits: {wrong}, flagged by {r['reasons_on_wrong_fits']}]"
                        if wrong else ""))
    right = sum(r["right"] for r in records)
    lines.append(f"right fits: {right}; reasons named on them: "
                 f"{sum(sum(r['false_alarms'].values()) for r in records)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--methods", nargs="+", default=["ct", "pe"])
    parser.add_argument("--models", nargs="+", default=list(CHECKS), choices=list(CHECKS))
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("cmdstanpy").setLevel(logging.WARNING)
    records = []
    for model in args.models:
        for method in args.methods:
            record = run(model, method, list(range(1, args.seeds + 1)))
            records.append(record)
            RESULTS.parent.mkdir(parents=True, exist_ok=True)
            with RESULTS.open("a") as f:
                f.write(json.dumps(record) + "\n")
    print(_table(records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
