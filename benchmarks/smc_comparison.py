"""Accuracy per second: CT and PE (pemc-stan defaults) against PyMC's ``sample_smc`` (defaults).

Targets (``--targets``), each with exact answers:

``mixture_a`` / ``mixture_b``
    The 20-component Gaussian mixture of Kou, Zhou & Wong (2006), scenario (a)
    or (b) of ``models/gaussian_mixture_20`` (means, weights, sds and exact
    moments from its ``generate_data.py``), written on R^2 with no box.  The
    density is the normalised mixture, so log Z = 0; E[X1], E[X2], E[X1^2],
    E[X2^2] are exact (``generate_data.exact_moments``).  The Stan program is
    the gallery program without its box (``--mixture-stan-form plain``, the
    default), or the same density split as PyMC needs it (``split``: the
    prior x ~ N(0, s^2 I) and the likelihood mixture / prior).  The PyMC model
    is always the split one: SMC tempers from a prior it can draw from, so it
    gets x ~ N(``--mixture-prior-mu``, ``--mixture-prior-sd``^2 I) and a
    ``pm.Potential`` of log mixture - log prior (the densities are identical).
``boltzmann``
    The 28-unit Boltzmann machine relaxation (27-D) of ``models/boltzmann_machine``:
    the gallery Stan program and data; PyMC: x ~ N(0, I) and a ``pm.Potential``
    sum_i log cosh(q_i'x + b_i).  Exact log Z (137.129..., the Stan density with
    constants), E[x] and Cov[x] by enumerating the 2^28 states
    (``generate_data.load``, the stored ``ground_truth.json``).  Quantities:
    E[x1], E[x2], E[x1^2], E[x2^2] (the two leading directions) and the 27 E[x_d]
    and 27 E[x_d^2] pooled (one RMSE over all coordinates and runs).

Samplers, each run ``--reps`` times with seeds ``--first-seed``, ``--first-seed`` + 1, ...:

``ct``, ``pe``, ``ct_tempered``, ``pe_tempered``
    ``pemc_stan.sample(program, data, method=..., chains=, iter_sampling=, seed=)``
    and nothing else (every method option at its default, but the ``_tempered``
    ones temper alone: ``split_modes='never'``; ``--chains`` 4 and
    ``--iter-sampling`` 1000 are the API's own defaults).  Moments by the fit's
    own estimator (``fit.expectation``), log Z by the method's default: CT's
    eq.-20 ``fit.log_z()``, PE's ``pemc_stan.evidence(fit)`` (bridge sampling on
    the resampled draws).  Seconds: the whole ``pemc_stan.sample`` call (pilots,
    warm-up, sampling; the compiled programs come from the model cache, filled by
    an untimed warm-up fit first), plus for PE's log Z the ``evidence`` call.
    Each fit's verdict (``fit.check()``) is recorded.
``smc``
    ``pm.sample_smc`` with its defaults (kernel, draws, chains = max(2, cores),
    cores = the CPU count) apart from ``random_seed`` and ``progressbar=False``;
    ``--smc-chains`` / ``--smc-cores`` set them explicitly, and what PyMC used is
    recorded.  PyMC runs in its own virtual environment (``--pymc-venv``, made once
    with ``python -m venv`` and ``pip install pymc``; PyMC is not a dependency of
    pemc-stan) through ``benchmarks/_smc_worker.py``.  Seconds: the
    ``pm.sample_smc`` call (which compiles the model's functions inside it, from
    PyTensor's disk cache after an untimed warm-up call); ``import pymc``, building
    the model and the warm-up call are reported separately.  Moments: mean of the
    final particles; log Z: the marginal likelihood estimate, log mean_c Z_c over
    the chains.

Per target, quantity and sampler: RMSE against the exact value over the runs
(pooled quantities: over runs and coordinates), mean seconds, and accuracy per
second = 1 / (RMSE^2 x seconds); then the ratios CT/SMC and PE/SMC of accuracy per
second (> 1: better than SMC).  For an unbiased estimator RMSE^2 falls like 1 /
seconds, so accuracy per second does not depend on the run length; for a biased
one (a sampler that misses modes) it falls with longer runs.

Every run is appended to ``--results`` (JSON lines, ``"record": "run"``) as it
finishes, then the summary rows (``"record": "summary"``); all records of one
invocation share a ``bench_id``.

Usage::

    python benchmarks/smc_comparison.py                      # mixture_a and boltzmann, 5 reps
    python benchmarks/smc_comparison.py --quick --targets mixture_a   # smoke test
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
WORKER = BENCH / "_smc_worker.py"
RESULTS = BENCH / "results" / "smc_comparison.jsonl"
MIXTURE_DIR = ROOT / "models" / "gaussian_mixture_20"
DEFAULT_VENV = Path.home() / ".cache" / "pemc-stan" / "bench-pymc-venv"
SAMPLERS = ("ct", "pe", "ct_tempered", "pe_tempered", "smc")
#: pemc-stan's samplers: (method, what else ``pemc_stan.sample`` is given).  The
#: ``_tempered`` ones temper alone (``split_modes='never'``: no mode split).
PEMC_SAMPLERS: dict[str, tuple[str, dict[str, Any]]] = {
    "ct": ("ct", {}), "pe": ("pe", {}),
    "ct_tempered": ("ct", {"split_modes": "never"}),
    "pe_tempered": ("pe", {"split_modes": "never"}),
}
TARGETS = ("mixture_a", "mixture_b", "boltzmann")
READY = ".pemc-bench-ready"

#: The 20-Gaussian mixture on R^2 as in models/gaussian_mixture_20, without the box.
MIXTURE_PLAIN = """// Mixture of K isotropic bivariate Gaussians (Kou, Zhou & Wong 2006) on R^2.
// Normalised density: log Z = 0.
data {
  int<lower=1> K;
  array[K] vector[2] mu;
  simplex[K] w;
  vector<lower=0>[K] sigma;
}
parameters {
  vector[2] x;
}
model {
  vector[K] lp;
  for (k in 1:K) {
    lp[k] = log(w[k]) + normal_lpdf(x | mu[k], sigma[k]);
  }
  target += log_sum_exp(lp);
}
"""

#: The same density written as PyMC's model: prior N(prior_mu, prior_sd^2 I) times
#: mixture / prior.
MIXTURE_SPLIT = """// Mixture of K isotropic bivariate Gaussians (Kou, Zhou & Wong 2006) on
// R^2, written as a prior times a likelihood: x ~ N(prior_mu, prior_sd^2 I) and mixture / prior.
// The density is the normalised mixture: log Z = 0.
data {
  int<lower=1> K;
  array[K] vector[2] mu;
  simplex[K] w;
  vector<lower=0>[K] sigma;
  real prior_mu;
  real<lower=0> prior_sd;
}
parameters {
  vector[2] x;
}
model {
  x ~ normal(prior_mu, prior_sd);
  profile("likelihood") {
    vector[K] lp;
    for (k in 1:K) {
      lp[k] = log(w[k]) + normal_lpdf(x | mu[k], sigma[k]);
    }
    target += log_sum_exp(lp) - normal_lpdf(x | prior_mu, prior_sd);
  }
}
"""

logger = logging.getLogger(__name__)


@dataclass
class Quantity:
    """A row of the table: moments of some coordinates, or log Z.

    Attributes
    ----------
    name
        Row label.
    kind
        ``"mean"`` (E[x_d]), ``"second"`` (E[x_d^2]) or ``"log_z"``.
    index
        0-based coordinates (pooled when more than one); empty for log Z.
    """

    name: str
    kind: str
    index: tuple[int, ...] = ()


@dataclass
class Target:
    """A benchmark target: the Stan program, the PyMC job and the exact answers.

    Attributes
    ----------
    name
        ``mixture_a``, ``mixture_b`` or ``boltzmann``.
    program
        Stan program text or path.
    data
        Stan data (dict or JSON path).
    smc_data
        What the worker's model needs.
    smc_target
        The worker's target name.
    mean, second
        Exact E[x_d] and E[x_d^2], shape (D,).
    log_z
        Exact log Z of the density as written (both sides).
    quantities
        The table's rows.
    notes
        Settings that define the target (recorded).
    """

    name: str
    program: str
    data: Any
    smc_data: dict[str, Any]
    smc_target: str
    mean: np.ndarray
    second: np.ndarray
    log_z: float
    quantities: list[Quantity]
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        """D, the number of coordinates."""
        return int(self.mean.shape[0])

    def exact(self, q: Quantity) -> np.ndarray:
        """Exact values of ``q`` (one per pooled coordinate)."""
        if q.kind == "log_z":
            return np.array([self.log_z])
        return (self.mean if q.kind == "mean" else self.second)[list(q.index)]


def load_module(path: Path, name: str) -> ModuleType:
    """Import a Python file by path (the models' generators, the other benchmarks).

    Parameters
    ----------
    path
        The ``.py`` file.
    name
        Module name to register it under.

    Returns
    -------
    module

    Raises
    ------
    ImportError
        If the file cannot be loaded.
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def mixture_target(scenario: str, form: str, prior_mu: float, prior_sd: float) -> Target:
    """The 20-Gaussian mixture of scenario ``a`` or ``b`` on R^2 (log Z = 0).

    Parameters
    ----------
    scenario
        ``"a"`` or ``"b"``.
    form
        ``"plain"`` (the gallery program without its box) or ``"split"`` (the
        PyMC model's prior x likelihood split) for the Stan program.
    prior_mu, prior_sd
        The prior PyMC's SMC starts from (and the ``split`` Stan program's).

    Returns
    -------
    Target

    Raises
    ------
    ValueError
        For an unknown scenario or form.
    """
    if form not in ("plain", "split"):
        raise ValueError(f"form={form!r}: expected 'plain' or 'split'")
    gen = load_module(MIXTURE_DIR / "generate_data.py", "gaussian_mixture_20_generate_data")
    data = gen.scenario(scenario)
    exact = gen.exact_moments(data)  # computed from the same numbers the samplers get
    data = {k: v for k, v in data.items() if k not in ("box_lower", "box_upper")}
    prior = {"prior_mu": float(prior_mu), "prior_sd": float(prior_sd)}
    stan_data = {**data, **prior} if form == "split" else dict(data)
    quantities = [Quantity("E[X1]", "mean", (0,)), Quantity("E[X2]", "mean", (1,)),
                  Quantity("E[X1^2]", "second", (0,)), Quantity("E[X2^2]", "second", (1,)),
                  Quantity("log Z", "log_z")]
    return Target(
        name=f"mixture_{scenario}",
        program=MIXTURE_SPLIT if form == "split" else MIXTURE_PLAIN,
        data=stan_data, smc_data={**data, **prior}, smc_target="mixture",
        mean=np.array([exact["E[X1]"], exact["E[X2]"]]),
        second=np.array([exact["E[X1^2]"], exact["E[X2^2]"]]),
        log_z=0.0, quantities=quantities,
        notes={"scenario": scenario, "support": "R^2 (no box)", "stan_form": form,
               "smc_prior": f"N({prior_mu:g}, {prior_sd:g}^2 I), divided out by the potential",
               "log_z": "0: the program is the normalised mixture density"})


def boltzmann_target() -> Target:
    """The 28-unit Boltzmann machine relaxation with its enumerated ground truth.

    Returns
    -------
    Target

    Raises
    ------
    FileNotFoundError
        If the model's data or ground truth is missing.
    """
    ct_bench = load_module(BENCH / "ct_boltzmann_benchmark.py", "ct_boltzmann_benchmark")
    gen = ct_bench.load_generator()
    data, truth = gen.load()
    mean = np.asarray(truth.mean, dtype=float)
    second = np.diag(np.asarray(truth.cov, dtype=float)) + mean**2
    dim = int(data["D"])
    quantities = [Quantity("E[x1]", "mean", (0,)), Quantity("E[x2]", "mean", (1,)),
                  Quantity("E[x1^2]", "second", (0,)), Quantity("E[x2^2]", "second", (1,)),
                  Quantity(f"E[x_d], {dim} pooled", "mean", tuple(range(dim))),
                  Quantity(f"E[x_d^2], {dim} pooled", "second", tuple(range(dim))),
                  Quantity("log Z", "log_z")]
    return Target(
        name="boltzmann", program=str(gen.STAN_FILE), data=str(gen.DATA_FILE),
        smc_data={"Q": data["Q"], "b": data["b"]}, smc_target="boltzmann",
        mean=mean, second=second, log_z=float(truth.log_z), quantities=quantities,
        notes={"D_B": int(data["D_B"]), "D": dim,
               "truth": "enumeration of 2^28 states (models/boltzmann_machine/ground_truth.json)"})


# --------------------------------------------------------------------------- #
# pemc-stan side
# --------------------------------------------------------------------------- #


def _fit_log_z(fit: Any, seed: int) -> Any:
    """The method's default log Z: the fit's own (CT eq. 20), else ``pemc_stan.evidence(fit)``."""
    import pemc_stan

    return fit.log_z() or pemc_stan.evidence(fit, seed=seed)


def pemc_run(target: Target, method: str, seed: int, chains: int, iter_sampling: int,
             sample_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """One ``pemc_stan.sample`` fit with default options, its moments, log Z and verdict.

    Parameters
    ----------
    target
        The target.
    method
        A key of :data:`PEMC_SAMPLERS` (``"ct"``, ``"pe"``, ``"ct_tempered"``,
        ``"pe_tempered"``).
    seed, chains, iter_sampling
        Passed to ``pemc_stan.sample`` (nothing else is, outside ``sample_kwargs``).
    sample_kwargs
        Extra ``pemc_stan.sample`` arguments (only for the untimed warm-up fit).

    Returns
    -------
    dict
        ``seconds`` (the sample call), ``log_z_seconds`` (sample + log Z),
        ``mean``, ``second``, ``log_z``, ``log_z_se``, ``log_z_method``,
        ``verdict``, ``reasons`` (and ``log_z_error`` if log Z failed).
    """
    import pemc_stan

    name, given = PEMC_SAMPLERS[method]
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pemc_stan.sample(target.program, target.data, method=name, chains=chains,
                               iter_sampling=iter_sampling, seed=seed,
                               **given, **(sample_kwargs or {}))
    seconds = time.perf_counter() - t0
    out: dict[str, Any] = {"seconds": seconds}
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = _fit_log_z(fit, seed)
        out.update(log_z=float(est.log_z), log_z_se=float(est.std_error),
                   log_z_method=str(est.method))
    except Exception as exc:
        out.update(log_z=math.nan, log_z_se=math.nan, log_z_method=None,
                   log_z_error=f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    out["log_z_seconds"] = seconds + (time.perf_counter() - t0)
    columns = [f"x[{d + 1}]" for d in range(target.dim)]
    out["mean"] = [float(fit.expectation(c).mean) for c in columns]
    out["second"] = [float(fit.expectation(lambda v, c=c: v[c] ** 2).mean) for c in columns]
    verdict = fit.check()
    out.update(verdict=verdict.status, reasons=[str(r) for r in verdict.reasons])
    return out


def warm_pemc(target: Target, method: str) -> float:
    """Compile everything a timed fit needs (model cache) with one small untimed fit.

    Returns
    -------
    float
        Its wall seconds (compilation included).
    """
    t0 = time.perf_counter()
    pemc_run(target, method, seed=0, chains=2, iter_sampling=100,
             sample_kwargs={"iter_warmup": 100})
    return time.perf_counter() - t0


# --------------------------------------------------------------------------- #
# PyMC side
# --------------------------------------------------------------------------- #


def venv_python(venv: Path) -> Path:
    """The interpreter of a virtual environment."""
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_pymc_venv(venv: Path, spec: str) -> tuple[Path, float]:
    """Create the benchmark's PyMC environment once (``python -m venv``, ``pip install``).

    Parameters
    ----------
    venv
        Its folder; reused when it holds the ready marker.
    spec
        What to install (``pymc`` or a pinned ``pymc==X.Y``; several, space-separated).

    Returns
    -------
    (python, seconds spent creating it; 0 when reused)

    Raises
    ------
    subprocess.CalledProcessError
        If the venv cannot be created or PyMC cannot be installed.
    """
    python = venv_python(venv)
    marker = venv / READY
    if marker.is_file() and python.exists():
        return python, 0.0
    t0 = time.perf_counter()
    print(f"creating the PyMC environment {venv} (pip install {spec}) ...", flush=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    for command in ([sys.executable, "-m", "venv", str(venv)],
                    [str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
                    [str(python), "-m", "pip", "install", "--quiet", *spec.split()]):
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n", file=sys.stderr)
            proc.check_returncode()
    seconds = time.perf_counter() - t0
    marker.write_text(json.dumps({"spec": spec, "seconds": seconds,
                                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                           time.gmtime())}) + "\n")
    print(f"  done in {seconds:.0f} s", flush=True)
    return python, seconds


def run_smc(python: Path, target: Target, seeds: list[int], draws: int | None,
            chains: int | None, cores: int | None, warmup: bool) -> dict[str, Any]:
    """All SMC runs of one target in one worker process.

    Returns
    -------
    dict
        The worker's JSON result (see ``_smc_worker.py``).

    Raises
    ------
    RuntimeError
        If the worker fails (its standard error is included).
    """
    job = {"target": target.smc_target, "data": target.smc_data, "seeds": seeds,
           "draws": draws, "chains": chains, "cores": cores, "warmup": warmup}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(job, fh)
        job_file = fh.name
    try:
        proc = subprocess.run([str(python), str(WORKER), job_file], capture_output=True,
                              text=True, cwd=str(BENCH))
    finally:
        os.unlink(job_file)
    if proc.returncode != 0:
        raise RuntimeError(f"SMC worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if not lines:
        raise RuntimeError(f"SMC worker printed nothing:\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1])


# --------------------------------------------------------------------------- #
# summary
# --------------------------------------------------------------------------- #


def estimate(run: dict[str, Any], q: Quantity) -> np.ndarray:
    """A run's estimate of ``q`` (one value per pooled coordinate)."""
    if q.kind == "log_z":
        return np.array([float(run.get("log_z", math.nan))])
    return np.asarray(run[q.kind], dtype=float)[list(q.index)]


def seconds_for(run: dict[str, Any], q: Quantity) -> float:
    """Wall seconds behind ``q`` in a run (PE's log Z adds its evidence call)."""
    if q.kind == "log_z":
        return float(run.get("log_z_seconds", run["seconds"]))
    return float(run["seconds"])


def summarise(target: Target, runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """RMSE, mean seconds and accuracy per second of every quantity and sampler.

    Parameters
    ----------
    target
        The target (exact answers, quantities).
    runs
        Sampler -> its run records.

    Returns
    -------
    list of dict
        One per quantity: ``quantity``, ``exact`` and per sampler ``rmse``,
        ``seconds``, ``accuracy_per_second``, ``n_runs``; and ``ct_over_smc``,
        ``pe_over_smc``.
    """
    rows = []
    for q in target.quantities:
        exact = target.exact(q)
        row: dict[str, Any] = {"target": target.name, "quantity": q.name,
                               "exact": exact.tolist() if exact.size > 1 else float(exact[0]),
                               "pooled": len(q.index)}
        for sampler, records in runs.items():
            ok = [r for r in records if "failure" not in r]
            if not ok:
                row[sampler] = {"rmse": math.nan, "seconds": math.nan,
                                "accuracy_per_second": math.nan, "n_runs": 0}
                continue
            err = np.concatenate([estimate(r, q) - exact for r in ok])
            rmse = float(np.sqrt(np.mean(err**2)))
            secs = float(np.mean([seconds_for(r, q) for r in ok]))
            acc = 1.0 / (rmse**2 * secs) if rmse > 0 and secs > 0 else math.nan
            row[sampler] = {"rmse": rmse, "seconds": secs, "accuracy_per_second": acc,
                            "n_runs": len(ok), "bias": float(np.mean(err))}
        smc = row.get("smc", {}).get("accuracy_per_second", math.nan)
        for sampler in PEMC_SAMPLERS:
            if sampler in row:
                mine = row[sampler]["accuracy_per_second"]
                row[f"{sampler}_over_smc"] = (mine / smc if math.isfinite(smc) and smc > 0
                                              else math.nan)
        rows.append(row)
    return rows


def _g(x: float, width: int) -> str:
    if x is None or not math.isfinite(x):
        return f"{'nan':>{width}}"
    return f"{x:>{width}.3g}"


def format_table(rows: list[dict[str, Any]], samplers: list[str]) -> str:
    """The printed table: per row RMSE, seconds, accuracy/s of each sampler and the ratios.

    Parameters
    ----------
    rows
        From :func:`summarise` (all targets).
    samplers
        Columns, in order.

    Returns
    -------
    str
    """
    head1 = f"{'target':<10} {'quantity':<22}"
    head2 = f"{'':<10} {'':<22}"
    for s in samplers:
        head1 += f" | {s.upper():^28}"
        head2 += f" | {'RMSE':>9} {'s':>7} {'acc/s':>10}"
    ratios = [s for s in PEMC_SAMPLERS if s in samplers and "smc" in samplers]
    widths = {s: max(8, len(s) + 4) for s in ratios}
    if ratios:
        head1 += " | " + " ".join(f"{s.upper() + '/SMC':>{widths[s]}}" for s in ratios)
        head2 += " | " + " ".join(f"{'acc/s':>{widths[s]}}" for s in ratios)
    lines = [head1, head2, "-" * len(head2)]
    for r in rows:
        line = f"{r['target']:<10} {r['quantity']:<22}"
        for s in samplers:
            c = r.get(s, {})
            line += (f" | {_g(c.get('rmse', math.nan), 9)} {_g(c.get('seconds', math.nan), 7)}"
                     f" {_g(c.get('accuracy_per_second', math.nan), 10)}")
        if ratios:
            line += " | " + " ".join(_g(r.get(f"{s}_over_smc", math.nan), widths[s])
                                     for s in ratios)
        lines.append(line)
    return "\n".join(lines)


def _append(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(json.dumps(record, default=str) + "\n")


def _failure(exc: BaseException) -> dict[str, Any]:
    return {"failure": f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}",
            "traceback": traceback.format_exc()[-3000:]}


def make_targets(names: list[str], args: argparse.Namespace) -> list[Target]:
    """The chosen targets.

    Raises
    ------
    ValueError
        For an unknown target name.
    """
    out = []
    for name in names:
        if name in ("mixture_a", "mixture_b"):
            out.append(mixture_target(name[-1], args.mixture_stan_form, args.mixture_prior_mu,
                                      args.mixture_prior_sd))
        elif name == "boltzmann":
            out.append(boltzmann_target())
        else:
            raise ValueError(f"unknown target {name!r}; expected one of {TARGETS}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table, append the records.

    Parameters
    ----------
    argv
        Command-line arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 (a benchmark: the table says how it went), 1 if nothing could be run.
    """
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--targets", nargs="+", choices=TARGETS, default=None,
                   help="default: mixture_a boltzmann (--quick: mixture_a)")
    p.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=list(SAMPLERS))
    p.add_argument("--reps", type=int, default=None, help="runs per sampler (default 5; "
                   "--quick 2)")
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--chains", type=int, default=None,
                   help="pemc-stan chains (default 4, the API's default; --quick 2)")
    p.add_argument("--iter-sampling", type=int, default=None,
                   help="pemc-stan sampling iterations (default 1000, the API's default; "
                        "--quick 200)")
    p.add_argument("--smc-draws", type=int, default=None,
                   help="sample_smc draws (default: PyMC's; --quick 200)")
    p.add_argument("--smc-chains", type=int, default=None, help="default: PyMC's")
    p.add_argument("--smc-cores", type=int, default=None, help="default: PyMC's")
    p.add_argument("--no-smc-warmup", action="store_true",
                   help="skip the untimed warm-up sample_smc call")
    p.add_argument("--pymc-venv", type=Path, default=DEFAULT_VENV)
    p.add_argument("--pymc-spec", default="pymc", help="what pip installs (default: pymc)")
    p.add_argument("--mixture-stan-form", choices=("plain", "split"), default="plain")
    p.add_argument("--mixture-prior-mu", type=float, default=0.0)
    p.add_argument("--mixture-prior-sd", type=float, default=10.0)
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 2 reps, 2 chains x 200 draws, SMC 200 draws")
    args = p.parse_args(argv)
    quick = args.quick
    reps = args.reps if args.reps is not None else (2 if quick else 5)
    chains = args.chains if args.chains is not None else (2 if quick else 4)
    iter_sampling = (args.iter_sampling if args.iter_sampling is not None
                     else (200 if quick else 1000))
    smc_draws = args.smc_draws if args.smc_draws is not None else (200 if quick else None)
    names = args.targets or (["mixture_a"] if quick else ["mixture_a", "boltzmann"])
    samplers = [s for s in SAMPLERS if s in args.samplers]
    seeds = list(range(args.first_seed, args.first_seed + reps))

    logging.basicConfig(level=logging.WARNING)
    for name in ("cmdstanpy", "pemc_stan"):
        logging.getLogger(name).setLevel(logging.ERROR)
    bench_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}"
    started = time.perf_counter()
    targets = make_targets(names, args)
    settings = {"reps": reps, "seeds": seeds, "chains": chains, "iter_sampling": iter_sampling,
                "smc_draws": smc_draws, "smc_chains": args.smc_chains,
                "smc_cores": args.smc_cores, "smc_warmup": not args.no_smc_warmup,
                "quick": quick, "cpu_count": os.cpu_count(), "host": platform.node()}
    meta: dict[str, Any] = {"record": "meta", "bench_id": bench_id, "settings": settings,
                            "targets": {t.name: t.notes for t in targets}}

    python = None
    if "smc" in samplers:
        python, venv_seconds = ensure_pymc_venv(args.pymc_venv, args.pymc_spec)
        meta["pymc_venv"] = {"path": str(args.pymc_venv), "spec": args.pymc_spec,
                             "created_seconds": venv_seconds}
    if any(s in samplers for s in PEMC_SAMPLERS):
        import pemc_stan
        from pemc_stan.backend import runtime

        runtime.activate()
        meta["pemc_stan_version"] = pemc_stan.__version__
    _append(args.results, meta)
    print(f"bench_id {bench_id}: targets {names}, samplers {samplers}, seeds {seeds}; "
          f"pemc-stan chains={chains} iter_sampling={iter_sampling}; SMC draws="
          f"{smc_draws or 'default'} chains={args.smc_chains or 'default'} "
          f"cores={args.smc_cores or 'default'}", flush=True)

    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for target in targets:
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in samplers}
        base = {"record": "run", "bench_id": bench_id, "target": target.name, "quick": quick}
        for sampler in samplers:
            if sampler == "smc":
                assert python is not None
                try:
                    res = run_smc(python, target, seeds, smc_draws, args.smc_chains,
                                  args.smc_cores, not args.no_smc_warmup)
                except Exception as exc:
                    rec = {**base, "sampler": "smc", **_failure(exc)}
                    _append(args.results, rec)
                    runs["smc"].append(rec)
                    print(f"{target.name:<10} smc FAILED: {rec['failure']}", flush=True)
                    continue
                extra = {k: res.get(k) for k in ("pymc_version", "import_seconds",
                                                  "build_seconds", "warmup_seconds")}
                for r in res["runs"]:
                    rec = {**base, "sampler": "smc", **r, **extra}
                    _append(args.results, rec)
                    runs["smc"].append(rec)
                    print(f"{target.name:<10} smc seed {r['seed']:>3}: {r['seconds']:7.1f} s, "
                          f"log Z {r['log_z']:.4f} (chains {r['chains']} x "
                          f"{r['draws_per_chain']} draws, stages {r['stages']})", flush=True)
                used = res["runs"][0]["settings"] if res["runs"] else {}
                first = res["runs"][0] if res["runs"] else {}
                notes.append(
                    f"{target.name}: PyMC {res.get('pymc_version')}, import "
                    f"{res.get('import_seconds', math.nan):.1f} s, model build "
                    f"{res.get('build_seconds', math.nan):.2f} s, warm-up call "
                    f"{res.get('warmup_seconds') or 0.0:.1f} s (not timed); sample_smc "
                    f"passed {used.get('passed')}; ran {first.get('chains')} chains x "
                    f"{first.get('draws_per_chain')} draws on {first.get('cores')} cores; "
                    f"settings {used.get('sample_stats_attrs')}")
                continue
            try:
                compile_seconds = warm_pemc(target, sampler)
            except Exception as exc:
                rec = {**base, "sampler": sampler, "stage": "warm-up", **_failure(exc)}
                _append(args.results, rec)
                runs[sampler].append(rec)
                print(f"{target.name:<10} {sampler} warm-up FAILED: {rec['failure']}",
                      flush=True)
                continue
            notes.append(f"{target.name}: {sampler.upper()} untimed warm-up fit (compiles) "
                         f"{compile_seconds:.1f} s")
            for seed in seeds:
                rec = {**base, "sampler": sampler, "seed": seed, "chains": chains,
                       "iter_sampling": iter_sampling}
                try:
                    rec.update(pemc_run(target, sampler, seed, chains, iter_sampling))
                except Exception as exc:
                    rec.update(_failure(exc))
                _append(args.results, rec)
                runs[sampler].append(rec)
                if "failure" in rec:
                    print(f"{target.name:<10} {sampler} seed {seed:>3}: FAILED "
                          f"{rec['failure']}", flush=True)
                    continue
                why = "; ".join(rec["reasons"])
                print(f"{target.name:<10} {sampler:<3} seed {seed:>3}: {rec['seconds']:7.1f} s"
                      f" (log Z {rec['log_z_seconds']:.1f} s), log Z {rec['log_z']:.4f} "
                      f"+- {rec['log_z_se']:.4f}, verdict {rec['verdict']}"
                      + (f": {why[:200]}" if why else "")
                      + (f" [log Z failed: {rec['log_z_error']}]" if "log_z_error" in rec
                         else ""), flush=True)
        for s in PEMC_SAMPLERS:
            done = [r for r in runs.get(s, []) if "verdict" in r]
            if done:
                suspect = sum(r["verdict"] != "ok" for r in done)
                notes.append(f"{target.name}: {s.upper()} verdicts: {len(done) - suspect} ok, "
                             f"{suspect} suspect")
        target_rows = summarise(target, runs)
        for row in target_rows:
            _append(args.results, {"record": "summary", "bench_id": bench_id, **row})
        rows.extend(target_rows)

    if not rows:
        return 1
    print()
    print(f"accuracy per second = 1 / (RMSE^2 x seconds); RMSE over {reps} runs "
          f"(pooled rows: over runs and coordinates); ratios > 1: better than SMC")
    print(format_table(rows, samplers))
    print()
    for n in notes:
        print(n)
    total = time.perf_counter() - started
    print(f"total {total:.0f} s; records appended to {args.results} (bench_id {bench_id})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
