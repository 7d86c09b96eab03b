"""The peers' side of ``benchmarks/peers.py``: PyMC's ``sample_smc`` or nautilus on one target.

Runs inside the peers' own virtual environment (neither PyMC nor nautilus is a
dependency of pemc-stan), so it imports nothing from pemc-stan: only the standard
library, NumPy, the peer and ``_smc_worker.py``'s redirection of standard output.

Input: one JSON job on standard input::

    {"peer": "smc" | "nautilus",
     "target": {"kind": ..., "dim": D, "lower": L, "upper": U, "params": {...}},
     "seeds": [1, 2, ...]}

Every target is a uniform prior on the box [L, U]^D times a likelihood (the
densities of ``peers.py``'s Stan programs, with their constants); each kind's log
likelihood is written once, for NumPy (nautilus) and for PyTensor (PyMC), through
the module ``xp`` it is given.

Output: one JSON object on standard output (everything the peers print goes to
standard error): the peer's version and, per seed, the wall seconds of the run
(SMC's after an untimed warm-up call),
log Z, its standard error where the peer gives one (SMC: the spread of its
chains' estimates over the square root of their number), and the likelihood calls
where the peer counts them.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any

import numpy as np
from _smc_worker import log_marginal_likelihood, stdout_to_stderr  # benchmarks/ on sys.path


def _logsumexp(a: Any, xp: Any, axis: int) -> Any:
    top = xp.max(a, axis=axis, keepdims=True)
    return xp.squeeze(top, axis=axis) + xp.log(xp.sum(xp.exp(a - top), axis=axis))


def log_likelihood(x: Any, target: dict[str, Any], xp: Any) -> Any:
    """The target's log likelihood at ``x`` (shape (D,)), in ``xp`` (numpy or
    pytensor.tensor): the Stan program's density less the uniform prior's."""
    p = target["params"]
    kind = target["kind"]
    if kind == "shells":
        c = np.asarray(p["centres"], dtype=float)  # (2, D)
        w, r = float(p["w"]), float(p["r"])
        dist = xp.sqrt(xp.sum((x[None, :] - c) ** 2, axis=1))
        lp = -0.5 * ((dist - r) / w) ** 2 - math.log(w * math.sqrt(2 * math.pi))
        return _logsumexp(lp, xp, 0)
    if kind == "eggbox":
        return (2.0 + xp.cos(x[0] / 2.0) * xp.cos(x[1] / 2.0)) ** 5
    if kind == "gmm":
        mu = np.asarray(p["mu"], dtype=float)  # (K, D)
        s = float(p["sigma"])
        k, d = mu.shape
        lp = (-0.5 * xp.sum(((x[None, :] - mu) / s) ** 2, axis=1)
              - d * math.log(s * math.sqrt(2 * math.pi)))
        return _logsumexp(lp, xp, 0) - math.log(k)
    if kind == "tmix":
        mu = np.asarray(p["mu"], dtype=float)  # (K, D)
        nu = float(p["nu"])
        k, d = mu.shape
        const = (math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2)
                 - 0.5 * math.log(nu * math.pi))
        lp = xp.sum(const - (nu + 1) / 2 * xp.log1p((x[None, :] - mu) ** 2 / nu), axis=1)
        return _logsumexp(lp, xp, 0) - math.log(k)
    if kind == "corr_gauss":
        chol_inv = np.linalg.inv(np.asarray(p["chol"], dtype=float))
        d = chol_inv.shape[0]
        y = xp.dot(chol_inv, x)
        return (-0.5 * xp.sum(y**2) - float(np.sum(np.log(np.diag(np.asarray(p["chol"])))))
                - 0.5 * d * math.log(2 * math.pi))
    if kind == "coin":
        n, k = int(p["N"]), int(p["k"])
        q = x[0] * x[1]
        log_binom = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
        return log_binom + k * xp.log(q) + (n - k) * xp.log1p(-q)
    raise ValueError(f"unknown target kind {kind!r}")


def _smc(target: dict[str, Any], seed: int, warm_up: bool = False) -> dict[str, Any]:
    """``pm.sample_smc`` with its defaults (but the seed) on the target; with ``warm_up``,
    first an untimed call of 100 draws (PyTensor compiles the model's functions in the
    first call, from its disk cache after)."""
    import pymc as pm
    import pytensor.tensor as pt

    d, lo, hi = int(target["dim"]), float(target["lower"]), float(target["upper"])
    with pm.Model():
        x = pm.Uniform("x", lower=lo, upper=hi, shape=d)
        pm.Potential("log_likelihood", log_likelihood(x, target, pt))
        if warm_up:
            pm.sample_smc(draws=100, random_seed=0, progressbar=False)
        start = time.perf_counter()
        idata = pm.sample_smc(random_seed=seed, progressbar=False)
        seconds = time.perf_counter() - start
    log_z, per_chain = log_marginal_likelihood(idata)
    arr = np.asarray(per_chain, dtype=float)
    se = float(np.std(arr, ddof=1) / math.sqrt(arr.size)) if arr.size > 1 else math.nan
    return {"seconds": seconds, "log_z": log_z, "log_z_se": se, "per_chain": per_chain,
            "calls": None}


def _nautilus(target: dict[str, Any], seed: int, **_: Any) -> dict[str, Any]:
    """nautilus with its defaults (but the seed) on the target."""
    import nautilus

    d, lo, hi = int(target["dim"]), float(target["lower"]), float(target["upper"])
    prior = nautilus.Prior()
    for i in range(d):
        prior.add_parameter(f"x{i}", dist=(lo, hi))

    def likelihood(x: Any) -> float:
        return float(log_likelihood(np.asarray(x, dtype=float), target, np))

    sampler = nautilus.Sampler(prior, likelihood, pass_dict=False, seed=seed)
    start = time.perf_counter()
    sampler.run(verbose=False)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "log_z": float(sampler.log_z), "log_z_se": None,
            "calls": int(getattr(sampler, "n_like", 0)) or None}


def main() -> int:
    """Read the job, run the peer once per seed, print the results as JSON."""
    job = json.load(sys.stdin)
    peer, target = job["peer"], job["target"]
    runs = []
    with stdout_to_stderr():
        if peer == "smc":
            import pymc

            version, run = pymc.__version__, _smc
        elif peer == "nautilus":
            import nautilus

            version, run = nautilus.__version__, _nautilus
        else:
            raise SystemExit(f"peer={peer!r}: expected 'smc' or 'nautilus'")
        for i, seed in enumerate(job["seeds"]):
            try:
                extra = {"warm_up": True} if peer == "smc" and i == 0 else {}
                runs.append({"seed": seed, **run(target, int(seed), **extra)})
            except Exception as exc:  # a peer's failure is a result too
                runs.append({"seed": seed, "error": f"{type(exc).__name__}: {exc}"})
    json.dump({"peer": peer, "version": version, "runs": runs}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
