"""Experiment (rejected as a default): continuous tempering with one step size for all chains.

CmdStan adapts a step size per chain.  A CT chain whose warm-up never met a narrow mode
at high beta adapts a step size too large for it, and if it enters that mode later its
trajectories are rejected and it sticks (``heavy_tail_pair_2d``, seed 1: step sizes
0.37, 0.29, 0.13 and 0.31; the chain at 0.37 accepted 4% of its transitions in the
narrow mode).  This script measures the alternative: warm up as usual, then sample
every chain with the smallest step size any chain adapted (each with its own adapted
metric, from its last warm-up draw).  It patches
``MethodModel._launch`` for CT runs only, runs ``validation.py`` with the arguments
given, and appends the records, tagged ``"variant"``, to ``--out``; with ``--variant
per-chain`` nothing is patched (CmdStan's own adaptation: the package's behaviour).

``--equilibrium SEED DRAWS`` instead runs CT on ``heavy_tail_pair_2d`` with
``split_modes='never'`` and ``budget=1`` and prints the share of draws in the narrow
mode's cell (within 1.5 of (3, 3)) by band of beta, and E[x[1]] in its standard errors
(exact -0.5; at equilibrium the cell holds 30% of the mass at beta = 1), with a second
standard error of E[x[1]] from tours between visits to beta < 0.05 (regenerative: the
tours' weighted sums taken as independent).

The findings are in docs/validation.md, "One step size for every chain (experiment)".

Usage::

    python benchmarks/shared_step_experiment.py --variant shared -- --seed 1 --methods ct
    python benchmarks/shared_step_experiment.py --equilibrium 4 20000 --variant shared
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
OUT = ROOT / "benchmarks" / "results" / "shared_step.jsonl"
#: Offset of the sampling run's seed from the warm-up run's.
SAMPLING_SEED_OFFSET = 104729


def patch_shared_step() -> None:
    """Make every CT run with a warm-up sample all chains at the smallest adapted step."""
    from pemc_stan.sampling.model import MethodModel

    launch = MethodModel._launch

    def shared(self: Any, data: Any, chains: int, iter_warmup: int, iter_sampling: int,
               seed: int | None, output_dir: Any, show_progress: bool,
               kwargs: dict[str, Any]) -> Any:
        if self.method.short != "ct" or iter_warmup == 0 or kwargs.get("step_size"):
            return launch(self, data, chains, iter_warmup, iter_sampling, seed, output_dir,
                          show_progress, kwargs)
        warm = launch(self, data, chains, iter_warmup, 1, seed, None, False, kwargs)
        metric = np.asarray(warm.metric, dtype=float)
        last = warm.draws()[-1]
        inits = [{name: np.asarray(var.extract_reshape(last[c])).tolist()
                  for name, var in warm.metadata.stan_vars.items()} for c in range(chains)]
        fixed = {k: v for k, v in kwargs.items() if k not in ("inits", "adapt_delta")}
        fixed.update(step_size=[float(np.min(warm.step_size))] * chains, inits=inits,
                     adapt_engaged=False)
        if metric.ndim == 2:
            fixed["inv_metric"] = [{"inv_metric": row.tolist()} for row in metric]
        return launch(self, data, chains, 0, iter_sampling,
                      None if seed is None else seed + SAMPLING_SEED_OFFSET, output_dir,
                      show_progress, fixed)

    MethodModel._launch = shared  # type: ignore[method-assign,assignment]


def tour_standard_error(beta: np.ndarray, values: np.ndarray, log_w: np.ndarray,
                        near_zero: float = 0.05) -> tuple[int, float]:
    """Tours between entries into ``beta < near_zero`` (per chain), and the standard
    error of the ``w_1``-weighted mean of ``values`` from the tours' sums."""
    w = np.exp(log_w - np.max(log_w))
    sums: list[tuple[float, float]] = []
    for c in range(beta.shape[0]):
        low = beta[c] < near_zero
        starts = np.flatnonzero(low & ~np.r_[False, low[:-1]])
        cuts = np.r_[0, starts[starts > 0], beta.shape[1]]
        sums += [(float(np.sum(w[c, a:b] * values[c, a:b])), float(np.sum(w[c, a:b])))
                 for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    a, b = np.array(sums).T
    mean = a.sum() / b.sum()
    n = a.size
    return n, float(np.sqrt(np.sum((a - mean * b) ** 2) * n / (n - 1)) / b.sum())


def equilibrium(seed: int, draws: int) -> dict[str, Any]:
    """Narrow-cell share by beta band and E[x[1]] of one CT run of ``heavy_tail_pair_2d``."""
    import pemc_stan

    model = ROOT / "benchmarks" / "validation_cases" / "multimodal" / "heavy_tail_pair_2d"
    fit = pemc_stan.sample(str(model / "model.stan"), method="ct", seed=seed, budget=1,
                           split_modes="never", iter_sampling=draws)
    beta = fit.beta().reshape(-1)
    x1, x2 = (fit._column(c).reshape(-1) for c in ("x[1]", "x[2]"))
    narrow = np.hypot(x1 - 3, x2 - 3) < 1.5
    band = np.clip((beta * 10).astype(int), 0, 9)
    est = fit.expectation("x[1]")
    tours, tour_se = tour_standard_error(fit.beta(), fit._column("x[1]"), fit.log_weights())
    return {"seed": seed, "draws": draws, "verdict": "ok" if fit.check().ok else "suspect",
            "narrow_share_by_beta": [round(float(narrow[band == b].mean()), 3)
                                     for b in range(10)],
            "mean_x1": est.mean, "mcse_x1": est.mcse, "z_x1": (est.mean + 0.5) / est.mcse,
            "round_trips": fit.round_trips(), "tours": tours, "tour_se_x1": tour_se,
            "step_sizes": np.unique(fit._column("stepsize__")[:, 0]).round(4).tolist()}


def main(argv: list[str] | None = None) -> int:
    """Run the experiment; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=("shared", "per-chain"), required=True)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--equilibrium", nargs=2, type=int, metavar=("SEED", "DRAWS"))
    parser.add_argument("validation_args", nargs="*", help="arguments of validation.py")
    args = parser.parse_args(argv)
    if args.variant == "shared":
        patch_shared_step()
    if args.equilibrium:
        record = {"experiment": "equilibrium", "variant": args.variant,
                  **equilibrium(*args.equilibrium)}
        print(json.dumps(record))
        with args.out.open("a") as fh:
            fh.write(json.dumps(record) + "\n")
        return 0
    import validation

    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "runs.jsonl"
        code = validation.main([*args.validation_args, "--results", str(results), "--rerun"])
        with args.out.open("a") as fh:
            for line in results.read_text().splitlines() if results.exists() else ():
                fh.write(json.dumps({"variant": args.variant, **json.loads(line)}) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
