"""PyMC side of ``benchmarks/smc_comparison.py``: ``pm.sample_smc`` on one target, as JSON.

Runs inside the benchmark's own PyMC virtual environment (PyMC is not a
dependency of pemc-stan), so it imports nothing from pemc-stan: only the
standard library, NumPy and PyMC.

Input: one JSON job, from the file named by the first argument, or from standard
input when there is no argument (or it is ``-``)::

    {"target": "mixture" | "boltzmann",
     "data": {...},            # mixture: mu, w, sigma, prior_mu, prior_sd; boltzmann: Q, b
     "seeds": [1, 2, ...],     # one sample_smc call per seed (random_seed=seed)
     "draws": null,            # null: PyMC's default; an integer only in --quick mode
     "chains": null, "cores": null,   # null: PyMC's defaults
     "warmup": true}           # one untimed call first (100 draws; fills PyTensor's cache)

Output: one JSON object on standard output (everything PyMC prints goes to
standard error): the PyMC version, the seconds of ``import pymc``, of building
the model and of the warm-up call, and per seed the wall seconds of the
``pm.sample_smc`` call, the draws' E[x_d] and E[x_d^2] for every coordinate, the
log marginal likelihood (per chain and combined) and the settings PyMC used.

The models write the same densities as the Stan programs of the benchmark:

* ``mixture``: x ~ N(prior_mu, prior_sd^2 I) on R^2 and a ``pm.Potential`` equal to
  log(mixture density) - log(prior density), so the model's density is the
  normalised 20-component mixture itself (log Z = 0).  SMC needs a prior it can
  draw from (its tempering path runs from the prior to the posterior); the
  potential divides it out again.
* ``boltzmann``: x ~ N(0, I) (27-D) and a ``pm.Potential`` sum_i log cosh(q_i'x + b_i),
  the Stan program's density with all constants (log Z = 137.129...).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send file descriptor 1 to standard error (child processes included) while inside.

    Yields
    ------
    None
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def build_model(target: str, data: dict[str, Any]) -> Any:
    """The PyMC model of ``target`` (see the module docstring).

    Parameters
    ----------
    target
        ``"mixture"`` or ``"boltzmann"``.
    data
        The target's numbers.

    Returns
    -------
    pymc.Model

    Raises
    ------
    ValueError
        For an unknown target.
    """
    import pymc as pm
    import pytensor.tensor as pt

    if target == "mixture":
        mu = np.asarray(data["mu"], dtype=float)  # (K, 2)
        w = np.asarray(data["w"], dtype=float)  # (K,)
        sigma = np.asarray(data["sigma"], dtype=float)  # (K,)
        prior_mu = float(data["prior_mu"])
        prior_sd = float(data["prior_sd"])
        with pm.Model() as model:
            x = pm.Normal("x", mu=prior_mu, sigma=prior_sd, shape=2)
            z = (x[None, :] - mu) / sigma[:, None]
            comp = (np.log(w) - 2.0 * np.log(sigma) - math.log(2.0 * math.pi)
                    - 0.5 * pt.sum(z**2, axis=1))
            top = pt.max(comp)
            log_mix = top + pt.log(pt.sum(pt.exp(comp - top)))
            log_prior = (-0.5 * pt.sum(((x - prior_mu) / prior_sd) ** 2)
                         - 2.0 * math.log(prior_sd) - math.log(2.0 * math.pi))
            pm.Potential("mixture_over_prior", log_mix - log_prior)
        return model
    if target == "boltzmann":
        Q = np.asarray(data["Q"], dtype=float)  # (D_B, D)
        b = np.asarray(data["b"], dtype=float)  # (D_B,)
        with pm.Model() as model:
            x = pm.Normal("x", mu=0.0, sigma=1.0, shape=Q.shape[1])
            au = pt.abs(pt.dot(Q, x) + b)
            log_cosh = au + pt.log1p(pt.exp(-2.0 * au)) - math.log(2.0)
            pm.Potential("log_cosh", pt.sum(log_cosh))
        return model
    raise ValueError(f"target={target!r}: expected 'mixture' or 'boltzmann'")


def _floats(value: Any) -> list[float]:
    """Every number in a (possibly ragged, object-typed) nested array, flattened in order."""
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim > 0):
        out: list[float] = []
        for v in value:
            out.extend(_floats(v))
        return out
    try:
        return [float(value)]
    except (TypeError, ValueError):
        return []


def log_marginal_likelihood(idata: Any) -> tuple[float, list[float]]:
    """The SMC estimate of log Z: combined over chains, and per chain.

    Each chain's estimate is the last finite entry of its ``log_marginal_likelihood``
    sample statistic (PyMC records one entry per tempering stage, NaN before the
    last).  Chains are combined as log(mean_c Z_c), the average of unbiased
    estimates of Z.

    Parameters
    ----------
    idata
        The InferenceData returned by ``pm.sample_smc``.

    Returns
    -------
    (log Z, per-chain log Z)
    """
    values = idata.sample_stats["log_marginal_likelihood"].values
    per_chain = []
    for chain in values:
        finite = [v for v in _floats(chain) if math.isfinite(v)]
        per_chain.append(finite[-1] if finite else math.nan)
    arr = np.asarray(per_chain, dtype=float)
    if not np.all(np.isfinite(arr)):
        return math.nan, per_chain
    top = float(np.max(arr))
    return top + math.log(float(np.mean(np.exp(arr - top)))), per_chain


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    return str(value)


def smc_kwargs(job: dict[str, Any], seed: int) -> dict[str, Any]:
    """Keyword arguments of ``pm.sample_smc``: ``random_seed`` and only what the job sets.

    Parameters
    ----------
    job
        The job (``draws``, ``chains``, ``cores``: None means PyMC's default).
    seed
        ``random_seed``.

    Returns
    -------
    dict
    """
    kwargs: dict[str, Any] = {"random_seed": int(seed), "progressbar": False}
    for key in ("draws", "chains", "cores"):
        if job.get(key) is not None:
            kwargs[key] = int(job[key])
    return kwargs


def run_one(model: Any, job: dict[str, Any], seed: int) -> dict[str, Any]:
    """One timed ``pm.sample_smc`` call and what it estimated.

    Parameters
    ----------
    model
        The PyMC model.
    job
        The job.
    seed
        ``random_seed``.

    Returns
    -------
    dict
        ``seed``, ``seconds``, ``mean``, ``second``, ``log_z``, ``log_z_chains``,
        ``chains``, ``draws_per_chain``, ``cores`` (passed, or PyMC's default
        min(chains, CPU count)), ``stages``, ``settings``.
    """
    import pymc as pm

    kwargs = smc_kwargs(job, seed)
    t0 = time.perf_counter()
    with model:
        idata = pm.sample_smc(**kwargs)
    seconds = time.perf_counter() - t0
    x = np.asarray(idata.posterior["x"].values, dtype=float)  # (chain, draw, D)
    flat = x.reshape(-1, x.shape[-1])
    log_z, per_chain = log_marginal_likelihood(idata)
    stages = []
    if "beta" in idata.sample_stats:
        stages = [len(_floats(c)) for c in idata.sample_stats["beta"].values]
    attrs = {k: _jsonable(v) for k, v in idata.sample_stats.attrs.items()}
    return {"seed": int(seed), "seconds": seconds,
            "mean": flat.mean(axis=0).tolist(), "second": (flat**2).mean(axis=0).tolist(),
            "log_z": log_z, "log_z_chains": per_chain,
            "chains": int(x.shape[0]), "draws_per_chain": int(x.shape[1]),
            "cores": int(kwargs.get("cores", min(int(x.shape[0]), os.cpu_count() or 1))),
            "stages": stages,
            "settings": {"passed": {k: v for k, v in kwargs.items()}, "sample_stats_attrs": attrs}}


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Import PyMC, build the model, optionally warm up, then one run per seed.

    Parameters
    ----------
    job
        See the module docstring.

    Returns
    -------
    dict
        ``pymc_version``, ``python``, ``cpu_count``, ``import_seconds``,
        ``build_seconds``, ``warmup_seconds``, ``runs``.
    """
    t0 = time.perf_counter()
    import pymc as pm

    import_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = build_model(job["target"], job["data"])
    build_seconds = time.perf_counter() - t0
    warmup_seconds = None
    if job.get("warmup", True):
        # Untimed call with few draws: compiles the model's functions once so that
        # PyTensor's on-disk cache holds them; the timed calls below still compile
        # (from that cache), inside the timed sample_smc call.
        warm = {**job, "draws": min(int(job.get("draws") or 100), 100)}
        t0 = time.perf_counter()
        with model:
            pm.sample_smc(**smc_kwargs(warm, 0))
        warmup_seconds = time.perf_counter() - t0
    runs = [run_one(model, job, int(seed)) for seed in job["seeds"]]
    return {"pymc_version": pm.__version__, "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(), "import_seconds": import_seconds,
            "build_seconds": build_seconds, "warmup_seconds": warmup_seconds, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    """Read the job, run it with PyMC's output on standard error, print the JSON result.

    Parameters
    ----------
    argv
        ``[job file]`` (``-`` or nothing: standard input).

    Returns
    -------
    int
        0.
    """
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] != "-":
        with open(argv[0], encoding="utf-8") as fh:
            job = json.load(fh)
    else:
        job = json.load(sys.stdin)
    with stdout_to_stderr():
        result = run_job(job)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
