"""The tempering both methods share: the truncated exponential on the inverse temperature
and the bias ``g(beta)`` that spreads the chains' time along the thermodynamic length.

Given ``x``, both CT (Graham & Storkey 2017, eq 17) and PE's tempered copies put on
``beta`` in [0, 1] a density ``exp(-beta Delta(x) - g(beta))`` with ``Delta(x) =
log zeta + log b(x) - log gamma(x)``: its end weights ``w_0 = p(beta=0|x)`` and ``w_1 =
p(beta=1|x)`` (eq 20) are what both methods' estimators weigh draws by.  The helpers
here compute them stably (:func:`log_w0`, :func:`log_w1`, :meth:`BetaBias.log_w_pair`),
and :func:`length_bias` shapes the next round's ``g``.  CT's own estimators (eq 20's
log Z, post-stratification, eqs 21-22) stay in
:mod:`pemc_stan.methods.continuous_tempering.tempering`.
"""

from __future__ import annotations

import logging

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import bernoulli, factorial

from pemc_stan.numeric import logsumexp

logger = logging.getLogger(__name__)

__all__ = [
    "BetaBias",
    "FLAT",
    "UNIFORM_SHARE",
    "delta",
    "length_bias",
    "log_conditional_beta",
    "log_w0",
    "log_w1",
]

# Taylor coefficients of log(sinh(y)/y) = sum_{n>=1} c_n y^(2n), with
# c_n = 2^(2n) B_(2n) / (2n (2n)!)  (integrate coth(y) - 1/y term by term).
_N_SERIES = 14
_SERIES_COEF = np.array(
    [
        2.0 ** (2 * n) * bernoulli(2 * n)[2 * n] / (2 * n * factorial(2 * n, exact=False))
        for n in range(1, _N_SERIES + 1)
    ]
)
_SERIES_CUTOFF = 0.5  # |y| = |Delta|/2 below which the series is used
_MEMO_SIZE = 8


