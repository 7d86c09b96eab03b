"""A tempered run's cells weighed by importance sampling inside each cell.

A tempered run's shares of the modes rest on how often its chains entered each one,
about ten times a run on the 20-Gaussian mixture (docs/validation.md, "Tempering alone
against SMC").  Here the search's mode centres cut the base coordinates into cells (the
nearest centre in the search base's metric, as CT's strata), and each cell's mass
``Z_k = int_cell gamma`` is estimated by importance sampling with a proposal made for
that cell alone (:mod:`pemc_stan.estimators.stratified`: a draw outside its cell weighs
nothing, so each ``Z_k`` is unbiased whatever the proposal).  A cell's proposal is the
equal mixture of up to three Student-t parts (:data:`CELL_DF` degrees of freedom, the
covariances times :data:`CELL_SPREAD`):

* the run's particles in the cell weighted to the target, where they hold ``D + 1``
  effective draws;
* all the run's particles in the cell, unweighted, at any temperature: where the chains
  went, also in modes they hardly held at the target;
* the search's centre with its mode's Pathfinder covariance
  (:attr:`~pemc_stan.modes.search.ModeSearch.covariances`);

and, when given, a covering part every cell shares (a curved mode's arms reach beyond
all three).

The run's draws alone miss modes the chains passed by, and the search alone reaches
the modes it missed only through its parts' tails; no weight diagnostic sees mass that
no part reaches (docs/validation.md, "Tempering alone, weighed cell by cell").  A
tempered run's estimate where the draws' weights allow (:func:`pemc_stan.plan.run_plan`);
``benchmarks/cell_is_experiment.py`` measures its parts.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pemc_stan.estimators import weights as W
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.estimators.stratified import (
    stratified_log_z,
    stratified_mean,
    stratum_log_weights,
)
from pemc_stan.methods.base_density import BaseDensity
from pemc_stan.modes.density import LogDensity
from pemc_stan.modes.wide import mixture_log_density, mixture_sample
from pemc_stan.output.fit_protocol import by_column
from pemc_stan.sampling.hooks import WeightedEstimate

__all__ = ["CELL_DF", "CELL_DRAWS", "CELL_DRAWS_MAX", "CELL_K_MAX", "CELL_SPREAD", "COVER_DF",
           "COVER_SPREAD", "CellDraws", "cell_count", "cell_draws", "cell_parts", "cover_part"]

logger = logging.getLogger(__name__)

#: Degrees of freedom of a cell's proposal parts ...
CELL_DF = 5.0
#: ... whose covariances are this many times those fitted ...
CELL_SPREAD = 2.0
#: ... and the draws of each cell's proposal: at least this many, and at most
#: :data:`CELL_DRAWS_MAX`; between them as many in all as the run took gradients
#: (:func:`cell_count`: a density costs less than a gradient, so the cells cost at most
#: about what the run did).  A curved mode's arms need the more: ``curved_pair_2d`` CT
#: seed 1 was 9.9 standard errors off at 4,000 a cell with a pooled k of 0.35, and right
#: at 64,000 (docs/validation.md, "Tempering alone, weighed cell by cell").
CELL_DRAWS = 4000
CELL_DRAWS_MAX = 16_000
#: The covering part every cell's proposal gets: the search's base with its standard
#: deviations times this, and Student-t tails of :data:`COVER_DF` degrees of freedom (the
#: wide check's covering part, :data:`~pemc_stan.modes.wide.MOMENT_DF`) ...
COVER_SPREAD = 2.0
COVER_DF = 3.0
#: ... and the largest pooled Pareto k of the draws' weights for the cells to be the
#: run's estimate (where PSIS estimates and their errors hold, Vehtari et al. 2024).
CELL_K_MAX = 0.7


@dataclass(frozen=True, eq=False)
class CellDraws:
    """The cells' importance draws: per-draw log weights whose sum estimates ``Z``
    (:func:`~pemc_stan.estimators.stratified.stratum_log_weights`), the cell whose
    proposal drew each, and each parameter column's constrained values."""

    log_u: NDArray[np.float64]
    strata: NDArray[np.intp]
    values: dict[str, NDArray[np.float64]]
    cells: int

    def log_z(self) -> tuple[float, float]:
        """``(log Z, its standard error)``."""
        return stratified_log_z(self.log_u, self.strata)

    def mean(self, f: NDArray[np.float64] | str) -> W.WeightedMean:
        """``E[f]`` and its standard error, ``f`` a column or values at the draws."""
        values = self.values[f] if isinstance(f, str) else f
        return stratified_mean(values, self.log_u, self.strata)

    def pareto_k(self) -> float:
        """The Pareto k of all the draws' weights pooled (each cell's by its share)."""
        return float(W.pareto_smooth(self.log_u[np.isfinite(self.log_u)])[1])

    # what a fit reports when its estimate is the cells' (ExtendedFit.cell_estimate)
    def expectation(self, f: Callable[[Mapping[str, Any]], Any] | str) -> WeightedEstimate:
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
        values = np.asarray(self.values[f] if isinstance(f, str) else f(self.values),
                            dtype=float)
        if values.shape != self.log_u.shape:
            raise ValueError(f"f returned shape {values.shape}; expected one value per "
                             f"cell draw, {self.log_u.shape}")
        est = self.mean(values)
        mean, se = float(est.mean), float(est.std_error)
        u = np.exp(W.log_normalise(self.log_u))
        var = float(np.sum(np.where(u > 0, u * (values - mean) ** 2, 0.0)))
        return WeightedEstimate(mean=mean, mcse=se, ess=var / se**2 if se > 0 else math.nan)

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
    """Draws a cell (:data:`CELL_DRAWS`): ``gradients`` in all over ``cells`` cells, within
    :data:`CELL_DRAWS` and :data:`CELL_DRAWS_MAX`.

    Raises
    ------
    Nothing.
    """
    return int(min(max(gradients // max(cells, 1), CELL_DRAWS), CELL_DRAWS_MAX))


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


def _t(mean: NDArray[np.float64], cov: NDArray[np.float64]) -> BaseDensity | None:
    """The Student-t part, or None when its covariance is not positive definite."""
    scale = CELL_SPREAD * (np.asarray(cov, dtype=float) + np.asarray(cov, dtype=float).T) / 2
    try:
        np.linalg.cholesky(scale)
    except np.linalg.LinAlgError:
        return None
    return BaseDensity(np.asarray(mean, dtype=float), scale, "dense", df=CELL_DF)


def cell_parts(z: NDArray[np.float64], log_w: NDArray[np.float64],
               centre: NDArray[np.float64] | None, covariance: NDArray[np.float64] | None
               ) -> list[BaseDensity]:
    """One cell's proposal parts (module docstring): from the run's particles ``z`` in
    the cell (base coordinates) with their log target weights ``log_w``, and the search's
    ``centre`` and ``covariance`` of the cell's mode (None: no such part).

    Raises
    ------
    Nothing.
    """
    parts: list[BaseDensity | None] = []
    dim = z.shape[1]
    if z.shape[0] > dim + 1:
        usable = np.any(np.isfinite(log_w)) and not np.any(np.isnan(log_w) | (log_w == np.inf))
        if usable and W.ess(log_w) >= dim + 1:
            parts.append(_t(*W.weighted_moments(z, log_w)))
        parts.append(_t(z.mean(axis=0), np.atleast_2d(np.cov(z, rowvar=False))))
    if centre is not None and covariance is not None:
        parts.append(_t(centre, covariance))
    return [q for q in parts if q is not None]


def cell_draws(coords: Any, evaluator: LogDensity, data: Mapping[str, Any] | None,
               metric: BaseDensity, centres: NDArray[np.float64],
               covariances: NDArray[np.float64] | None, z_run: NDArray[np.float64],
               log_w_run: NDArray[np.float64], seed: int | None, n: int = CELL_DRAWS,
               cover: BaseDensity | None = None) -> CellDraws | None:
    """Importance draws of each cell of ``centres`` (the nearest in ``metric``'s metric)
    from its own proposal (:func:`cell_parts`), ``n`` a cell, weighed by the target.

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
    lab = metric.nearest_centre(z_run, centres)
    zs, lqs, strata = [], [], []
    for k in range(centres.shape[0]):
        inside = lab == k
        cov = None if covariances is None else np.asarray(covariances[k], dtype=float)
        parts = cell_parts(z_run[inside], log_w_run[inside], centres[k], cov)
        if cover is not None:
            parts.append(cover)
        if not parts:
            continue
        log_mix = np.full(len(parts), -np.log(len(parts)))
        y = mixture_sample(parts, log_mix, n, rng)
        zs.append(y)
        lqs.append(mixture_log_density(parts, log_mix, y))
        strata.append(np.full(y.shape[0], k, dtype=np.intp))
    if not zs:
        return None
    z, lq, cell = np.concatenate(zs), np.concatenate(lqs), np.concatenate(strata)
    try:
        x = coords.inverse(z, data)
        _, log_dz_dx = coords.forward(x, data)
        lg = np.asarray(evaluator.log_density(x), dtype=float) - log_dz_dx
    except (ValueError, RuntimeError) as exc:
        logger.info("cell draws could not be evaluated: %s", exc)
        return None
    log_u = stratum_log_weights(lg, lq, metric.nearest_centre(z, centres) == cell, cell)
    if not np.any(np.isfinite(log_u)):
        return None
    values = {c: np.asarray(v, dtype=float) for c, v in by_column(x, lead=1).items()}
    return CellDraws(log_u, cell, values, int(centres.shape[0]))
