"""Stratified importance sampling: a proposal of its own for each stratum of the space.

The space is cut into strata ``k`` (a tempered run's cells: the nearest of the
search's mode centres).  Stratum ``k`` gets ``M_k`` draws ``y_i`` of a proposal
``q_k``, and a draw that lands outside stratum ``k`` weighs nothing, so

    Z_k = int_k gamma  is estimated by  (1 / M_k) sum_{i in k} w_i,
    w_i = gamma(y_i) 1_k(y_i) / q_k(y_i),

unbiased whatever ``q_k`` as long as it reaches every point of the stratum where
``gamma`` has mass.  With the per-draw log weights ``log u_i = log w_i - log M_k``
(:func:`stratum_log_weights`) the estimates are sums over all draws:
``Z = sum_i u_i`` and ``E[f] = sum_i u_i f_i / Z``.  Their standard errors add the
strata's independent variances: ``Var Z = sum_k Var_k(w) / M_k``, and for the ratio
``E[f]`` the delta method, ``sum_k Var_k(w (f - E[f])) / M_k / Z^2``.

The strata's proposals are built in :mod:`pemc_stan.modes.cells`; with them a chain's
count of mode entries no longer limits a tempered run's shares.  Everything works on
log weights with log-sum-exp, like
:mod:`pemc_stan.estimators.weights`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pemc_stan.estimators.weights import WeightedMean, weights_and_values
from pemc_stan.numeric import logsumexp

__all__ = ["stratified_log_z", "stratified_mean", "stratum_log_masses", "stratum_log_weights"]


def _strata(log_u: ArrayLike, strata: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Validated ``(log u, strata)``.

    Raises
    ------
    ValueError
        If the shapes differ or are not one-dimensional, a stratum index is negative, a
        log weight is NaN or ``+inf``, or no weight is positive.
    """
    lu = np.asarray(log_u, dtype=float)
    lab = np.asarray(strata)
    if lu.ndim != 1 or lab.shape != lu.shape:
        raise ValueError(f"log weights {lu.shape} and strata {lab.shape} must be two "
                         "one-dimensional arrays of the same length")
    if lab.size and (not np.issubdtype(lab.dtype, np.integer) or lab.min() < 0):
        raise ValueError("strata must be non-negative integers (one per draw)")
    if np.any(np.isnan(lu)) or np.any(np.isposinf(lu)):
        raise ValueError("log weights must not be NaN or +inf")
    if not np.any(np.isfinite(lu)):
        raise ValueError("no draw has a positive weight: no stratum's proposal reached "
                         "its stratum's mass")
    return lu, lab.astype(np.intp)


def stratum_log_weights(log_target: ArrayLike, log_proposal: ArrayLike, inside: ArrayLike,
                        strata: ArrayLike) -> NDArray[np.float64]:
    """Per-draw ``log u_i = log gamma(y_i) - log q_k(y_i) - log M_k`` for a draw of
    stratum ``k``'s proposal inside stratum ``k``, ``-inf`` outside it or where the
    target's density is not finite (``M_k``: the number of draws of stratum ``k``).

    Parameters
    ----------
    log_target
        ``log gamma`` at each draw (NaN where it could not be evaluated).
    log_proposal
        The log density of the draw's own stratum's proposal at it.
    inside
        Whether each draw lies in the stratum whose proposal drew it.
    strata
        The stratum whose proposal drew each draw.

    Returns
    -------
    ndarray
        One log weight per draw; ``logsumexp`` of them estimates ``log Z``.

    Raises
    ------
    ValueError
        If the arrays' shapes differ.
    """
    lg = np.asarray(log_target, dtype=float)
    lq = np.asarray(log_proposal, dtype=float)
    ins = np.asarray(inside, dtype=bool)
    lab = np.asarray(strata, dtype=np.intp)
    if not lg.shape == lq.shape == ins.shape == lab.shape or lg.ndim != 1:
        raise ValueError(f"log_target {lg.shape}, log_proposal {lq.shape}, inside "
                         f"{ins.shape} and strata {lab.shape} must be one-dimensional "
                         "and of one length")
    m_k = np.bincount(lab, minlength=int(lab.max(initial=-1)) + 1).astype(float)
    ok = ins & np.isfinite(lg) & np.isfinite(lq)
    return np.where(ok, lg - np.where(ok, lq, 0.0) - np.log(m_k[lab]), -np.inf)


def stratum_log_masses(log_u: ArrayLike, strata: ArrayLike) -> NDArray[np.float64]:
    """``log Z_k`` of each stratum ``0..K-1`` (``-inf`` for one whose draws all missed it).

    Raises
    ------
    ValueError
        As :func:`_strata`.
    """
    lu, lab = _strata(log_u, strata)
    out = np.full(int(lab.max()) + 1, -np.inf)
    for k in np.unique(lab):
        out[k] = logsumexp(lu[lab == k])
    return out


def _variance(g: NDArray[np.float64], lab: NDArray[np.intp]) -> float:
    """``sum_k Var_k(M_k g) / M_k``: the variance of ``sum_i g_i`` when each stratum's
    draws are independent and ``g_i`` carries its ``1 / M_k``."""
    total = 0.0
    for k in np.unique(lab):
        gk = g[lab == k]
        total += float(np.var(gk * gk.size)) / gk.size
    return total


def stratified_log_z(log_u: ArrayLike, strata: ArrayLike) -> tuple[float, float]:
    """``(log Z, its standard error)`` from per-draw log weights
    (:func:`stratum_log_weights`): ``log sum_i u_i``, and the relative standard error of
    ``Z`` (the error of ``log Z`` to first order).

    Raises
    ------
    ValueError
        As :func:`_strata`.
    """
    lu, lab = _strata(log_u, strata)
    log_z = float(logsumexp(lu))
    return log_z, float(np.sqrt(_variance(np.exp(lu - log_z), lab)))


def stratified_mean(values: ArrayLike, log_u: ArrayLike, strata: ArrayLike) -> WeightedMean:
    """``E[f] = sum_i u_i f_i / sum_i u_i`` and its delta-method standard error, summed
    over the strata's independent draws.

    Parameters
    ----------
    values
        ``f(y_i)``, shape ``(n,)`` or ``(n, ...)``; draws run along axis 0.
    log_u, strata
        As :func:`stratified_log_z`.

    Returns
    -------
    WeightedMean
        ``mean`` and ``std_error`` shaped ``values.shape[1:]``.

    Raises
    ------
    ValueError
        As :func:`_strata`, if ``values`` has another number of draws, or if a value
        with weight is not finite.
    """
    lu, lab = _strata(log_u, strata)
    u, f = weights_and_values(values, lu)
    mean = np.sum(u * f, axis=0)
    g = (u * (f - mean)).reshape(lu.size, -1)
    se = np.sqrt([_variance(g[:, j], lab) for j in range(g.shape[1])])
    return WeightedMean(np.asarray(mean), se.reshape(np.shape(mean)))
