"""Spike-and-slab targets (a phase transition) with exact answers, run with the defaults.

A narrow Gaussian spike inside a wide Gaussian slab, both centred at the origin: one
maximum, the spike holding most of the mass.  Tempering along beta meets the mass moving
abruptly from the slab to the spike (Skilling 2006); NUTS adapted in the slab never enters
the spike.  Each kind sets the dimension, the sds, the spike's share of the mass and the
prior (a box ``[-a, a]^D`` of uniform density, or none):

    gamma(x) = [w_s N(x; 0, s_s^2 I) + w_b N(x; 0, s_b^2 I)] / (2a)^D   on the box
    log Z    = log(w_s P_s + w_b P_b) - D log(2a),   P = erf(a / (sqrt(2) s))^D

(without a box, ``P = 1`` and no ``(2a)^D``); the weights give the spike its share of Z,
so ``w_s P_s + w_b P_b = 1``.  The sd of every coordinate is ``sqrt(p_s v_s + p_b v_b)``
with ``p`` the parts' shares and ``v`` their variances truncated to the box.  Printed per
kind, method and seed: the log Z error and the sd error in standard errors, the verdict
and the wall time; a run is right when both are within 4 standard errors.

Usage::

    python benchmarks/spike_slab.py                    # every kind, CT and PE, seeds 1-3
    python benchmarks/spike_slab.py --kinds issue_10d --methods ct --seeds 1
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy.special import erf

BOX = """// A spike inside a slab on a box of uniform prior density.
data {
  int<lower=1> D;
  real<lower=0> a;
  real log_ws;
  real log_wb;
  real<lower=0> s_s;
  real<lower=0> s_b;
}
parameters {
  vector<lower=-a, upper=a>[D] x;
}
model {
  target += log_sum_exp(log_ws + normal_lpdf(x | 0, s_s), log_wb + normal_lpdf(x | 0, s_b))
            - D * log(2 * a);
}
"""

OPEN = """// A spike inside a slab, no prior bounds.
data {
  int<lower=1> D;
  real log_ws;
  real log_wb;
  real<lower=0> s_s;
  real<lower=0> s_b;
}
parameters {
  vector[D] x;
}
model {
  target += log_sum_exp(log_ws + normal_lpdf(x | 0, s_s), log_wb + normal_lpdf(x | 0, s_b));
}
"""


@dataclass(frozen=True)
class Kind:
    """A spike-and-slab target: dimension, sds, the spike's share of the mass, the box."""

    name: str
    d: int
    s_spike: float
    s_slab: float
    spike_share: float
    box: float | None  # half-width a, or None without a prior box

    def weights(self) -> tuple[float, float]:
        """``(w_s, w_b)``: unnormalised weights giving the spike its share of Z."""
        p_s, p_b = self._inside()
        w_s = self.spike_share / p_s
        return w_s, (1.0 - self.spike_share) / p_b

    def _inside(self) -> tuple[float, float]:
        if self.box is None:
            return 1.0, 1.0
        return tuple(float(erf(self.box / (math.sqrt(2) * s))) ** self.d  # type: ignore
                     for s in (self.s_spike, self.s_slab))

    def data(self) -> dict[str, Any]:
        w_s, w_b = self.weights()
        out: dict[str, Any] = {"D": self.d, "log_ws": math.log(w_s), "log_wb": math.log(w_b),
                               "s_s": self.s_spike, "s_b": self.s_slab}
        if self.box is not None:
            out["a"] = self.box
        return out

    def log_z(self) -> float:
        """Exactly ``log 1 - D log(2a)``: the weights make the parts' masses sum to one."""
        return 0.0 if self.box is None else -self.d * math.log(2 * self.box)

    def sd(self) -> float:
        """Every coordinate's sd: each part's variance (truncated to the box) by its share."""
        q = self.spike_share
        return math.sqrt(q * _variance(self.s_spike, self.box)
                         + (1 - q) * _variance(self.s_slab, self.box))

    def program(self) -> str:
        return OPEN if self.box is None else BOX


def _variance(s: float, a: float | None) -> float:
    """The variance of N(0, s^2) truncated to [-a, a] (not truncated without ``a``)."""
    if a is None:
        return s * s
    t = a / s
    density = math.exp(-0.5 * t * t) / math.sqrt(2 * math.pi)
    return s * s * (1.0 - 2.0 * t * density / float(erf(t / math.sqrt(2))))