class BetaBias:
    """A piecewise-linear bias ``g(beta)`` on the inverse temperature (shaping its marginal).

    The CT program adds ``-g(beta)`` to the joint of eq 16, ``log p(x, beta) =
    log b(x) - beta Delta(x) - g(beta) + const``, which changes only how the
    chains divide their time between temperatures: the slices ``beta = 0`` and
    ``beta = 1`` are still the base and the target, and with

        ``p(beta | x) = exp(-beta Delta(x) - g(beta)) / N(x)``,
        ``N(x) = int_0^1 exp(-beta Delta(x) - g(beta)) d beta``

    the weights are ``w_0 = p(0 | x)``, ``w_1 = p(1 | x)`` and eq 20 becomes
    ``Z = zeta e^{g(1) - g(0)} E[w_1] / E[w_0]``.  ``g`` is linear between
    ``knots`` (0 = k_0 < ... < k_J = 1), so ``N(x)`` is a sum of exact
    integrals of exponentials, one per segment.  ``g = 0`` is the paper's CT.

    Parameters
    ----------
    knots
        Increasing, from 0 to 1.
    values
        ``g`` at the knots (finite).

    Raises
    ------
    ValueError
        On knots that are not increasing from 0 to 1, or non-finite values.
    """

    def __init__(self, knots: ArrayLike = (0.0, 1.0), values: ArrayLike = (0.0, 0.0)) -> None:
        k = np.asarray(knots, dtype=float).ravel()
        v = np.asarray(values, dtype=float).ravel()
        if k.size < 2 or k.shape != v.shape or k[0] != 0.0 or k[-1] != 1.0 or np.any(
                np.diff(k) <= 0):
            raise ValueError("beta bias knots must increase from 0 to 1, one value per knot")
        if not np.all(np.isfinite(v)):
            raise ValueError("beta bias values must be finite")
        self.knots, self.values = k, v - v[0]
        #: The last few ``Delta`` arrays' weights: a fit's checks and estimates ask for
        #: those of the same draws hundreds of times (4 ms each on 16,000 draws).
        self._memo: dict[tuple[tuple[int, ...], int],
                         tuple[NDArray[np.float64],
                               tuple[NDArray[np.float64], NDArray[np.float64]]]] = {}

    @property
    def is_flat(self) -> bool:
        """True when ``g`` is constant (the paper's CT)."""
        return bool(np.all(self.values == 0.0))

    @property
    def offset(self) -> float:
        """``g(1) - g(0)``, the factor of eq 20."""
        return float(self.values[-1] - self.values[0])

    def __call__(self, beta: ArrayLike) -> NDArray[np.float64]:
        """``g(beta)``."""
        return np.interp(np.asarray(beta, dtype=float), self.knots, self.values)

    def stan_data(self) -> dict[str, object]:
        """The CT program's entries ``pemc_n_knots``, ``pemc_knots``, ``pemc_bias``."""
        return {"pemc_n_knots": int(self.knots.size), "pemc_knots": self.knots.tolist(),
                "pemc_bias": self.values.tolist()}

    def log_normaliser(self, delta_values: ArrayLike) -> NDArray[np.float64]:
        """``log N(x)`` for each ``Delta(x)`` (finite).

        On segment ``[k_j, k_j + h_j]`` with slope ``s_j`` the integral is
        ``exp(-k_j Delta - g_j) h_j (1 - e^{-y}) / y``, ``y = h_j (Delta + s_j)``,
        whose log is ``-k_j Delta - g_j + log h_j - log w_0(y)``.

        Raises
        ------
        ValueError
            If ``Delta`` is not finite.
        """
        d = np.asarray(delta_values, dtype=float)
        h = np.diff(self.knots)
        slope = np.diff(self.values) / h
        y = h * (d[..., None] + slope)
        terms = -self.knots[:-1] * d[..., None] - self.values[:-1] + np.log(h) - _log_w(y, 0)
        return np.asarray(logsumexp(terms, axis=-1))

    def log_w_pair(self, delta_values: ArrayLike
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(log p(beta=0 | x), log p(beta=1 | x))`` under this bias.

        Raises
        ------
        ValueError
            If ``Delta`` is not finite.
        """
        d = np.asarray(delta_values, dtype=float)
        key = (d.shape, hash(d.tobytes()))
        hit = self._memo.get(key)
        if hit is None or not np.array_equal(hit[0], d):
            if self.is_flat:
                pair = _log_w(d, 0), _log_w(d, 1)
            else:
                log_n = self.log_normaliser(d)
                pair = (-self.values[0] - log_n, -d - self.values[-1] - log_n)
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.pop(next(iter(self._memo)))
            hit = self._memo[key] = (d.copy(), pair)
        return hit[1][0].copy(), hit[1][1].copy()  # callers may write to theirs

    def __getstate__(self) -> dict[str, object]:
        """Pickled without the memo of weights."""
        return {"knots": self.knots, "values": self.values}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._memo = {}

    def log_conditional(self, beta: ArrayLike, delta_values: ArrayLike) -> NDArray[np.float64]:
        """``log p(beta | x)`` (broadcast).

        Raises
        ------
        ValueError
            If ``Delta`` is not finite.
        """
        b = np.asarray(beta, dtype=float)
        d = np.asarray(delta_values, dtype=float)
        return -b * d - self(b) - self.log_normaliser(d)


FLAT = BetaBias()

#: Share of the shaped beta-marginal that stays uniform (see :func:`length_bias`).
UNIFORM_SHARE = 0.5


def length_bias(delta_next: ArrayLike, log_ratio: ArrayLike, n_knots: int = 24,
                uniform_share: float = UNIFORM_SHARE, max_range: float = 30.0,
                min_ess: float = 100.0) -> BetaBias:
    """The bias for the next round: time spread evenly along its bridge's length.

    How far apart two temperatures are, for the sampler, is measured by the
    thermodynamic length ``ds = sd_beta(Delta) d beta`` (the Fisher metric of
    the tempered family ``b^(1 - beta) gamma^beta``: ``d/d beta log`` of the
    tempered density is ``-Delta + const``).  Where ``sd_beta(Delta)`` is large
    the family changes fast, typically just above ``beta = 0``, where a
    barrier of height ``H`` between modes shrinks to ``beta H``: a flat
    beta-marginal leaves the chains little time there.  The next round's
    beta-marginal is made proportional to

        ``pi(beta) = (1 - u) sd_beta(Delta') / L + u``,   ``L = int_0^1 sd_beta(Delta')``

    (``u = uniform_share`` keeps time at every temperature, including the
    target's end) by ``g(beta) = log p'(beta) - log pi(beta)``, where ``p'`` is
    the beta-marginal the next round's bridge would have with no bias.  The
    next round has its own base ``b'`` and ``zeta'`` (the bootstrap re-fits
    both), so ``p'`` and ``sd_beta(Delta')`` are estimated from this round's
    draws ``x_s`` by importance sampling: they come from this round's
    x-marginal ``q(x) ∝ b(x) N(x)`` (:meth:`BetaBias.log_normaliser`), and the
    next bridge's joint is ``b'(x) e^{-beta Delta'(x)}``, so

        ``p'(beta) ∝ sum_s exp(r_s - beta Delta'_s)``,
        ``r_s = log b'(x_s) - log b(x_s) - log N(x_s)``

    and ``E'_beta[Delta'^m]`` is the same sum with ``Delta'^m`` (normalised).
    ``g`` is tabulated on a fine grid and kept at ``n_knots`` knots placed at
    equal steps of ``pi``'s cumulative mass.  Any ``g`` leaves the estimators
    exact; a poor one only costs efficiency, so when the importance weights
    have a Kish ESS below ``min_ess`` at ``beta = 0`` or ``beta = 1`` (the new
    bridge is too far from this one to be judged from its draws) the flat
    joint is returned.

    Parameters
    ----------
    delta_next
        ``Delta'(x_s) = log zeta' + log b'(x_s) - log gamma(x_s)`` of this
        round's draws under the next round's base and ``zeta'`` (any shape).
    log_ratio
        ``r_s`` above, same shape.
    n_knots
        Knots of the new bias (>= 2).
    uniform_share
        ``u`` in [0, 1].
    max_range
        ``g`` is clipped to ``[-max_range, max_range]`` around ``g(0) = 0``.
    min_ess
        Smallest Kish ESS of the importance weights at either end.

    Returns
    -------
    BetaBias

    Raises
    ------
    ValueError
        On non-finite ``Delta'``, shapes that differ, fewer than 2 knots or
        ``uniform_share`` outside [0, 1].
    """
    if n_knots < 2 or not 0.0 <= uniform_share <= 1.0:
        raise ValueError("need n_knots >= 2 and uniform_share in [0, 1]")
    d = np.asarray(delta_next, dtype=float).ravel()
    r = np.asarray(log_ratio, dtype=float).ravel()
    if d.shape != r.shape:
        raise ValueError(f"delta_next has {d.size} values but log_ratio {r.size}")
    _check_delta(d)
    r = np.where(np.isfinite(r), r, -np.inf)
    for end in (0.0, 1.0):
        lw = r - end * d
        if not np.any(np.isfinite(lw)) or float(np.exp(
                2 * logsumexp(lw) - logsumexp(2 * lw))) < min_ess:
            logger.info("beta bias: the next bridge is too far from this round's draws "
                        "(importance ESS < %g at beta = %g); keeping the flat joint", min_ess, end)
            return FLAT
    grid = np.unique(np.concatenate([[0.0], np.logspace(-8.0, -1.0, 120),
                                     np.linspace(0.0, 1.0, 181)]))
    chunks = [slice(i, i + 8192) for i in range(0, d.size, 8192)]

    def log_terms(c: slice) -> NDArray[np.float64]:
        return np.asarray(r[c, None] - grid[None, :] * d[c, None])

    log_marg = logsumexp(np.stack([logsumexp(log_terms(c), axis=0) for c in chunks]), axis=0)
    m1 = np.zeros(grid.size)
    m2 = np.zeros(grid.size)
    for c in chunks:
        w = np.exp(log_terms(c) - log_marg[None, :])
        m1 += w.T @ d[c]
        m2 += w.T @ (d[c] * d[c])
    sd = np.sqrt(np.maximum(m2 - m1 * m1, 0.0))
    dg = np.diff(grid)
    length = float(np.sum(0.5 * (sd[1:] + sd[:-1]) * dg))
    shape = sd / length if length > 0 and np.isfinite(length) else np.ones_like(sd)
    pi = (1.0 - uniform_share) * shape + uniform_share
    g_new = log_marg - np.log(pi)
    g_new = np.clip(g_new - g_new[0], -max_range, max_range)
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (pi[1:] + pi[:-1]) * dg)])
    knots = np.unique(np.concatenate([[0.0, 1.0], np.interp(
        np.linspace(0.0, cdf[-1], n_knots), cdf, grid)]))
    return BetaBias(knots, np.interp(knots, grid, g_new))


def delta(log_gamma: ArrayLike, log_zeta: float, log_base: ArrayLike) -> NDArray[np.float64]:
    """``Delta(x)`` of eq 17: ``Delta = phi(x) + log zeta - psi(x)``.

    With ``phi = -log_gamma`` (unnormalised target) and ``psi = -log_base``
    (normalised base) this is ``Delta = log_zeta + log_base - log_gamma``:
    positive where ``zeta * base`` exceeds the unnormalised target, where the
    conditional (eq 17) pushes ``beta`` towards 0.

    Parameters
    ----------
    log_gamma : array_like
        Unnormalised target log density ``-phi(x)`` at each draw.
    log_zeta : float
        ``log zeta`` used when sampling (eq 14).
    log_base : array_like
        Normalised base log density ``-psi(x)`` at each draw.

    Returns
    -------
    ndarray
        Broadcast ``Delta`` values.

    Raises
    ------
    ValueError
        If any resulting ``Delta`` is NaN or infinite.
    """
    out = float(log_zeta) + np.asarray(log_base, dtype=float) - np.asarray(log_gamma, dtype=float)
    _check_delta(out)
    return out


def _check_delta(d: NDArray[np.float64]) -> None:
    """Raise ValueError unless every ``Delta`` is finite."""
    if np.isnan(d).any():
        raise ValueError("Delta contains NaN")
    if np.isinf(d).any():
        raise ValueError("Delta contains +/-inf (target or base density is zero or infinite)")


def _log_sinhc_series(y: NDArray[np.float64]) -> NDArray[np.float64]:
    """``g(y) = log(sinh(y)/y)`` for ``|y| < 0.5`` by its Taylor series.

    ``g(y) = sum_{n>=1} 2^(2n) B_(2n) y^(2n) / (2n (2n)!)`` (integrate
    ``coth(y) - 1/y`` term by term; radius of convergence pi, so 14 terms
    give full double precision for ``|y| < 0.5``).
    """
    y2 = np.square(y)
    return y2 * np.polyval(_SERIES_COEF[::-1], y2)


def _log_w_pair(d: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(log w_0, log w_1)`` of eq 20 for finite ``Delta``, accurate to a few ulps.

    * ``|Delta| < 1``: with ``g(y) = log(sinh(y)/y)`` (series),
      ``log w_1 = -Delta/2 - g(Delta/2)`` and ``log w_0 = Delta/2 - g(Delta/2)``,
      because ``Delta/(e^Delta - 1) = e^(-Delta/2) (Delta/2)/sinh(Delta/2)``.
    * ``|Delta| >= 1``, ``a = |Delta|``: the "heavy" weight is
      ``H = log a - log(-expm1(-a))`` (``= log w_0`` if ``Delta > 0``, ``log w_1``
      if ``Delta < 0``) and the other one is ``H - a``; no cancellation occurs.
    """
    _check_delta(d)
    lw0 = np.empty_like(d)
    lw1 = np.empty_like(d)
    small = np.abs(d) < 2.0 * _SERIES_CUTOFF
    if np.any(small):
        ds = d[small]
        g = _log_sinhc_series(0.5 * ds)
        lw0[small] = 0.5 * ds - g
        lw1[small] = -0.5 * ds - g
    big = ~small
    if np.any(big):
        db = d[big]
        a = np.abs(db)
        heavy = np.log(a) - np.log(-np.expm1(-a))
        lw0[big] = np.where(db > 0, heavy, heavy - a)
        lw1[big] = np.where(db > 0, heavy - a, heavy)
    return lw0, lw1


