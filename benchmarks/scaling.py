"""How a run's cost and accuracy move with the model's size, against plain CmdStan NUTS.

Families with a size knob and exact answers:

- ``gauss``: a correlated Gaussian in D dimensions (a stationary AR(1) chain, correlation
  0.9 between neighbours): means 0, sds 1, log Z = 0.
- ``hier``: a hierarchical normal model with known variances, N observations in J
  groups (conjugate: the posterior means of ``mu`` and ``theta`` and log Z in closed form).
- ``bimodal``: a product of D one-dimensional two-component mixtures (2^D modes): each
  coordinate's mean and sd in closed form, log Z = 0.
- ``touching``: two Gaussian modes in D dimensions that touch (0.7 N(0, I) and
  0.3 N(m, 0.5^2 I), ``m`` 2.5 along the first axis): means, sds and log Z = 0 in closed form.

For each family and size, plain NUTS (CmdStan, compiled beforehand) and pemc-stan's
defaults (CT and PE, compiled beforehand) run with the same chains, warm-up and draws,
one after the other on one machine.  Printed: wall seconds, the ratio to NUTS, the worst
|error| / reported standard error over the means and sds, the log Z error in its standard
errors, and the verdict.  ``--png`` draws the ratios against the size.

Usage::

    python benchmarks/scaling.py                       # every family, the default sizes
    python benchmarks/scaling.py --family gauss --sizes 10 100 --methods ct
    python benchmarks/scaling.py --plot --results R --png P  # the PNG of a results file
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SIZES = {"gauss": [10, 100, 1000], "hier": [100, 1000, 10_000],
         "bimodal": [5, 10, 20, 50, 100], "touching": [5, 10, 20, 50, 100]}


@dataclass
class Case:
    """A model of one size with its exact answers (CmdStan column -> value)."""

    name: str
    code: str
    data: dict[str, Any]
    mean: dict[str, float]
    sd: dict[str, float]
    log_z: float


def gauss(d: int, seed: int = 1) -> Case:
    """A stationary AR(1) chain, ``x[1] ~ normal(0, 1)``, ``x[k] ~ normal(0.9 x[k-1],
    sqrt(1 - 0.81))``: every sd 1, neighbours correlated 0.9 (the covariance's scales
    span a factor of 19), and a gradient that costs O(D), so that D = 1000 measures the
    run's overhead and not a dense matrix product."""
    rho = 0.9
    code = """data { int D; real rho; }
parameters { vector[D] x; }
model {
  x[1] ~ normal(0, 1);
  x[2:D] ~ normal(rho * x[1:(D - 1)], sqrt(1 - square(rho)));
}
"""
    return Case(f"gauss_{d}", code, {"D": d, "rho": rho},
                {f"x[{i + 1}]": 0.0 for i in range(d)},
                {f"x[{i + 1}]": 1.0 for i in range(d)}, 0.0)


