"""How heavy the tail of an estimate's terms is: whether its error bar can be trusted.

A weighted mean ``sum_i w_i f_i`` has a normal-theory standard error only when its terms
``w_i (f_i - mean)`` have a finite variance.  The generalized Pareto shape ``k`` of their
upper tail says whether they do (Vehtari et al. 2024, the PSIS paper, section 3; the
``posterior`` package's ``pareto_khat``): the variance is infinite from ``k = 1/2``, and a
sample of ``S`` terms gives usable estimates only up to
``min(1 - 1/log10 S, 0.7)`` (:func:`khat_bound`; 0.5 at ``S = 100``, 0.667 at 1,000).
A Student-t of ``nu`` degrees of freedom has ``k = 1/nu`` for ``|x|`` and ``2/nu`` for
``x^2``: its variance's error bar is unreliable for ``nu`` below about 3.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from pemc_stan.estimators.psis import psis

__all__ = ["TAIL_TERMS_MIN", "khat_bound", "tail_fields", "tail_khat"]

#: Fewer distinct non-zero terms than this have no tail to fit (NaN): the fit takes the
#: largest ``min(S / 5, 3 sqrt(S))``, and ArviZ gives ``k = inf`` for 4 or fewer.
TAIL_TERMS_MIN = 50


def khat_bound(n: float) -> float:
    """The largest ``k`` at which ``n`` terms still give a reliable estimate:
    ``min(1 - 1/log10 n, 0.7)`` (``-inf`` below 10 terms).

    Raises
    ------
    Nothing.
    """
    if not n > 10:
        return float("-inf")
    return min(1.0 - 1.0 / math.log10(n), 0.7)


def tail_khat(terms: ArrayLike) -> float:
    """The generalized Pareto shape ``k`` of the upper tail of ``|terms|`` (a sample's
    deviations from its estimate, times their weights where weighted), fitted to the
    largest ``min(S / 5, 3 sqrt(S))`` of them as PSIS fits weights
    (:func:`~pemc_stan.estimators.psis.psis` of their logarithms).  NaN for fewer than
    :data:`TAIL_TERMS_MIN` distinct non-zero finite terms (an indicator's 0s and 1s have
    no tail to fit); ``inf`` for a non-finite term.

    Raises
    ------
    Nothing.
    """
    a = np.abs(np.asarray(terms, dtype=float).reshape(-1))
    if np.any(np.isinf(a)):
        return float("inf")
    a = a[np.isfinite(a) & (a > 0)]
    if a.size < TAIL_TERMS_MIN or np.unique(a).size < TAIL_TERMS_MIN:
        return float("nan")
    _, k = psis(np.log(a))
    return float(k) if np.isfinite(k) else float("nan")  # inf: a tail of ties, not a fit


def tail_fields(terms: ArrayLike) -> dict[str, float]:
    """``{"khat", "khat_max"}`` of an estimate's terms: :func:`tail_khat` and the
    :func:`khat_bound` of their number.

    Raises
    ------
    Nothing.
    """
    t = np.asarray(terms, dtype=float)
    n = int(np.count_nonzero(np.isfinite(t) & (t != 0)))  # a draw of no weight is no term
    return {"khat": tail_khat(t), "khat_max": khat_bound(n)}
