"""Pseudo-extended estimators: the pooled mixture estimator of PE draws.

Pure NumPy functions of the pseudo-samples' log weights (see
:func:`mixture_mean`); the per-draw Theorem-2.1 estimator is the shared
within-draw self-normalised mean of :class:`~pemc_stan.sampling.fit.ExtendedFit`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq
from scipy.special import expit

from pemc_stan.estimators.weights import _check_log_weights, chain_ess, ess, log_normalise

__all__ = ["COPY_DRAWS_MIN", "CopiesSpread", "MixtureEstimate", "copies_spread",
           "mixture_log_ratio", "mixture_weights", "mixture_mean"]


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


#: The Kish effective number of a pseudo-sample's weights over its draws below which its
#: own mean is not judged: its delta-method error needs many weighted draws (a copy whose
#: weight sits in one draw gets that draw's value with an error near 0), and such a copy
#: carries little of the estimate.
COPY_DRAWS_MIN = 100.0


class CopiesSpread(NamedTuple):
    """:func:`copies_spread`'s chi-square per degree of freedom and the copies judged."""

    spread: float
    copies: int


def copies_spread(values: ArrayLike, log_w: ArrayLike) -> CopiesSpread:
    """How far the pseudo-samples' own weighted means of ``f`` fall apart, in their errors.

    The extended target is symmetric in the pseudo-samples (sampled temperatures), so
    each one, weighted by its within-draw share ``W_tk``, estimates ``E_pi[f]``:
    ``m_k = sum_t W_tk f_tk / sum_t W_tk``, with the delta-method error
    ``sd(r) / sqrt(ESS(r))`` of ``r_t = W_tk (f_tk - m_k) / mean_t(W_tk)`` (copies with fewer
    than :data:`COPY_DRAWS_MIN` effective weighted draws are left out).  Returned: the
    chi-square per degree of freedom of the ``m_k`` of every chain's every
    pseudo-sample about their inverse-variance mean, about 1 where the copies move
    between modes, large where each stays in the mode it started in (the within-draw
    estimate then weighs modes by how many copies sit in each).

    Parameters
    ----------
    values, log_w : array_like, shape (chains, draws, N)
        ``f`` and the unnormalised log weight of every pseudo-sample.

    Returns
    -------
    CopiesSpread
        ``spread`` NaN with fewer than two copies judged (an error finite and positive).

    Raises
    ------
    ValueError
        On a shape mismatch, or as :func:`~pemc_stan.estimators.weights.chain_ess`.
    """
    arr = _check_log_weights(log_w)
    f = np.asarray(values, dtype=float)
    if f.shape != arr.shape or arr.ndim != 3:
        raise ValueError(f"values {f.shape} and log_w {arr.shape} must share one shape "
                         "(chains, draws, N)")
    own = np.moveaxis(log_normalise(arr, axis=-1), -1, 1).reshape(-1, arr.shape[1])
    means, errors = [], []
    for lk, fk in zip(own, np.moveaxis(f, -1, 1).reshape(-1, f.shape[1]), strict=True):
        top = float(np.max(lk))
        if not np.isfinite(top):
            continue
        if ess(lk) < COPY_DRAWS_MIN:
            continue
        u = np.exp(lk - top)  # the copy's weights over its draws, the largest 1: no underflow
        fk = np.where(u > 0, fk, 0.0)
        if not np.all(np.isfinite(fk)):
            continue
        m = float(np.sum(u * fk) / np.sum(u))
        r = u / np.mean(u) * (fk - m)  # m - E[f] is about mean(r)
        if not np.ptp(r) > 0:
            continue
        error = float(np.sqrt(np.var(r, ddof=1) / max(chain_ess(r), 1.0)))
        if np.isfinite(error) and error > 0:
            means.append(m)
            errors.append(error)
    if len(means) < 2:
        return CopiesSpread(float("nan"), len(means))
    m_k, inv = np.asarray(means), 1.0 / np.asarray(errors) ** 2
    pooled = float(np.sum(inv * m_k) / np.sum(inv))
    return CopiesSpread(float(np.sum(inv * (m_k - pooled) ** 2) / (m_k.size - 1)), m_k.size)
