"""Experiment (rejected): continuous tempering with a base that mixes the search's modes.

On the 20-Gaussian mixture (scenario a), tempering alone (``split_modes='never'``) gets
each mode's share from the few times a chain enters that mode's core near beta = 1.  This
script tries the base the issue proposed: ``lam`` times the search's covering Gaussian
plus ``1 - lam`` times one Student-t per Pathfinder group of the pilot (its draws'
mean and covariance, its mass), with log zeta from iid base draws and the estimates
post-stratified by the t-components' cells (``Strata``: exact within a cell whatever
the chains' time there).  It prints, per seed, the cells the chains reached, the errors
of E[X1], E[X2], E[X1^2], E[X2^2] and log Z, and those of importance sampling from the
same base alone.  The findings are in docs/validation.md, "Rejected again: a mixture base
with a wide component".

Usage::

    python benchmarks/mixture_base_experiment.py --seeds 1 2 3 --lam 0.7
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import smc_comparison

PROGRAM = """\
functions {
  real log_gamma(vector x, int K, array[] vector mu, vector w, vector sigma) {
    vector[K] lp;
    for (k in 1:K) lp[k] = log(w[k]) + normal_lpdf(x | mu[k], sigma[k]);
    return log_sum_exp(lp);
  }
  real log_base(vector x, int M, vector log_pi, array[] vector cm, array[] matrix cL, real nu) {
    vector[M] lp;
    for (m in 1:M) lp[m] = log_pi[m] + multi_student_t_cholesky_lpdf(x | nu, cm[m], cL[m]);
    return log_sum_exp(lp);
  }
}
data {
  int<lower=1> K; array[K] vector[2] mu; simplex[K] w; vector<lower=0>[K] sigma;
  real log_zeta;
  int<lower=1> M; vector[M] log_pi; array[M] vector[2] cm; array[M] matrix[2, 2] cL; real nu;
}
parameters { vector[2] x; real u; }
transformed parameters { real beta = inv_logit(u); }
model {
  target += beta * (log_gamma(x, K, mu, w, sigma) - log_zeta)
            + (1 - beta) * log_base(x, M, log_pi, cm, cL, nu);
  target += log_inv_logit(u) + log1m_inv_logit(u);
}
generated quantities {
  real delta = log_zeta + log_base(x, M, log_pi, cm, cL, nu) - log_gamma(x, K, mu, w, sigma);
}
"""


class MixtureBase:
    """``lam`` x the covering Gaussian + ``(1 - lam)`` x one Student-t per found group."""

    def __init__(self, model: Any, seed: int, lam: float, nu: float) -> None:
        found = model.search_modes(seed)
        groups, _, z_all, _ = model.pilot().pathfinder(seed)
        log_mass = np.array([g[1] for g in groups])
        share = np.exp(log_mass - logsumexp(log_mass))
        keep = [(idx, s) for (idx, _), s in zip(groups, share, strict=True) if s >= 1e-3]
        total = sum(s for _, s in keep)
        self.log_pi = [float(np.log((1 - lam) * s / total)) for _, s in keep] + [np.log(lam)]
        self.means = [z_all[idx].mean(0) for idx, _ in keep] + [found.base.mean]
        covs = [np.cov(z_all[idx].T) + 1e-9 * np.eye(2) for idx, _ in keep] + [found.base.cov]
        self.chols = [np.linalg.cholesky(c) for c in covs]
        self.nu = nu

    def _parts(self, x: np.ndarray, last: int | None = None) -> np.ndarray:
        comps = list(zip(self.log_pi, self.means, self.chols, strict=True))[:last]
        return np.stack([lp + stats.multivariate_t.logpdf(x, loc=m, shape=c @ c.T, df=self.nu)
                         for lp, m, c in comps], 1)

    def log_density(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(logsumexp(self._parts(x), axis=1))

    def cell(self, x: np.ndarray) -> np.ndarray:
        """The mode component of most base density (the wide one is no cell)."""
        return np.asarray(np.argmax(self._parts(x, -1), axis=1))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        k = rng.choice(len(self.means), size=n, p=np.exp(self.log_pi))
        scale = np.sqrt(rng.chisquare(self.nu, size=n) / self.nu)
        e = rng.standard_normal((n, 2))
        return np.array([self.means[j] + self.chols[j] @ v / s
                         for j, v, s in zip(k, e, scale, strict=True)])

    def stan_data(self) -> dict[str, Any]:
        return {"M": len(self.means), "log_pi": self.log_pi, "nu": self.nu,
                "cm": [list(m) for m in self.means], "cL": [c.tolist() for c in self.chols]}


def run(seed: int, lam: float, nu: float, base_draws: int) -> None:
    import pemc_stan
    from pemc_stan.backend.compile import compile_model
    from pemc_stan.methods.continuous_tempering import tempering as T

    target = smc_comparison.mixture_target("a", "plain", 0.0, 10.0)
    data = target.data
    mu, w, sd = (np.asarray(data[k], dtype=float) for k in ("mu", "w", "sigma"))
    exact = [*target.mean, *target.second, 0.0]

    def log_gamma(x: np.ndarray) -> np.ndarray:
        parts = np.log(w) + stats.norm.logpdf(x[:, None, :], mu, sd[:, None]).sum(-1)
        return np.asarray(logsumexp(parts, axis=1))

    model = pemc_stan.pipeline.method_model(target.program, data, "ct", split_modes="never")
    base = MixtureBase(model, seed, lam, nu)
    rng = np.random.default_rng(seed)
    xb = base.sample(base_draws, rng)
    log_iw = log_gamma(xb) - base.log_density(xb)
    log_zeta = float(logsumexp(log_iw) - np.log(base_draws))
    ess = float(np.exp(2 * logsumexp(log_iw) - logsumexp(2 * log_iw)))
    cells = len(base.means) - 1
    mass = np.bincount(base.cell(xb), minlength=cells) / base_draws

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mixture_base_ct.stan"
        path.write_text(PROGRAM)
        fit = compile_model(path).sample(
            data={**{k: data[k] for k in ("K", "mu", "w", "sigma")}, "log_zeta": log_zeta,
                  **base.stan_data()}, chains=4, seed=seed, show_progress=False)
    x = fit.stan_variable("x")
    delta = fit.stan_variable("delta").reshape(4, -1)
    labels = base.cell(x).reshape(4, -1)
    seen = np.bincount(labels.ravel(), minlength=cells) > 0
    remap = np.cumsum(seen) - 1  # cells without draws are dropped: their mass is lost
    strata = T.Strata(remap[labels], np.log(mass[seen] / mass[seen].sum()), base_draws)
    lw = T.stratified_log_w1(delta, strata)
    weights = np.exp(lw - logsumexp(lw)).ravel()
    iw = np.exp(log_iw - logsumexp(log_iw))

    def moments(wt: np.ndarray, v: np.ndarray) -> list[float]:
        return [float(wt @ v[:, 0]), float(wt @ v[:, 1]), float(wt @ v[:, 0] ** 2),
                float(wt @ v[:, 1] ** 2)]

    ct = [*moments(weights, x), T.log_z_estimate(delta, log_zeta, strata=strata).log_z]
    alone = [*moments(iw, xb), log_zeta]
    names = ("E[X1]", "E[X2]", "E[X1^2]", "E[X2^2]", "log Z")
    print(f"seed {seed}, lam {lam:g}: {cells} cells, {int(seen.sum())} with draws; "
          f"IS ESS {ess:.0f} of {base_draws}")
    for name, e, a, b in zip(names, exact, ct, alone, strict=True):
        print(f"  {name:8s} CT error {a - e:+9.4f}   IS alone {b - e:+9.4f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--lam", type=float, default=0.7, help="the wide component's weight")
    parser.add_argument("--nu", type=float, default=5.0, help="the t-components' df")
    parser.add_argument("--base-draws", type=int, default=20_000)
    args = parser.parse_args(argv)
    for seed in args.seeds:
        run(seed, args.lam, args.nu, args.base_draws)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
