"""Table-1-shaped RMSE benchmark: pseudo-extended NUTS vs plain NUTS on the 20-Gaussian mixture.

For each scenario of ``models/gaussian_mixture_20`` and each sampler (plain
NUTS; PE with N = 2, 5, 10), runs ``--seeds`` independent fits and prints the
RMSE over seeds of the estimates of E[X1], E[X2], E[X1^2], E[X2^2] against
the exact moments, the mean number of gradient evaluations per fit (leapfrog
steps, warmup + sampling; a PE gradient covers N copies) and the mean wall
time in seconds (sampling only; the Pathfinder pilot of the scale is timed
separately).

Usage::

    python benchmarks/pe_mixture_benchmark.py --seeds 10 --scenarios a b
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import warnings
from pathlib import Path

import numpy as np

from pemc_stan import runtime
from pemc_stan.compile import compile_model
from pemc_stan.sampling import PseudoExtendedModel

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "gaussian_mixture_20" / "gaussian_mixture_20.stan"
MOMENTS = ("E[X1]", "E[X2]", "E[X1^2]", "E[X2^2]")


def _plain(data: dict, seed: int, iters: int, chains: int) -> tuple[list[float], int, float]:
    model = compile_model(MODEL)
    t = time.perf_counter()
    fit = model.sample(data=data, chains=chains, iter_warmup=iters, iter_sampling=iters,
                       seed=seed, save_warmup=True, show_progress=False)
    secs = time.perf_counter() - t
    x = fit.stan_variable("x")  # post-warmup draws, (draws, 2)
    est = [x[:, 0].mean(), x[:, 1].mean(), (x[:, 0] ** 2).mean(), (x[:, 1] ** 2).mean()]
    grads = int(fit.draws_pd(vars=["n_leapfrog__"], inc_warmup=True)["n_leapfrog__"].sum())
    return [float(e) for e in est], grads, secs


def _pe(data: dict, n: int, seed: int, iters: int, chains: int, beta_min: float,
        log_scale: float | None) -> tuple[list[float], int, float, float]:
    pe = PseudoExtendedModel(MODEL, data, n_pseudo=n, beta_min=beta_min, log_scale=log_scale)
    t = time.perf_counter()
    scale = pe.log_scale(seed)
    pilot = time.perf_counter() - t
    pe.options.log_scale = scale  # options are a plain dataclass; fix the pilot value
    t = time.perf_counter()
    fit = pe.sample(chains=chains, iter_warmup=iters, iter_sampling=iters, seed=seed,
                    save_warmup=True)
    secs = time.perf_counter() - t
    est = [fit.expectation("x[1]").mean, fit.expectation("x[2]").mean,
           fit.expectation(lambda v: v["x[1]"] ** 2).mean,
           fit.expectation(lambda v: v["x[2]"] ** 2).mean]
    grads = int(fit.fit.draws_pd(vars=["n_leapfrog__"], inc_warmup=True)["n_leapfrog__"].sum())
    return [float(e) for e in est], grads, secs, pilot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--scenarios", nargs="+", default=["a", "b"])
    parser.add_argument("--n-pseudo", type=int, nargs="+", default=[2, 5, 10])
    parser.add_argument("--iter", type=int, default=1000, help="warmup = sampling iterations")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--beta-min", type=float, default=0.01)
    parser.add_argument("--log-scale", type=float, default=None,
                        help="fixed log Z offset (default: Pathfinder pilot)")
    args = parser.parse_args()
    logging.getLogger("cmdstanpy").setLevel(logging.WARNING)
    warnings.simplefilter("ignore")
    runtime.activate()
    exact_all = json.loads((ROOT / "models" / "gaussian_mixture_20" /
                            "exact_moments.json").read_text())
    for sc in args.scenarios:
        data = json.loads((MODEL.parent / f"scenario_{sc}.data.json").read_text())
        exact = np.array([exact_all[sc][m] for m in MOMENTS])
        rows = []
        samplers = [("NUTS", None)] + [(f"PE N={n}", n) for n in args.n_pseudo]
        for label, n in samplers:
            ests, grads, secs, pilots = [], [], [], []
            for seed in range(1, args.seeds + 1):
                if n is None:
                    e, g, s = _plain(data, seed, args.iter, args.chains)
                    p = 0.0
                else:
                    e, g, s, p = _pe(data, n, seed, args.iter, args.chains, args.beta_min,
                                     args.log_scale)
                ests.append(e)
                grads.append(g)
                secs.append(s)
                pilots.append(p)
            rmse = np.sqrt(np.mean((np.asarray(ests) - exact) ** 2, axis=0))
            rows.append((label, rmse, np.mean(grads), np.mean(secs), np.mean(pilots)))
        print(f"\nScenario ({sc}): RMSE over {args.seeds} seeds, {args.chains} chains x "
              f"{args.iter} warmup + {args.iter} sampling iterations, beta_min={args.beta_min}, "
              f"log_scale={'pilot' if args.log_scale is None else args.log_scale}")
        print(f"{'sampler':<10}" + "".join(f"{m:>10}" for m in MOMENTS)
              + f"{'grad evals':>12}{'seconds':>9}{'pilot s':>9}")
        for label, rmse, g, s, p in rows:
            print(f"{label:<10}" + "".join(f"{r:>10.3f}" for r in rmse)
                  + f"{g:>12.0f}{s:>9.1f}{p:>9.1f}")


if __name__ == "__main__":
    main()