def hier(n: int, seed: int = 1) -> Case:
    """``y[i] ~ normal(theta[g[i]], sigma)``, ``theta ~ normal(mu, tau)``,
    ``mu ~ normal(0, 5)``, ``sigma = 1`` and ``tau = 0.5`` known; J = N / 10 groups (at
    most 1,000)."""
    rng = np.random.default_rng(seed)
    j = min(max(n // 10, 10), 1000)
    sigma, tau, s0 = 1.0, 0.5, 5.0
    g = np.arange(n) % j
    theta_true = rng.normal(1.0, tau, j)
    y = rng.normal(theta_true[g], sigma)
    counts = np.bincount(g, minlength=j).astype(float)
    ybar = np.bincount(g, weights=y, minlength=j) / counts
    ss = np.bincount(g, weights=(y - ybar[g]) ** 2, minlength=j)
    v = tau**2 + sigma**2 / counts  # ybar_j | mu
    cov = s0**2 * np.ones((j, j)) + np.diag(v)
    _, logdet = np.linalg.slogdet(cov)
    quad = ybar @ np.linalg.solve(cov, ybar)
    log_z = float(-0.5 * (j * math.log(2 * math.pi) + logdet + quad)
                  + np.sum(-(counts - 1) / 2 * math.log(2 * math.pi * sigma**2)
                           - 0.5 * np.log(counts) - ss / (2 * sigma**2)))
    prec_mu = 1 / s0**2 + np.sum(1 / v)
    mu_mean = float(np.sum(ybar / v) / prec_mu)
    prec_t = 1 / tau**2 + counts / sigma**2
    t_mean = (mu_mean / tau**2 + counts * ybar / sigma**2) / prec_t
    # Var(theta_j | y) = 1 / prec_t + (1 / (tau^2 prec_t))^2 Var(mu | y)
    t_sd = np.sqrt(1 / prec_t + (1 / (tau**2 * prec_t)) ** 2 / prec_mu)
    code = """data { int N; int J; array[N] int<lower=1, upper=J> g; vector[N] y; }
parameters { real mu; vector[J] theta; }
model {
  mu ~ normal(0, 5);
  theta ~ normal(mu, 0.5);
  y ~ normal(theta[g], 1);
}
"""
    mean = {"mu": mu_mean, **{f"theta[{k + 1}]": float(t) for k, t in enumerate(t_mean)}}
    sd = {"mu": float(1 / math.sqrt(prec_mu)),
          **{f"theta[{k + 1}]": float(s) for k, s in enumerate(t_sd)}}
    return Case(f"hier_{n}", code, {"N": n, "J": j, "g": (g + 1).tolist(), "y": y.tolist()},
                mean, sd, log_z)


def bimodal(d: int, seed: int = 1) -> Case:
    """Each coordinate: 0.3 N(-2, 0.5^2) + 0.7 N(2, 0.8^2)."""
    w, m1, s1, m2, s2 = 0.3, -2.0, 0.5, 2.0, 0.8
    mean = w * m1 + (1 - w) * m2
    second = w * (s1**2 + m1**2) + (1 - w) * (s2**2 + m2**2)
    code = """data { int D; }
parameters { vector[D] x; }
model {
  for (d in 1:D)
    target += log_mix(0.3, normal_lpdf(x[d] | -2, 0.5), normal_lpdf(x[d] | 2, 0.8));
}
"""
    sd = math.sqrt(second - mean**2)
    return Case(f"bimodal_{d}", code, {"D": d}, {f"x[{i + 1}]": mean for i in range(d)},
                {f"x[{i + 1}]": sd for i in range(d)}, 0.0)


def touching(d: int, seed: int = 1) -> Case:
    """0.7 N(0, I) + 0.3 N(m, 0.5^2 I) with m = (2.5, 0, ..., 0)."""
    w, shift, s2 = 0.7, 2.5, 0.5
    code = """data { int D; vector[D] m; }
parameters { vector[D] x; }
model {
  target += log_mix(0.7, normal_lpdf(x | 0, 1), normal_lpdf(x | m, 0.5));
}
"""
    mean = {f"x[{i + 1}]": (1 - w) * shift if i == 0 else 0.0 for i in range(d)}
    var1 = w * 1.0 + (1 - w) * (s2**2 + shift**2) - ((1 - w) * shift) ** 2
    rest = w * 1.0 + (1 - w) * s2**2
    sd = {f"x[{i + 1}]": math.sqrt(var1 if i == 0 else rest) for i in range(d)}
    return Case(f"touching_{d}", code, {"D": d, "m": [shift] + [0.0] * (d - 1)}, mean, sd, 0.0)


FAMILIES: dict[str, Callable[[int], Case]] = {"gauss": gauss, "hier": hier,
                                               "bimodal": bimodal, "touching": touching}


def _worst(case: Case, means: dict[str, tuple[float, float]],
           sds: dict[str, tuple[float, float]]) -> float:
    """The worst |error| / standard error over every exact mean and sd."""
    worst = 0.0
    for exact, got in ((case.mean, means), (case.sd, sds)):
        for column, value in exact.items():
            est, se = got.get(column, (math.nan, math.nan))
            worst = max(worst, abs(est - value) / max(se, 1e-12))
    return worst


def run_nuts(case: Case, stan_file: Path, args: argparse.Namespace) -> dict[str, Any]:
    from pemc_stan.backend.compile import compile_model

    model = compile_model(stan_file)
    start = time.perf_counter()
    fit = model.sample(data=case.data, chains=args.chains, iter_warmup=args.iter_warmup,
                       iter_sampling=args.iter_sampling, seed=args.seed, show_progress=False,
                       show_console=False)
    seconds = time.perf_counter() - start
    import arviz as az

    draws = fit.draws_pd()
    chains = fit.chains
    means, sds = {}, {}
    for column in case.mean:
        x = draws[column].to_numpy().reshape(chains, -1)
        mean, sd = float(x.mean()), float(x.std())
        dev2 = (x - mean) ** 2  # the variance's own effective draws, not the mean's
        ess_mean = float(az.ess(x))
        ess_var = max(float(az.ess(dev2)), 1.0)
        means[column] = (mean, float(x.std()) / math.sqrt(max(ess_mean, 1.0)))
        sds[column] = (sd, float(dev2.std()) / math.sqrt(ess_var) / (2 * sd))
    return {"seconds": seconds, "worst": _worst(case, means, sds), "log_z": math.nan,
            "verdict": "-"}


def run_method(case: Case, stan_file: Path, method: str, args: argparse.Namespace
               ) -> dict[str, Any]:
    import pemc_stan
    from pemc_stan.modes.density import DensityEvaluator
    from pemc_stan.run.pipeline import method_model
    from pemc_stan.stan.inputs import read_program

    program = read_program(stan_file)
    warm = method_model(program, case.data, method=method)  # compiles, outside the timing
    warm.method_model()
    warm.original_model()
    _ = DensityEvaluator(warm.program, case.data, program.name).model
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pemc_stan.sample(program, data=case.data, method=method, chains=args.chains,
                               iter_warmup=args.iter_warmup, iter_sampling=args.iter_sampling,
                               seed=args.seed)
    seconds = time.perf_counter() - start
    means, sds = {}, {}
    for column in case.mean:
        est = fit.expectation(column)
        second = fit.expectation(lambda v, c=column: v[c] ** 2)
        var = float(second.mean) - float(est.mean) ** 2
        sd = math.sqrt(max(var, 0.0))
        # delta method on sd = sqrt(E[x^2] - E[x]^2), ignoring their covariance
        se_var = math.hypot(float(second.mcse), 2 * float(est.mean) * float(est.mcse))
        means[column] = (float(est.mean), float(est.mcse))
        sds[column] = (sd, se_var / max(2 * sd, 1e-12))
    log_z = fit.log_z()
    z = math.nan if log_z is None else (log_z.log_z - case.log_z) / max(log_z.std_error, 1e-12)
    cost = fit.follow_up.cost() if fit.follow_up is not None else {}
    return {"seconds": seconds, "worst": _worst(case, means, sds), "log_z": z,
            "verdict": "ok" if fit.check().ok else "suspect",
            "stage_seconds": cost.get("stage_seconds", {})}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", nargs="*", choices=sorted(FAMILIES), default=list(FAMILIES))
    p.add_argument("--sizes", nargs="*", type=int, help="sizes (default: each family's)")
    p.add_argument("--methods", nargs="*", default=["ct", "pe"])
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--iter-warmup", type=int, default=1000)
    p.add_argument("--iter-sampling", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--results", type=Path, default=Path("benchmarks/results/scaling.jsonl"))
    p.add_argument("--png", type=Path, default=Path("benchmarks/results/scaling.png"))
    p.add_argument("--plot", action="store_true",
                   help="draw the PNG from the results file (its last row of each family, "
                        "size and sampler) and stop")
    args = p.parse_args(argv)
    if args.plot:
        latest = {}
        for line in args.results.read_text().splitlines():
            row = json.loads(line)
            latest[(row["family"], row["size"], row["sampler"])] = row
        _plot(list(latest.values()), args.png)
        return 0
    from pemc_stan.backend import runtime

    runtime.activate()
    rows: list[dict[str, Any]] = []
    folder = Path(tempfile.mkdtemp(prefix="pemc-scaling-"))
    print(f"{'case':<16} {'sampler':<5} {'seconds':>8} {'x NUTS':>7} {'worst z':>8} "
          f"{'log Z z':>8} verdict")
    for family in args.family:
        for size in args.sizes or SIZES[family]:
            case = FAMILIES[family](size)
            stan_file = folder / f"{case.name.split('_')[0]}.stan"
            stan_file.write_text(case.code)
            nuts = run_nuts(case, stan_file, args)
            results = {"nuts": nuts}
            for method in args.methods:
                results[method] = run_method(case, stan_file, method, args)
            for sampler, r in results.items():
                ratio = r["seconds"] / nuts["seconds"]
                print(f"{case.name:<16} {sampler:<5} {r['seconds']:8.2f} {ratio:7.2f} "
                      f"{r['worst']:8.2f} {r['log_z']:8.2f} {r['verdict']}", flush=True)
                row = {"family": family, "size": size, "sampler": sampler, "ratio": ratio,
                       "seed": args.seed, **r}
                rows.append(row)
                args.results.parent.mkdir(parents=True, exist_ok=True)
                with args.results.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
    _plot(rows, args.png)
    return 0


def _plot(rows: list[dict[str, Any]], png: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG")
        return
    families = sorted({r["family"] for r in rows})
    fig, axes = plt.subplots(1, len(families), figsize=(4 * len(families), 3.4), squeeze=False)
    for ax, family in zip(axes[0], families, strict=True):
        for sampler in sorted({r["sampler"] for r in rows if r["sampler"] != "nuts"}):
            pts = sorted((r["size"], r["ratio"]) for r in rows
                         if r["family"] == family and r["sampler"] == sampler)
            ax.plot([s for s, _ in pts], [q for _, q in pts], marker="o", label=sampler)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(family)
        ax.set_xlabel("N" if family == "hier" else "D")
        ax.set_ylabel("wall time / NUTS")
        ax.legend()
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")


if __name__ == "__main__":
    raise SystemExit(main())
