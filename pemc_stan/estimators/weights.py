"""Importance-weight utilities: normalisation, ESS, weighted means, resampling.

Everything works on *log*-weights and uses log-sum-exp, in the style of
blackjax's ``smc/ess.py``.  A log-weight of ``-inf`` is a legitimate zero
weight; ``NaN`` and ``+inf`` are always errors, as is a row whose weights are
all zero (nothing to normalise).

These functions serve the pseudo-extended (PE) post-processing and the
continuously tempered (CT) estimators in
:mod:`pemc_stan.methods.continuous_tempering.tempering`.  For PE
(eq 2, Theorem 2.1 / eq 3 of the PE paper) the log-weight of pseudo-sample
``i`` at iteration ``t`` is ``log gamma(x_i) - log q(x_i)`` (for the tempered
instrumental of eqs 7-8: ``log gamma(x_i) + log pi(beta_i) - log gamma_beta_i(x_i)
- log g(beta_i)``), self-normalised within the iteration; a draws x N matrix of
these goes to :func:`resample_indices` to keep one pseudo-sample per iteration.

The pooled mixture estimator of PE draws, which is specific to that method,
lives in :mod:`pemc_stan.methods.pseudo_extended.estimators`.
"""

from __future__ import annotations

import logging
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pemc_stan.estimators.convergence import ess_mean
from pemc_stan.estimators.psis import psis
from pemc_stan.numeric import logsumexp

logger = logging.getLogger(__name__)

__all__ = [
    "WeightedMean",
    "chain_ess",
    "ess",
    "log_normalise",
    "max_weight_share",
    "pareto_smooth",
    "resample_indices",
    "weighted_mean",
    "weighted_moments",
    "weights_and_values",
]


class WeightedMean(NamedTuple):
    """A self-normalised importance-sampling estimate and its Monte-Carlo standard error."""

    mean: NDArray[np.float64]
    std_error: NDArray[np.float64]


def _check_log_weights(log_w: ArrayLike, axis: int = -1) -> NDArray[np.float64]:
    """Validate log-weights and return them as a float array.

    Raises
    ------
    ValueError
        If ``log_w`` is empty, contains NaN or ``+inf``, or a slice along
        ``axis`` has every weight zero (all ``-inf``).
    """
    arr = np.asarray(log_w, dtype=float)
    if arr.ndim == 0:
        raise ValueError("log-weights must be at least one-dimensional")
    if arr.shape[axis] == 0:
        raise ValueError("log-weights are empty along the weight axis")
    if np.isnan(arr).any():
        raise ValueError(f"log-weights contain NaN ({int(np.isnan(arr).sum())} entries)")
    if np.isposinf(arr).any():
        raise ValueError("log-weights contain +inf (an infinite importance weight)")
    all_zero = np.all(np.isneginf(arr), axis=axis)
    if np.any(all_zero):
        raise ValueError(
            f"{int(np.sum(all_zero))} row(s) of log-weights are all -inf (every weight is zero)"
        )
    return arr


def log_normalise(log_w: ArrayLike, axis: int = -1) -> NDArray[np.float64]:
    """Normalise log-weights so that the weights sum to one along ``axis``.

    Parameters
    ----------
    log_w : array_like
        Unnormalised log-weights; ``-inf`` entries are zero weights.
    axis : int, default -1
        Axis holding the weights of one set.

    Returns
    -------
    ndarray
        ``log_w - logsumexp(log_w, axis)``, same shape as ``log_w``.

    Raises
    ------
    ValueError
        On NaN, ``+inf`` or an all ``-inf`` set of weights.
    """
    arr = _check_log_weights(log_w, axis)
    shifted = arr - np.max(arr, axis=axis, keepdims=True)  # exact for the largest weight
    return shifted - logsumexp(shifted, axis=axis, keepdims=True)


def ess(log_w: ArrayLike, axis: int = -1) -> NDArray[np.float64] | float:
    """Kish effective sample size of self-normalised weights.

    ``ESS = (sum w)^2 / sum w^2 = exp(2 logsumexp(lw) - logsumexp(2 lw))``;
    it is 1 when a single weight is non-zero and ``n`` for equal weights.

    Parameters
    ----------
    log_w : array_like
        Unnormalised log-weights.
    axis : int, default -1
        Axis holding the weights of one set.

    Returns
    -------
    float or ndarray
        ESS per set (a float for 1-D input).

    Raises
    ------
    ValueError
        On NaN, ``+inf`` or an all ``-inf`` set of weights.
    """
    arr = _check_log_weights(log_w, axis)
    out = np.exp(2.0 * logsumexp(arr, axis=axis) - logsumexp(2.0 * arr, axis=axis))
    return float(out) if np.ndim(out) == 0 else out


