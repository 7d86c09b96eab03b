"""Gaussian and Student-t base densities in per-type base coordinates, shared by the methods.

Three users: continuous tempering's base density ``b(x) = exp(-psi(x))``
(Graham & Storkey 2017, sections 5-6), pseudo-extended tempering towards a
base (``temper="base"``, :mod:`pemc_stan.methods.pseudo_extended.transform`)
and the pilot (:mod:`pemc_stan.modes.pilot`), which fits the base and uses
it for importance sampling.  Messages therefore name the method only when the
caller passes it (``base_coordinates(..., method=...)``).

The base density must be a **normalised** density on
the parameters' constrained space (the same space and reference measure as
the Stan model's density ``gamma(x)``: Lebesgue measure on the free
coordinates of each constrained type, as Stan uses).  It is built as a
Gaussian in *base coordinates* ``z = c(x) in R^D``, one coordinate map per
constraint type, plus the log-Jacobian of that map::

    log b(x) = log N(c(x); m, S) + log |det dc/dx|

so that ``x = c^{-1}(z)`` with ``z ~ N(m, S)`` has exactly the density ``b``.

The coordinate maps ``c`` and their log-Jacobians, one per constraint type, are
in :mod:`pemc_stan.core.coordinates`.

Moments in base coordinates are known exactly (``E_b[z] = m``,
``Cov_b[z] = S``): eq 22 estimates of them are the paper's convergence check.

With finite degrees of freedom ``df`` the Gaussian gets heavier tails: a multivariate
Student-t with scale matrix ``S`` (dense), or independent Student-t coordinates with
scales ``sqrt(diag S)`` (diag), whose covariance is ``S df / (df - 2)``.  A base with
lighter tails than the target leaves part of a mode (a banana's arms) where the
tempered density is negligible at every temperature.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pemc_stan.core.coordinates import BaseCoordinates
from pemc_stan.estimators.weights import weighted_moments
from pemc_stan.numeric import logsumexp

logger = logging.getLogger(__name__)

__all__ = ["BaseDensity", "covering", "fit_base", "moment_match", "stan_base_lpdf"]


# --------------------------------------------------------------------------- #
# The Gaussian base density
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class BaseDensity:
    """``b(x) = N(c(x); mean, cov) |det dc/dx|`` (or the Student-t of ``df`` degrees of
    freedom with that location and scale), normalised on the constrained space.

    Attributes
    ----------
    mean
        (D,) mean in base coordinates.
    cov
        (D, D) covariance in base coordinates (diagonal when ``covariance="diag"``).
    covariance
        ``"diag"`` (independent coordinates, ``normal_lpdf`` in Stan) or
        ``"dense"`` (``multi_normal_cholesky_lpdf``).
    df
        Degrees of freedom of the tails: infinite for the Gaussian, else a Student-t
        (independent coordinates when diag, ``student_t_lpdf``; multivariate when dense,
        ``multi_student_t_cholesky_lpdf``) whose scale matrix is ``cov``.
    """

    mean: NDArray[np.float64]
    cov: NDArray[np.float64]
    covariance: str = "diag"
    info: dict[str, Any] = field(default_factory=dict, compare=False)
    df: float = math.inf

    def validate(self) -> BaseDensity:
        """Check shapes, finiteness and positive definiteness.

        Returns
        -------
        BaseDensity
            ``self``.

        Raises
        ------
        ValueError
            Naming the problem.
        """
        m = np.asarray(self.mean, dtype=float)
        c = np.asarray(self.cov, dtype=float)
        if m.ndim != 1 or c.shape != (m.size, m.size):
            raise ValueError(f"base mean has shape {m.shape} and covariance {c.shape}; "
                             "expected (D,) and (D, D)")
        if not (np.all(np.isfinite(m)) and np.all(np.isfinite(c))):
            raise ValueError("base mean/covariance contain non-finite values")
        if self.covariance not in ("diag", "dense"):
            raise ValueError(f"covariance={self.covariance!r} is invalid; expected 'diag' or "
                             "'dense'")
        if self.covariance == "diag" and np.any(c != np.diag(np.diag(c))):
            raise ValueError("covariance='diag' but the covariance matrix has off-diagonal "
                             "entries")
        try:
            np.linalg.cholesky(c)
        except np.linalg.LinAlgError:
            raise ValueError("base covariance is not positive definite") from None
        if not self.df > 2:
            raise ValueError(f"base degrees of freedom df={self.df!r}; expected more than 2 "
                             "(a finite covariance), or inf for a Gaussian base")
        return self

    @property
    def tails(self) -> bool:
        """Whether the base is a Student-t (finite ``df``)."""
        return math.isfinite(self.df)

    def with_df(self, df: float) -> BaseDensity:
        """The same location and scale with ``df`` degrees of freedom (inf: Gaussian)."""
        if df == self.df:
            return self
        return BaseDensity(self.mean, self.cov, self.covariance, dict(self.info),
                           float(df)).validate()

    @property
    def variances(self) -> NDArray[np.float64]:
        """The marginal variances of ``z`` under the base (``diag(cov) df / (df - 2)``)."""
        v = np.diag(np.asarray(self.cov, dtype=float))
        return v * (self.df / (self.df - 2.0)) if self.tails else v

    @property
    def dim(self) -> int:
        """Number of base coordinates ``D``."""
        return int(np.asarray(self.mean).size)

    @property
    def sd(self) -> NDArray[np.float64]:
        """Marginal standard deviations."""
        return np.sqrt(np.diag(self.cov))

    def stan_data(self) -> dict[str, Any]:
        """The base-density data entries of a generated program (``pemc_D``, ``pemc_base_*``)."""
        out: dict[str, Any] = {"pemc_D": self.dim, "pemc_base_mean": np.asarray(self.mean).tolist()}
        if self.tails:
            out["pemc_base_df"] = float(self.df)
        if self.covariance == "diag":
            out["pemc_base_sd"] = self.sd.tolist()
        else:
            out["pemc_base_chol"] = np.linalg.cholesky(self.cov).tolist()
        return out

    def log_density_z(self, z: ArrayLike) -> NDArray[np.float64]:
        """``log b_z(z)`` (Gaussian or Student-t) for z of shape (S, D)."""
        za = np.atleast_2d(np.asarray(z, dtype=float))
        if self.tails and self.covariance == "diag":
            from scipy.stats import t as student_t

            return np.sum(student_t.logpdf(za, self.df, self.mean, self.sd), axis=1)
        chol = np.linalg.cholesky(self.cov)
        r = np.linalg.solve(chol, (za - self.mean).T)  # (D, S)
        log_det = np.sum(np.log(np.diag(chol)))
        q = np.sum(r * r, axis=0)
        if not self.tails:
            return -0.5 * q - log_det - 0.5 * self.dim * math.log(2 * math.pi)
        nu, d = self.df, self.dim
        return (math.lgamma(0.5 * (nu + d)) - math.lgamma(0.5 * nu)
                - 0.5 * d * math.log(nu * math.pi) - log_det
                - 0.5 * (nu + d) * np.log1p(q / nu))

    def log_density(self, coords: BaseCoordinates, draws: Mapping[str, ArrayLike],
                    data: Mapping[str, Any] | None) -> NDArray[np.float64]:
        """``log b(x)`` at constrained draws (normalised, Jacobian included).

        Raises
        ------
        KeyError, UnsupportedBaseError
            As :meth:`BaseCoordinates.forward`.
        """
        z, jac = coords.forward(draws, data)
        return self.log_density_z(z) + jac

    def sample_z(self, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
        """``n`` draws of the base coordinates."""
        if self.tails and self.covariance == "diag":
            return self.mean + rng.standard_t(self.df, (n, self.dim)) * self.sd
        chol = np.linalg.cholesky(self.cov)
        eps = rng.standard_normal((n, self.dim)) @ chol.T
        if self.tails:  # a Gaussian scaled by sqrt(df / chi2_df): the multivariate t
            eps *= np.sqrt(self.df / rng.chisquare(self.df, n))[:, None]
        return self.mean + eps

    def sample(self, coords: BaseCoordinates, n: int, rng: np.random.Generator,
               data: Mapping[str, Any] | None) -> dict[str, NDArray[np.float64]]:
        """``n`` constrained draws from ``b``."""
        return coords.inverse(self.sample_z(n, rng), data)

    # Regions: the cells of the nearest of K centres in the base's own metric
    # (Mahalanobis distance under ``cov``), used to post-stratify CT draws.

    def _whitened_centres(self, centres: ArrayLike) -> NDArray[np.float64]:
        c = np.atleast_2d(np.asarray(centres, dtype=float))
        if c.shape[1] != self.dim:
            raise ValueError(f"centres have {c.shape[1]} coordinates; the base has {self.dim}")
        return np.linalg.solve(np.linalg.cholesky(self.cov), (c - self.mean).T).T  # (K, D)

    def nearest_centre(self, z: ArrayLike, centres: ArrayLike) -> NDArray[np.intp]:
        """Index of the nearest centre (base metric) of each row of ``z`` (S, D).

        Raises
        ------
        ValueError
            If the centres do not have ``D`` coordinates.
        """
        dl = self._whitened_centres(centres)
        za = np.atleast_2d(np.asarray(z, dtype=float))
        eps = np.linalg.solve(np.linalg.cholesky(self.cov), (za - self.mean).T).T
        # |eps - d_k|^2 = |eps|^2 - 2 eps.d_k + |d_k|^2; the first term is the same for all k
        return np.argmin(np.sum(dl * dl, axis=1) - 2.0 * eps @ dl.T, axis=1)

    def centre_masses(self, centres: ArrayLike, n: int, rng: np.random.Generator
                      ) -> NDArray[np.float64]:
        """Monte-Carlo estimate (``n`` iid base draws) of the base's mass of each centre's cell.

        Only the projections of the whitened draws on the K whitened centres
        decide the cell, so ``n`` draws of a K-dimensional Gaussian suffice
        whatever ``D``.

        Raises
        ------
        ValueError
            If the centres do not have ``D`` coordinates.
        """
        dl = self._whitened_centres(centres)
        if self.tails and self.covariance == "diag":  # not a scale mixture: draw in full
            cell = self.nearest_centre(self.sample_z(n, rng), centres)
            return np.bincount(cell, minlength=dl.shape[0]) / float(n)
        _, r = np.linalg.qr(dl.T)  # eps . d_k = (Q^T eps) . r_k with Q^T eps ~ N(0, I)
        proj = rng.standard_normal((n, r.shape[0])) @ r
        if self.tails:
            proj *= np.sqrt(self.df / rng.chisquare(self.df, n))[:, None]
        cell = np.argmin(np.sum(dl * dl, axis=1) - 2.0 * proj, axis=1)
        return np.bincount(cell, minlength=dl.shape[0]) / float(n)


def moment_match(z: ArrayLike, log_weights: ArrayLike | None = None,
                 groups: Sequence[tuple[NDArray[np.intp], float]] | None = None,
                 covariance: str = "diag", min_sd: float = 1e-6) -> BaseDensity:
    """Gaussian base with the (weighted) mean and covariance of draws in base coordinates.

    Parameters
    ----------
    z
        (S, D) draws in base coordinates.
    log_weights
        Optional (S,) importance log-weights (self-normalised within each group).
    groups
        Optional mixture components ``[(indices, log mass), ...]`` (section 6,
        eq 25): each group's weighted moments, combined as a mixture with
        weights proportional to ``exp(log mass)``; the base matches the
        mixture's mean and covariance.
    covariance
        ``"diag"`` or ``"dense"`` (the base's form; with fewer than ``4 D``
        effective draws a dense base gets the variances only).
    min_sd
        Floor on the marginal standard deviations (degenerate draws).

    Returns
    -------
    BaseDensity

    Raises
    ------
    ValueError
        If there are no usable draws or ``covariance`` is unknown.
    """
    za = np.asarray(z, dtype=float)
    if za.ndim != 2 or za.shape[0] < 2:
        raise ValueError(f"need (S >= 2, D) draws in base coordinates, got shape {za.shape}")
    lw = np.zeros(za.shape[0]) if log_weights is None else np.asarray(log_weights, float)
    ok = np.isfinite(lw) & np.all(np.isfinite(za), axis=1)
    if not np.any(ok):
        raise ValueError("no draw has a finite weight and finite base coordinates")
    if groups is None:
        groups = [(np.arange(za.shape[0]), 0.0)]
    means, covs, masses = [], [], []
    for idx, log_mass in groups:
        idx = np.asarray(idx)[ok[np.asarray(idx)]]
        if idx.size == 0:
            continue
        mu, cov_k = weighted_moments(za[idx], lw[idx])
        means.append(mu)
        covs.append(cov_k)
        masses.append(log_mass)
    pm = np.exp(np.asarray(masses) - logsumexp(masses))
    mean = sum(p * m for p, m in zip(pm, means, strict=True))
    cov = sum(p * (c + np.outer(m - mean, m - mean))
              for p, c, m in zip(pm, covs, means, strict=True))
    cov = 0.5 * (cov + cov.T)
    if covariance == "diag":
        cov = np.diag(np.maximum(np.diag(cov), min_sd**2))
    elif covariance == "dense":
        lw_ok = lw[ok] - logsumexp(lw[ok])
        kish = float(np.exp(-logsumexp(2.0 * lw_ok)))  # (sum w)^2 / sum w^2, normalised w
        if kish < 4 * za.shape[1]:  # too few draws for D(D+1)/2 entries: variances only
            logger.info("dense base from %.0f effective draws in %d dimensions: using the "
                        "variances only", kish, za.shape[1])
            cov = np.diag(np.diag(cov))
        cov = cov + np.eye(cov.shape[0]) * min_sd**2
        d = np.sqrt(np.diag(cov))
        floor = np.maximum(d, min_sd) / d
        cov = cov * np.outer(floor, floor)
    else:
        raise ValueError(f"covariance={covariance!r} is invalid; expected 'diag' or 'dense'")
    return BaseDensity(np.asarray(mean, float), np.asarray(cov, float), covariance).validate()


def covering(a: BaseDensity, b: BaseDensity) -> BaseDensity:
    """The Gaussian with the mean and covariance of the equal mixture of ``a`` and ``b``.

    It covers where either puts its mass (the mixture's covariance adds the spread of
    the two means to the average of the two covariances); ``a``'s covariance form.

    Raises
    ------
    ValueError
        If the two have different dimensions.
    """
    if a.dim != b.dim:
        raise ValueError(f"bases of dimensions {a.dim} and {b.dim} cannot be combined")
    mean = 0.5 * (np.asarray(a.mean) + np.asarray(b.mean))
    da, db = np.asarray(a.mean) - mean, np.asarray(b.mean) - mean
    cov = 0.5 * (np.asarray(a.cov) + np.outer(da, da) + np.asarray(b.cov) + np.outer(db, db))
    if a.covariance == "diag":
        cov = np.diag(np.diag(cov))
    return BaseDensity(mean, 0.5 * (cov + cov.T), a.covariance).validate()


def fit_base(coords: BaseCoordinates, draws: Mapping[str, ArrayLike],
             data: Mapping[str, Any] | None, covariance: str = "diag",
             log_weights: ArrayLike | None = None,
             groups: Sequence[tuple[NDArray[np.intp], float]] | None = None) -> BaseDensity:
    """Moment-match a Gaussian base to constrained draws (see :func:`moment_match`).

    Raises
    ------
    ValueError, UnsupportedBaseError
        As :func:`moment_match` and :meth:`BaseCoordinates.forward`.
    """
    z, _ = coords.forward(draws, data)
    return moment_match(z, log_weights, groups, covariance)


# --------------------------------------------------------------------------- #
# The base's log density in Stan (after the coordinate statements of
# :func:`pemc_stan.core.coordinate_code.stan_coordinate_code`)
# --------------------------------------------------------------------------- #


def stan_base_lpdf(covariance: str, z: str = "pemc_z", tails: bool = False) -> str:
    """Stan expression of the base's ``log b_z(z)`` for the data of
    :meth:`BaseDensity.stan_data` (``covariance``: ``"diag"`` or ``"dense"``; ``tails``:
    the Student-t of ``pemc_base_df`` degrees of freedom)."""
    if covariance == "diag":
        if tails:
            return f"student_t_lpdf({z} | pemc_base_df, pemc_base_mean, pemc_base_sd)"
        return f"normal_lpdf({z} | pemc_base_mean, pemc_base_sd)"
    if tails:
        return (f"multi_student_t_cholesky_lpdf({z} | pemc_base_df, pemc_base_mean, "
                "pemc_base_chol)")
    return f"multi_normal_cholesky_lpdf({z} | pemc_base_mean, pemc_base_chol)"
