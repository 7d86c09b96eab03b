"""Evidence estimators on the 28-unit Boltzmann machine relaxation (issue #6).

For each seed, on models/boltzmann_machine (27-D mixture of 2^28 Gaussians with
exact log Z from enumeration):

* plain NUTS on the unchanged model, then bridge sampling on its draws
  (``estimate_evidence(nuts_fit, estimator="bridge")``): NUTS stays near a few
  modes, so the bridge estimates the mass of those modes only;
* pseudo-extended MCMC (``pemc_stan.sample(method="pe")``, by default 5
  pseudo-samples all at the fixed beta = 0.5, like the PE paper's fixed-beta runs on
  this model), bridge sampling on its resampled draws;
* continuous tempering (``pemc_stan.sample(method="ct")``, by default with the CT
  paper's mean-field base, see ct_boltzmann_benchmark.py): the eq.-20 estimator
  ``fit.log_z()`` and bridge sampling on its resampled draws.

With ``--pe-beta estimate`` (beta sampled; ``--pe-temper likelihood`` to keep it
proper) the PE chain sits at beta ~ 0.06, its weights degenerate and its resampled
draws cover as little of the distribution as plain NUTS (4/10 within 3 SE in our
run); ``--base pathfinder`` gives CT the API's default base (see the CT benchmark).

Prints per seed log Z, the reported standard error and |error|/SE of each, and
the exact Boltzmann mass of the sign patterns sign(Qx + b) the draws visit (how
much of the distribution each sampler's draws cover); then, per estimator, the
share of runs within 3 standard errors.

    python benchmarks/evidence_boltzmann_benchmark.py --seeds 10 --chains 4 \
        --iter-warmup 1000 --iter-sampling 1000
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import logging
import math
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = ROOT / "models" / "boltzmann_machine"

logger = logging.getLogger(__name__)


def load_ct_benchmark() -> ModuleType:
    """Import benchmarks/ct_boltzmann_benchmark.py by path (generator loader, mean-field base)."""
    spec = importlib.util.spec_from_file_location(
        "ct_boltzmann_benchmark", Path(__file__).resolve().parent / "ct_boltzmann_benchmark.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def visited_mass(x: NDArray[np.float64], Q: NDArray[np.float64], b: NDArray[np.float64],
                 log_z: float) -> tuple[int, float]:
    """Distinct sign patterns s = sign(Qx + b) among draws and their exact total P(s).

    P(s) = exp(s'QQ's / 2 + s'b) / (2^D_B Z) with Z the Stan density's normaliser.
    """
    s = np.where(x @ Q.T + b >= 0.0, 1.0, -1.0)
    patterns = np.unique(s, axis=0)
    A = Q @ Q.T
    log_p = (0.5 * np.einsum("ki,ij,kj->k", patterns, A, patterns) + patterns @ b
             - log_z - Q.shape[0] * math.log(2.0))
    return int(patterns.shape[0]), float(np.exp(log_p).sum())


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="number of seeded runs (1..N)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--iter-warmup", type=int, default=1000)
    parser.add_argument("--iter-sampling", type=int, default=1000)
    parser.add_argument("--n-pseudo", type=int, default=5, help="pseudo-samples for PE")
    parser.add_argument("--pe-temper", default="posterior",
                        help="PE tempering: posterior | likelihood (N(0, I) prior x cosh "
                             "product^beta)")
    parser.add_argument("--pe-beta", default="0.5",
                        help="PE beta: a number (the same fixed beta for every pseudo-sample, "
                             "as PE paper fig. 4's fixed-beta runs) or 'estimate'")
    parser.add_argument("--base", default="mean-field",
                        help="CT base: pathfinder | advi | laplace | mean-field (see "
                             "ct_boltzmann_benchmark.py)")
    parser.add_argument("--base-covariance", default="dense", help="diag | dense")
    parser.add_argument("--mf-restarts", type=int, default=50)
    parser.add_argument("--bootstrap-rounds", type=int, default=None,
                        help="CT bootstrap rounds (default: the API's default)")
    parser.add_argument("--output-dir", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("cmdstanpy").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")

    import pemc_stan
    from pemc_stan.backend import runtime
    from pemc_stan.backend.compile import compile_model
    from pemc_stan.run.evidence import evidence as estimate_evidence

    runtime.activate()
    ct_bench = load_ct_benchmark()
    gen = ct_bench.load_generator()
    data, truth = gen.load()
    Q, b = np.asarray(data["Q"]), np.asarray(data["b"])
    dim = int(data["D"])
    stan_file = str(gen.STAN_FILE)
    data_file = str(gen.DATA_FILE)
    plain = compile_model(stan_file)
    out_root = Path(args.output_dir or tempfile.mkdtemp(prefix="evidence_boltzmann_"))
    run = {"chains": args.chains, "iter_warmup": args.iter_warmup,
           "iter_sampling": args.iter_sampling, "show_progress": False}
    ct_kwargs: dict[str, Any] = {"base_covariance": args.base_covariance}
    if args.base != "mean-field":
        ct_kwargs["base"] = args.base
    if args.bootstrap_rounds is not None:
        ct_kwargs["bootstrap_rounds"] = args.bootstrap_rounds
    x_cols = [f"x[{i}]" for i in range(1, dim + 1)]
    pe_beta: Any = (args.pe_beta if args.pe_beta == "estimate"
                    else [float(args.pe_beta)] * args.n_pseudo)

    print(f"Boltzmann machine relaxation: D_B={data['D_B']}, D={dim}; exact log Z = "
          f"{truth.log_z:.6f}")
    print(f"chains={args.chains} iter_warmup={args.iter_warmup} "
          f"iter_sampling={args.iter_sampling}; PE n_pseudo={args.n_pseudo} "
          f"temper={args.pe_temper} beta={args.pe_beta}; CT {ct_kwargs}"
          + (f" base=mean-field ({args.mf_restarts} restarts)" if args.base == "mean-field"
             else ""))
    print("per estimator: log Z (SE) |err|/SE; 'mass' = exact P of the sign patterns "
          "the (resampled) draws visit")
    names = ("NUTS+bridge", "PE+bridge", "CT eq.20", "CT+bridge")
    results: dict[str, list[tuple[float, float, float]]] = {n: [] for n in names}
    failures: dict[str, list[int]] = {}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        out = out_root / f"seed{seed}"
        print(f"seed {seed}:", flush=True)

        def report(name: str, est: Any, mass: tuple[int, float] | None, seconds: float) -> None:
            z = abs(est.log_z - truth.log_z) / est.std_error if est.std_error > 0 else math.inf
            results[name].append((est.log_z, est.std_error, z))
            extra = "" if mass is None else f"  patterns {mass[0]:>5d} mass {mass[1]:.3f}"
            print(f"  {name:<12} {est.log_z:>11.4f} ({est.std_error:.4f}) "
                  f"err {est.log_z - truth.log_z:>+9.4f} |err|/SE {z:>8.2f}  "
                  f"{seconds:>6.1f} s{extra}", flush=True)

        def attempt(name: str, fn: Callable[[], Any], seed: int = seed) -> tuple[Any, float]:
            try:
                return _timed(fn)
            except Exception as exc:
                failures.setdefault(name, []).append(seed)
                print(f"  {name:<12} FAILED: {type(exc).__name__}: {exc}", flush=True)
                return None, 0.0

        nuts, t_nuts = _timed(functools.partial(plain.sample, data=data_file, seed=seed,
                                                output_dir=str(out / "nuts"), **run))
        est, t_b = attempt("NUTS+bridge", functools.partial(
            estimate_evidence, nuts, data_file, estimator="bridge", program=stan_file, seed=seed))
        if est is not None:
            report("NUTS+bridge", est,
                   visited_mass(nuts.stan_variable("x"), Q, b, truth.log_z), t_nuts + t_b)

        pe, t_pe = _timed(functools.partial(pemc_stan.sample, stan_file, data_file, method="pe",
                                            n_pseudo=args.n_pseudo, seed=seed,
                                            temper=args.pe_temper, beta=pe_beta,
                                            output_dir=str(out / "pe"), **run))
        est, t_b = attempt("PE+bridge", functools.partial(estimate_evidence, pe,
                                                          estimator="bridge", seed=seed))
        if est is not None:
            pe_x = pe.resampled_parameters_pd()[x_cols].to_numpy(dtype=float)
            report("PE+bridge", est, visited_mass(pe_x, Q, b, truth.log_z), t_pe + t_b)

        ct_run = dict(ct_kwargs)
        if args.base == "mean-field":
            ct_run.update(ct_bench.mean_field_base(gen, data, seed, args.mf_restarts,
                                                   args.base_covariance))
        ct, t_ct = _timed(functools.partial(pemc_stan.sample, stan_file, data_file, method="ct",
                                            seed=seed, output_dir=str(out / "ct"), **run,
                                            **ct_run))
        ct_x = ct.resampled_parameters_pd()[x_cols].to_numpy(dtype=float)
        report("CT eq.20", ct.log_z(), visited_mass(ct_x, Q, b, truth.log_z), t_ct)
        est, t_b = attempt("CT+bridge", functools.partial(estimate_evidence, ct,
                                                          estimator="bridge", seed=seed))
        if est is not None:
            report("CT+bridge", est, None, t_b)

    print()
    print(f"exact log Z = {truth.log_z:.6f}")
    print(f"{'estimator':<12} {'mean logZ':>10} {'mean err':>9} {'sd':>7} {'mean SE':>8} "
          f"{'within 3 SE':>11}")
    for name in names:
        r = np.array(results[name])
        if r.size == 0:
            continue
        n = r.shape[0]
        sd = np.std(r[:, 0], ddof=1) if n > 1 else float("nan")
        print(f"{name:<12} {np.mean(r[:, 0]):>10.4f} {np.mean(r[:, 0]) - truth.log_z:>+9.4f} "
              f"{sd:>7.4f} {np.mean(r[:, 1]):>8.4f} {int(np.sum(r[:, 2] <= 3.0)):>6d}/{n}")
    for name, seeds in failures.items():
        print(f"{name} failed (raised) in seeds {seeds}")
    print(f"draws in {out_root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
