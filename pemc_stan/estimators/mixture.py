"""Estimates of a mixture from its components: ``p = sum_k (Z_k / Z) p_k``.

When a target is split into parts sampled apart (the modes of
:mod:`pemc_stan.modes.split`), each part ``k`` gives its mass ``log Z_k``
with a standard error and its own estimate ``m_k`` of ``E_k[f]`` with a
Monte-Carlo standard error.  The mixture's ``log Z = logsumexp(log Z_k)`` and
``E[f] = sum_k p_k m_k`` (``p_k = Z_k / Z``), with standard errors by the delta
method, the parts independent:

- ``d log Z / d log Z_k = p_k``;
- ``d E[f] / d m_k = p_k`` and ``d E[f] / d log Z_k = p_k (m_k - E[f])``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pemc_stan.numeric import logsumexp

__all__ = ["importance_error", "importance_in_range", "mixture_log_z", "mixture_mean",
           "mixture_weights", "region_shares", "unexplained_mass"]


def mixture_weights(log_z: ArrayLike) -> NDArray[np.float64]:
    """``p_k = Z_k / sum Z`` from the parts' ``log Z_k`` (one part weighs 1, whatever
    its mass: a mass that could not be estimated weighs nothing against nothing).

    Raises
    ------
    ValueError
        If ``log_z`` is empty.
    """
    lz = np.asarray(log_z, dtype=float)
    if lz.size == 0:
        raise ValueError("a mixture needs at least one part")
    if lz.size == 1:
        return np.ones(1)
    return np.asarray(np.exp(lz - logsumexp(lz)), dtype=float)


def mixture_log_z(log_z: ArrayLike, std_error: ArrayLike) -> tuple[float, float]:
    """``log Z = log sum_k Z_k`` and its standard error ``sqrt(sum_k p_k^2 se_k^2)``.

    Raises
    ------
    ValueError
        If ``log_z`` is empty or the arrays differ in length.
    """
    lz, se = np.asarray(log_z, dtype=float), np.asarray(std_error, dtype=float)
    if lz.shape != se.shape:
        raise ValueError(f"{lz.size} log Z values but {se.size} standard errors")
    p = mixture_weights(lz)
    return float(logsumexp(lz)), float(np.sqrt(np.sum((p * se) ** 2)))


def mixture_mean(log_z: ArrayLike, log_z_se: ArrayLike, means: ArrayLike,
                 mcse: ArrayLike) -> tuple[float, float]:
    """``E[f] = sum_k p_k m_k`` and its delta-method standard error.

    ``se^2 = sum_k p_k^2 mcse_k^2 + sum_k p_k^2 (m_k - E[f])^2 se(log Z_k)^2``.

    Raises
    ------
    ValueError
        If the arrays differ in length or are empty.
    """
    arrays = [np.asarray(a, dtype=float) for a in (log_z, log_z_se, means, mcse)]
    if len({a.shape for a in arrays}) != 1:
        raise ValueError("log_z, log_z_se, means and mcse must have one entry per part")
    lz, lz_se, m, s = arrays
    if lz.size == 1:  # one part: its mass's error moves nothing
        return float(m[0]), float(s[0])
    p = mixture_weights(lz)
    est = float(np.sum(p * m))
    var = float(np.sum((p * s) ** 2) + np.sum((p * (m - est) * lz_se) ** 2))
    return est, float(np.sqrt(var))


def importance_error(log_weights: ArrayLike, log_z: float) -> tuple[float, float]:
    """``(Z_IS / Z, its standard error)`` of importance weights against a given ``log Z``.

    ``Z_IS`` is the mean of ``exp(log_weights)`` (``-inf`` or NaN: no mass) and its
    standard error ``sd(w / Z) / sqrt(n)`` the sampler's own (it falls as ``1 / sqrt(n)``).

    Raises
    ------
    ValueError
        If there are fewer than two weights or ``log_z`` is not finite.
    """
    lw = np.asarray(log_weights, dtype=float).reshape(-1)
    if lw.size < 2 or not np.isfinite(log_z):
        raise ValueError(f"{lw.size} importance weights and log Z {log_z}: need two or more "
                         "weights and a finite log Z")
    r = np.where(np.isnan(lw), -np.inf, lw) - log_z
    n = r.size
    log_m1 = float(logsumexp(r)) - np.log(n)
    log_m2 = float(logsumexp(2.0 * r)) - np.log(n)
    m1 = float(np.exp(min(log_m1, 700.0)))
    var = max(float(np.exp(min(log_m2, 700.0))) - m1 * m1, 0.0) * n / (n - 1)
    return m1, float(np.sqrt(var / n))


def importance_in_range(log_weights: ArrayLike, log_z: float) -> bool:
    """Whether :func:`importance_error`'s moments of ``w / Z`` are within floating point:
    it clips them at ``exp(700)``, and beyond that its error is too small and a
    comparison made with it is no comparison.

    Raises
    ------
    Nothing.
    """
    lw = np.asarray(log_weights, dtype=float).reshape(-1)
    r = lw[np.isfinite(lw)] - log_z
    if np.any(np.isposinf(lw)) or not np.isfinite(log_z):
        return False
    return r.size == 0 or float(logsumexp(2.0 * r)) - math.log(lw.size) < 700.0


def region_shares(log_weights: ArrayLike, labels: ArrayLike, n_regions: int
                  ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Each region's share of the mass importance draws see, and its standard error.

    ``share_k = sum_{i in k} w_i / sum_i w_i`` (self-normalised: no ``log Z`` needed),
    with the delta method's ``se_k^2 = sum_i w_i^2 (1[i in k] - share_k)^2 / (sum_i
    w_i)^2``; ``labels`` gives each draw's region (``0 .. n_regions - 1``).  Without a
    finite weight, every share and error is NaN.

    Raises
    ------
    ValueError
        If the labels do not match the weights or lie outside the regions.
    """
    lw = np.asarray(log_weights, dtype=float).reshape(-1)
    lab = np.asarray(labels, dtype=np.intp).reshape(-1)
    if lab.shape != lw.shape or (lab.size and (lab.min() < 0 or lab.max() >= n_regions)):
        raise ValueError(f"{lab.size} labels in 0..{n_regions - 1} for {lw.size} weights: "
                         "need one label a weight, each a region")
    lw = np.where(np.isnan(lw), -np.inf, lw)
    if not np.any(np.isfinite(lw)):
        return np.full(n_regions, np.nan), np.full(n_regions, np.nan)
    w = np.exp(lw - np.max(lw))
    total = float(np.sum(w))
    shares = np.bincount(lab, weights=w, minlength=n_regions) / total
    inside = lab[:, None] == np.arange(n_regions)[None, :]
    ses = np.sqrt(np.sum((w[:, None] * (inside - shares[None, :])) ** 2, axis=0)) / total
    return shares, ses


def unexplained_mass(log_weights: ArrayLike, log_z: float, std_error: float
                     ) -> tuple[float, float]:
    """The mass an importance sampler sees beyond a mixture's ``Z``: ``(excess, z)``.

    ``log_weights`` are ``log gamma - log q`` of draws from a proposal ``q`` wider than
    the parts (``-inf`` or NaN: no mass), whose mean estimates the whole ``Z_IS``;
    ``excess = Z_IS / Z - 1``, and ``z`` is it in standard errors: the sampler's own
    (:func:`importance_error`) and the mixture's (``std_error`` of ``log Z``) combined.
    Missing parts make ``z`` large; one heavy weight alone gives ``z`` near 1.

    Raises
    ------
    ValueError
        If there are fewer than two weights or ``log_z`` is not finite.
    """
    ratio, own = importance_error(log_weights, log_z)
    se = float(np.hypot(own, std_error))
    excess = ratio - 1.0
    return excess, (excess / se if se > 0 else float(np.inf) * np.sign(excess))
