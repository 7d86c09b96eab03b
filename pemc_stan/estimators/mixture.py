"""Estimates of a mixture from its components: ``p = sum_k (Z_k / Z) p_k``.

When a target is split into parts sampled apart (the modes of
:mod:`pemc_stan.methods.mode_split`), each part ``k`` gives its mass ``log Z_k``
with a standard error and its own estimate ``m_k`` of ``E_k[f]`` with a
Monte-Carlo standard error.  The mixture's ``log Z = logsumexp(log Z_k)`` and
``E[f] = sum_k p_k m_k`` (``p_k = Z_k / Z``), with standard errors by the delta
method, the parts independent:

- ``d log Z / d log Z_k = p_k``;
- ``d E[f] / d m_k = p_k`` and ``d E[f] / d log Z_k = p_k (m_k - E[f])``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp

__all__ = ["mixture_log_z", "mixture_mean", "mixture_weights"]


def mixture_weights(log_z: ArrayLike) -> NDArray[np.float64]:
    """``p_k = Z_k / sum Z`` from the parts' ``log Z_k``.

    Raises
    ------
    ValueError
        If ``log_z`` is empty.
    """
    lz = np.asarray(log_z, dtype=float)
    if lz.size == 0:
        raise ValueError("a mixture needs at least one part")
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
    p = mixture_weights(lz)
    est = float(np.sum(p * m))
    var = float(np.sum((p * s) ** 2) + np.sum((p * (m - est) * lz_se) ** 2))
    return est, float(np.sqrt(var))