KINDS = [
    Kind("issue_10d", 10, 0.01, 0.1, 0.99, 1.0),  # the issue's: sd 0.10 reported, 0.014 true
    Kind("blackjax_10d", 10, 0.1, 1.0, 0.9, 5.0),  # BlackJAX's phase-transition target
    Kind("needle_2d", 2, 0.001, 1.0, 0.5, 5.0),
    Kind("heavy_spike_5d", 5, 0.01, 1.0, 0.999, None),
    Kind("wide_20d", 20, 0.1, 1.0, 0.9, None),
    Kind("even_20d", 20, 0.05, 1.0, 0.5, 3.0),
    Kind("open_2d", 2, 0.01, 1.0, 0.99, None),
    Kind("box_5d", 5, 0.1, 1.0, 0.7, 2.0),
]


def run(kind: Kind, method: str, seed: int, folder: Path) -> dict[str, Any]:
    import pemc_stan
    from pemc_stan.run.pipeline import method_model
    from pemc_stan.stan.inputs import read_program

    stan = folder / f"{kind.name}.stan"
    stan.write_text(kind.program())
    program = read_program(stan)
    warm = method_model(program, kind.data(), method=method)  # compiles, outside the timing
    warm.method_model()
    warm.original_model()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pemc_stan.sample(program, data=kind.data(), method=method, seed=seed)
    seconds = time.perf_counter() - start
    log_z = fit.log_z() or pemc_stan.evidence(fit, seed=seed)
    z_log_z = (log_z.log_z - kind.log_z()) / max(log_z.std_error, 1e-12)
    mean = fit.expectation("x[1]")
    second = fit.expectation(lambda v: v["x[1]"] ** 2)
    var = float(second.mean) - float(mean.mean) ** 2
    sd = math.sqrt(max(var, 0.0))
    se_sd = math.hypot(float(second.mcse), 2 * float(mean.mean) * float(mean.mcse)) / max(
        2 * sd, 1e-12)
    z_sd = (sd - kind.sd()) / max(se_sd, 1e-12)
    verdict = fit.check()
    right = abs(z_log_z) <= 4 and abs(z_sd) <= 4
    return {"kind": kind.name, "method": method, "seed": seed, "seconds": seconds,
            "log_z": log_z.log_z, "log_z_se": log_z.std_error, "exact_log_z": kind.log_z(),
            "z_log_z": z_log_z, "sd": sd, "exact_sd": kind.sd(), "z_sd": z_sd,
            "verdict": verdict.status, "reasons": verdict.names(), "right": right,
            "sampling": type(fit).__name__}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kinds", nargs="*", default=[k.name for k in KINDS],
                   choices=[k.name for k in KINDS])
    p.add_argument("--methods", nargs="*", default=["ct", "pe"], choices=["ct", "pe"])
    p.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    p.add_argument("--results", type=Path, default=Path("benchmarks/results/spike_slab.jsonl"))
    args = p.parse_args(argv)
    from pemc_stan.backend import runtime

    runtime.activate()
    folder = Path(tempfile.mkdtemp(prefix="pemc-spike-"))
    print(f"{'kind':<16} {'method':<6} {'seed':>4} {'log Z z':>8} {'sd z':>7} "
          f"{'seconds':>8}  verdict   run")
    rows = []
    for kind in (k for k in KINDS if k.name in args.kinds):
        for method in args.methods:
            for seed in args.seeds:
                r = run(kind, method, seed, folder)
                rows.append(r)
                args.results.parent.mkdir(parents=True, exist_ok=True)
                with args.results.open("a") as fh:
                    fh.write(json.dumps(r) + "\n")
                mark = ("right" if r["right"] else "WRONG") + (
                    "" if r["right"] or r["verdict"] != "ok" else "  SILENT")
                print(f"{kind.name:<16} {method:<6} {seed:>4} {r['z_log_z']:8.2f} "
                      f"{r['z_sd']:7.2f} {r['seconds']:8.1f}  {r['verdict']:<8}  {mark} "
                      f"{','.join(r['reasons'])}", flush=True)
    ok_right = sum(r["right"] and r["verdict"] == "ok" for r in rows)
    silent = sum((not r["right"]) and r["verdict"] == "ok" for r in rows)
    print(f"right and ok: {ok_right}/{len(rows)}; wrong with an ok verdict: {silent}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
