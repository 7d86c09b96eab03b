"""Compile time and sampling cost of a bundled model with the resolved CmdStan.

Prints, measured side by side in one run:
- the compile time of models/normal_normal with the installation's precompiled
  header and without it (PRECOMPILED_HEADERS=false), and their ratio;
- NUTS sampling time per gradient evaluation (leapfrog step), per chain.

Usage: python benchmarks/runtime_benchmark.py [--chains 4] [--iter 2000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import cmdstanpy
import numpy as np

from pemc_stan.backend import runtime

MODEL = Path(__file__).resolve().parent.parent / "models" / "normal_normal"


def _compile_fresh(
    workdir: Path, cpp_options: dict[str, str] | None
) -> tuple[cmdstanpy.CmdStanModel, float]:
    workdir.mkdir(parents=True)
    stan_file = workdir / "normal_normal.stan"
    shutil.copy(MODEL / "normal_normal.stan", stan_file)
    started = time.perf_counter()
    model = cmdstanpy.CmdStanModel(
        stan_file=str(stan_file), cpp_options=cpp_options, force_compile=True
    )
    return model, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--iter", type=int, default=2000, help="sampling iterations per chain")
    args = parser.parse_args()

    started = time.perf_counter()
    installation = runtime.activate(show_progress=True)
    print(f"CmdStan: {installation.describe()} "
          f"(resolved/built in {time.perf_counter() - started:.1f} s)")
    data = json.loads((MODEL / "data.json").read_text())

    with tempfile.TemporaryDirectory() as tmp:
        model, with_pch = _compile_fresh(Path(tmp) / "pch", None)
        _, without_pch = _compile_fresh(Path(tmp) / "nopch", {"PRECOMPILED_HEADERS": "false"})
        print(f"compile normal_normal: {with_pch:.1f} s with the precompiled header, "
              f"{without_pch:.1f} s without (ratio {without_pch / with_pch:.2f}x)")

        fit = model.sample(
            data=data,
            chains=args.chains,
            parallel_chains=args.chains,
            iter_warmup=1000,
            iter_sampling=args.iter,
            seed=1,
            show_progress=False,
            output_dir=str(Path(tmp) / "fit"),
        )
        leapfrog = (
            fit.draws_pd()[["chain__", "n_leapfrog__"]].groupby("chain__")["n_leapfrog__"].sum()
        )
        print(f"{'chain':>5} {'gradients':>10} {'sampling s':>11} {'µs/gradient':>12}")
        per_grad = []
        for chain, timing in enumerate(fit.time, start=1):
            grads = int(leapfrog.loc[chain])
            micro = 1e6 * timing["sampling"] / grads
            per_grad.append(micro)
            print(f"{chain:>5} {grads:>10} {timing['sampling']:>11.3f} {micro:>12.2f}")
        print(f"mean sampling time per gradient evaluation: {np.mean(per_grad):.2f} µs "
              f"(N = {data['N']} observations)")


if __name__ == "__main__":
    main()