def log_w1(delta_values: ArrayLike) -> NDArray[np.float64]:
    """``log w_1(x) = log p(beta = 1 | x)`` of eq 20: ``w_1 = Delta / (exp(Delta) - 1)``.

    Stable formulation (derivation in :func:`_log_w_pair`):

    * ``|Delta| < 1``: ``log w_1 = -Delta/2 - g(Delta/2)``, ``g(y) = log(sinh(y)/y)``
      by its Taylor series (``w_1 -> 1`` as ``Delta -> 0``);
    * ``Delta >= 1``: ``log w_1 = log Delta - Delta - log(-expm1(-Delta))``
      (``w_1 ~ Delta e^(-Delta)``);
    * ``Delta <= -1``: ``log w_1 = log|Delta| - log(-expm1(-|Delta|))`` (``w_1 ~ |Delta|``).

    Parameters
    ----------
    delta_values : array_like
        ``Delta(x)`` values (eq 17).

    Returns
    -------
    ndarray

    Raises
    ------
    ValueError
        If ``Delta`` is NaN or infinite.
    """
    return _log_w(delta_values, 1)


def _log_w(delta_values: ArrayLike, which: int) -> NDArray[np.float64]:
    """``log w_which`` of :func:`_log_w_pair`, shaped like ``delta_values``."""
    d = np.asarray(delta_values, dtype=float)
    return _log_w_pair(np.atleast_1d(d))[which].reshape(d.shape)


