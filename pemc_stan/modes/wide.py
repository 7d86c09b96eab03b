"""The wide importance check of the mode split: draws from around the modes found.

A defensive mixture of the found modes' covering Gaussian and of Gaussians fitted to the
modes' draws (:func:`wide_log_weights`) weighs the whole target, so that mass no group
of modes holds shows, and :func:`unexplained_starts` gives starts where that mass is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from pemc_stan.errors import PemcStanError
from pemc_stan.methods.base_density import BaseDensity
from pemc_stan.modes.density import DensityEvaluator

logger = logging.getLogger(__name__)

__all__ = ["UNEXPLAINED_STARTS", "WIDE_DRAWS", "WIDE_SPREADS", "ModeGaussians",
           "unexplained_starts", "wide_log_weights"]


#: Importance sampling around found modes (:func:`wide_log_weights`) draws from their
#: covering Gaussian, half with its standard deviations as they are (among the modes
#: found) and half doubled (beyond them) ...
WIDE_SPREADS = (1.0, 2.0)
#: ... this many draws at a time (in 2-D, 100,000 densities take about 0.7 s).
WIDE_DRAWS = 100_000


#: A mode's Gaussian in the wide sampler's proposal (:func:`wide_log_weights`) has the
#: standard deviations of the mode's draws times this: a little wider than the mode, so
#: that its tails and the error of its fitted covariance keep the weights even.
WIDE_MODE_SPREAD = 1.25

#: Gaussians fitted to the modes' draws, ``(log weight, mean, covariance)`` each in base
#: coordinates (the weights need not be normalised).
ModeGaussians = list[tuple[float, NDArray[np.float64], NDArray[np.float64]]]


def _proposal(base: BaseDensity, modes: ModeGaussians | None
              ) -> tuple[list[BaseDensity], NDArray[np.float64]]:
    """The wide sampler's mixture: its parts and their log weights.  The covering
    Gaussian with its standard deviations times each of :data:`WIDE_SPREADS` (equal
    parts); with ``modes``, half the weight goes to them instead (the fitted
    covariances times :data:`WIDE_MODE_SPREAD` squared)."""
    mean, cov = np.asarray(base.mean, dtype=float), np.asarray(base.cov, dtype=float)
    parts = [BaseDensity(mean, s**2 * cov, "dense") for s in WIDE_SPREADS]
    log_w = np.full(len(parts), -np.log(len(parts)))
    if modes:
        lm = np.array([m[0] for m in modes], dtype=float)
        parts += [BaseDensity(np.asarray(m[1], dtype=float),
                              WIDE_MODE_SPREAD**2 * np.asarray(m[2], dtype=float), "dense")
                  for m in modes]
        log_w = np.concatenate([log_w, lm - logsumexp(lm)]) - np.log(2.0)
    return parts, log_w


#: A draw of the wide sampler is unexplained by the modes found where the target's
#: density is more than this many times ``Z`` times their fitted mixture's ...
UNEXPLAINED_RATIO = 100.0
#: ... and this many of them, resampled by weight, start Pathfinder again
#: (:func:`unexplained_starts`) ...
UNEXPLAINED_STARTS = 16
#: ... chosen among this many of the heaviest draws.
UNEXPLAINED_CANDIDATES = 5_000


def unexplained_starts(z: NDArray[np.float64], log_weights: NDArray[np.float64], log_z: float,
                       base: BaseDensity, modes: ModeGaussians, rng: np.random.Generator,
                       n: int = UNEXPLAINED_STARTS) -> NDArray[np.float64]:
    """Up to ``n`` of the wide sampler's draws ``z`` (log weights ``log gamma - log q``,
    proposal :func:`_proposal` of ``base`` and ``modes``) where ``gamma`` exceeds ``Z``
    times the modes' normalised mixture by :data:`UNEXPLAINED_RATIO`, drawn without
    replacement in proportion to their weights, so that each mode the search missed
    gets starts in proportion to its mass.  Shape (0, D) when there are none.

    Raises
    ------
    Nothing.
    """
    empty = np.empty((0, z.shape[1]))
    finite = np.flatnonzero(np.isfinite(log_weights))
    if not modes or finite.size == 0 or not np.isfinite(log_z):
        return empty
    top = finite[np.argsort(-log_weights[finite], kind="stable")[:UNEXPLAINED_CANDIDATES]]
    parts, log_pi = _proposal(base, modes)
    try:
        dens = np.array([q.log_density_z(z[top]) for q in parts]) + log_pi[:, None]
    except np.linalg.LinAlgError:
        return empty
    k = len(WIDE_SPREADS)
    log_m = logsumexp(dens[k:], axis=0) + np.log(2.0)  # the modes' half, normalised
    log_rho = log_weights[top] + logsumexp(dens, axis=0) - log_z - log_m
    cand = top[log_rho > np.log(UNEXPLAINED_RATIO)]
    if cand.size == 0:
        return empty
    p = np.exp(log_weights[cand] - logsumexp(log_weights[cand]))
    pick = rng.choice(cand.size, size=min(n, int(np.count_nonzero(p))), replace=False, p=p)
    return np.asarray(z[cand[pick]], dtype=float)


def wide_log_weights(coords: Any, base: BaseDensity, evaluator: DensityEvaluator,
                     data: Mapping[str, Any] | None, seed: int | None, n: int = WIDE_DRAWS,
                     modes: ModeGaussians | None = None
                     ) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """``log gamma(x(z)) + log|dx/dz| - log q(z)`` of ``n`` draws ``z`` of ``q`` (base
    coordinates), and the draws: ``q`` is the equal mixture of the Gaussian ``base``
    with its standard deviations times each of :data:`WIDE_SPREADS`, and with
    ``modes`` (Gaussians fitted to the found modes' draws) the defensive mixture of
    that and of them, half each.  Its estimate of ``Z`` is unbiased either way; when
    the modes hold all the mass, their half keeps the weights nearly even (on the
    mixture on R^2 one batch then reached the precision eight batches of the covering
    Gaussians alone did not), and a mode missing from them is still reached by the
    covering half.  ``-inf`` where the density is not finite.  None when the draws
    cannot be evaluated (the split is then judged without them).

    Raises
    ------
    Nothing.
    """
    rng = np.random.default_rng(seed)
    try:
        parts, log_w = _proposal(base, modes)
        counts = rng.multinomial(n, np.exp(log_w - logsumexp(log_w)))
        z = np.concatenate([q.sample_z(int(m), rng) for q, m in zip(parts, counts, strict=True)])
        log_q = logsumexp([q.log_density_z(z) + w for q, w in zip(parts, log_w, strict=True)],
                          axis=0)
        x = coords.inverse(z, data)
        ok = np.ones(n, dtype=bool)
        for v in x.values():
            ok &= np.all(np.isfinite(np.asarray(v, dtype=float).reshape(n, -1)), axis=1)
        lw = np.full(n, -np.inf)
        if np.any(ok):
            kept = {k: np.asarray(v)[ok] for k, v in x.items()}
            _, log_dz_dx = coords.forward(kept, data)
            lw[ok] = evaluator.log_density(kept) - log_dz_dx - log_q[ok]
    except (ValueError, RuntimeError, PemcStanError, np.linalg.LinAlgError) as exc:
        logger.info("importance sampling around the modes failed: %s", exc)
        return None
    return np.where(np.isnan(lw), -np.inf, lw), z
