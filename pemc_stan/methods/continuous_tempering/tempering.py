"""Continuous-tempering (CT) post-processing: eqs 14-22 of Graham & Storkey,
"Continuously tempered Hamiltonian Monte Carlo" (Graham & Storkey 2017).

Notation (paper, section 3 and 5):

* target density ``exp(-phi(x)) / Z``, i.e. ``phi(x) = -log_gamma(x)`` where
  ``log_gamma`` is the *unnormalised* target log density;
* normalised base density ``exp(-psi(x))``, i.e. ``psi(x) = -log_base(x)``;
* ``log_zeta`` is the fixed approximation to ``log Z`` used in eq 14;
* ``beta(u)`` is the logistic sigmoid (section 5) and the joint (eq 16) is
  ``p(x, beta) ∝ exp(-beta phi - (1 - beta) psi) / zeta^beta``.

The conditional of ``beta`` given ``x`` (eq 17) is an exponential with rate
``Delta(x) = phi(x) + log zeta - psi(x)`` truncated to [0, 1], and the
Rao-Blackwellised weights of eq 20 are ``w_0 = p(beta=0|x)`` and
``w_1 = p(beta=1|x)``.

Post-stratification by regions (:class:`Strata`)
------------------------------------------------
Partition the space into regions ``R_k`` (in practice the cells of the modes
the pilot found) and let ``b_k = int_{R_k} b`` be the base's mass of each,
known from the base alone.  For the region's share of the evidence,
``Z_k = int_{R_k} gamma``, eq 20 restricted to ``R_k`` reads::

    Z_k = zeta * b_k * E[w_1 1_k] / E[w_0 1_k]

(both sides of the identity behind eq 20, ``int_{R_k} b e^{-Delta} = (Z_k /
zeta)``, restricted to the region).  The ratio uses only the draws inside
``R_k``, so it does not depend on how long the chains happened to stay in
each region: the slow part of a multimodal run (how often a chain changes
mode through ``beta ~ 0``) drops out, and the region masses come from the
exactly known ``b_k`` instead.  So ``Z = sum_k Z_k`` and the target
expectations weight a draw in ``R_k`` by ``w_1 b_k / E[w_0 1_k]``.  With one
region (``b_1 = 1``) these are eqs 20 and 21 exactly.

The weights ``w_0``, ``w_1`` themselves, ``Delta`` and the bias ``g(beta)`` (shared with
PE) are in :mod:`pemc_stan.methods.tempering`.
"""

from __future__ import annotations

import logging
import math
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

from pemc_stan.estimators.log_z import EvidenceEstimate, quadrature_weights
from pemc_stan.estimators.weights import WeightedMean, chain_ess
from pemc_stan.methods.tempering import FLAT, BetaBias, log_conditional_beta
from pemc_stan.numeric import logsumexp

logger = logging.getLogger(__name__)

__all__ = [
    "as_chains",
    "beta_of_u",
    "ct_thermodynamic_integration",
    "log_dbeta_du",
    "log_z_estimate",
    "Strata",
    "pooled_log_ratio",
    "stratified_log_w1",
    "weighted_expectations",
]


