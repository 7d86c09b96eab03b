"""How often tempering alone (CT) enters each mode of the 20-Gaussian mixture on R^2.

A tempered run learns a mode's share from the times its chains come into that mode's
core near beta = 1, so the count of those entries bounds its accuracy.  For each seed
this prints the wall time by stage, the round trips of beta per chain, the share of
draws at beta > 0.9, the entries per mode and the gradients spent.  A draw is in a
mode's core when it lies within ``CORE_SDS`` of the component's sds of its mean with
beta above 0.5; an entry is a chain arriving in a core it was not in (a chain that
leaves a core but stays above beta = 0.1 has not left the mode).  The findings are in
docs/validation.md, "Tempering alone against SMC: what a run spends per mode entered".

Usage::

    python benchmarks/mode_entries.py --seeds 1 2
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

import smc_comparison

import pemc_stan

CORE_SDS = 3.0


def entries(x: NDArray[np.float64], beta: NDArray[np.float64], mu: NDArray[np.float64],
            sd: NDArray[np.float64]) -> NDArray[np.int64]:
    """Entries into each component's core: ``x`` (chains, draws, 2), ``beta`` (chains,
    draws), component means ``mu`` (K, 2) and sds ``sd`` (K,)."""
    dist = np.linalg.norm(x[..., None, :] - mu, axis=-1)  # (chains, draws, K)
    nearest = np.argmin(dist / sd, axis=-1)
    core = (np.take_along_axis(dist, nearest[..., None], -1)[..., 0]
            < CORE_SDS * sd[nearest]) & (beta > 0.5)
    out = np.zeros(mu.shape[0], dtype=np.int64)
    for c in range(x.shape[0]):
        where = -1
        for d in range(x.shape[1]):
            k = int(nearest[c, d]) if core[c, d] else -1
            if k >= 0 and k != where:
                out[k] += 1
            where = k if k >= 0 else (where if beta[c, d] > 0.1 else -1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("pemc_stan.plan").setLevel(logging.INFO)  # the stages' wall times
    target = smc_comparison.mixture_target("a", "plain", 0.0, 10.0)
    mu = np.asarray(target.data["mu"], dtype=float)
    sd = np.asarray(target.data["sigma"], dtype=float)
    for seed in args.seeds:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = pemc_stan.sample(target.program, target.data, method="ct",
                                   split_modes="never", seed=seed)
        seconds = time.perf_counter() - t0
        beta = fit.beta()
        x = np.stack([fit.particles(c)[..., 0] for c in ("x[1]", "x[2]")], axis=-1)
        n = entries(x, beta, mu, sd)
        print(f"seed {seed}: {seconds:.1f} s; round trips per chain "
              f"{fit.round_trips_per_chain()}; draws at beta > 0.9 {np.mean(beta > 0.9):.3f}; "
              f"entries {n.sum()} ({n.tolist()}), modes never entered "
              f"{int(np.sum(n == 0))}; gradients {fit.gradients()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
