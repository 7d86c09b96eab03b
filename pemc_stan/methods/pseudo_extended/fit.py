"""Post-processing of a pseudo-extended (PE) fit.

A PE run samples ``(x_{1:N}, beta_{1:N})`` from the extended target (eq 8 of
Nemeth et al. 2019).  By Theorem 2.1, within each draw ``t`` the
self-normalised weights ``W_ti = w_ti / sum_j w_tj`` (eq 3) make
``sum_i W_ti f(x_ti)`` an unbiased-in-expectation estimate of ``E_pi[f]``::

    log w_ti = (1 - beta_ti) log gamma~(x_ti) + log pi(beta_ti) - log g(beta_ti)

(``log gamma~`` replaced by the offset log likelihood ``log L~`` under
likelihood-only tempering; the ``pi``/``g`` terms are absent for a fixed
ladder).  :class:`PseudoExtendedFit` computes these weights in Python from the
draws, the per-draw and overall weight ESS, weighted expectations
``mean_t sum_i W_ti f(x_ti)`` with an MCSE from the autocorrelation-aware ESS
of the per-draw estimates, and resampled draws of the original parameters (one
pseudo-sample per iteration, so chains stay chains) on which the original
model's transformed parameters and generated quantities are recomputed with
cmdstanpy's standalone ``generate_quantities``.
"""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cmdstanpy
import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import stats

from pemc_stan.estimators import weights as W
from pemc_stan.output.diagnostics import transition_counts, treedepth_advice
from pemc_stan.stan.parser import parse
from pemc_stan.output.reporting import (
    SAMPLER_COLUMNS,
    recompute_quantities,
    write_resampled_csvs,
)
from pemc_stan.methods.pseudo_extended.transform import TransformResult, _as_beta

logger = logging.getLogger(__name__)

__all__ = ["PseudoExtendedFit", "PseudoExtendedDiagnosticWarning", "WeightedEstimate"]


class PseudoExtendedDiagnosticWarning(UserWarning):
    """The pseudo-extended weights or temperatures look problematic."""


class WeightedEstimate(dict):  # type: ignore[type-arg]
    """``{"mean", "mcse", "ess"}`` of a weighted expectation (a dict with attribute access)."""

    __getattr__ = dict.__getitem__