def log_w0(delta_values: ArrayLike) -> NDArray[np.float64]:
    """``log w_0(x) = log p(beta = 0 | x)`` of eq 20: ``w_0 = Delta / (1 - exp(-Delta))``.

    ``w_0 = e^Delta w_1`` and ``w_0(Delta) = w_1(-Delta)``:

    * ``|Delta| < 1``: ``log w_0 = Delta/2 - g(Delta/2)``;
    * ``Delta >= 1``: ``log w_0 = log Delta - log(-expm1(-Delta))``;
    * ``Delta <= -1``: ``log w_0 = log|Delta| - |Delta| - log(-expm1(-|Delta|))``.

    Takes and returns arrays as :func:`log_w1`, with the same errors.

    Raises
    ------
    ValueError
        If ``Delta`` is NaN or infinite.
    """
    return _log_w(delta_values, 0)


def log_conditional_beta(beta: ArrayLike, delta_values: ArrayLike) -> NDArray[np.float64]:
    """``log p(beta | x)`` of eq 17: ``-beta Delta + log(Delta / (1 - e^-Delta))``.

    Equals ``log w_0`` at ``beta = 0`` and ``log w_1`` at ``beta = 1``.

    Parameters
    ----------
    beta : array_like
        Inverse temperatures in [0, 1].
    delta_values : array_like
        ``Delta(x)`` values (broadcast against ``beta``).

    Returns
    -------
    ndarray

    Raises
    ------
    ValueError
        If ``beta`` is outside [0, 1] or ``Delta`` is not finite.
    """
    b = np.asarray(beta, dtype=float)
    if np.any(~((b >= 0.0) & (b <= 1.0))):
        raise ValueError("beta must lie in [0, 1]")
    d = np.asarray(delta_values, dtype=float)
    return -b * d + log_w0(d)
