"""A tempered run's cells weighed by importance sampling inside each cell.

A tempered run's shares of the modes rest on how often its chains entered each one,
which can be a handful of times a run.  Here the search's mode centres cut the base
coordinates into cells (the
nearest centre in the search base's metric, as CT's strata), and each cell's mass
``Z_k = int_cell gamma`` is estimated by importance sampling with a proposal made for
that cell alone (:mod:`pemc_stan.estimators.stratified`: a draw outside its cell weighs
nothing, so each ``Z_k`` is unbiased whatever the proposal).  A cell's proposal is the
equal mixture of the parts below (Student-t of :data:`CELL_DF` degrees of freedom unless
said, the covariances times :data:`CELL_SPREAD`), from the particles within
:data:`PARTICLE_RADIUS` of the search base's mean:

* the run's particles in the cell weighted to the target, where they hold ``D + 1``
  effective draws;
* all the run's particles in the cell, unweighted, at any temperature: where the chains
  went, also in modes they hardly held at the target; one Student-t, and kernels at the
  particles (:class:`KernelPart`) that follow a curved mode's arms;
* the search's centre with its mode's Pathfinder covariance
  (:attr:`~pemc_stan.core.search.ModeSearch.covariances`), and so every other mode's
  whose Gaussian reaches into the cell (:data:`SPILL_SHARE`: a spike inside a slab);
* the search's centre with independent Cauchy coordinates (:class:`AxisPart`, cut far
  out): tails along the axes, where a product of heavy-tailed factors has them; and so
  every other mode's whose axis part reaches into the cell (its arm crosses the cut);

and, when given, a covering part every cell shares (:func:`cover_part`: a heavy tail or
a curved mode's arms reach beyond the rest).

A cell whose weights stay above their Pareto-k bound is cut again: where it weighs
heaviest (:meth:`CellDraws.heavy_modes`: a mode the search missed beside a found one, a
neighbour's arm across the cut) becomes a cell of its own, and both are drawn afresh.
Any cut leaves each cell's mass unbiased, so this is one step of adaptive importance
sampling; the other cells' draws stand.

The run's draws alone miss modes the chains passed by, and the search alone reaches
the modes it missed only through its parts' tails; no weight diagnostic sees mass that
no part reaches (docs/decisions.md).  The cells' estimate is a tempered run's reported
estimate where every cell's weights allow it (:func:`pemc_stan.run.conductor.run_plan`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import solve_triangular

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.estimators import weights as W
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.estimators.psis import tail_size
from pemc_stan.estimators.stratified import (
    stratified_log_z,
    stratified_mean,
    stratum_log_weights,
)
from pemc_stan.estimators.tails import khat_bound, tail_fields
from pemc_stan.modes.wide import Part, mixture_log_density, mixture_sample
from pemc_stan.output.fit_protocol import by_column
from pemc_stan.sampling.hooks import WeightedEstimate
from pemc_stan.sampling.model import LogDensity
from pemc_stan.sampling.views import NamedView

__all__ = ["AXIS_REACH", "CELL_DF", "CELL_DRAWS", "CELL_DRAWS_MAX", "CELL_DRAWS_MIN",
           "CELL_K_MAX", "CELL_SPREAD", "CELL_TOTAL", "COVER_DF", "COVER_SPREAD",
           "KERNEL_CENTRES", "PARTICLE_RADIUS", "AxisPart", "CellDraws", "EqualMixture",
           "KernelPart", "cell_count", "cell_draws", "cell_parts", "cover_part",
           "more_draws_for"]

logger = logging.getLogger(__name__)

#: Degrees of freedom of a cell's proposal parts ...
CELL_DF = 5.0
#: ... whose covariances are this many times those fitted ...
CELL_SPREAD = 2.0
#: A cell's kernel part: Student-t kernels at up to this many of the run's particles in
#: the cell (any temperature), each the particles' covariance times Scott's factor
#: ``M^(-2/(D+4))`` (and :data:`CELL_SPREAD`).  It follows a curved mode's arms where the
#: chains went, which one Student-t cannot: without it the weights can look healthy
#: while a curved mode's moments are far off ...
KERNEL_CENTRES = 200
#: (... its density is computed for this many draws at a time.)
KERNEL_BLOCK = 2048
#: The run's particles farther than this many of the search base's standard deviations
#: from its mean, and as far from the run's own weighted mean in its weighted spread,
#: place no part (:func:`_near`): PE's copies at small beta on a density without a prior
#: (its tempered target is then nearly flat) drift to astronomical values, and would make
#: the spread and kernel parts as wide.
PARTICLE_RADIUS = 20.0
#: The draws of the cells' proposals after a run (:func:`cell_count`): this many in all,
#: as many as the wide check's (:data:`~pemc_stan.modes.wide.MOMENT_DRAWS`), and no more
#: than the run took gradients (an ODE model's density is dear), each cell
#: between :data:`CELL_DRAWS_MIN` and :data:`CELL_DRAWS_MAX`.  A density through CmdStan
#: costs more than a gradient, so the cap keeps the check well below the run's own cost.
#: A curved mode's arms need the more: at a few thousand a cell its estimate can be far
#: off with a good pooled k (docs/decisions.md).
CELL_TOTAL = 100_000
CELL_DRAWS_MIN = 1000
CELL_DRAWS_MAX = 16_000
#: Draws a cell when no run's gradient count sizes them.
CELL_DRAWS = 4000
#: Each cell's proposal also has an :class:`AxisPart` at the search's centre, the mode's
#: standard deviations times ``sqrt(CELL_SPREAD)``, Cauchy coordinates: a product of
#: heavy-tailed factors runs out along the axes, which every elliptical part reaches only
#: with a density falling as ``r^-(df + D)`` (an underestimate no weight diagnostic sees,
#: docs/decisions.md).  Each coordinate is cut at this many of the search base's standard
#: deviations from the centre (the modes' extent, not the mode's own scale: a boxed
#: parameter's tail is long on the unconstrained scale beside its mode's width): an uncut
#: Cauchy draw hundreds of units out makes a model's ``exp`` of a parameter underflow (a
#: funnel's scale 0), where its density throws and the cells cannot be weighed.
AXIS_REACH = 50.0
#: The covering part every cell's proposal gets: the search's base with its standard
#: deviations times this, and Student-t tails of :data:`COVER_DF` degrees of freedom (the
#: wide check's covering part, :data:`~pemc_stan.modes.wide.MOMENT_DF`) ...
COVER_SPREAD = 2.0
COVER_DF = 3.0
#: ... and the largest Pareto k of a cell's weights for the cells to be the run's estimate
#: (where PSIS estimates and their errors hold, Vehtari et al. 2024), lower for a cell of
#: fewer than 2,154 weighted draws (:meth:`CellDraws.cell_k_bound`: PSIS's bound at its
#: sample size), each cell's judged
#: on its own: pooled, a few cells' heavy weights vanish among the rest.  A cell above it
#: gets :data:`CELL_MORE` times its draws first (a k that is high only for want of draws
#: then falls below the bound), the furthest above their bounds first, as many as
#: :data:`CELL_TOTAL` more draws pay for, and what they leave pays for the second cut
#: (module docstring); a cell with fewer than :data:`CELL_K_DRAWS`
#: draws inside is not judged.
CELL_K_MAX = 0.7
CELL_MORE = 4
CELL_K_DRAWS = 20
#: A mode's Gaussian that puts at least this share of its draws (of
#: :data:`SPILL_DRAWS`) in another mode's cell is a part of that cell's proposal too: a
#: spike inside a slab shares its centre with the slab's, and the cut between the two
#: centres gives the slab's cell part of the spike, which nothing else in the slab's
#: proposal reaches (no draw there: an underestimate no Pareto k sees).  Separated modes'
#: Gaussians stay in their own cells, and their proposals are unchanged.
SPILL_SHARE = 0.005
SPILL_DRAWS = 2000
#: Offsets of the spills' seeds from the cells' (their draws leave the cells' own
#: unchanged): the Gaussians', the axis parts'.
SPILL_SEED_OFFSET = 611953
AXIS_SEED_OFFSET = 611954


@dataclass(frozen=True, eq=False)
class CellDraws:
    """The cells' importance draws: per-draw log weights whose sum estimates ``Z``
    (:func:`~pemc_stan.estimators.stratified.stratum_log_weights`), the cell whose
    proposal drew each, and each parameter column's constrained values."""

    log_u: NDArray[np.float64]
    strata: NDArray[np.intp]
    values: dict[str, NDArray[np.float64]]
    cells: int
    z: NDArray[np.float64] | None = None

    def heavy_modes(self, cells: list[int]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Where each of ``cells`` weighs heaviest: the weighted mean and covariance (K, D)
        and (K, D, D) of its draws with the ``M`` largest weights (PSIS's tail, ``M =
        min(S/5, 3 sqrt S)``), for the cells where they hold ``D + 1`` effective draws.
        Those draws lie where the cell's proposal falls short of the target (a
        neighbour's arm across the cut, a heavy tail).  None of either without the draws'
        base coordinates.

        Raises
        ------
        Nothing.
        """
        if self.z is None:
            return np.empty((0, 0)), np.empty((0, 0, 0))
        d = self.z.shape[1]
        means, covs = [], []
        for k in cells:
            lu = np.where(self.strata == k, self.log_u, -np.inf)
            s = int(np.count_nonzero(np.isfinite(lu)))
            m = tail_size(s)
            top = np.argsort(lu)[-m:]
            if m > d + 1 and W.ess(lu[top]) >= d + 1:
                mean, cov = W.weighted_moments(self.z[top], lu[top])
                means.append(mean)
                covs.append(cov)
        return np.array(means).reshape(-1, d), np.array(covs).reshape(-1, d, d)

    def log_z(self) -> tuple[float, float]:
        """``(log Z, its standard error)``."""
        return stratified_log_z(self.log_u, self.strata)

    def mean(self, f: NDArray[np.float64] | str) -> W.WeightedMean:
        """``E[f]`` and its standard error, ``f`` a column or values at the draws."""
        values = self.values[f] if isinstance(f, str) else f
        return stratified_mean(values, self.log_u, self.strata)

    def pareto_k(self) -> float:
        """The largest Pareto k of a cell's weights (:meth:`cell_k`; NaN: none known)."""
        k = self.cell_k()
        return float(np.max(k[np.isfinite(k)])) if np.any(np.isfinite(k)) else math.nan

    def pooled_k(self) -> float:
        """The Pareto k of all the draws' weights pooled (each cell's by its share)."""
        return float(W.pareto_smooth(self.log_u[np.isfinite(self.log_u)])[1])

    def cell_k(self) -> NDArray[np.float64]:
        """Each cell's Pareto k of its draws' weights (K,): NaN for a cell with fewer than
        :data:`CELL_K_DRAWS` draws inside it (no proposal, or its draws fall elsewhere)."""
        return self._cell_k.copy()

    @cached_property
    def _cell_k(self) -> NDArray[np.float64]:
        """:meth:`cell_k`, fitted once (the gate, the extra draws and the record read it)."""
        out = np.full(self.cells, np.nan)
        for k in range(self.cells):
            lu = self.log_u[(self.strata == k) & np.isfinite(self.log_u)]
            if lu.size >= CELL_K_DRAWS:
                out[k] = float(W.pareto_smooth(lu)[1])
        return out

    def cell_k_bound(self) -> NDArray[np.float64]:
        """Each cell's largest reliable Pareto k at its number ``S`` of weighted draws:
        ``min(1 - 1/log10 S, CELL_K_MAX)`` (:func:`~pemc_stan.estimators.tails.khat_bound`;
        0.5 at 100 draws, 0.667 at 1,000, :data:`CELL_K_MAX` from 2,154)."""
        sizes = np.bincount(self.strata[np.isfinite(self.log_u)], minlength=self.cells)
        return np.array([min(khat_bound(float(n)), CELL_K_MAX) for n in sizes])

    def uneven_cells(self) -> list[int]:
        """The cells whose Pareto k exceeds their :meth:`cell_k_bound` (judged cells
        only)."""
        k, bound = self.cell_k(), self.cell_k_bound()
        return [int(j) for j in np.flatnonzero(np.isfinite(k) & (k > bound))]

    # what a fit reports when its estimate is the cells' (ExtendedFit.cell_estimate)
    def expectation(self, f: Callable[[Any], Any] | str) -> WeightedEstimate:
        """``E[f]`` as a fit reports it: ``f`` a column, or a callable of a view
        ``column -> values at the draws`` (N,); ``ess`` is the weighted variance over the
        squared standard error.

        Raises
        ------
        KeyError
            For a column the draws do not hold.
        ValueError
            For a callable that does not return one value a draw.
        """
        view = NamedView(self.values.__getitem__, self.values)
        values = np.asarray(view[f] if isinstance(f, str) else f(view), dtype=float)
        if values.shape != self.log_u.shape:
            raise ValueError(f"f returned shape {values.shape}; expected one value per "
                             f"cell draw, {self.log_u.shape}")
        est = self.mean(values)
        mean, se = float(est.mean), float(est.std_error)
        u = np.exp(W.log_normalise(self.log_u))
        var = float(np.sum(np.where(u > 0, u * (values - mean) ** 2, 0.0)))
        terms = np.where(u > 0, u * (values - mean), 0.0)
        return WeightedEstimate(mean=mean, mcse=se, ess=var / se**2 if se > 0 else math.nan,
                                **tail_fields(terms))

    def evidence(self) -> EvidenceEstimate:
        """``log Z`` as a fit reports it (estimator ``"cells"``, :meth:`describe` in its
        diagnostics)."""
        log_z, se = self.log_z()
        return EvidenceEstimate(log_z, se, "cells", self.describe())

    def resampled(self, n: int, seed: int | None) -> dict[str, NDArray[np.float64]]:
        """``n`` draws of every column resampled by the weights (systematic), in random
        order: the draws are independent, so any cut into chains is fair."""
        rng = np.random.default_rng(seed)
        idx = rng.permutation(W.resample_indices(self.log_u, rng, n_samples=n))
        return {c: v[idx] for c, v in self.values.items()}

    def describe(self) -> dict[str, Any]:
        """What the estimate is, for the diagnostics and the run folder."""
        return {"estimate": "cells", "cells": self.cells, "draws": int(self.log_u.size),
                "pareto_k": round(self.pareto_k(), 3)}


def cell_count(gradients: int, cells: int) -> int:
    """Draws a cell (:data:`CELL_TOTAL`) after a run of ``gradients``, over ``cells`` cells.

    Raises
    ------
    Nothing.
    """
    total = min(gradients, CELL_TOTAL) // max(cells, 1)
    return int(min(max(total, CELL_DRAWS_MIN), CELL_DRAWS_MAX))


def cover_part(base: BaseDensity) -> BaseDensity:
    """The covering part of every cell's proposal (:data:`COVER_SPREAD`) around ``base``.

    Raises
    ------
    ValueError
        If ``base`` has no covariance.
    """
    return BaseDensity(np.asarray(base.mean, dtype=float),
                       COVER_SPREAD**2 * np.asarray(base.cov, dtype=float), "dense",
                       df=COVER_DF)


@dataclass(frozen=True, eq=False)
class KernelPart:
    """Student-t kernels (``df`` degrees of freedom, scale ``chol chol^T``) at ``centres``
    (M, D), in equal shares: a proposal part that follows where the particles went."""

    centres: NDArray[np.float64]
    chol: NDArray[np.float64]
    df: float

    def sample_z(self, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
        """``n`` draws, shape (n, D)."""
        pick = self.centres[rng.integers(self.centres.shape[0], size=n)]
        eps = rng.standard_normal((n, self.centres.shape[1])) @ self.chol.T
        return pick + eps * np.sqrt(self.df / rng.chisquare(self.df, n))[:, None]

    def log_density_z(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        """The log density at ``z`` (S, D), in blocks of draws (S x M distances each)."""
        za = np.atleast_2d(np.asarray(z, dtype=float))
        nu, (m, d) = self.df, self.centres.shape
        w = solve_triangular(self.chol, za.T, lower=True).T
        c = solve_triangular(self.chol, self.centres.T, lower=True).T
        const = (math.lgamma(0.5 * (nu + d)) - math.lgamma(0.5 * nu)
                 - 0.5 * d * math.log(nu * math.pi)
                 - float(np.sum(np.log(np.diag(self.chol)))) - math.log(m))
        out = np.empty(za.shape[0])
        cc = np.sum(c * c, axis=1)
        for a in range(0, za.shape[0], KERNEL_BLOCK):
            wb = w[a:a + KERNEL_BLOCK]
            q = np.maximum(np.sum(wb * wb, axis=1)[:, None] + cc[None, :] - 2 * wb @ c.T, 0.0)
            lt = np.log1p(q / nu)
            lt *= -0.5 * (nu + d)
            top = lt.max(axis=1)
            out[a:a + KERNEL_BLOCK] = top + np.log(np.exp(lt - top[:, None]).sum(axis=1))
        return out + const


@dataclass(frozen=True, eq=False)
class AxisPart:
    """Independent Cauchy coordinates about ``centre`` with scales ``scale`` (D,), each
    cut at ``reach`` (D,) of its scales: a proposal part whose tails run out along the
    coordinate axes, where a product of heavy-tailed factors (a vectorised ``student_t``)
    puts them.
    Along an axis its density falls as ``r^-2``, an elliptical part's as ``r^-(df + D)``:
    the weights of a factor with ``nu > 1/2`` degrees of freedom have a finite variance
    under it, out to its reach."""

    centre: NDArray[np.float64]
    scale: NDArray[np.float64]
    reach: NDArray[np.float64]

    def sample_z(self, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
        """``n`` draws, shape (n, D)."""
        u = rng.uniform(-1.0, 1.0, (n, self.centre.size)) * np.arctan(self.reach)
        return self.centre + self.scale * np.tan(u)

    def log_density_z(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        """The log density at ``z`` (S, D): -inf beyond the reach."""
        u = (np.atleast_2d(np.asarray(z, dtype=float)) - self.centre) / self.scale
        const = -float(np.sum(np.log(2.0 * np.arctan(self.reach) * self.scale)))
        inside = np.all(np.abs(u) <= self.reach, axis=1)
        return np.where(inside, const - np.sum(np.log1p(u * u), axis=1), -np.inf)


@dataclass(frozen=True, eq=False)
class EqualMixture:
    """The equal mixture of ``parts``, as one part of a cell's proposal."""

    parts: tuple[Part, ...]

    def sample_z(self, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
        """``n`` draws, shape (n, D)."""
        return mixture_sample(self.parts, self._log_w, n, rng)

    def log_density_z(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        """The log density at ``z`` (S, D)."""
        return mixture_log_density(self.parts, self._log_w, z)

    @property
    def _log_w(self) -> NDArray[np.float64]:
        return np.full(len(self.parts), -math.log(len(self.parts)))


def _axes(centre: NDArray[np.float64], cov: NDArray[np.float64],
          extent: NDArray[np.float64] | None) -> AxisPart | None:
    """The axis part at a mode's ``centre``, scales its standard deviations times
    ``sqrt(CELL_SPREAD)``, cut at :data:`AXIS_REACH` times ``extent`` (D,; None: the
    mode's standard deviations); None when a variance is not positive."""
    var = np.diag(np.asarray(cov, dtype=float))
    if not np.all(np.isfinite(var) & (var > 0)):
        return None
    sd = np.sqrt(var)
    reach = AXIS_REACH * (sd if extent is None else np.asarray(extent, dtype=float))
    return AxisPart(np.asarray(centre, dtype=float), math.sqrt(CELL_SPREAD) * sd,
                    reach / (math.sqrt(CELL_SPREAD) * sd))


def _kernels(z: NDArray[np.float64], cov: NDArray[np.float64]) -> KernelPart | None:
    """The kernel part at up to :data:`KERNEL_CENTRES` of the particles ``z`` (evenly
    spaced), each kernel the particles' covariance times Scott's factor squared and
    :data:`CELL_SPREAD`; None when that is not positive definite."""
    keep = z[np.unique(np.linspace(0, z.shape[0] - 1, KERNEL_CENTRES).astype(int))]
    m, d = keep.shape
    scale = CELL_SPREAD * m ** (-2.0 / (d + 4)) * (cov + cov.T) / 2
    try:
        return KernelPart(keep, np.linalg.cholesky(scale), CELL_DF)
    except np.linalg.LinAlgError:
        return None


def _t(mean: NDArray[np.float64], cov: NDArray[np.float64]) -> BaseDensity | None:
    """The Student-t part, or None when its covariance is not positive definite."""
    scale = CELL_SPREAD * (np.asarray(cov, dtype=float) + np.asarray(cov, dtype=float).T) / 2
    try:
        np.linalg.cholesky(scale)
    except np.linalg.LinAlgError:
        return None
    return BaseDensity(np.asarray(mean, dtype=float), scale, "dense", df=CELL_DF)


def cell_parts(z: NDArray[np.float64], log_w: NDArray[np.float64],
               centre: NDArray[np.float64] | None, covariance: NDArray[np.float64] | None,
               extent: NDArray[np.float64] | None = None) -> list[Part]:
    """One cell's proposal parts (module docstring): from the run's particles ``z`` in
    the cell (base coordinates) with their log target weights ``log_w``, and the search's
    ``centre`` and ``covariance`` of the cell's mode (None: no such part); the axis part
    cut at :data:`AXIS_REACH` times ``extent`` (the search base's standard deviations;
    None: the mode's own).

    Raises
    ------
    Nothing.
    """
    parts: list[Part | None] = []
    dim = z.shape[1]
    if z.shape[0] > dim + 1:
        usable = np.any(np.isfinite(log_w)) and not np.any(np.isnan(log_w) | (log_w == np.inf))
        if usable and W.ess(log_w) >= dim + 1:
            parts.append(_t(*W.weighted_moments(z, log_w)))
        cov = np.atleast_2d(np.cov(z, rowvar=False))
        parts.append(_t(z.mean(axis=0), cov))
        parts.append(_kernels(z, cov))
    if centre is not None and covariance is not None:
        parts.append(_t(centre, covariance))
        parts.append(_axes(centre, covariance, extent))
    return [q for q in parts if q is not None]


def cell_draws(coords: Any, evaluator: LogDensity, data: Mapping[str, Any] | None,
               metric: BaseDensity, centres: NDArray[np.float64],
               covariances: NDArray[np.float64] | None, z_run: NDArray[np.float64],
               log_w_run: NDArray[np.float64], seed: int | None, n: int = CELL_DRAWS,
               cover: BaseDensity | None = None) -> CellDraws | None:
    """Importance draws of each cell of ``centres`` (the nearest in ``metric``'s metric)
    from its own proposal (:func:`cell_parts`), ``n`` a cell, weighed by the target; cut
    again where a cell stays uneven (module docstring), so that the draws may hold more
    cells than ``centres``.

    Parameters
    ----------
    coords
        The base coordinates (``inverse`` and ``forward`` with their Jacobian).
    evaluator
        ``log gamma`` at constrained draws.
    data
        The model's data.
    metric
        The search's base: its metric decides a point's cell.
    centres, covariances
        (K, D) the search's mode centres and (K, D, D) their covariances (None: none).
    z_run, log_w_run
        The run's particles in base coordinates (M, D), at any temperature, and their
        log weights to the target (M,).
    seed
        For the draws.
    n
        Draws per cell.
    cover
        A part every cell's proposal also gets (a covering density in base coordinates),
        or None.

    Returns
    -------
    CellDraws or None
        None when no cell has a proposal, or the draws cannot be evaluated.

    Raises
    ------
    ValueError
        If the shapes do not agree.
    """
    centres = np.atleast_2d(np.asarray(centres, dtype=float))
    z_run = np.asarray(z_run, dtype=float)
    log_w_run = np.asarray(log_w_run, dtype=float).reshape(-1)
    if z_run.shape[0] != log_w_run.size or z_run.shape[1] != centres.shape[1]:
        raise ValueError(f"particles {z_run.shape}, weights {log_w_run.shape} and centres "
                         f"{centres.shape} do not agree")
    rng = np.random.default_rng(seed)
    near = _near(metric, z_run, log_w_run)
    z_run, log_w_run = z_run[near], log_w_run[near]
    cut = _Cut(metric, centres, covariances, z_run, log_w_run, cover, seed)
    proposals = cut.proposals(range(centres.shape[0]))
    if not proposals:
        return None
    drawn = _evaluated(proposals, dict.fromkeys(proposals, n), coords, evaluator, data, rng)
    if drawn is None:
        return None
    drawn, draws, spent = _with_more(drawn, cut, proposals, n, CELL_TOTAL, coords,
                                     evaluator, data, rng)
    # cut again where the uneven cells weigh heaviest, as many as the extra draws left pay
    # for (each and its new cell drawn afresh); the other cells' draws stand
    uneven = more_draws_for(draws, set(proposals), n, CELL_TOTAL - spent, 2)
    heavy, heavy_cov = draws.heavy_modes(uneven)
    if len(heavy):
        logger.info("cells %s above their Pareto-k bounds: cut again where they weigh "
                    "heaviest", ", ".join(str(k + 1) for k in uneven))
        cut = cut.with_centres(heavy, heavy_cov)
        proposals = cut.proposals([*uneven, *range(centres.shape[0], cut.centres.shape[0])])
        fresh = _evaluated(proposals, dict.fromkeys(proposals, n), coords, evaluator, data,
                           rng)
        if fresh is not None:
            kept = drawn.only(~np.isin(drawn.cell, uneven))
            _, draws, _ = _with_more(kept.joined(fresh), cut, proposals, n,
                                     CELL_TOTAL - spent - fresh.cell.size, coords, evaluator,
                                     data, rng)
    return draws if np.any(np.isfinite(draws.log_u)) else None


@dataclass(frozen=True, eq=False)
class _Cut:
    """The cells' centres, and what each cell's proposal is made from (:func:`cell_draws`)."""

    metric: BaseDensity
    centres: NDArray[np.float64]
    covariances: NDArray[np.float64] | None
    z_run: NDArray[np.float64]
    log_w_run: NDArray[np.float64]
    cover: BaseDensity | None
    seed: int | None

    def with_centres(self, centres: NDArray[np.float64],
                     covariances: NDArray[np.float64]) -> _Cut:
        """This cut with cells at ``centres`` added (their ``covariances`` kept when the
        cut's centres have theirs)."""
        covs = None if self.covariances is None else np.concatenate(
            [np.asarray(self.covariances, dtype=float), covariances])
        return replace(self, centres=np.vstack([self.centres, centres]),
                                   covariances=covs)

    def proposals(self, cells: Iterable[int]
                  ) -> dict[int, tuple[list[Part], NDArray[np.float64]]]:
        """The proposal (parts and their log weights, equal) of each of ``cells`` that has
        a part (module docstring)."""
        centres, covariances = self.centres, self.covariances
        lab = self.metric.nearest_centre(self.z_run, centres)
        spills = _spills(self.metric, centres, covariances, self.seed)
        others = _others_axes(self.metric, centres, covariances, self.seed)
        out: dict[int, tuple[list[Part], NDArray[np.float64]]] = {}
        for k in cells:
            inside = lab == k
            cov = None if covariances is None else np.asarray(covariances[k], dtype=float)
            parts = cell_parts(self.z_run[inside], self.log_w_run[inside], centres[k], cov,
                               self.metric.sd)
            if covariances is not None:  # other modes' Gaussians reaching into the cell
                parts += [q for j in np.flatnonzero(spills[:, k])
                          if (q := _t(centres[j], covariances[j])) is not None]
            if k in others:  # other modes' arms crossing into the cell
                parts.append(others[k])
            if self.cover is not None:
                parts.append(self.cover)
            if parts:
                out[k] = parts, np.full(len(parts), -np.log(len(parts)))
        return out


def _with_more(drawn: _Drawn, cut: _Cut,
               proposals: Mapping[int, tuple[list[Part], NDArray[np.float64]]], n: int,
               total: int, coords: Any, evaluator: LogDensity,
               data: Mapping[str, Any] | None, rng: np.random.Generator
               ) -> tuple[_Drawn, CellDraws, int]:
    """``drawn`` weighed, with :data:`CELL_MORE` times ``n`` draws of the cells of
    ``proposals`` above their Pareto-k bound, as many as ``total`` more draws pay for
    (:func:`more_draws_for`), and how many more were drawn."""
    draws = _weighed(drawn, cut.metric, cut.centres)
    uneven = more_draws_for(draws, set(proposals), n, total, CELL_MORE - 1)
    if not uneven:
        return drawn, draws, 0
    more = _evaluated(proposals, dict.fromkeys(uneven, (CELL_MORE - 1) * n), coords,
                      evaluator, data, rng)
    if more is None:
        return drawn, draws, 0
    drawn = drawn.joined(more)
    return drawn, _weighed(drawn, cut.metric, cut.centres), more.cell.size


def _near(metric: BaseDensity, z: NDArray[np.float64], log_w: NDArray[np.float64]
          ) -> NDArray[np.bool_]:
    """The particles that place parts: within :data:`PARTICLE_RADIUS` standard deviations
    of the search base's mean, or of the run's own weighted mean in its weighted spread
    (where its weights hold ``D + 1`` effective draws): a base on a spike inside a slab
    is a hundredth of the slab's width, and the slab's particles, the run's target, are
    no drift."""
    def within(mean: NDArray[np.float64], cov: NDArray[np.float64]) -> NDArray[np.bool_]:
        eps = np.linalg.solve(np.linalg.cholesky(cov), (z - mean).T)
        return np.asarray(np.sum(eps * eps, axis=0) <= PARTICLE_RADIUS**2)

    near = within(np.asarray(metric.mean, dtype=float), np.asarray(metric.cov, dtype=float))
    usable = np.isfinite(log_w) | (log_w == -np.inf)
    if not np.all(usable) or not np.any(np.isfinite(log_w)) or W.ess(log_w) < z.shape[1] + 1:
        return near
    mean, cov = W.weighted_moments(z, log_w)
    try:
        return near | within(mean, np.atleast_2d(cov))
    except np.linalg.LinAlgError:  # the weighted spread is degenerate
        return near


def more_draws_for(draws: CellDraws, drawn: set[int], n: int, total: int = CELL_TOTAL,
                   each: int = CELL_MORE - 1) -> list[int]:
    """The cells (of those with a proposal, ``drawn``) above their Pareto-k bound, the
    furthest above first, as many as ``total`` draws pay for at ``each`` times their ``n``
    draws a cell (:data:`CELL_MORE` times as many as the first, by default)."""
    excess = draws.cell_k() - draws.cell_k_bound()
    uneven = sorted((j for j in draws.uneven_cells() if j in drawn), key=lambda j: -excess[j])
    return uneven[:max(total, 0) // (each * n)]


def _spills(metric: BaseDensity, centres: NDArray[np.float64],
            covariances: NDArray[np.float64] | None, seed: int | None) -> NDArray[np.bool_]:
    """``(K, K)``: whether mode ``j``'s Gaussian puts :data:`SPILL_SHARE` of its draws in
    cell ``k`` (``j != k``; all False without covariances or a Gaussian to draw)."""
    if covariances is None:
        return np.zeros((centres.shape[0],) * 2, dtype=bool)
    covs = np.asarray(covariances, dtype=float)

    def gaussian(j: int, rng: np.random.Generator) -> NDArray[np.float64] | None:
        try:
            chol = np.linalg.cholesky(covs[j])
        except np.linalg.LinAlgError:
            return None
        return centres[j] + rng.standard_normal((SPILL_DRAWS, centres.shape[1])) @ chol.T

    return _reaching(metric, centres, gaussian, seed, SPILL_SEED_OFFSET)


def _reaching(metric: BaseDensity, centres: NDArray[np.float64],
              draw: Callable[[int, np.random.Generator], NDArray[np.float64] | None],
              seed: int | None, offset: int) -> NDArray[np.bool_]:
    """``(K, K)``: whether ``draw(j, rng)`` (mode ``j``'s part; None: none) puts
    :data:`SPILL_SHARE` of its draws in cell ``k`` (``j != k``), the draws seeded
    ``seed + offset``."""
    k = centres.shape[0]
    out = np.zeros((k, k), dtype=bool)
    if k < 2:
        return out
    rng = np.random.default_rng(None if seed is None else seed + offset)
    for j in range(k):
        y = draw(j, rng)
        if y is None:
            continue
        share = np.bincount(metric.nearest_centre(y, centres), minlength=k) / y.shape[0]
        out[j] = share >= SPILL_SHARE
        out[j, j] = False
    return out


def _others_axes(metric: BaseDensity, centres: NDArray[np.float64],
                 covariances: NDArray[np.float64] | None, seed: int | None
                 ) -> dict[int, EqualMixture]:
    """Per cell ``k``, the equal mixture of the other modes' axis parts that put
    :data:`SPILL_SHARE` of their draws in it (cells none reaches left out): a mode's arms
    along an axis can cross into a neighbour's cell, far from its centre in the other
    coordinates, where nothing of that cell's own reaches."""
    if covariances is None:
        return {}
    axes = [_axes(centres[j], covariances[j], metric.sd) for j in range(centres.shape[0])]

    def axis(j: int, rng: np.random.Generator) -> NDArray[np.float64] | None:
        part = axes[j]
        return None if part is None else part.sample_z(SPILL_DRAWS, rng)

    reach = _reaching(metric, centres, axis, seed, AXIS_SEED_OFFSET)
    out = {}
    for k in range(centres.shape[0]):
        parts = tuple(q for j in np.flatnonzero(reach[:, k]) if (q := axes[j]) is not None)
        if parts:
            out[k] = EqualMixture(parts)
    return out


class _Drawn(NamedTuple):
    """Draws of the cells' proposals: base coordinates, the proposal's and the target's
    log densities there (the Jacobian included), the cell each was drawn for, and the
    constrained draws by column."""

    z: NDArray[np.float64]
    lq: NDArray[np.float64]
    lg: NDArray[np.float64]
    cell: NDArray[np.intp]
    values: dict[str, NDArray[np.float64]]

    def only(self, keep: NDArray[np.bool_]) -> _Drawn:
        """The draws where ``keep``."""
        return _Drawn(self.z[keep], self.lq[keep], self.lg[keep], self.cell[keep],
                      {c: v[keep] for c, v in self.values.items()})

    def joined(self, more: _Drawn) -> _Drawn:
        """These draws and ``more``."""
        return _Drawn(np.concatenate([self.z, more.z]), np.concatenate([self.lq, more.lq]),
                      np.concatenate([self.lg, more.lg]),
                      np.concatenate([self.cell, more.cell]),
                      {c: np.concatenate([v, more.values[c]]) for c, v in self.values.items()})


def _evaluated(proposals: Mapping[int, tuple[list[Part], NDArray[np.float64]]],
               counts: Mapping[int, int], coords: Any, evaluator: LogDensity,
               data: Mapping[str, Any] | None, rng: np.random.Generator) -> _Drawn | None:
    """``counts[k]`` draws of cell ``k``'s proposal, evaluated; None when the target
    cannot be evaluated or is +inf at one of them (logged: the run's own estimate stands,
    and the wide checks name the density)."""
    zs, lqs, strata = [], [], []
    for k, m in counts.items():
        parts, log_mix = proposals[k]
        y = mixture_sample(parts, log_mix, m, rng)
        zs.append(y)
        lqs.append(mixture_log_density(parts, log_mix, y))
        strata.append(np.full(y.shape[0], k, dtype=np.intp))
    z, lq, cell = np.concatenate(zs), np.concatenate(lqs), np.concatenate(strata)
    try:
        x = coords.inverse(z, data)
        _, log_dz_dx = coords.forward(x, data)
        lg = np.asarray(evaluator.log_density(x), dtype=float) - log_dz_dx
    except (ValueError, RuntimeError) as exc:
        logger.info("cell draws could not be evaluated: %s", exc)
        return None
    if np.any(np.isposinf(lg)):  # no weight to give it, and dropping it would bias them
        logger.info("cell draws could not be weighed: the density is +inf at %d of %d "
                    "points inside its support", int(np.sum(np.isposinf(lg))), lg.size)
        return None
    values = {c: np.asarray(v, dtype=float) for c, v in by_column(x, lead=1).items()}
    return _Drawn(z, lq, lg, cell, values)


def _weighed(drawn: _Drawn, metric: BaseDensity, centres: NDArray[np.float64]) -> CellDraws:
    """The cells' draws weighed (:func:`~pemc_stan.estimators.stratified.stratum_log_weights`):
    a draw outside the cell its proposal is for weighs nothing."""
    inside = metric.nearest_centre(drawn.z, centres) == drawn.cell
    log_u = stratum_log_weights(drawn.lg, drawn.lq, inside, drawn.cell)
    return CellDraws(log_u, drawn.cell, drawn.values, int(centres.shape[0]), drawn.z)
