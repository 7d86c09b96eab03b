"""The field's evidence benchmarks: pemc-stan (CT and PE, defaults) beside PyMC's SMC and nautilus.

Every target is a uniform prior on a box [L, U]^D times a likelihood, written as a
Stan program with all its constants, and has an exact log Z:

``shells_D`` (D = 2, 10, 30, 50)
    Two Gaussian shells (Feroz & Hobson 2008): radius 2, width 0.1, centres
    (+-3.5, 0, ...), box [-6, 6]^D.  log Z = log(2 S_{D-1} M) - D log 12, with
    S_{D-1} the unit sphere's area and M = int r^{D-1} N(r; 2, 0.1) dr by quadrature
    (the box cuts off less than 1e-6 of the mass).
``eggbox``
    log L = (2 + cos(x/2) cos(y/2))^5 on [0, 10 pi]^2; log Z by 2-D quadrature.
``gmm40``
    40 equal Gaussians (sd 1) in 2-D, centres uniform on [-40, 40]^2 (NumPy seed
    40), box [-50, 50]^2; log Z = log(mass in the box) - 2 log 100 from the normal
    CDF.
``tmix_D`` (D = 5, 10)
    Five equal Student-t components (nu = 2, scale 1, independent coordinates),
    centres uniform on [-10, 10]^D (NumPy seed D), box [-20, 20]^D; log Z from the
    Student-t CDF.
``corr_D`` (D = 10, 100)
    A Gaussian with correlation 0.9^|i-j| (sd 1), box [-10, 10]^D; log Z = -D log 20
    (the box cuts off less than 1e-20).
``coin``
    15 heads in 20 flips with probability x1 x2, box [0, 1]^2: an unidentifiable
    product (a ridge along x1 x2 = 0.75); log Z = log C(20, 15) +
    log int_0^1 (-log u) u^15 (1 - u)^5 du by quadrature.

Samplers, ``--seeds`` each:

``ct``, ``pe``
    ``pemc_stan.sample(program, data, method=..., seed=...)`` and nothing else (the
    defaults); log Z as ``benchmarks/validation.py`` reads it (the method's own, else
    bridge sampling).  Seconds: the ``sample`` call and the evidence call (the programs
    come from the model cache, filled by an untimed first fit).  Verdict: ``fit.check()``.
``smc``, ``nautilus``
    PyMC's ``pm.sample_smc`` and ``nautilus.Sampler`` with their defaults but the
    seed, in their own virtual environment (``--peers-venv``, made on the first run:
    ``python -m venv`` and ``pip install pymc nautilus-sampler``; neither is a
    dependency of pemc-stan), through ``benchmarks/_peers_worker.py``.  Seconds: the
    sampling call alone.

nautilus runs with ``discard_exploration=False`` (its default), which its own
documentation says an unbiased evidence needs.  Each target's Stan program is first
checked against the peers' likelihood at a few points (:func:`check_program`).

Printed per target and sampler: the mean error of log Z, its RMSE over the seeds,
the share within 4 of pemc-stan's own standard errors, the share of runs whose every
reported ``E[x_i]`` is within 4 of its standard error of the exact mean (``m4``; or its
error bar named unreliable), the verdicts (``silent``: ok and log Z or a mean not
within 4 standard errors), the mean seconds and accuracy per second
``1 / (RMSE^2 x seconds)``, and pemc-stan's accuracy per second over each peer's
(> 1: pemc-stan better).  Every run is appended to ``--results`` as it ends.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import integrate, special, stats

HERE = Path(__file__).resolve().parent
DEFAULT_RESULTS = HERE / "results" / "peers.jsonl"
METHODS = ("ct", "pe")
PEERS = ("smc", "nautilus")
#: What the peers' virtual environment installs, and where it is by default.
PEERS_SPEC = "pymc nautilus-sampler"
DEFAULT_VENV = Path.home() / ".cache" / "pemc-stan" / "bench-peers-venv"
#: An estimate this many of its own standard errors from the exact log Z is a miss.
Z_MAX = 4.0


@dataclass(frozen=True)
class Target:
    """A uniform prior on ``[lower, upper]^dim`` times a likelihood: its Stan program,
    data, the numbers the peers' worker needs (``kind``, ``params``), the exact log Z and
    the exact posterior mean of ``x`` (``means``)."""

    name: str
    kind: str
    dim: int
    lower: float
    upper: float
    stan: str
    data: dict[str, Any]
    log_z: float
    params: dict[str, Any] = field(default_factory=dict)
    means: tuple[float, ...] = ()

    def job(self) -> dict[str, Any]:
        """What ``_peers_worker.py`` is given."""
        return {"kind": self.kind, "dim": self.dim, "lower": self.lower,
                "upper": self.upper, "params": self.params}


def _program(likelihood: str, data_block: str = "") -> str:
    """A box-prior Stan program: ``x`` uniform on its bounds, then the likelihood."""
    return (f"data {{\n  int<lower=1> D;\n  real L;\n  real<lower=L> U;\n{data_block}}}\n"
            f"parameters {{\n  vector<lower=L, upper=U>[D] x;\n}}\n"
            f"model {{\n  target += -D * log(U - L);  // the uniform prior\n"
            f"{likelihood}}}\n")


def shells(d: int, r: float = 2.0, w: float = 0.1, box: float = 6.0) -> Target:
    """Two Gaussian shells in ``d`` dimensions."""
    def radial(p: float) -> float:
        return float(np.exp((d - 1) * np.log(p) - 0.5 * ((p - r) / w) ** 2
                            - 0.5 * np.log(2 * np.pi * w * w)))
    m, _ = integrate.quad(radial, max(1e-12, r - 12 * w), r + 12 * w, limit=200)
    log_area = np.log(2) + d / 2 * np.log(np.pi) - special.gammaln(d / 2)
    log_z = float(np.log(2) + log_area + np.log(m) - d * np.log(2 * box))
    centres = np.zeros((2, d))
    centres[:, 0] = (-3.5, 3.5)
    stan = _program("  target += log_sum_exp(normal_lpdf(distance(x, c1) | r, w),\n"
                        "                        normal_lpdf(distance(x, c2) | r, w));\n",
                    "  vector[D] c1;\n  vector[D] c2;\n  real r;\n  real w;\n")
    data = {"D": d, "L": -box, "U": box, "c1": centres[0].tolist(),
            "c2": centres[1].tolist(), "r": r, "w": w}
    return Target(f"shells_{d}", "shells", d, -box, box, stan, data, log_z,
                  {"centres": centres.tolist(), "r": r, "w": w}, (0.0,) * d)  # x -> -x


def eggbox() -> Target:
    """The eggbox on [0, 10 pi]^2."""
    shift = 243.0  # the largest log L
    with warnings.catch_warnings():  # quadpack's subdivision notice: the value is checked
        warnings.simplefilter("ignore", integrate.IntegrationWarning)  # against a grid
        v, _ = integrate.dblquad(lambda y, x: np.exp((2 + np.cos(x / 2) * np.cos(y / 2)) ** 5
                                                     - shift),
                                 0, 10 * np.pi, 0, 10 * np.pi, epsabs=1e-10, epsrel=1e-10)
    log_z = float(np.log(v) + shift - 2 * np.log(10 * np.pi))
    stan = _program("  target += pow(2 + cos(x[1] / 2) * cos(x[2] / 2), 5);\n")
    return Target("eggbox", "eggbox", 2, 0.0, 10 * np.pi, stan,  # x -> 10 pi - x
                  {"D": 2, "L": 0.0, "U": 10 * np.pi}, log_z, means=(5 * np.pi,) * 2)


def _mixture_program(component: str) -> str:
    return _program("  vector[K] lp;\n  for (k in 1:K) {\n"
                        f"    lp[k] = {component};\n  }}\n"
                        "  target += log_sum_exp(lp) - log(K);\n",
                    "  int<lower=1> K;\n  array[K] vector[D] mu;\n")


def gmm40(k: int = 40, half: float = 40.0, box: float = 50.0) -> Target:
    """40 equal unit Gaussians in 2-D."""
    mu = np.random.default_rng(40).uniform(-half, half, (k, 2))
    inside = np.prod(stats.norm.cdf(box - mu) - stats.norm.cdf(-box - mu), axis=1)
    log_z = float(np.log(np.mean(inside)) - 2 * np.log(2 * box))
    stan = _mixture_program("normal_lpdf(x | mu[k], 1)")
    means = inside @ mu / inside.sum()  # the box cuts each component 10 sds out
    return Target("gmm40", "gmm", 2, -box, box, stan,
                  {"D": 2, "L": -box, "U": box, "K": k, "mu": mu.tolist()}, log_z,
                  {"mu": mu.tolist(), "sigma": 1.0}, tuple(means.tolist()))


def tmix(d: int, k: int = 5, nu: float = 2.0, half: float = 10.0, box: float = 20.0) -> Target:
    """Five equal Student-t components (nu = 2) in ``d`` dimensions."""
    mu = np.random.default_rng(d).uniform(-half, half, (k, d))
    inside = np.prod(stats.t.cdf(box - mu, nu) - stats.t.cdf(-box - mu, nu), axis=1)
    log_z = float(np.log(np.mean(inside)) - d * np.log(2 * box))
    stan = _mixture_program(f"student_t_lpdf(x | {nu:g}, mu[k], 1)")
    # each component's coordinates are independent Student-t's cut by the box
    first = np.vectorize(lambda m: integrate.quad(lambda x: x * stats.t.pdf(x, nu, m),
                                                  -box, box, points=[m])[0])(mu)
    inside_1d = stats.t.cdf(box - mu, nu) - stats.t.cdf(-box - mu, nu)
    means = np.sum(inside[:, None] * first / inside_1d, axis=0) / inside.sum()
    return Target(f"tmix_{d}", "tmix", d, -box, box, stan,
                  {"D": d, "L": -box, "U": box, "K": k, "mu": mu.tolist()}, log_z,
                  {"mu": mu.tolist(), "nu": nu}, tuple(means.tolist()))


def correlated(d: int, rho: float = 0.9, box: float = 10.0) -> Target:
    """A correlated Gaussian (correlation ``rho^|i-j|``) in ``d`` dimensions."""
    idx = np.arange(d)
    chol = np.linalg.cholesky(rho ** np.abs(idx[:, None] - idx[None, :]))
    stan = _program("  target += multi_normal_cholesky_lpdf(x | rep_vector(0, D), chol);\n",
                    "  cholesky_factor_cov[D] chol;\n")
    return Target(f"corr_{d}", "corr_gauss", d, -box, box, stan,
                  {"D": d, "L": -box, "U": box, "chol": chol.tolist()},
                  float(-d * np.log(2 * box)), {"chol": chol.tolist()}, (0.0,) * d)


def coin(n: int = 20, k: int = 15) -> Target:
    """``k`` heads in ``n`` flips with probability ``x1 x2``."""
    v, _ = integrate.quad(lambda u: -np.log(u) * u**k * (1 - u) ** (n - k), 0, 1,
                          epsabs=1e-14, epsrel=1e-12, limit=200)
    # E[x1] = int_0^1 int_0^x1 L(u) du dx1 / Z (u = x1 x2) = int L(u) (1 - u) du / Z
    m, _ = integrate.quad(lambda u: u**k * (1 - u) ** (n - k + 1), 0, 1,
                          epsabs=1e-14, epsrel=1e-12)
    log_binom = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    stan = _program("  target += binomial_lpmf(k | N, x[1] * x[2]);\n",
                    "  int<lower=0> N;\n  int<lower=0, upper=N> k;\n")
    return Target("coin", "coin", 2, 0.0, 1.0, stan,
                  {"D": 2, "L": 0.0, "U": 1.0, "N": n, "k": k},
                  float(log_binom + np.log(v)), {"N": n, "k": k}, (m / v,) * 2)


def targets() -> dict[str, Target]:
    """Every target, by name."""
    out = [*(shells(d) for d in (2, 10, 30, 50)), eggbox(), gmm40(),
           *(tmix(d) for d in (5, 10)), *(correlated(d) for d in (10, 100)), coin()]
    return {t.name: t for t in out}


# ------------------------------------------------------------------------------ runs

def run_method(target: Target, method: str, seed: int, workdir: Path) -> dict[str, Any]:
    """One pemc-stan run with the defaults: log Z, its error bar, verdict and seconds."""
    import pemc_stan

    program = workdir / f"{target.name}.stan"
    start = time.perf_counter()
    fit = pemc_stan.sample(str(program), data=target.data, method=method, seed=seed,
                           show_progress=False)
    est = fit.log_z() or pemc_stan.evidence(fit, estimator="bridge", seed=seed)
    seconds = time.perf_counter() - start
    verdict = fit.check()
    means = [fit.expectation(f"x[{i + 1}]") for i in range(target.dim)]
    return {"log_z": float(est.log_z), "log_z_se": float(est.std_error),
            "seconds": seconds, "verdict": verdict.status,
            "reasons": list(verdict.names()), "sampling": type(fit).__name__,
            "mean_x": [float(e.mean) for e in means], "mean_x_se": [float(e.mcse) for e in means],
            "mean_x_khat": [float(e.khat) for e in means],
            "mean_x_khat_max": [float(e.get("khat_max", math.nan)) for e in means]}


#: Points at which a target's Stan program is checked against the peers' likelihood.
CHECK_POINTS = 5


def check_program(target: Target) -> None:
    """Stop unless the Stan program's log density (CmdStan's ``log_prob``, all constants)
    is the peers' log likelihood plus the uniform prior's at :data:`CHECK_POINTS` points
    of the box (the shells' on a shell, where their density is not negligible): all
    samplers must target one Z."""
    import _peers_worker as worker  # benchmarks/ is sys.path[0]

    from pemc_stan.backend.compile import compile_model

    model = compile_model(target.stan, name=f"peers_{target.name}")
    rng = np.random.default_rng(CHECK_POINTS)
    for _ in range(CHECK_POINTS):
        x = rng.uniform(target.lower, target.upper, target.dim)
        if target.kind == "shells":
            x = np.zeros(target.dim)
            x[0], x[-1] = 3.5 + rng.uniform(-2.0, 2.0), rng.uniform(-0.5, 0.5)
        stan = float(model.log_prob({"x": x.tolist()}, data=target.data,
                                    jacobian=False)["lp__"].iloc[0])
        mine = (float(worker.log_likelihood(x, target.job(), np))
                - target.dim * np.log(target.upper - target.lower))
        if not abs(stan - mine) <= 1e-6 * max(1.0, abs(mine)):
            raise SystemExit(f"{target.name}: the Stan program's log density {stan!r} is not "
                             f"the peers' {mine!r} at x = {x.tolist()}: fix one of them")


def warm_up(target: Target, method: str, workdir: Path) -> None:
    """A short untimed run, so that the timed ones find every program compiled."""
    import pemc_stan

    program = workdir / f"{target.name}.stan"
    program.write_text(target.stan)
    try:
        pemc_stan.sample(str(program), data=target.data, method=method, seed=0,
                         iter_warmup=100, iter_sampling=100, show_progress=False)
    except Exception as exc:  # the timed runs say what fails
        print(f"{target.name} {method}: the warm-up run failed ({exc})", file=sys.stderr)


def run_peer(target: Target, peer: str, seed: int, python: Path,
             timeout: float | None = None) -> dict[str, Any]:
    """The peer's run of ``target`` with ``seed``, in a worker process of its own (stopped
    after ``timeout`` seconds, the run then recorded as timed out)."""
    job = json.dumps({"peer": peer, "target": target.job(), "seeds": [seed]})
    try:
        proc = subprocess.run([str(python), str(HERE / "_peers_worker.py")], input=job,
                              capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"seed": seed, "error": f"timed out after {timeout:g} s"}
    if proc.returncode != 0:
        return {"seed": seed, "error": " / ".join(proc.stderr.strip().splitlines()[-3:])}
    out = json.loads(proc.stdout)
    return {**out["runs"][0], "version": out["version"]}


# --------------------------------------------------------------------------- summary

def latest(records: list[dict[str, Any]], targets: list[str], seeds: list[int]
           ) -> list[dict[str, Any]]:
    """The last record of each (target, sampler, seed) of ``targets`` and ``seeds``: a
    rerun replaces the earlier one."""
    kept: dict[tuple[str, str, int], dict[str, Any]] = {}
    for r in records:
        if r["target"] in targets and r["seed"] in seeds:
            kept[r["target"], r["sampler"], r["seed"]] = r
    return list(kept.values())


def means_within(run: dict[str, Any]) -> bool | None:
    """Whether each reported ``E[x_i]`` of ``run`` is within :data:`Z_MAX` of its standard
    error of the exact mean, or its error bar is named unreliable (its terms' tail k over
    their bound); None for a run that recorded no means."""
    if "mean_x" not in run:
        return None
    err = np.abs(np.subtract(run["mean_x"], run["exact_means"]))
    se = np.asarray(run["mean_x_se"], dtype=float)
    unreliable = np.asarray(run["mean_x_khat"]) > np.asarray(run["mean_x_khat_max"])
    return bool(np.all((err <= Z_MAX * se) | unreliable))


def summarise(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per target and sampler: error, RMSE, share within :data:`Z_MAX` standard errors (of
    log Z; of the means, :func:`means_within`), verdicts, seconds and accuracy per
    second."""
    rows = []
    keys = sorted({(r["target"], r["sampler"]) for r in records})
    for name, sampler in keys:
        runs = [r for r in records if (r["target"], r["sampler"]) == (name, sampler)
                and "log_z" in r and r["log_z"] is not None and math.isfinite(r["log_z"])]
        failed = sum(1 for r in records if (r["target"], r["sampler"]) == (name, sampler)
                     and r not in runs)
        if not runs:
            rows.append({"target": name, "sampler": sampler, "runs": 0, "failed": failed})
            continue
        err = np.array([r["log_z"] - r["exact"] for r in runs])
        se = np.array([r.get("log_z_se") or math.nan for r in runs], dtype=float)
        seconds = float(np.mean([r["seconds"] for r in runs]))
        rmse = float(np.sqrt(np.mean(err**2)))
        # pemc-stan's own error bars only: SMC's, from the spread of its two default
        # chains, has one degree of freedom (a right estimate is within 4 of it 84% of
        # the time); nautilus gives none
        barred = np.isfinite(se) & (sampler in METHODS)
        within = np.abs(err[barred]) <= Z_MAX * se[barred]
        ok = [r for r in runs if r.get("verdict") == "ok"]
        scored = [w for r in runs if (w := means_within(r)) is not None]
        rows.append({
            "target": name, "sampler": sampler, "runs": len(runs), "failed": failed,
            "error": float(np.mean(err)), "rmse": rmse,
            "within": float(np.mean(within)) if within.size else None,
            "means_within": float(np.mean(scored)) if scored else None,
            "ok": None if "verdict" not in runs[0] else len(ok),
            "silent": None if "verdict" not in runs[0] else sum(  # no error bar: a miss
                1 for r in ok if not abs(r["log_z"] - r["exact"]) <= Z_MAX * r["log_z_se"]
                or means_within(r) is False),
            "seconds": seconds,
            "acc_per_s": 1.0 / max(rmse**2 * seconds, 1e-300)})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The summary as text, a line per target: each sampler's RMSE of log Z and mean
    seconds (pemc-stan's with its ok runs, the shares within 4 of its standard errors, of
    log Z and of the means, and the ok runs beyond them, ``silent``), then pemc-stan's
    accuracy per second over each peer's."""
    by = {(r["target"], r["sampler"]): r for r in rows}
    samplers = [m for m in (*METHODS, *PEERS) if any(k[1] == m for k in by)]
    head = f"{'target':10} {'runs':>4}"
    for m in samplers:
        head += f" | {m[:4]:4} {'rmse':>6} {'s':>6}" + (
            f" {'ok':>3} {'in4':>4} {'m4':>4} {'sil':>3}" if m in METHODS else "")
    ratios = [(m, p) for m in METHODS for p in PEERS if m in samplers and p in samplers]
    head += " |" + "".join(f" {m + '/' + p[:4]:>9}" for m, p in ratios)
    lines = [head]
    for name in sorted({k[0] for k in by}):
        runs = max(by[k]["runs"] for k in by if k[0] == name)
        line = f"{name:10} {runs:4}"
        for m in samplers:
            r = by.get((name, m))
            if r is None or not r["runs"]:
                cell = f" | {'':4} {'-':>6} {'-':>6}" if r is None else \
                    f" | {'':4} {'failed':>6} {r['failed']:6}"
                line += cell + (f" {'':>3} {'':>4} {'':>4} {'':>3}" if m in METHODS else "")
                continue
            line += f" | {'':4} {r['rmse']:6.3f} {r['seconds']:6.1f}"
            if m in METHODS:
                within, means = ("" if r[k] is None else f"{100 * r[k]:3.0f}%"
                                 for k in ("within", "means_within"))
                line += f" {r['ok']:3} {within:>4} {means:>4} {r['silent']:3}"
        line += " |"
        for m, p in ratios:
            mine, other = by.get((name, m)), by.get((name, p))
            ok = mine and other and mine["runs"] and other["runs"]
            line += f" {mine['acc_per_s'] / other['acc_per_s']:9.3g}" if ok else f" {'':>9}"
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the samplers on the targets over the seeds; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="*", default=None, help="default: all")
    parser.add_argument("--samplers", nargs="*", default=[*METHODS, *PEERS])
    parser.add_argument("--seeds", type=int, nargs=2, default=(1, 10), metavar=("FIRST", "LAST"))
    parser.add_argument("--peers-venv", type=Path, default=DEFAULT_VENV,
                        help="the peers' virtual environment, made once (pip install "
                             f"{PEERS_SPEC}) when it is not ready")
    parser.add_argument("--peer-timeout", type=float, default=None, metavar="SECONDS",
                        help="stop a peer's runs of one target after this long")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    parser.add_argument("--report-only", action="store_true",
                        help="print the table of the records in --results")
    parser.add_argument("--workdir", type=Path, default=Path("peers_programs"))
    args = parser.parse_args(argv)
    every = targets()
    chosen = args.targets or list(every)
    unknown = sorted(set(chosen) - set(every))
    if unknown:
        parser.error(f"unknown targets {unknown}; expected some of {sorted(every)}")
    seeds = list(range(args.seeds[0], args.seeds[1] + 1))
    if not args.report_only:
        args.workdir.mkdir(parents=True, exist_ok=True)
        args.results.parent.mkdir(parents=True, exist_ok=True)
        python = args.peers_venv / "bin" / "python"
        if set(args.samplers) & set(PEERS):
            from smc_comparison import ensure_pymc_venv  # benchmarks/ is sys.path[0]

            python, _ = ensure_pymc_venv(args.peers_venv, PEERS_SPEC)
        for name in chosen:
            target = every[name]
            check_program(target)
            for sampler in args.samplers:
                if sampler in METHODS:
                    warm_up(target, sampler, args.workdir)
                    runs = []
                    for seed in seeds:
                        try:
                            runs.append({"seed": seed,
                                         **run_method(target, sampler, seed, args.workdir)})
                        except Exception as exc:  # a failure is a result too
                            runs.append({"seed": seed, "error": f"{type(exc).__name__}: {exc}"})
                else:
                    runs = [run_peer(target, sampler, seed, python, args.peer_timeout)
                            for seed in seeds]
                with args.results.open("a") as f:
                    for run in runs:
                        f.write(json.dumps({"target": name, "sampler": sampler,
                                            "exact": target.log_z,
                                            "exact_means": list(target.means), **run}) + "\n")
                print(f"{name} {sampler}: done", file=sys.stderr, flush=True)
    records = latest([json.loads(line) for line in args.results.open()], chosen, seeds)
    print(table(summarise(records)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
