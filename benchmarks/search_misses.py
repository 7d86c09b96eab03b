"""How often the search for modes misses a mode of known mass when its rule says stop.

Each model kind plants one mode of mass 10%, 25% or 30% beside a main one (or, for the
product, among 2^D), with its exact centre; the pilot's search (the defaults, the
continuous-tempering model's, which the split and both methods start from) runs on
many seeds, and a run *misses* the planted mode when no mode centre it reports lies
within :data:`FOUND_SDS` of the planted mode's standard deviations of that centre, and
nearer to it than to the main mode's (the origin; base coordinates).  Misses are
counted apart for runs whose search stopped by its rule (the unseen share) and at its
path or time limit.  Only the search runs: no NUTS, no tempering (those may still reach
a mode the search missed; this measures the rule).

Usage::

    python benchmarks/search_misses.py --seeds 100 --masses 0.25
    python benchmarks/search_misses.py --seeds 20 --kinds far_pair_2d narrow_offaxis_5d
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "search_misses.jsonl"
#: A planted mode is found when a reported centre lies within this many of its standard
#: deviations (the largest, in every coordinate) of its centre.
FOUND_SDS = 4.0

GAUSSIANS = """
data { int D; int J; vector[J] w; array[J] vector[D] mu; array[J] vector[D] sd; }
parameters { vector[D] x; }
model {
  vector[J] lp;
  for (j in 1:J) lp[j] = log(w[j]) + normal_lpdf(x | mu[j], sd[j]);
  target += log_sum_exp(lp);
}
"""
STUDENT = """
data { int D; int J; vector[J] w; array[J] vector[D] mu; array[J] vector[D] sd; real nu; }
parameters { vector[D] x; }
model {
  vector[J] lp;
  for (j in 1:J) lp[j] = log(w[j]) + student_t_lpdf(x | nu, mu[j], sd[j]);
  target += log_sum_exp(lp);
}
"""
LOGNORMALS = """
data { int D; int J; vector[J] w; array[J] vector[D] mu; array[J] vector[D] sd; }
parameters { vector<lower=0>[D] x; }
model {
  vector[J] lp;
  for (j in 1:J) lp[j] = log(w[j]) + lognormal_lpdf(x | mu[j], sd[j]);
  target += log_sum_exp(lp);
}
"""


@dataclass(frozen=True)
class Kind:
    """A model kind: its program, and the data planting a mode of mass ``m``."""

    name: str
    program: str
    dim: int
    planted: Any  # (m) -> (data, centre of the planted mode in base coordinates, its sd)


def _pair(d: int, offset: np.ndarray, sd_planted: float, sd_main: float = 1.0,
          **extra: Any) -> Any:
    def plant(m: float) -> tuple[dict[str, Any], np.ndarray, float]:
        mu = [np.zeros(d), offset]
        sd = [np.full(d, sd_main), np.full(d, sd_planted)]
        data = {"D": d, "J": 2, "w": [1 - m, m], "mu": [v.tolist() for v in mu],
                "sd": [v.tolist() for v in sd], **extra}
        return data, offset, sd_planted
    return plant


def _unit(d: int, k: int, r: float) -> np.ndarray:
    """``r`` along the diagonal of the first ``k`` coordinates (off every axis)."""
    v = np.zeros(d)
    v[:k] = r / np.sqrt(k)
    return v


KINDS = {k.name: k for k in (
    # two Gaussians far apart: the plain case
    Kind("far_pair_2d", GAUSSIANS, 2, _pair(2, np.array([10.0, 10.0]), 1.0)),
    # ... and the far one narrow: from 98% of the widest box L-BFGS goes to the wide one
    Kind("narrow_far_2d", GAUSSIANS, 2, _pair(2, np.array([9.0, -12.0]), 0.3)),
    # a narrow mode off the axes, 3.5 sd from the main one's centre; and the same mode
    # wider, to see where the search starts to find it
    Kind("narrow_offaxis_5d", GAUSSIANS, 5, _pair(5, _unit(5, 2, 3.5), 0.05)),
    *(Kind(f"offaxis_5d_sd{sd:g}", GAUSSIANS, 5, _pair(5, _unit(5, 2, 3.5), sd))
      for sd in (0.2, 0.5, 1.0)),
    # a narrower mode 6 sd away in 20 dimensions
    Kind("pair_20d", GAUSSIANS, 20, _pair(20, _unit(20, 1, 6.0), 0.3)),
    # a local maximum at 5 sd in 40 dimensions, half as wide
    Kind("local_max_40d", GAUSSIANS, 40, _pair(40, _unit(40, 4, 5.0), 0.5)),
    # heavy tails: Student-t(3) modes 8 scales apart in 10 dimensions
    Kind("student_pair_10d", STUDENT, 10, _pair(10, _unit(10, 10, 8.0), 1.0, nu=3.0)),
    # positive parameters: a product of lognormals beside one 3 log-units away (the base
    # coordinates are log x, where the modes are Gaussians)
    Kind("lognormal_pair_3d", LOGNORMALS, 3, _pair(3, _unit(3, 3, 3.0 * np.sqrt(3)), 0.1,
                                                 sd_main=0.5)),
)}


def run_one(kind: Kind, m: float, seed: int) -> dict[str, Any]:
    """One search on ``kind`` with a planted mode of mass ``m``: found or missed."""
    from pemc_stan.run.pipeline import method_model

    data, centre, sd = kind.planted(m)
    model = method_model(kind.program, data, method="ct")
    began = time.monotonic()
    found = model.search_modes(seed)
    seconds = time.monotonic() - began
    search = found.search
    centres = np.zeros((0, kind.dim)) if search is None or search.centres is None \
        else np.asarray(search.centres, dtype=float)
    dist = np.max(np.abs(centres - centre), axis=1) / sd if len(centres) else np.array([])
    nearer = np.linalg.norm(centres - centre, axis=1) < np.linalg.norm(centres, axis=1)
    dist = np.where(nearer, dist, np.inf)  # the main mode (at 0) is not the planted one
    stopped = "" if search is None else search.stopped
    return {"kind": kind.name, "mass": m, "seed": seed,
            "found": bool(dist.size and dist.min() <= FOUND_SDS),
            "by_rule": stopped.startswith("unseen share"), "stopped": stopped,
            "modes": 0 if search is None else int(search.major_modes),
            "paths": 0 if search is None else int(search.paths),
            "seconds": round(seconds, 3)}


def report(records: list[dict[str, Any]]) -> str:
    """The table: misses per kind and mass, all runs and those the rule stopped."""
    rows = ["kind                  mass  runs  missed  stopped by rule: runs missed"
            "   paths  seconds"]
    keys = sorted({(r["kind"], r["mass"]) for r in records})
    for kind, m in keys:
        rs = [r for r in records if r["kind"] == kind and r["mass"] == m]
        rule = [r for r in rs if r["by_rule"]]
        rows.append(f"{kind:20s} {m:5.2f} {len(rs):5d} {sum(not r['found'] for r in rs):7d}"
                    f" {len(rule):22d} {sum(not r['found'] for r in rule):6d}"
                    f" {np.median([r['paths'] for r in rs]):7.0f}"
                    f" {np.median([r['seconds'] for r in rs]):8.2f}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", nargs="*", default=list(KINDS), choices=list(KINDS))
    parser.add_argument("--masses", nargs="*", type=float, default=[0.10, 0.25, 0.30])
    parser.add_argument("--seeds", type=int, default=20, help="seeds 1..N per kind and mass")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--report", action="store_true", help="print the table and stop")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    done = [json.loads(line) for line in args.results.read_text().splitlines()] \
        if args.results.exists() else []
    if not args.report:
        have = {(r["kind"], r["mass"], r["seed"]) for r in done}
        args.results.parent.mkdir(parents=True, exist_ok=True)
        with args.results.open("a") as out:
            for name in args.kinds:
                for m in args.masses:
                    for seed in range(1, args.seeds + 1):
                        if (name, m, seed) in have:
                            continue
                        rec = run_one(KINDS[name], m, seed)
                        done.append(rec)
                        out.write(json.dumps(rec) + "\n")
                        out.flush()
                    missed = sum(not r["found"] for r in done
                                 if r["kind"] == name and r["mass"] == m)
                    print(f"{name} {m}: {missed} missed", file=sys.stderr)
    print(report(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
