"""Importance-weight utilities: normalisation, ESS, weighted means, resampling.

Everything works on *log*-weights and uses log-sum-exp, in the style of
blackjax's ``smc/ess.py``.  A log-weight of ``-inf`` is a legitimate zero
weight; ``NaN`` and ``+inf`` are always errors, as is a row whose weights are
all zero (nothing to normalise).

These functions serve the pseudo-extended (PE) post-processing and the
continuously tempered (CT) estimators in :mod:`pemc_stan.methods.continuous_tempering.tempering`.  For PE
(eq 2, Theorem 2.1 / eq 3 of the PE paper) the log-weight of pseudo-sample
``i`` at iteration ``t`` is ``log gamma(x_i) - log q(x_i)`` (for the tempered
instrumental of eqs 7-8: ``log gamma(x_i) + log pi(beta_i) - log gamma_beta_i(x_i)
- log g(beta_i)``), self-normalised within the iteration; a draws x N matrix of
these goes to :func:`resample_indices` to keep one pseudo-sample per iteration.

:func:`mixture_weights` and :func:`mixture_mean` give a second consistent PE
estimator that pools every pseudo-sample of every draw; see
:func:`mixture_mean` for its derivation.
"""

from __future__ import annotations

import logging
import warnings
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq
from scipy.special import expit, logsumexp

logger = logging.getLogger(__name__)

