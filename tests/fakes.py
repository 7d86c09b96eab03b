"""Synthetic pemc-stan fits for tests that need no compiled model (imported as ``fakes``)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import logit
from scipy.stats import norm

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.search import ModeSearch
from pemc_stan.errors import PseudoExtendedWarning
from pemc_stan.methods.continuous_tempering.fit import ContinuousTemperingFit
from pemc_stan.methods.pseudo_extended.fit import PseudoExtendedFit
from pemc_stan.modes.split_fit import ModeSplitFit
from pemc_stan.run.pipeline import transform_result

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
                seed: int = 0, nan_density: tuple[tuple[int, int, int], ...] = (),
                beta_high_share: float | None = None, **fit_kwargs: Any) -> PseudoExtendedFit:
    """A PE fit of CODE on random draws with the PE program's column layout.

    ``nan_density`` lists ``(draw, chain, pseudo-sample)`` (0-based) whose log
    density and log likelihood are NaN (a solver failing in generated quantities).
    The temperatures are uniform on (0.05, 0.95); with ``beta_high_share``, that share of
    them is above 0.95 and the rest in (0.2, 0.8).  ``fit_kwargs`` go to the fit
    (``pilot_notes=``, ...).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PseudoExtendedWarning)
        res = transform_result(CODE, method="pe", n_pseudo=n_pseudo, temper="likelihood",
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
        if beta_high_share is not None:
            high = rng.uniform(size=(n_draws, n_chains)) < beta_high_share
            arr[:, :, c[f"pemc_beta[{k}]"]] = np.where(
                high, rng.uniform(0.96, 0.999, size=high.shape),
                rng.uniform(0.2, 0.8, size=high.shape))
        arr[:, :, c[f"tau[{k}]"]] = np.abs(arr[:, :, c[f"tau[{k}]"]])
        arr[:, :, c[f"pemc_log_lik[{k}]"]] *= 3
    arr[:, :, c["divergent__"]] = rng.uniform(size=(n_draws, n_chains)) < 0.1
    arr[:, :, c["treedepth__"]] = rng.integers(1, 5, size=(n_draws, n_chains))
    for draw, chain, k in nan_density:
        for base in ("pemc_log_weight", "pemc_log_gamma", "pemc_log_lik"):
            arr[draw, chain, c[f"{base}[{k + 1}]"]] = np.nan
    return PseudoExtendedFit(_FakeFit(cols, arr), res, log_scale=-1.5, data=DATA, seed=7,
                             **fit_kwargs)


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

    def log_normaliser(self) -> object:
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


# --------------------------------------------------------------------------- exact CT draws
#: Target ``gamma(x) = Z N(x; M, S^2)`` of :data:`CT_PROGRAM`, base ``b = N(0, 1)``.
M, S, LOG_Z = 1.0, 0.7, 2.3
CT_PROGRAM = "parameters { real x; } model { x ~ normal(1, 0.7); }"


def ct_log_c(beta: np.ndarray) -> np.ndarray:
    """log integral N(x;M,S^2)^beta N(x;0,1)^(1-beta) dx (closed form)."""
    lam = beta / S**2 + (1 - beta)
    b = beta * M / S**2
    return (-0.5 * np.log(2 * np.pi) - beta * np.log(S) - beta * M**2 / (2 * S**2)
            + 0.5 * np.log(2 * np.pi / lam) + b**2 / (2 * lam))


def ct_draws(rng: np.random.Generator, n: int, log_zeta: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact i.i.d. draws (x, beta) from the CT joint of eq 16.

    Marginal p(beta) ∝ z(beta)/zeta^beta = (Z/zeta)^beta c(beta) (eq 19), sampled by
    inverse CDF on a fine grid; then x | beta is Gaussian.
    """
    grid = np.linspace(0.0, 1.0, 200_001)
    logp = grid * (LOG_Z - log_zeta) + ct_log_c(grid)
    p = np.exp(logp - logp.max())
    cdf = np.concatenate([[0.0], np.cumsum((p[1:] + p[:-1]) / 2)])
    cdf /= cdf[-1]
    beta = np.clip(np.interp(rng.uniform(size=n), cdf, grid), 1e-12, 1 - 1e-12)
    lam = beta / S**2 + (1 - beta)
    x = beta * M / S**2 / lam + rng.normal(size=n) / np.sqrt(lam)
    return x, beta


class FrameRun:
    """The parts of cmdstanpy.CmdStanMCMC the fits read, from columns of draws in chain order
    (the first ``n / chains`` values are chain 1's)."""

    def __init__(self, frame: dict[str, np.ndarray], chains: int,
                 max_depth: int | None = None) -> None:
        if max_depth is not None:  # the run's max_treedepth, as the CSV header gives it
            self.metadata = SimpleNamespace(cmdstan_config={"max_depth": max_depth})
        self.column_names = tuple(frame)
        n = len(next(iter(frame.values())))
        arr = np.stack([frame[c] for c in self.column_names], axis=1)  # (n, cols)
        self._arr = arr.reshape(chains, n // chains, -1)

    def draws(self, concat_chains: bool = False) -> np.ndarray:
        return np.transpose(self._arr, (1, 0, 2))

    def draws_pd(self) -> pd.DataFrame:
        return pd.DataFrame(self._arr.reshape(-1, self._arr.shape[-1]),
                            columns=list(self.column_names))


def exact_ct_frame(log_zeta: float, n: int = 8000, seed: int = 1) -> dict[str, np.ndarray]:
    """Columns of ``n`` exact draws of the CT joint (eq 16) of :data:`CT_PROGRAM` with base
    N(0, 1): ``beta`` by inverse CDF of its marginal (eq 19), then ``x | beta``."""
    rng = np.random.default_rng(seed)
    x, beta = ct_draws(rng, n, log_zeta)
    log_gamma = LOG_Z + norm.logpdf(x, M, S)
    log_base = norm.logpdf(x)
    return {"x": x, "pemc_u": logit(beta), "pemc_beta": beta, "pemc_z[1]": x,
            "pemc_log_jacobian": np.zeros(n), "pemc_log_gamma": log_gamma,
            "pemc_log_base": log_base, "pemc_delta": log_zeta + log_base - log_gamma,
            "divergent__": np.zeros(n), "treedepth__": np.full(n, 3.0)}


def exact_ct_fit(log_zeta: float, n: int = 8000, chains: int = 4, seed: int = 1,
                 frame: dict[str, np.ndarray] | None = None, base_mean: float = 0.0,
                 **fit_kwargs: Any) -> ContinuousTemperingFit:
    """A CT fit of :data:`CT_PROGRAM` on exact draws (:func:`exact_ct_frame`, or ``frame``),
    whose base is declared as N(``base_mean``, 1) (the draws' base is N(0, 1))."""
    frame = exact_ct_frame(log_zeta, n, seed) if frame is None else frame
    result = transform_result(CT_PROGRAM, method="ct")
    base = BaseDensity(np.full(1, base_mean), np.eye(1))
    return ContinuousTemperingFit(FrameRun(frame, chains), result, log_zeta, base=base,
                                  seed=seed, **fit_kwargs)


# --------------------------------------------------------------------------- a mode split
#: The user's program of :func:`split_fit` (a proper prior: its ``log Z`` is defined).
SPLIT_PROGRAM = "parameters { real x; } model { x ~ normal(0, 10); }"


def split_fit(log_z: list[float], log_z_se: list[float], means: list[float],
              sds: list[float], chain_groups: list[int], n_draws: int = 2000,
              seed: int = 5, divergent: int = 0, cut: int = 0) -> ModeSplitFit:
    """A mode split of :data:`SPLIT_PROGRAM` on i.i.d. draws: chain ``c`` holds ``n_draws``
    draws of N(``means[g]``, ``sds[g]``^2), ``g = chain_groups[c]``, and group ``g``'s bridge
    mass is ``log_z[g]`` with standard error ``log_z_se[g]`` (one mode per group, every
    draw in its group's cell); the first ``divergent`` transitions diverged, and the first
    ``cut`` stopped at ``max_treedepth=10``."""
    from pemc_stan.estimators.log_z import EvidenceEstimate

    rng = np.random.default_rng(seed)
    groups = np.asarray(chain_groups, dtype=np.intp)
    x = np.stack([rng.normal(means[g], sds[g], n_draws) for g in groups])  # (chains, draws)
    k = len(log_z)
    shares = tuple(float(q) for q in np.exp(np.asarray(log_z) - np.logaddexp.reduce(log_z)))
    search = ModeSearch((2.0,), k, k, 8, "a test's modes", shares,
                        np.asarray(means, dtype=float)[:, None], shares)
    masses = [EvidenceEstimate(lz, se, "bridge") for lz, se in zip(log_z, log_z_se, strict=True)]
    flags = np.zeros(x.size)
    flags[:divergent] = 1.0
    depth = np.full(x.size, 4.0)
    depth[:cut] = 10.0
    return ModeSplitFit(FrameRun({"divergent__": flags, "treedepth__": depth, "x": x.reshape(-1)},
                                 len(groups), max_depth=10),
                        transform_result(SPLIT_PROGRAM, method="ct"), groups=groups,
                        mode_log_z=masses, search=search,
                        cells=np.repeat(groups[:, None], n_draws, axis=1),
                        members=[[g] for g in range(k)], outside=np.zeros(len(groups)),
                        seed=seed)