def pooled_log_ratio(log_q_ratio_run: ArrayLike, log_n_run: ArrayLike,
                     log_q_ratio_base: ArrayLike, log_n_base: ArrayLike
                     ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``log b'(x) - log q_mix(x)`` for a round's draws pooled with iid draws of the next base.

    The round's draws ``x_s`` (``S`` of them) come from its x-marginal
    ``q(x) = b(x) N(x) / C`` (:meth:`BetaBias.log_normaliser` gives ``log N``), and
    ``M`` more are drawn from the next round's base ``b'``.  Pooled, they are draws of
    the mixture ``q_mix = (S q + M b') / (S + M)`` (the balance heuristic of multiple
    importance sampling), and ``b' / q_mix`` is bounded by ``(S + M) / M``: the next
    bridge's ``beta = 0`` end is represented by at least about ``M`` effective draws,
    however few of the round's draws were near ``beta = 0``.  ``C`` is estimated on the
    round's draws through the identity ``E_q[1 / N(x)] = int b(x) dx / C = 1 / C``.

    Parameters
    ----------
    log_q_ratio_run, log_n_run
        At the round's draws: ``log b(x) - log b'(x)`` and ``log N(x)``.
    log_q_ratio_base, log_n_base
        The same at the iid draws of ``b'``.

    Returns
    -------
    (ndarray, ndarray)
        ``log b' - log q_mix`` at the round's draws and at the base draws (the
        ``log_ratio`` of :func:`~pemc_stan.methods.tempering.length_bias`, whose
        ``Delta'`` are those of the same draws).

    Raises
    ------
    ValueError
        If the round has no draw with a finite ``log N``.
    """
    a_run = np.asarray(log_q_ratio_run, float).ravel() + np.asarray(log_n_run, float).ravel()
    a_base = np.asarray(log_q_ratio_base, float).ravel() + np.asarray(log_n_base, float).ravel()
    log_n = np.asarray(log_n_run, float).ravel()
    ok = np.isfinite(log_n)
    if not np.any(ok):
        raise ValueError("no draw of the round has a finite log N(x)")
    n_run, n_base = a_run.size, a_base.size
    log_c = math.log(int(np.sum(ok))) - float(logsumexp(-log_n[ok]))

    def ratio(a: NDArray[np.float64]) -> NDArray[np.float64]:
        a = np.where(np.isfinite(a), a, np.inf)  # a draw q cannot judge gets no weight
        return np.asarray(math.log(n_run + n_base)
                          - np.logaddexp(math.log(n_run) + a - log_c, math.log(n_base)))

    return ratio(a_run), ratio(a_base)


def beta_of_u(u: ArrayLike) -> NDArray[np.float64]:
    """Inverse temperature ``beta(u) = 1 / (1 + exp(-u))`` (logistic sigmoid, section 5).

    Parameters
    ----------
    u : array_like
        Temperature control variable.

    Returns
    -------
    ndarray
        ``beta`` in [0, 1].

    Raises
    ------
    ValueError
        If ``u`` contains NaN.
    """
    arr = np.asarray(u, dtype=float)
    if np.isnan(arr).any():
        raise ValueError("u contains NaN")
    return expit(arr)


def log_dbeta_du(u: ArrayLike) -> NDArray[np.float64]:
    """``log |d beta / d u|`` for the logistic map (the Jacobian term of eqs 14-15).

    ``d beta/du = sigma(u) sigma(-u)``, so
    ``log |d beta/du| = -softplus(u) - softplus(-u) = -|u| - 2 log1p(exp(-|u|))``,
    which is exact and overflow-free for any finite ``u``.

    Parameters
    ----------
    u : array_like
        Temperature control variable.

    Returns
    -------
    ndarray

    Raises
    ------
    ValueError
        If ``u`` contains NaN.
    """
    arr = np.asarray(u, dtype=float)
    if np.isnan(arr).any():
        raise ValueError("u contains NaN")
    a = np.abs(arr)
    return -a - 2.0 * np.log1p(np.exp(-a))


def as_chains(values: ArrayLike, chain_ids: ArrayLike | None = None) -> NDArray[np.float64]:
    """Arrange per-draw values as ``(n_chains, n_draws, ...)``.

    Parameters
    ----------
    values : array_like
        Either already chain-shaped ``(n_chains, n_draws, ...)`` (when
        ``chain_ids`` is None and ``ndim >= 2``), or flat ``(n, ...)`` with
        ``chain_ids`` of length ``n``.  Flat input without ``chain_ids`` is
        one chain.  Within a chain the draw order is preserved.
    chain_ids : array_like, optional
        Chain label of each draw.

    Returns
    -------
    ndarray

    Raises
    ------
    ValueError
        If ``chain_ids`` has the wrong length or chains have unequal lengths.
    """
    arr = np.asarray(values, dtype=float)
    if chain_ids is None:
        return arr[None, ...] if arr.ndim == 1 else arr
    ids = np.asarray(chain_ids)
    if ids.shape != arr.shape[:1]:
        raise ValueError(f"chain_ids has shape {ids.shape}, expected {arr.shape[:1]}")
    labels = list(dict.fromkeys(ids.tolist()))
    groups = [arr[ids == lab] for lab in labels]
    lengths = {g.shape[0] for g in groups}
    if len(lengths) != 1:
        raise ValueError(f"chains have unequal lengths {sorted(lengths)}")
    return np.stack(groups)


def _mcse_of_mean(h: NDArray[np.float64]) -> tuple[float, float]:
    """``(sd(h) / sqrt(ESS(h)), ESS(h))`` for chain-shaped ``h`` (chains, draws)."""
    n_eff = chain_ess(h)
    return float(np.std(h, ddof=1) / np.sqrt(n_eff)), n_eff


class Strata(NamedTuple):
    """Regions of the draws for post-stratified CT estimates (see the module docstring).

    Attributes
    ----------
    labels
        Region index ``0..K-1`` of each draw, shaped like ``Delta``.
    log_mass
        ``(K,)`` log of the base's mass ``b_k`` of each region (summing to 1).
    n_mass
        Number of iid base draws ``b_k`` was estimated from (their binomial
        error enters the standard errors); 0 when the masses are exact.
    """

    labels: NDArray[np.intp]
    log_mass: NDArray[np.float64]
    n_mass: int = 0


def _stratified(lw1: NDArray[np.float64], lw0: NDArray[np.float64], strata: Strata
                ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
                           NDArray[np.float64]]:
    """Stratified weights: ``(log a, log v, log A_k - log B_k, log r_k)``.

    ``a_s = w_1 b_k / (B_k D)`` and ``v_s = w_0 b_k / (B_k D)`` for a draw in
    region ``k``, with ``A_k = mean(w_1 1_k)``, ``B_k = mean(w_0 1_k)`` and
    ``D = sum_k b_k A_k / B_k`` (so ``mean(a) = 1``); ``r_k = b_k A_k / (B_k D)``
    (the regions' shares of ``Z``).

    Raises
    ------
    ValueError
        If the labels do not match the draws, or a region with base mass has
        no draw (merge it into a neighbour first).
    """
    lab = np.asarray(strata.labels)
    if lab.shape != lw1.shape:
        raise ValueError(f"strata labels have shape {lab.shape}; the draws {lw1.shape}")
    lb = np.asarray(strata.log_mass, dtype=float)
    k = lb.size
    if lab.size and (lab.min() < 0 or lab.max() >= k):
        raise ValueError(f"strata labels must lie in 0..{k - 1}")
    log_a_k = np.full(k, -np.inf)
    log_b_k = np.full(k, -np.inf)
    for j in range(k):
        m = lab == j
        if np.any(m):
            log_a_k[j] = logsumexp(lw1[m])
            log_b_k[j] = logsumexp(lw0[m])
    used = np.isfinite(lb)
    if np.any(used & ~np.isfinite(log_b_k)):
        raise ValueError("a region with base mass holds no draw; merge it into another one")
    ratio = np.where(used, log_a_k - np.where(used, log_b_k, 0.0), -np.inf)
    log_r = np.where(used, lb + ratio, -np.inf)
    log_d = logsumexp(log_r[used])
    shift = np.where(used, lb - log_b_k, -np.inf) - log_d + np.log(lw1.size)
    return lw1 + shift[lab], lw0 + shift[lab], ratio, log_r - log_d


def _mass_variance(g: NDArray[np.float64], strata: Strata) -> float:
    """Variance of ``sum_k g_k b_k`` from the binomial error of ``n_mass`` base draws."""
    if strata.n_mass <= 0:
        return 0.0
    b = np.exp(np.asarray(strata.log_mass, dtype=float))
    return float(max(np.sum(b * g * g) - np.sum(b * g) ** 2, 0.0) / strata.n_mass)


def stratified_log_w1(delta_values: ArrayLike, strata: Strata | None,
                      bias: BetaBias = FLAT) -> NDArray[np.float64]:
    """Log target weights per draw: ``log w_1``, post-stratified when ``strata`` is given.

    With strata, ``log(w_1 b_k / (B_k D))`` (mean of the weights 1); without,
    ``log w_1`` of eq 20.

    Raises
    ------
    ValueError
        As :func:`~pemc_stan.methods.tempering.log_w1`, and on labels that do not match the draws.
    """
    lw0, lw1 = bias.log_w_pair(np.asarray(delta_values, dtype=float))
    if strata is None:
        return lw1
    return _stratified(lw1, lw0, strata)[0]


def log_z_estimate(
    delta_values: ArrayLike, log_zeta: float, chain_ids: ArrayLike | None = None,
    strata: Strata | None = None, bias: BetaBias = FLAT,
) -> EvidenceEstimate:
    """``log Z`` from CT draws by the Rao-Blackwellised ratio estimator of eq 20.

    ``Z = zeta * mean(w_1) / mean(w_0)``, i.e.
    ``log Z = log zeta + logsumexp(log w_1) - logsumexp(log w_0)``.

    Standard error (delta method, autocorrelation-aware).  With
    ``a_k = mean(w_k)``, the first-order expansion of
    ``log a_1 - log a_0`` is the mean of the per-draw influence values
    ``h_s = w_1(x_s)/a_1 - w_0(x_s)/a_0`` (mean zero; it carries the
    covariance between numerator and denominator).  Arranged as
    (chains, draws), ``SE(log Z) = sd(h) / sqrt(ESS(h))`` with ESS from
    ArviZ's ``ess(method="mean")``: split chains, Geyer's initial monotone
    autocorrelation sum, and the multi-chain variance ``var_plus`` which grows
    when chains disagree.

    Parameters
    ----------
    delta_values : array_like
        ``Delta(x)`` per draw (eq 17), flat ``(n,)`` or ``(n_chains, n_draws)``.
    log_zeta : float
        ``log zeta`` used when sampling.
    chain_ids : array_like, optional
        Chain label of each draw for flat input.
    strata : Strata, optional
        Regions for the post-stratified estimate ``log Z = log zeta + log sum_k
        b_k A_k / B_k``; its influence values are ``h_s = a_s - v_s A_k / B_k``
        (see :func:`_stratified`), plus the binomial error of the region
        masses.  Labels shaped like ``delta_values`` after reshaping to chains.
    bias : BetaBias, optional
        The bias ``g`` the draws were made with (default none): the weights
        are its ``p(0 | x)``, ``p(1 | x)`` and ``log Z`` gains ``g(1) - g(0)``.

    Returns
    -------
    EvidenceEstimate
        ``method="ct_eq20"``; diagnostics hold ESS of ``h``, Kish ESS of the
        ``w_1`` and ``w_0`` weights, the estimated ``P(beta=1)/P(beta=0)`` in
        log space and per-chain ``log Z`` estimates.

    Raises
    ------
    ValueError
        On non-finite ``Delta`` or inconsistent chain information.
    """
    d = as_chains(delta_values, chain_ids)
    if d.ndim != 2:
        raise ValueError("delta must be (n,) or (n_chains, n_draws)")
    lw0, lw1 = bias.log_w_pair(d)
    log_zeta = float(log_zeta) + bias.offset
    n = d.size
    log_a1 = logsumexp(lw1) - np.log(n)
    log_a0 = logsumexp(lw0) - np.log(n)
    log_z = float(log_zeta) + log_a1 - log_a0
    h = np.exp(lw1 - log_a1) - np.exp(lw0 - log_a0)
    strata_info: dict[str, object] = {}
    mass_var = 0.0
    if strata is not None:
        labels = np.asarray(strata.labels).reshape(d.shape)
        st = Strata(labels, strata.log_mass, strata.n_mass)
        la, lv, ratio, log_r = _stratified(lw1, lw0, st)
        used = np.isfinite(log_r)
        log_d = float(logsumexp(np.asarray(strata.log_mass, dtype=float)[used] + ratio[used]))
        log_z = float(log_zeta) + log_d
        h = np.exp(la) - np.exp(lv + np.where(used, ratio, 0.0)[labels])
        g = np.exp(np.where(used, ratio - log_d, -np.inf))  # d log D / d b_k
        mass_var = _mass_variance(g, st)
        strata_info = {"regions": int(np.sum(used)), "region_log_z": (log_r + log_z).tolist(),
                       "mass_variance": mass_var}
    se, n_eff = _mcse_of_mean(h)
    se = float(np.sqrt(se**2 + mass_var))
    per_chain = float(log_zeta) + logsumexp(lw1, axis=1) - logsumexp(lw0, axis=1)
    diagnostics = {
        "n_draws": int(n),
        "n_chains": int(d.shape[0]),
        "ess_influence": n_eff,
        "kish_ess_w1": float(np.exp(2 * logsumexp(lw1) - logsumexp(2 * lw1))),
        "kish_ess_w0": float(np.exp(2 * logsumexp(lw0) - logsumexp(2 * lw0))),
        "log_p_beta1_over_p_beta0": float(log_a1 - log_a0),
        "per_chain_log_z": per_chain.tolist(),
        **strata_info,
    }
    logger.debug("CT log Z = %.6g +/- %.3g (ESS %.1f)", log_z, se, n_eff)
    return EvidenceEstimate(float(log_z), se, "ct_eq20", diagnostics)


def weighted_expectations(
    values: ArrayLike,
    delta_values: ArrayLike,
    which: Literal["target", "base"] = "target",
    chain_ids: ArrayLike | None = None,
    strata: Strata | None = None,
    bias: BetaBias = FLAT,
) -> WeightedMean:
    """Expectations under the target (eq 21, weights ``w_1``) or base (eq 22, ``w_0``).

    ``E[f | beta=k] ~= sum_s w_k(x_s) f(x_s) / sum_s w_k(x_s)``.  Standard
    error by the delta method with influence values
    ``h_s = (w_k(x_s)/mean(w_k)) (f(x_s) - mu)`` and
    ``SE = sd(h) / sqrt(ESS(h))`` (ArviZ mean-ESS over chains), per
    component of ``f``.

    Parameters
    ----------
    values : array_like
        ``f(x_s)``: flat ``(n,)`` / ``(n, k)`` (with optional ``chain_ids``),
        or chain-shaped ``(n_chains, n_draws)`` / ``(n_chains, n_draws, k)``
        matching ``delta_values``.
    delta_values : array_like
        ``Delta(x_s)``, flat ``(n,)`` or ``(n_chains, n_draws)``.
    which : {"target", "base"}
        ``"target"`` for eq 21, ``"base"`` for eq 22.
    chain_ids : array_like, optional
        Chain label per draw for flat input.
    strata : Strata, optional
        Regions for post-stratified expectations.  Base (eq 22): weights
        ``w_0 b_k / E[w_0 1_k]`` (each cell gets its known base mass, so what
        is checked is the sampling within the cells, on which the stratified
        estimates rely), influence values ``v_s (f_s - m_k)`` with ``m_k`` the
        cell's weighted mean.  Target: weights ``a_s`` of :func:`_stratified`, influence values
        ``h_s = a_s (f_s - mu) - v_s m_k`` with ``m_k = sum_{s in R_k} a_s (f_s -
        mu) / sum_{s in R_k} v_s`` (the error of ``B_k``), plus the binomial
        error of the region masses.

    Returns
    -------
    WeightedMean
        ``mean`` and ``std_error`` of shape ``(k,)`` or scalar.

    Raises
    ------
    ValueError
        On unknown ``which``, shape mismatch or non-finite input.
    """
    if which not in ("target", "base"):
        raise ValueError(f"which must be 'target' or 'base', got {which!r}")
    d_raw = np.asarray(delta_values, dtype=float)
    d = as_chains(d_raw, chain_ids)
    f_raw = np.asarray(values, dtype=float)
    if d_raw.ndim == 1 and chain_ids is None:
        f = f_raw[None, ...]  # flat draws form one chain
    else:
        f = as_chains(f_raw, chain_ids)
    if f.ndim == 1 or f.shape[:2] != d.shape:
        raise ValueError(f"values shape {f.shape} does not match Delta shape {d.shape}")
    if not np.all(np.isfinite(f)):
        raise ValueError("values contain NaN or infinite entries")
    scalar = f.ndim == 2
    f3 = f[..., None] if scalar else f
    lw0, lw1 = bias.log_w_pair(d)
    if strata is None:
        lw = lw1 if which == "target" else lw0
        w = np.exp(lw - (logsumexp(lw) - np.log(d.size)))  # w / mean(w)
        w3 = w[..., None]
        mu = np.sum(w3 * f3, axis=(0, 1)) / np.sum(w3, axis=(0, 1))
        h = w3 * (f3 - mu)
        se = np.array([_mcse_of_mean(h[..., j])[0] for j in range(h.shape[-1])])
    else:
        labels = np.asarray(strata.labels).reshape(d.shape)
        st = Strata(labels, strata.log_mass, strata.n_mass)
        la, lv, _, _ = _stratified(lw1, lw0, st)
        k_regions = np.asarray(strata.log_mass).size
        b = np.exp(np.asarray(strata.log_mass, dtype=float))
        if which == "base":  # weights w_0 b_k / B_k: the cells get their known base mass
            v3 = np.exp(lv - np.log(np.mean(np.exp(lv))))[..., None]
            mu = np.sum(v3 * f3, axis=(0, 1)) / np.sum(v3, axis=(0, 1))
            cell_w = np.array([v3[labels == j].sum() for j in range(k_regions)])
            cell_mean = np.stack([(v3 * f3)[labels == j].sum(axis=0) for j in range(k_regions)])
            cell_mean = np.divide(cell_mean, cell_w[:, None], out=np.zeros_like(cell_mean),
                                  where=cell_w[:, None] > 0)
            h = v3 * (f3 - cell_mean[labels])
            se = np.array([np.sqrt(_mcse_of_mean(h[..., j])[0] ** 2
                                   + _mass_variance(cell_mean[:, j] - mu[j], st))
                           for j in range(h.shape[-1])])
            if scalar:
                return WeightedMean(np.asarray(mu[0]), np.asarray(se[0]))
            return WeightedMean(mu, se)
        a3, v = np.exp(la)[..., None], np.exp(lv)
        mu = np.sum(a3 * f3, axis=(0, 1)) / np.sum(a3, axis=(0, 1))
        dev = a3 * (f3 - mu)  # (chains, draws, k)
        sum_dev = np.stack([dev[labels == j].sum(axis=0) for j in range(k_regions)])  # (K, k)
        sum_v = np.array([v[labels == j].sum() for j in range(k_regions)])
        m_k = np.divide(sum_dev, sum_v[:, None], out=np.zeros_like(sum_dev),
                        where=sum_v[:, None] > 0)
        h = dev - v[..., None] * m_k[labels]
        g = np.divide(sum_dev / d.size, b[:, None], out=np.zeros_like(sum_dev),
                      where=b[:, None] > 0)  # d mu / d b_k
        se = np.array([np.sqrt(_mcse_of_mean(h[..., j])[0] ** 2 + _mass_variance(g[:, j], st))
                       for j in range(h.shape[-1])])
    if scalar:
        return WeightedMean(np.asarray(mu[0]), np.asarray(se[0]))
    return WeightedMean(mu, se)


def ct_thermodynamic_integration(
    delta_values: ArrayLike,
    log_zeta: float,
    n_grid: int = 101,
    rule: Literal["trapezoid", "simpson"] = "simpson",
    chain_ids: ArrayLike | None = None,
    bias: BetaBias = FLAT,
) -> EvidenceEstimate:
    """Thermodynamic integration from CT draws reweighted to a grid of inverse temperatures.

    For the geometric bridge (eq 4), ``d log z(b)/db = E_b[log L]`` with
    ``log L(x) = -phi(x) + psi(x) = log zeta - Delta(x)``, so
    ``log Z = integral_0^1 E_b[log zeta - Delta] db`` (path sampling, section 4).
    Generalising eqs 21-22 from ``b in {0, 1}`` to any ``b``, draws ``x_s`` from
    the CT joint give
    ``E_b[f] ~= sum_s p(b|x_s) f(x_s) / sum_s p(b|x_s)`` with ``p(b|x)`` of
    eq 17.  The integral over an equally spaced grid of ``n_grid`` values of
    ``b`` uses the trapezoid or Simpson rule (weights ``c_k``).

    Standard error: all grid points reuse the same draws, so the per-draw
    influence values ``h_s = sum_k c_k (p(b_k|x_s)/mean_s' p(b_k|x_s')) (f_s - mu_k)``
    (delta method for the sum of ratio estimators) are formed and
    ``SE = sd(h)/sqrt(ESS(h))`` with the ArviZ mean-ESS over chains.  The
    quadrature error is not included (``diagnostics["discretisation_gap"]``
    reports |trapezoid - Simpson|).

    Parameters
    ----------
    delta_values : array_like
        ``Delta(x)`` per draw, flat ``(n,)`` or ``(n_chains, n_draws)``.
    log_zeta : float
        ``log zeta`` used when sampling.
    n_grid : int, default 101
        Number of grid points in [0, 1] (>= 3).
    rule : {"trapezoid", "simpson"}
        Quadrature rule.
    chain_ids : array_like, optional
        Chain label per draw for flat input.
    bias : BetaBias, optional
        The bias ``g`` the draws were made with (default none).

    Returns
    -------
    EvidenceEstimate
        ``method="ct_thermodynamic_integration_<rule>"``.

    Raises
    ------
    ValueError
        On non-finite ``Delta``, ``n_grid < 3`` or an unknown rule.
    """
    if n_grid < 3:
        raise ValueError("n_grid must be at least 3")
    d = as_chains(delta_values, chain_ids)
    if d.ndim != 2:
        raise ValueError("delta must be (n,) or (n_chains, n_draws)")
    grid = np.linspace(0.0, 1.0, n_grid)
    c = quadrature_weights(grid, rule)
    f = float(log_zeta) - d.ravel()
    if bias.is_flat:
        log_p = log_conditional_beta(grid[:, None], d.ravel()[None, :])  # (K, n), eq 17
    else:
        log_p = bias.log_conditional(grid[:, None], d.ravel()[None, :])
    rel_w = np.exp(log_p - (logsumexp(log_p, axis=1, keepdims=True) - np.log(f.size)))
    mu = np.mean(rel_w * f, axis=1)  # E_b[log L] at each grid point
    log_z = float(c @ mu)
    h = (c[:, None] * rel_w * (f[None, :] - mu[:, None])).sum(axis=0).reshape(d.shape)
    se, n_eff = _mcse_of_mean(h)
    other = "trapezoid" if rule == "simpson" else "simpson"
    gap = abs(log_z - float(quadrature_weights(grid, other) @ mu))
    diagnostics = {"grid": grid.tolist(), "integrand": mu.tolist(), "ess_influence": n_eff,
                   "discretisation_gap": gap, "n_draws": int(d.size)}
    return EvidenceEstimate(log_z, se, f"ct_thermodynamic_integration_{rule}", diagnostics)