class PseudoExtendedFit:
    """A pseudo-extended MCMC fit.

    Parameters
    ----------
    fit
        The cmdstanpy fit of the PE program.
    result
        The :class:`~pemc_stan.methods.pseudo_extended.transform.TransformResult` it was built from.
    log_scale
        The ``pemc_log_scale`` used.
    data
        The user's data (for generated quantities of the original model).
    original_model
        A callable returning the compiled original model (compiled lazily, for
        :meth:`resampled_draws_pd` with generated quantities), or the model.
    seed
        Seed of the resampling.

    Attributes
    ----------
    fit, result, log_scale, n_pseudo
    """

    method = "pseudo_extended"

    def __init__(self, fit: cmdstanpy.CmdStanMCMC, result: TransformResult, log_scale: float,
                 data: dict[str, Any] | None = None,
                 original_model: cmdstanpy.CmdStanModel | Callable[[], cmdstanpy.CmdStanModel]
                 | None = None, seed: int | None = None) -> None:
        self.fit = fit
        self.result = result
        self.log_scale = float(log_scale)
        self.data = dict(data or {})
        self._original_model = original_model
        self.seed = seed
        self.n_pseudo = result.options.n_pseudo
        self._draws = fit.draws(concat_chains=False)  # (iter, chains, cols)
        self._columns = list(fit.column_names)
        self._col = {c: i for i, c in enumerate(self._columns)}
        self._resampled: pd.DataFrame | None = None
        self._index: NDArray[np.intp] | None = None
        self._param_cols: dict[str, list[tuple[str, list[str]]]] | None = None

    # ------------------------------------------------------------------ #
    # raw quantities, arrays shaped (chains, draws, N)
    # ------------------------------------------------------------------ #

    def _stack(self, names: list[str]) -> NDArray[np.float64]:
        idx = [self._col[n] for n in names]
        return np.transpose(self._draws[:, :, idx], (1, 0, 2)).astype(float)

    def beta(self) -> NDArray[np.float64]:
        """Inverse temperatures, shape (chains, draws, N)."""
        ladder = self.result.options.fixed_ladder
        if ladder is not None:
            shape = (self._draws.shape[1], self._draws.shape[0], self.n_pseudo)
            return np.broadcast_to(np.asarray(ladder, dtype=float), shape).copy()
        return self._stack([f"pemc_beta[{k}]" if f"pemc_beta[{k}]" in self._col
                            else f"pemc_beta.{k}" for k in range(1, self.n_pseudo + 1)])

    def _gq(self, base: str) -> NDArray[np.float64]:
        names = []
        for k in range(1, self.n_pseudo + 1):
            names.append(f"{base}[{k}]" if f"{base}[{k}]" in self._col else f"{base}.{k}")
        return self._stack(names)

    def log_gamma(self) -> NDArray[np.float64]:
        """``log gamma(x_i)`` (full log density, no offset), shape (chains, draws, N)."""
        return self._gq("pemc_log_gamma")

    def log_weights_stan(self) -> NDArray[np.float64]:
        """Unnormalised log-weights as computed by the Stan program's generated quantities."""
        return self._gq("pemc_log_weight")

    def log_weights(self) -> NDArray[np.float64]:
        """Unnormalised log-weights computed in Python (Theorem 2.1 / eq 3), (chains, draws, N).

        ``(1 - beta) * tau + log pi(beta) - log g(beta)`` with ``tau = log gamma - log_scale``
        (posterior tempering) or ``log L - log_scale`` (likelihood tempering).
        """
        opts = self.result.options
        beta = self.beta()
        tau = (self._gq("pemc_log_lik") if opts.temper == "likelihood"
               else self.log_gamma()) - self.log_scale
        with np.errstate(invalid="ignore"):
            lw = (1.0 - beta) * tau
        if opts.fixed_ladder is None:
            pi_b, g_b = _as_beta(opts.beta_prior, "beta_prior"), _as_beta(opts.instrumental,
                                                                          "instrumental")
            if not pi_b.is_uniform:
                lw = lw + stats.beta.logpdf(beta, pi_b.a, pi_b.b)
            if not g_b.is_uniform:
                lw = lw - stats.beta.logpdf(beta, g_b.a, g_b.b)
        return lw

    def normalised_weights(self) -> NDArray[np.float64]:
        """Within-draw normalised weights ``W_ti``, shape (chains, draws, N)."""
        return np.exp(W.log_normalise(self.log_weights(), axis=-1))

    def weight_ess(self) -> NDArray[np.float64]:
        """Per-draw weight ESS ``1 / sum_i W_ti^2`` in [1, N], shape (chains, draws)."""
        return np.asarray(W.ess(self.log_weights(), axis=-1))

    def max_weight_share(self, threshold: float = 0.99) -> float:
        """Share of draws in which one pseudo-sample carries >= ``threshold`` of the weight."""
        return W.max_weight_share(self.log_weights(), threshold=threshold, axis=-1)

    # ------------------------------------------------------------------ #
    # parameters
    # ------------------------------------------------------------------ #

    def _param_columns(self) -> dict[str, list[tuple[str, list[str]]]]:
        """For each user parameter: (original column, [PE column of copy k, k=1..N]) pairs.

        Column names are cmdstanpy's bracket form: copy ``k`` of ``mu[2]`` is
        ``mu[k,2]`` (arrayed) or ``pemc_mu_k[2]`` (unrolled).
        """
        if self._param_cols is not None:
            return self._param_cols
        out: dict[str, list[tuple[str, list[str]]]] = {}
        for p in self.result.parameters:
            per_copy: list[list[tuple[str, str]]] = []
            for k in range(1, self.n_pseudo + 1):
                pairs: list[tuple[str, str]] = []
                if p.unrolled:
                    v = p.stan_variable(k)
                    for c in self._columns:
                        if c == v or c.startswith(v + "["):
                            pairs.append((p.name + c[len(v):], c))
                else:
                    whole, head = f"{p.name}[{k}]", f"{p.name}[{k},"
                    for c in self._columns:
                        if c == whole or c.startswith(whole + "."):  # scalar (or tuple) copy
                            pairs.append((p.name + c[len(whole):], c))
                        elif c.startswith(head):
                            pairs.append((f"{p.name}[{c[len(head):]}", c))
                per_copy.append(pairs)
            out[p.name] = [(o, [pc[j][1] for pc in per_copy])
                           for j, (o, _) in enumerate(per_copy[0])]
        self._param_cols = out
        return out

    def pseudo_samples(self, column: str) -> NDArray[np.float64]:
        """All copies of one original parameter column (e.g. ``"x"`` or ``"mu[2]"``).

        Returns
        -------
        ndarray, shape (chains, draws, N)

        Raises
        ------
        KeyError
            If ``column`` is not a column of an original parameter.
        """
        for pairs in self._param_columns().values():
            for orig, cols in pairs:
                if orig == column:
                    return self._stack(cols)
        raise KeyError(f"{column!r} is not a parameter column of the original model")

    def parameter_columns(self) -> list[str]:
        """Columns (CmdStan names) of the original parameters, in output order."""
        return [o for pairs in self._param_columns().values() for o, _ in pairs]

    def expectation(self, f: Callable[[NDArray[np.float64]], NDArray[np.float64]] | str,
                    estimator: str = "draw") -> WeightedEstimate:
        """Weighted expectation ``E_pi[f(x)]`` with its Monte-Carlo standard error.

        ``estimator="draw"`` (Theorem 2.1): the estimate is ``mean_t h_t`` with
        ``h_t = sum_i W_ti f(x_ti)`` (``E[h_t] = E_pi[f]``); the MCSE is
        ``sd(h) / sqrt(ESS(h))`` with the autocorrelation-aware multi-chain ESS
        of :func:`pemc_stan.estimators.weights.chain_ess`.

        ``estimator="mixture"``: pools every pseudo-sample of every draw,
        each weighted by its probability of being the target component of its
        marginal mixture (:func:`pemc_stan.estimators.weights.mixture_mean`; one ratio
        ``Z / Z_q`` for sampled temperatures, one per pseudo-sample for a
        fixed ladder).  Same draws, same cost; on the 20-Gaussian mixture its
        MCSE was 4-14% lower.  The MCSE is that of the per-draw influence series.

        Parameters
        ----------
        f
            A column name of an original parameter (``"x"``, ``"theta[2]"``)
            for its mean, or a callable taking a dict-like ``column ->
            array (chains, draws, N)`` and returning an array of that shape.
        estimator
            ``"draw"`` (default) or ``"mixture"``.

        Returns
        -------
        WeightedEstimate
            Keys ``mean``, ``mcse``, ``ess``.

        Raises
        ------
        KeyError
            For an unknown column.
        ValueError
            For an unknown ``estimator``, or a callable returning the wrong shape.
        """
        if estimator not in ("draw", "mixture"):
            raise ValueError(f"estimator={estimator!r}: expected 'draw' (Theorem 2.1, "
                             "per-draw weights) or 'mixture' (pooled over all draws)")
        if isinstance(f, str):
            values = self.pseudo_samples(f)
        else:
            values = np.asarray(f(_ColumnView(self)), dtype=float)
        lw = self.log_weights()
        if values.shape != lw.shape:
            raise ValueError(f"f returned shape {values.shape}; expected (chains, draws, N) = "
                             f"{lw.shape}")
        if estimator == "mixture":
            est = W.mixture_mean(values, lw, pooled=self.result.options.fixed_ladder is None)
            mean, h = est.mean, est.influence  # (chains, draws)
        else:
            wn = np.exp(W.log_normalise(lw, axis=-1))
            h = np.sum(np.where(wn > 0, wn * values, 0.0), axis=-1)  # (chains, draws)
            mean = float(np.mean(h))
        ess = W.chain_ess(h)
        sd = float(np.std(h, ddof=1)) if h.size > 1 else 0.0
        return WeightedEstimate(mean=mean, mcse=sd / np.sqrt(ess), ess=ess)

    def weighted_mean_iid(self, column: str) -> W.WeightedMean:
        """Pooled self-normalised IS mean of a column via :func:`pemc_stan.estimators.weights.weighted_mean`.

        Pools every (draw, pseudo-sample) pair with its weight normalised
        within its draw (so each draw has total weight 1); the standard error
        treats draws as independent (no autocorrelation correction; prefer
        :meth:`expectation`).

        Raises
        ------
        KeyError
            For an unknown column.
        """
        values = self.pseudo_samples(column).reshape(-1)
        lw = W.log_normalise(self.log_weights(), axis=-1).reshape(-1)
        return W.weighted_mean(values, lw)

    # ------------------------------------------------------------------ #
    # resampling
    # ------------------------------------------------------------------ #

    def resample_index(self) -> NDArray[np.intp]:
        """The pseudo-sample kept at each iteration (0-based), shape (chains, draws)."""
        if self._index is None:
            rng = np.random.default_rng(self.seed)
            self._index = W.resample_indices(self.log_weights(), rng, axis=-1)
        return self._index

    def resampled_parameters_pd(self) -> pd.DataFrame:
        """Resampled draws of the original parameters (one pseudo-sample per iteration).

        Returns
        -------
        pandas.DataFrame
            Columns ``chain__``, ``iter__``, ``draw__``, then the original
            parameter columns (CmdStan bracket names).
        """
        idx = self.resample_index()
        n_chains, n_draws = idx.shape
        frame: dict[str, Any] = {
            "chain__": np.repeat(np.arange(1, n_chains + 1), n_draws),
            "iter__": np.tile(np.arange(1, n_draws + 1), n_chains),
        }
        frame["draw__"] = np.arange(1, n_chains * n_draws + 1)
        for pairs in self._param_columns().values():
            for orig, cols in pairs:
                vals = self._stack(cols)
                frame[orig] = np.take_along_axis(vals, idx[..., None], axis=-1)[..., 0].reshape(-1)
        return pd.DataFrame(frame)

    def _original(self) -> cmdstanpy.CmdStanModel:
        m = self._original_model
        if m is None:
            raise ValueError("no original model available for generated quantities")
        if not isinstance(m, cmdstanpy.CmdStanModel):
            m = m()
            self._original_model = m
        return m

    def resampled_draws_pd(self, output_dir: str | os.PathLike[str] | None = None
                           ) -> pd.DataFrame:
        """Resampled draws with the original model's transformed parameters and GQs.

        Writes the resampled parameter draws as Stan CSV files (one per chain,
        keeping the PE run's configuration comments) and runs cmdstanpy's
        standalone ``generate_quantities`` of the ORIGINAL model on them.

        Returns
        -------
        pandas.DataFrame
            ``chain__``, ``iter__``, ``draw__``, parameters, transformed
            parameters, generated quantities.

        Raises
        ------
        RuntimeError
            If CmdStan's generate_quantities fails.
        """
        if self._resampled is not None:
            return self._resampled
        out_dir = Path(output_dir) if output_dir else Path(tempfile.mkdtemp(prefix="pemc_pe_gq_"))
        self._resampled = recompute_quantities(
            self.result.original_code, getattr(self.result, "model_name", "model"), self.data,
            self.resampled_parameters_pd(), self._write_csvs, self._original, self.seed,
            out_dir)
        return self._resampled

    def _write_csvs(self, params: pd.DataFrame, out_dir: Path) -> list[str]:
        sampler = [c for c in SAMPLER_COLUMNS if c in self._col]
        cols = [self._col[c] for c in sampler]
        values = [self._draws[:, chain][:, cols] for chain in range(self._draws.shape[1])]
        return write_resampled_csvs(self.fit.runset.csv_files, params, sampler, values, out_dir)

    # ------------------------------------------------------------------ #
    # diagnostics
    # ------------------------------------------------------------------ #

    def diagnostics(self, warn: bool = True) -> dict[str, Any]:
        """Weight and temperature diagnostics, with advice.

        Returns
        -------
        dict
            ``weight_ess_mean`` (mean per-draw ESS, in [1, N]),
            ``weight_ess_overall`` (ESS of all pooled, per-draw normalised
            weights), ``max_weight_share``, ``beta_mean``, ``beta_quantiles``
            (5%, 50%, 95%), ``divergences``, ``max_treedepth_hits`` (transitions
            stopped at ``max_treedepth``), ``messages`` (advice strings).
        """
        lw = self.log_weights()
        per_draw = self.weight_ess()
        pooled = W.log_normalise(lw, axis=-1).reshape(-1)
        beta = self.beta()
        nuts = transition_counts(self.fit, self._draws, self._col)
        divergences = nuts.divergences
        info: dict[str, Any] = {
            "weight_ess_mean": float(np.mean(per_draw)),
            "weight_ess_overall": float(W.ess(pooled)),
            "max_weight_share": self.max_weight_share(),
            "beta_mean": float(np.mean(beta)),
            "beta_quantiles": tuple(float(q) for q in np.quantile(beta, [0.05, 0.5, 0.95])),
            "divergences": divergences,
            "max_treedepth_hits": nuts.max_treedepth_hits,
        }
        msgs: list[str] = []
        n = self.n_pseudo
        if n > 1 and info["max_weight_share"] > 0.9:
            msgs.append(
                f"one pseudo-sample carries >= 99% of the weight in "
                f"{100 * info['max_weight_share']:.0f}% of the draws: the tempered copies rarely "
                "matter. Increase n_pseudo, or try temper='likelihood' or a fixed ladder "
                "(beta=[...]) with more intermediate temperatures.")
        if self.result.options.fixed_ladder is None and info["beta_quantiles"][0] > 0.5 and n > 1:
            msgs.append(
                "the inverse temperatures stay high (5% quantile "
                f"{info['beta_quantiles'][0]:.2f}): little tempering happens. Check log_scale "
                "(a too large offset favours beta near 1) or use a fixed ladder.")
        if info["weight_ess_mean"] < 1.05 and n > 1:
            msgs.append("the per-draw weight ESS is ~1: estimates rely on single pseudo-samples; "
                        "increase n_pseudo.")
        if divergences:
            msgs.append(f"{divergences} divergent transitions: increase adapt_delta or use "
                        "temper='likelihood' (tempered heavy-tailed priors are hard to sample).")
        deeper = treedepth_advice(nuts)
        if deeper:
            msgs.append(deeper)
        info["messages"] = msgs
        if warn:
            for m in msgs:
                warnings.warn(m, PseudoExtendedDiagnosticWarning, stacklevel=2)
                logger.warning(m)
        return info

    def to_inference_data(self, **kwargs: Any) -> Any:
        """ArviZ InferenceData of this fit; see :func:`pemc_stan.output.inference_data.to_inference_data`.

        Raises
        ------
        RuntimeError
            If the original model's generate_quantities fails.
        """
        from pemc_stan.output.inference_data import to_inference_data

        return to_inference_data(self, **kwargs)

    def summary(self, estimator: str = "draw") -> pd.DataFrame:
        """Weighted mean, MCSE and ESS of every original parameter column.

        Parameters
        ----------
        estimator
            As in :meth:`expectation`.

        Raises
        ------
        ValueError
            For an unknown ``estimator``.
        """
        rows = []
        for c in self.parameter_columns():
            est = self.expectation(c, estimator=estimator)
            rows.append({"name": c, "mean": est.mean, "mcse": est.mcse, "ess": est.ess})
        return pd.DataFrame(rows).set_index("name")


class _ColumnView:
    """``view["x"]`` -> copies of column ``x``, shape (chains, draws, N)."""

    def __init__(self, fit: PseudoExtendedFit) -> None:
        self._fit = fit

    def __getitem__(self, column: str) -> NDArray[np.float64]:
        return self._fit.pseudo_samples(column)
