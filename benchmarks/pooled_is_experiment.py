"""Experiment (rejected): importance draws after a tempering-alone run as its estimate.

On the 20-Gaussian mixture (scenario a), after CT with ``split_modes='never'``, this
draws from the wide sampler's defensive mixture (``pemc_stan.modes.wide._proposal``):
the run's covering Gaussian, and for half the draws Gaussians fitted to the run's
weighted draws in each cell of its strata.  A second stage adds Gaussians around the
first stage's heavy draws that those do not explain, and both stages are weighed as one
deterministic mixture.  It prints, per seed, the Pareto k, the errors of E[X1], E[X2],
E[X1^2], E[X2^2] and log Z (with z-scores of the means), then the RMSEs and their
accuracy per second against the SMC figures of docs/validation.md.  The findings are in
docs/validation.md, "Rejected: pooling importance draws into the tempered estimate".

Usage::

    python benchmarks/pooled_is_experiment.py --seeds 1 2 3 4 5
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import smc_comparison

import pemc_stan
from pemc_stan.estimators import weights as W
from pemc_stan.modes.density import DensityEvaluator
from pemc_stan.modes.wide import (
    UNEXPLAINED_RATIO,
    _proposal,
    mixture_log_density,
    mixture_sample,
)

STAGE_DRAWS = 50_000
#: Heavy draws within this many of the fitted modes' median sds join one new component.
CLUSTER_SDS = 6.0
#: SMC's RMSEs of E[X1], E[X2], E[X1^2], E[X2^2], log Z and its seconds (cff72f7 table).
SMC_RMSE = np.array([0.0775, 0.0807, 0.827, 0.988, 0.0457])
SMC_SECONDS = 1.8


def _log_gamma(density: DensityEvaluator, coords: Any, data: Any, z: NDArray[np.float64]
               ) -> NDArray[np.float64]:
    """``log gamma`` at base coordinates ``z``, with the Jacobian of the map back."""
    x = {k: np.asarray(v) for k, v in coords.inverse(z, data).items()}
    return np.asarray(density.log_density(x) - coords.forward(x, data)[1])


def _cell_gaussians(fit: Any) -> list[tuple[float, NDArray[np.float64], NDArray[np.float64]]]:
    """The run's weighted draws per stratum cell: (log mass, mean, covariance)."""
    lw = np.asarray(fit.particle_log_weights()).reshape(-1)
    z = fit.particle_coordinates()
    strata = fit.strata()
    labels = strata.labels.reshape(-1) if strata is not None else np.zeros(lw.size, int)
    out = []
    for k in np.unique(labels):
        lk, zk = lw[labels == k], z[labels == k]
        if W.ess(lk) >= 10:
            wk = np.exp(lk - logsumexp(lk))
            out.append((float(logsumexp(lk)), np.average(zk, axis=0, weights=wk),
                        np.atleast_2d(np.cov(zk, rowvar=False, aweights=wk))))
    return out


def _unexplained(z: NDArray[np.float64], lw: NDArray[np.float64], lg: NDArray[np.float64],
                 parts: list[Any], log_w: NDArray[np.float64], n_cover: int,
                 sd: NDArray[np.float64]
                 ) -> list[tuple[float, NDArray[np.float64], NDArray[np.float64]]]:
    """Gaussians around the heavy draws the fitted modes do not explain."""
    log_z = float(logsumexp(lw) - math.log(lw.size))
    log_modes = mixture_log_density(parts[n_cover:], log_w[n_cover:], z) + math.log(2.0)
    cand = np.flatnonzero((lg - log_z - log_modes > math.log(UNEXPLAINED_RATIO))
                          & np.isfinite(lw))
    cand = cand[np.argsort(-lw[cand])][:5000]
    free = np.ones(cand.size, dtype=bool)
    out = []
    for i in range(cand.size):
        if not free[i]:
            continue
        members = free & (np.linalg.norm((z[cand] - z[cand[i]]) / sd, axis=1) < CLUSTER_SDS)
        free &= ~members
        idx = cand[members]
        if idx.size < z.shape[1] + 2:
            mean, cov = z[cand[i]], np.diag(sd**2)
        else:
            wk = np.exp(lw[idx] - logsumexp(lw[idx]))
            mean = np.average(z[idx], axis=0, weights=wk)
            cov = np.atleast_2d(np.cov(z[idx], rowvar=False, aweights=wk)) + np.diag((sd / 4) ** 2)
        out.append((float(logsumexp(lw[idx]) - math.log(lw.size)), mean, cov))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    args = parser.parse_args(argv)
    target = smc_comparison.mixture_target("a", "plain", 0.0, 10.0)
    density = DensityEvaluator(target.program, target.data, "pooled_is")
    truth = np.array([*target.mean, *target.second, target.log_z])
    errors, seconds = [], []
    for seed in args.seeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = pemc_stan.sample(target.program, target.data, method="ct",
                                   split_modes="never", seed=seed)
        t0 = time.perf_counter()
        coords, rng = fit.result.coordinates, np.random.default_rng(seed + 99)
        modes = _cell_gaussians(fit)
        parts1, lw1 = _proposal(fit.base, modes)
        z1 = mixture_sample(parts1, lw1, STAGE_DRAWS, rng)
        lg1 = _log_gamma(density, coords, target.data, z1)
        sd = np.median([np.sqrt(np.diag(m[2])) for m in modes], axis=0)
        lw_1 = lg1 - mixture_log_density(parts1, lw1, z1)
        extra = _unexplained(z1, lw_1, lg1, parts1, lw1, 2, sd)
        parts2, lw2 = _proposal(fit.base, modes + extra)
        z2 = mixture_sample(parts2, lw2, STAGE_DRAWS, rng)
        lg2 = _log_gamma(density, coords, target.data, z2)
        z, lg = np.concatenate([z1, z2]), np.concatenate([lg1, lg2])
        log_mix = np.logaddexp(mixture_log_density(parts1, lw1, z),
                               mixture_log_density(parts2, lw2, z)) - math.log(2.0)
        plw, k = W.pareto_smooth(lg - log_mix)
        seconds.append(time.perf_counter() - t0)
        x = coords.inverse(z, target.data)["x"].reshape(z.shape[0], -1)
        est = [W.weighted_mean(f, plw) for f in (x[:, 0], x[:, 1], x[:, 0]**2, x[:, 1]**2)]
        values = np.array([e.mean for e in est] + [logsumexp(plw) - math.log(z.shape[0])])
        errors.append(values - truth)
        zs = [(e.mean - t) / e.std_error for e, t in zip(est[:2], truth[:2], strict=True)]
        print(f"seed {seed}: {len(modes)} + {len(extra)} components, Pareto k {k:.2f}, "
              f"{seconds[-1]:.1f} s; errors {np.round(values - truth, 3).tolist()}, "
              f"z of the means {np.round(zs, 1).tolist()}", flush=True)
    rmse = np.sqrt(np.mean(np.square(errors), axis=0))
    ratio = SMC_RMSE**2 * SMC_SECONDS / (rmse**2 * np.mean(seconds))
    print(f"RMSE {np.round(rmse, 4).tolist()} in {np.mean(seconds):.1f} s: "
          f"{np.round(ratio, 2).tolist()} x SMC's accuracy per second")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
