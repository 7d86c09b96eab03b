"""Synthetic pemc-stan fits for tests that need no compiled model (imported as ``fakes``)."""

from __future__ import annotations

import warnings

import numpy as np

from pemc_stan.errors import PseudoExtendedWarning
from pemc_stan.methods.continuous_tempering.fit import ContinuousTemperingFit
from pemc_stan.methods.pseudo_extended.fit import PseudoExtendedFit
from pemc_stan.pipeline import transform_result

CODE = """
data { int<lower=1> K; vector[K] y; real<lower=0> s; }
parameters { real<lower=0> tau; vector[K] v; }
model { tau ~ exponential(1); v ~ normal(0, tau); y ~ normal(v, s); }
"""
DATA = {"K": 3, "y": [0.5, -1.0, 2.0], "s": 1.0}
SAMPLER = ["lp__", "accept_stat__", "stepsize__", "treedepth__", "n_leapfrog__",
           "divergent__", "energy__"]


class _FakeFit:
    """What PseudoExtendedFit and the converter read from a CmdStanMCMC."""

    def __init__(self, columns: list[str], draws: np.ndarray) -> None:
        self.column_names = tuple(columns)
        self._draws = draws

    def draws(self, concat_chains: bool = False) -> np.ndarray:
        assert not concat_chains
        return self._draws


def fake_pe_fit(n_chains: int = 3, n_draws: int = 40, n_pseudo: int = 3,
                seed: int = 0, nan_density: tuple[tuple[int, int, int], ...] = ()
                ) -> PseudoExtendedFit:
    """A PE fit of CODE on random draws with the PE program's column layout.

    ``nan_density`` lists ``(draw, chain, pseudo-sample)`` (0-based) whose log
    density and log likelihood are NaN (a solver failing in generated quantities).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PseudoExtendedWarning)
        res = transform_result(CODE, n_pseudo=n_pseudo, temper="likelihood",
                               reparameterize="none")  # the layout of v[k, j]
    cols = list(SAMPLER)
    cols += [f"tau[{k}]" for k in range(1, n_pseudo + 1)]
    cols += [f"v[{k},{j}]" for j in range(1, 4) for k in range(1, n_pseudo + 1)]
    for base in ("pemc_beta", "pemc_log_weight", "pemc_log_gamma", "pemc_log_lik"):
        cols += [f"{base}[{k}]" for k in range(1, n_pseudo + 1)]
    rng = np.random.default_rng(seed)
    arr = rng.normal(size=(n_draws, n_chains, len(cols)))
    c = {name: i for i, name in enumerate(cols)}
    for k in range(1, n_pseudo + 1):
        arr[:, :, c[f"pemc_beta[{k}]"]] = rng.uniform(0.05, 0.95, size=(n_draws, n_chains))
        arr[:, :, c[f"tau[{k}]"]] = np.abs(arr[:, :, c[f"tau[{k}]"]])
        arr[:, :, c[f"pemc_log_lik[{k}]"]] *= 3
    arr[:, :, c["divergent__"]] = rng.uniform(size=(n_draws, n_chains)) < 0.1
    arr[:, :, c["treedepth__"]] = rng.integers(1, 5, size=(n_draws, n_chains))
    for draw, chain, k in nan_density:
        for base in ("pemc_log_weight", "pemc_log_gamma", "pemc_log_lik"):
            arr[draw, chain, c[f"{base}[{k + 1}]"]] = np.nan
    return PseudoExtendedFit(_FakeFit(cols, arr), res, log_scale=-1.5, data=DATA, seed=7)


class FakeCTFit(ContinuousTemperingFit):
    """A continuously tempered fit of CODE on random draws (the CT fit's own arrays replaced)."""

    def __init__(self, n_chains: int = 2, n_draws: int = 50, seed: int = 0) -> None:
        import pandas as pd

        from pemc_stan.estimators.log_z import EvidenceEstimate

        rng = np.random.default_rng(seed)
        self.result = transform_result(CODE, method="ct")  # type: ignore[assignment]
        self.data = DATA
        self.log_zeta = -2.0
        self.seed = seed
        cols = [*SAMPLER, "tau", "v[1]", "v[2]", "v[3]", "pemc_u", "pemc_beta", "pemc_delta"]
        arr = rng.normal(size=(n_draws, n_chains, len(cols)))
        arr[:, :, cols.index("tau")] = np.abs(arr[:, :, cols.index("tau")])
        arr[:, :, cols.index("pemc_beta")] = 1 / (1 + np.exp(-arr[:, :, cols.index("pemc_u")]))
        self.fit = _FakeFit(cols, arr)
        self._cols = cols
        self._arr = arr
        frame = {"chain__": np.repeat(np.arange(1, n_chains + 1), n_draws),
                 "iter__": np.tile(np.arange(1, n_draws + 1), n_chains),
                 "draw__": np.arange(1, n_chains * n_draws + 1)}
        for c in ("tau", "v[1]", "v[2]", "v[3]"):
            frame[c] = rng.normal(size=n_chains * n_draws)
        self._resampled = pd.DataFrame(frame)
        self._estimate = EvidenceEstimate(log_z=-2.1, std_error=0.05, method="ct_eq20")

    def _column(self, name: str) -> np.ndarray:
        return self._arr[:, :, self._cols.index(name)].T

    def beta(self) -> np.ndarray:
        return self._column("pemc_beta")

    def delta(self) -> np.ndarray:
        return self._column("pemc_delta")

    def log_weights(self) -> np.ndarray:
        return -np.logaddexp(0.0, self.delta())  # log w1 = -log(1 + exp(Delta))

    def log_z(self) -> object:
        return self._estimate

    def resampled_draws_pd(self, output_dir: str | None = None) -> object:
        return self._resampled

    def extended_draws_pd(self) -> object:
        import pandas as pd

        n_draws, n_chains, _ = self._arr.shape
        frame = {"chain__": np.repeat(np.arange(1, n_chains + 1), n_draws),
                 "iter__": np.tile(np.arange(1, n_draws + 1), n_chains)}
        for i, c in enumerate(self._cols):
            frame[c] = self._arr[:, :, i].T.reshape(-1)
        return pd.DataFrame(frame)