__all__ = [
    "MixtureEstimate",
    "WeightedMean",
    "chain_ess",
    "ess",
    "log_normalise",
    "max_weight_share",
    "mixture_log_ratio",
    "mixture_mean",
    "mixture_weights",
    "resample_indices",
    "weighted_mean",
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
    f = np.asarray(values, dtype=float)
    if f.shape[:1] != lw.shape:
        raise ValueError(f"values has {f.shape[:1]} leading entries, log_w has {lw.shape}")
    w = np.exp(lw - logsumexp(lw)).reshape((-1,) + (1,) * (f.ndim - 1))
    used = np.broadcast_to(w > 0, f.shape)
    if not np.all(np.isfinite(f[used])):
        raise ValueError("values are NaN or infinite at draws with positive weight")
    f = np.where(used, f, 0.0)
    mu = np.sum(w * f, axis=0)
    var = np.sum(w**2 * (f - mu) ** 2, axis=0)
    return WeightedMean(np.asarray(mu), np.sqrt(np.asarray(var)))


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

    Uses ArviZ's ``ess(method="mean")`` (split chains, Geyer initial monotone
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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
    out = az.ess(arr, method="mean")
    if hasattr(out, "to_array"):  # xarray Dataset (older ArviZ)
        out = out.to_array()
    value = float(np.asarray(out).squeeze())
    if not np.isfinite(value):
        raise ValueError("ArviZ returned a non-finite ESS")
    return value


class MixtureEstimate(NamedTuple):
    """The pooled mixture estimate of :func:`mixture_mean`.

    ``influence`` has one value per draw (the shape of ``log_w`` without its
    last axis); the estimate's error is, to first order, the mean of
    ``influence``, so its Monte-Carlo SE is ``sd(influence) / sqrt(ESS)``
    with the autocorrelation-aware ESS of the per-draw series.
    """

    mean: float
    influence: NDArray[np.float64]


def _solve_log_ratio(z: NDArray[np.float64], n: int) -> float:
    """The ``s`` with ``mean(logistic(z - s)) = 1 / n`` (decreasing in ``s``; unique root)."""
    finite = z[np.isfinite(z)]
    if finite.size * n <= z.size:
        raise ValueError(
            f"only {finite.size} of {z.size} log-weights are finite: at least a share 1/{n} of "
            "the pseudo-samples must have positive weight for the mixture estimator")

    def excess(s: float) -> float:
        return float(np.mean(expit(z - s))) - 1.0 / n

    lo, hi = float(finite.min()) - 50.0, float(finite.max()) + 50.0
    return float(brentq(excess, lo, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps, maxiter=500))


def mixture_log_ratio(log_w: ArrayLike, pooled: bool = True) -> NDArray[np.float64]:
    """Estimate ``log r = log (Z / Z_q)`` from pseudo-extended log-weights.

    Each pseudo-sample of a PE draw has the marginal density
    ``m = a / N + (1 - 1/N) q`` (see :func:`mixture_mean`), and the
    probability that it is the target component is
    ``rho = w / (w + (N - 1) r)`` with ``w`` its unnormalised weight.
    Because ``E_m[rho] = 1 / N`` exactly, ``r`` solves
    ``mean(rho) = 1 / N`` over all draws (``pooled``: one ``r`` for all
    pseudo-samples, as when the temperatures are sampled and the pseudo-samples
    are exchangeable) or over the draws of each pseudo-sample separately
    (``pooled=False``: one ``r_j = Z / Z_q(beta_j)`` per pseudo-sample, as for
    a fixed ladder).

    Parameters
    ----------
    log_w : array_like, shape (..., N)
        Unnormalised log-weights, pseudo-samples along the last axis and every
        draw (of every chain) along the others.
    pooled : bool, default True
        One ratio for all pseudo-samples, or one per pseudo-sample.

    Returns
    -------
    ndarray
        ``log r``: shape ``()`` if pooled, else ``(N,)``.  With ``N = 1`` the
        ratio plays no role and ``0`` is returned.

    Raises
    ------
    ValueError
        On invalid log-weights, or when too few weights are positive for the
        equation to have a root.
    """
    arr = _check_log_weights(log_w)
    n = arr.shape[-1]
    if n == 1:
        return np.zeros(()) if pooled else np.zeros(1)
    z = arr.reshape(-1, n) - np.log(n - 1.0)
    if pooled:
        return np.asarray(_solve_log_ratio(z.reshape(-1), n))
    return np.array([_solve_log_ratio(z[:, j], n) for j in range(n)])


def mixture_weights(log_w: ArrayLike, pooled: bool = True) -> NDArray[np.float64]:
    """Per-pseudo-sample target-component probabilities ``rho`` (see :func:`mixture_mean`).

    Parameters
    ----------
    log_w : array_like, shape (..., N)
        Unnormalised log-weights.
    pooled : bool, default True
        Passed to :func:`mixture_log_ratio`.

    Returns
    -------
    ndarray, same shape as ``log_w``
        ``rho = logistic(log w - log(N - 1) - log r)``, in [0, 1]; their mean
        over all entries is ``1 / N`` (over each pseudo-sample's draws if not
        pooled).  All ones when ``N = 1``.

    Raises
    ------
    ValueError
        As :func:`mixture_log_ratio`.
    """
    arr = _check_log_weights(log_w)
    n = arr.shape[-1]
    if n == 1:
        return np.ones_like(arr)
    return expit(arr - np.log(n - 1.0) - mixture_log_ratio(arr, pooled))


def mixture_mean(values: ArrayLike, log_w: ArrayLike, pooled: bool = True) -> MixtureEstimate:
    """Pooled ("mixture") estimate of ``E_pi[f]`` from all pseudo-samples of all draws.

    The PE extended target (eq 8) is, with the target ``a(x, beta) = pi(x) pi(beta)``
    and the normalised instrumental ``q(x, beta) = gamma(x)^beta g(beta) / Z_q``,
    ``p(x_{1:N}, beta_{1:N}) = (1/N) sum_i a(x_i, beta_i) prod_{j != i} q(x_j, beta_j)``.
    Every pseudo-sample is therefore marginally distributed as the two-component
    mixture ``m = a / N + (1 - 1/N) q``, and
    ``rho = (a / N) / m = w / (w + (N - 1) r)`` (``w`` the unnormalised weight
    of Theorem 2.1, ``r = Z / Z_q``) is the probability that it is the target
    component.  Since ``E_m[rho f] = E_pi[f] / N``, summing over the ``N``
    pseudo-samples of a draw gives ``E_p[sum_j rho_j f(x_j)] = E_pi[f]``.
    With ``r`` estimated by :func:`mixture_log_ratio` (which makes the
    ``rho`` of the draws sum to the number of draws) the estimate is
    ``sum_tj rho_tj f_tj / sum_tj rho_tj``.

    Compared with Theorem 2.1's ``sum_i W_ti f(x_ti)``, each pseudo-sample's
    weight is divided by ``w + (N - 1) r`` -- the expectation of the other
    pseudo-samples' weights in place of their values in the same draw -- so
    draws with several pseudo-samples in the target's high-density region count
    more, and draws with none count less.  It is consistent, not unbiased for a
    finite number of draws (a ratio with an estimated ``r``); its first-order
    error is the mean of ``influence``, which accounts for the error of ``r``
    (estimating-equation sandwich).

    Parameters
    ----------
    values : array_like, shape (..., N)
        ``f(x)`` of every pseudo-sample, same shape as ``log_w``.
    log_w : array_like, shape (..., N)
        Unnormalised log-weights.
    pooled : bool, default True
        One ratio ``r`` for all pseudo-samples (sampled temperatures) or one per
        pseudo-sample (a fixed ladder).

    Returns
    -------
    MixtureEstimate
        ``mean`` and the per-draw ``influence`` (shape ``log_w.shape[:-1]``).

    Raises
    ------
    ValueError
        On a shape mismatch, non-finite values where the weight is positive, or
        as :func:`mixture_log_ratio`.
    """
    arr = _check_log_weights(log_w)
    f = np.asarray(values, dtype=float)
    if f.shape != arr.shape:
        raise ValueError(f"values have shape {f.shape}, log_w has {arr.shape}")
    rho = mixture_weights(arr, pooled)
    used = rho > 0
    if not np.all(np.isfinite(f[used])):
        raise ValueError("values are NaN or infinite where the weight is positive")
    f = np.where(used, f, 0.0)
    n = arr.shape[-1]
    a = np.sum(rho * f, axis=-1)  # per-draw numerator A_t
    b = np.sum(rho, axis=-1)  # per-draw denominator B_t (mean 1)
    theta = float(np.sum(a) / np.sum(b))
    u = a - theta * b
    if n > 1:
        # d rho / d log r = -rho (1 - rho); linearise the equations for log r too.
        d = rho * (1.0 - rho)
        lead = tuple(range(d.ndim - 1))
        da = -np.mean(d * f, axis=lead)  # (N,): d mean(A) / d log r_j
        db = -np.mean(d, axis=lead)
        if pooled:
            k = (np.sum(da) - theta * np.sum(db)) / np.sum(db)
            u = u - k * (b - 1.0)
        else:
            k_j = (da - theta * db) / (n * db)
            u = u - np.sum(k_j * (n * rho - 1.0), axis=-1)
    return MixtureEstimate(theta, u)
