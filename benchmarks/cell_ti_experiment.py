"""Experiment (rejected): each mode's share by thermodynamic integration inside its cell.

On the 20-Gaussian mixture (scenario a), CT with ``split_modes='never'`` and no
follow-ups gives each draw ``x`` and ``Delta(x)``.  With cells of the true component
means (an oracle partition, the most this estimator could have), a cell's evidence is

    log Z_k = log b_k + int_0^1 E_{beta,k}[log gamma - log b] d beta,

where ``b_k`` is the base's mass of the cell (iid base draws) and ``E_{beta,k}`` weighs
the cell's draws by ``p(beta | x)`` (eq 17 with the run's bias).  Unlike the ratio of a
cell's ``w_1`` and ``w_0`` draws (the run's post-stratified shares), this estimate needs
no count of draws at beta = 0 and 1, only the cell's draws along beta.  The script prints
both estimators' errors of the shares and E[X1] per seed.  The findings are in
docs/validation.md, "Rejected: a mode's share by integration along beta in its cell".

    python benchmarks/cell_ti_experiment.py --seeds 1 2 3 4 5
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import smc_comparison

import pemc_stan
from pemc_stan.methods.tempering import BetaBias

#: Inverse temperatures of the integral: dense on a log scale near 0, where a cell's
#: tempered density narrows from the base's spread to the mode's.
GRID = np.unique(np.concatenate([[0.0], np.logspace(-6, -1, 120), np.linspace(0.1, 1, 181)]))
BASE_DRAWS = 400_000


def nearest(x: NDArray[np.float64], means: NDArray[np.float64]) -> NDArray[np.intp]:
    """The index of the nearest mean for each row of ``x``."""
    return np.argmin(((x[:, None, :] - means[None]) ** 2).sum(-1), axis=1)


def cell_log_z(delta: NDArray[np.float64], f: NDArray[np.float64], log_bk: float,
               bias: BetaBias) -> float:
    """``log Z_k`` by integration along beta from one cell's draws."""
    log_p = bias.log_conditional(GRID[:, None], delta[None, :])  # eq 17 with the bias
    weights = np.exp(log_p - logsumexp(log_p, axis=1, keepdims=True))
    return float(log_bk + np.trapezoid(weights @ f, GRID))


def one_seed(seed: int, target: smc_comparison.Target) -> None:
    means = np.asarray(target.data["mu"], dtype=float)
    w = np.asarray(target.data["w"], dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pemc_stan.sample(target.program, target.data, method="ct", split_modes="never",
                               seed=seed, budget=1)
    delta = fit.delta().ravel()
    x = np.stack([fit.particles("x[1]").ravel(), fit.particles("x[2]").ravel()], axis=-1)
    cells = nearest(x, means)
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal(fit.base.mean, fit.base.cov, size=BASE_DRAWS)
    bk = np.bincount(nearest(z, means), minlength=w.size) / BASE_DRAWS
    lw = fit.log_weights().ravel()
    shares = {"stratified": np.zeros(w.size), "cell TI": np.full(w.size, -np.inf)}
    for k in range(w.size):
        inside = cells == k
        if not inside.any() or bk[k] == 0:
            continue
        shares["stratified"][k] = np.exp(logsumexp(lw[inside]) - logsumexp(lw))
        shares["cell TI"][k] = cell_log_z(delta[inside], fit.log_zeta - delta[inside],
                                          float(np.log(bk[k])), fit.bias)
    shares["cell TI"] = np.exp(shares["cell TI"] - logsumexp(shares["cell TI"]))
    print(f"seed {seed}: exact E[X1] {w @ means[:, 0]:.3f}")
    for name, s in shares.items():
        print(f"  {name:10s}: RMS error of the 20 shares {np.sqrt(np.mean((s - w) ** 2)):.4f}, "
              f"largest share {s.max():.3f}, E[X1] from the shares {s @ means[:, 0]:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    args = parser.parse_args(argv)
    target = smc_comparison.mixture_target("a", "plain", 5.0, 5.0)
    for seed in args.seeds:
        one_seed(seed, target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