def weighted_moments(z: ArrayLike, log_w: ArrayLike
                     ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The self-normalised weighted mean ``(D,)`` of the rows of ``z`` ``(S, D)`` and their
    weighted covariance ``(D, D)`` about it.

    Raises
    ------
    Nothing (NaN where every weight is zero).
    """
    za = np.asarray(z, dtype=float)
    lw = np.asarray(log_w, dtype=float)
    w = np.exp(lw - logsumexp(lw))
    keep = w > 0
    if np.any(keep):  # rows of no weight add nothing (in many dimensions, most rows)
        za, w = za[keep], w[keep]
    mu = w @ za
    dz = za - mu
    return mu, (w[:, None] * dz).T @ dz


def weights_and_values(values: ArrayLike, log_w: NDArray[np.float64]
                       ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Normalised weights shaped to broadcast against ``values`` (draws along axis 0),
    and the values, 0 at draws of no weight.

    Raises
    ------
    ValueError
        If ``values`` has another number of draws than ``log_w``, or a value with weight
        is not finite.
    """
    f = np.asarray(values, dtype=float)
    if f.shape[:1] != log_w.shape:
        raise ValueError(f"values has {f.shape[:1]} leading entries, log_w has {log_w.shape}")
    w = np.exp(log_w - logsumexp(log_w)).reshape((-1,) + (1,) * (f.ndim - 1))
    used = np.broadcast_to(w > 0, f.shape)
    if not np.all(np.isfinite(f[used])):
        raise ValueError("values are NaN or infinite at draws with positive weight")
    return w, np.where(used, f, 0.0)


def weighted_mean(values: ArrayLike, log_w: ArrayLike) -> WeightedMean:
    """Self-normalised importance-sampling mean and its delta-method standard error.

    With normalised weights ``W_i = w_i / sum_j w_j`` the estimate is
    ``mu = sum_i W_i f_i`` and, by the delta method for the ratio
    ``sum w f / sum w`` with independent draws,
    ``Var(mu) ~= sum_i W_i^2 (f_i - mu)^2``.

    Parameters
    ----------
    values : array_like, shape (n,) or (n, ...)
        Function values ``f(x_i)``; weights run along axis 0.
    log_w : array_like, shape (n,)
        Unnormalised log-weights.

    Returns
    -------
    WeightedMean
        ``mean`` and ``std_error`` with shape ``values.shape[1:]``.

    Raises
    ------
    ValueError
        On shape mismatch, non-finite values with positive weight, or invalid
        log-weights.
    """
    lw = _check_log_weights(log_w)
    if lw.ndim != 1:
        raise ValueError("log_w must be one-dimensional (one weight per draw)")
    w, f = weights_and_values(values, lw)
    mu = np.sum(w * f, axis=0)
    var = np.sum(w**2 * (f - mu) ** 2, axis=0)
    return WeightedMean(np.asarray(mu), np.sqrt(np.asarray(var)))


def pareto_smooth(log_w: ArrayLike) -> tuple[NDArray[np.float64], float]:
    """Pareto-smoothed log-weights and the ``k_hat`` of their upper tail (PSIS, Vehtari et
    al. 2024, :func:`~pemc_stan.estimators.psis.psis`, the weights' scale kept): below 0.7 smoothed
    estimates and their delta-method errors (:func:`weighted_mean`) are reliable; for
    weights all finite and equal (no tail) the weights as given and ``k_hat = -inf``.

    Raises
    ------
    ValueError
        On a log-weight that is NaN or ``+inf``, or none finite.
    """
    lw = _check_log_weights(log_w)
    if np.all(np.isfinite(lw)) and float(np.ptp(lw)) == 0.0:
        return lw.copy(), float("-inf")
    smoothed, k_hat = psis(lw)
    return smoothed, float(k_hat)


def resample_indices(
    log_w: ArrayLike,
    rng: np.random.Generator,
    method: Literal["systematic", "multinomial"] = "systematic",
    axis: int = -1,
    n_samples: int | None = None,
) -> NDArray[np.intp]:
    """Draw indices with probability proportional to the weights.

    * 1-D ``log_w`` (length ``N``): returns ``n_samples`` (default ``N``)
      indices into the vector.  ``"systematic"`` uses one uniform ``U`` and
      the points ``(U + i) / n``; ``"multinomial"`` uses ``n`` i.i.d. uniforms.
    * N-D ``log_w`` (e.g. draws x N pseudo-samples): returns ONE index per
      row along ``axis`` (shape = ``log_w`` without ``axis``), so each MCMC
      iteration keeps exactly one pseudo-sample and chains stay chains.  With
      one draw per row systematic and multinomial resampling coincide (a
      single inverse-CDF draw per row).

    Indices of zero-weight entries are never returned.

    Parameters
    ----------
    log_w : array_like
        Unnormalised log-weights.
    rng : numpy.random.Generator
        Source of randomness.
    method : {"systematic", "multinomial"}
        Resampling scheme (only matters for 1-D input).
    axis : int, default -1
        Weight axis for N-D input.
    n_samples : int, optional
        Number of indices for 1-D input; not allowed for N-D input.

    Returns
    -------
    ndarray of intp

    Raises
    ------
    ValueError
        On invalid log-weights, an unknown ``method`` or a bad ``n_samples``.
    """
    if method not in ("systematic", "multinomial"):
        raise ValueError(f"unknown resampling method {method!r}")
    arr = _check_log_weights(log_w, axis)
    if arr.ndim == 1:
        n = arr.shape[0] if n_samples is None else int(n_samples)
        if n < 1:
            raise ValueError("n_samples must be a positive integer")
        cdf = _normalised_cdf(arr)
        if method == "systematic":
            u = (1.0 - rng.uniform() + np.arange(n)) / n  # in (0, 1]
        else:
            u = 1.0 - rng.uniform(size=n)
        return np.searchsorted(cdf, u, side="left").astype(np.intp)
    if n_samples is not None:
        raise ValueError("n_samples is only supported for one-dimensional log-weights")
    moved = np.moveaxis(arr, axis, -1)
    cdf = _normalised_cdf(moved)
    u = 1.0 - rng.uniform(size=moved.shape[:-1] + (1,))  # in (0, 1]
    return np.sum(cdf < u, axis=-1).astype(np.intp)


def _normalised_cdf(arr: NDArray[np.float64]) -> NDArray[np.float64]:
    """Cumulative normalised weights along the last axis, ending exactly at 1."""
    w = np.exp(arr - np.max(arr, axis=-1, keepdims=True))
    cdf = np.cumsum(w, axis=-1)
    return cdf / cdf[..., -1:]


def max_weight_share(log_w: ArrayLike, threshold: float = 0.99, axis: int = -1) -> float:
    """Share of weight sets in which one weight carries at least ``threshold`` of the mass.

    A high share means the importance weights are degenerate (e.g. only one
    pseudo-sample per iteration matters).

    Parameters
    ----------
    log_w : array_like
        Unnormalised log-weights; for 1-D input the result is 0.0 or 1.0.
    threshold : float, default 0.99
        Normalised-weight level in (0, 1] counted as "almost all mass".
    axis : int, default -1
        Weight axis.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        On invalid log-weights or a threshold outside (0, 1].
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError("threshold must lie in (0, 1]")
    lwn = log_normalise(log_w, axis=axis)
    top = np.exp(np.max(lwn, axis=axis))
    return float(np.mean(top >= threshold))


def chain_ess(x: ArrayLike) -> float:
    """Autocorrelation-aware ESS of the mean of a chain-shaped array.

    :func:`~pemc_stan.estimators.convergence.ess_mean` (split chains, Geyer initial monotone
    sequence, multi-chain variance ``var_plus`` so that disagreement between
    chains lowers the ESS).  A constant array returns its size.

    Parameters
    ----------
    x : array_like, shape (n_chains, n_draws) or (n_draws,)
        One scalar quantity per draw.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``x`` has more than two dimensions, fewer than 4 draws per chain, or
        non-finite entries.
    """
    arr = np.asarray(x, dtype=float)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError("chain_ess expects shape (n_chains, n_draws)")
    if arr.shape[1] < 4:
        raise ValueError("chain_ess needs at least 4 draws per chain")
    if not np.all(np.isfinite(arr)):
        raise ValueError("chain_ess got non-finite values")
    if np.ptp(arr) <= np.finfo(float).resolution * max(1.0, float(np.max(np.abs(arr)))):
        return float(arr.size)
    value = ess_mean(arr)
    if not np.isfinite(value):
        raise ValueError("the ESS of the mean is not finite")
    return value
