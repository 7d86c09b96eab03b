"""The cells of the pilot's modes in a CT run: which are one mode, and whether the step
size suits each.

A draw's cell is the nearest of the pilot's mode centres in the base's metric
(:meth:`~pemc_stan.core.base_density.BaseDensity.nearest_centre`).  The fit
post-stratifies its estimates by the cells that are separate modes
(:func:`join_crossed_cells`), and compares the chains' acceptance across them
(:func:`lowest_acceptance_ratio`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pemc_stan.numeric import logsumexp

__all__ = ["MERGE_CROSSINGS", "MERGE_RATE", "MIN_CELL_DRAWS", "MODE_ACCEPT_RATIO",
           "MODE_ACCEPT_DRAWS", "join_crossed_cells", "lowest_acceptance_ratio"]

#: Fewest steps between two cells at beta > 0.5 that show they are one mode (:meth:`strata`).
MERGE_CROSSINGS = 5
#: ... and the least share of the steps between them that independent draws would make:
#: parts of one mode are crossed at a rate of order 1 / (the autocorrelation time of the
#: cell indicator), isolated modes only where a chain passes a barrier at beta > 0.5.
MERGE_RATE = 0.05
#: Fewest draws of a cell of its own (:meth:`strata`).
MIN_CELL_DRAWS = 50
#: A mode's cell whose mean acceptance statistic at beta > 0.5 is below this share of
#: the other cells' was sampled with a step size too large for it (:meth:`mode_acceptance`;
#: docs/decisions.md).
MODE_ACCEPT_RATIO = 2.0 / 3.0
#: Fewest draws at beta > 0.5 in a cell for its acceptance to be judged.
MODE_ACCEPT_DRAWS = 30


def join_crossed_cells(labels: NDArray[np.intp], mass: NDArray[np.float64],
                       beta: NDArray[np.float64], log_w0: NDArray[np.float64] | None = None
                       ) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """Join cells that are not separate modes (see the fit's ``strata``).

    Repeatedly joins the two cells with the most steps between them at ``beta
    > 0.5`` while that count is at least ``MERGE_CROSSINGS`` and at least
    ``MERGE_RATE`` times ``2 H p_i p_j``, the count of ``H`` such steps between
    independent draws whose shares of the cells are ``p_i`` and ``p_j`` (separated
    modes: a tiny share of that count; one mode split in two: a share of order one
    over the autocorrelation time); then a cell with
    fewer than ``MIN_CELL_DRAWS`` draws, or whose base-end weights ``w_0``
    (``log_w0``) have a Kish ESS below ``MIN_CELL_DRAWS / 5`` (its ``E[w_0 1_k]``,
    the denominator of its share of ``Z``, rests on a few draws: a cell the
    chains entered only near ``beta = 1``), joins the cell it is crossed into
    most often, or the largest one.
    ``labels`` and ``beta`` are (chains, draws); returns cells ``0..K'-1`` and
    their summed masses.
    """
    labels = np.asarray(labels).copy()
    mass = np.asarray(mass, dtype=float).copy()

    def join(i: int, j: int) -> None:  # cell j into cell i, then relabel 0..K-2
        nonlocal labels, mass
        labels[labels == j] = i
        labels[labels > j] -= 1
        mass[i] += mass[j]
        mass = np.delete(mass, j)

    def crossings(hot_only: bool) -> NDArray[np.int_]:
        step = labels[:, 1:] != labels[:, :-1]
        if hot_only:
            step &= (beta[:, 1:] > 0.5) & (beta[:, :-1] > 0.5)
        counts = np.zeros((mass.size, mass.size), dtype=int)
        np.add.at(counts, (labels[:, :-1][step], labels[:, 1:][step]), 1)
        return counts + counts.T

    hot = (beta[:, 1:] > 0.5) & (beta[:, :-1] > 0.5)
    while mass.size > 1:
        counts = crossings(True)
        share = np.bincount(labels[:, 1:][hot], minlength=mass.size) / max(int(hot.sum()), 1)
        independent = 2.0 * hot.sum() * np.outer(share, share)
        counts[(counts < MERGE_CROSSINGS) | (counts < MERGE_RATE * independent)] = 0
        i, j = np.unravel_index(int(np.argmax(counts)), counts.shape)
        if counts[i, j] == 0:
            break
        join(int(min(i, j)), int(max(i, j)))
    while mass.size > 1:
        sizes = np.bincount(labels.ravel(), minlength=mass.size)
        score = sizes.astype(float)
        if log_w0 is not None:  # Kish ESS of w_0 in each cell, on the scale of the draws
            kish = np.array([np.exp(2 * logsumexp(log_w0[labels == k])
                                    - logsumexp(2 * log_w0[labels == k])) if sizes[k] else 0.0
                             for k in range(mass.size)])
            score = np.minimum(score, 5.0 * kish)
        small = int(np.argmin(score))
        if score[small] >= MIN_CELL_DRAWS:
            break
        counts = crossings(False)[small]
        counts[small] = -1
        other = int(np.argmax(counts)) if counts.max() > 0 else int(
            np.argmax(np.where(np.arange(mass.size) == small, -1, sizes)))
        join(min(small, other), max(small, other))
    return labels.astype(np.intp), mass


def lowest_acceptance_ratio(cells: NDArray[np.intp], hot: NDArray[np.bool_],
                            accept: NDArray[np.float64], n_cells: int
                            ) -> tuple[float, int] | None:
    """The lowest ratio of a cell's mean acceptance statistic over the ``hot`` draws to
    the other cells', and that cell; None without two cells of :data:`MODE_ACCEPT_DRAWS`
    hot draws.  ``cells``, ``hot`` and ``accept`` are shaped alike (NaN acceptance: 0).

    Raises
    ------
    Nothing.
    """
    accept = np.nan_to_num(np.asarray(accept, dtype=float), nan=0.0)
    worst: tuple[float, int] | None = None
    for k in range(n_cells):
        mine, rest = hot & (cells == k), hot & (cells != k)
        if mine.sum() < MODE_ACCEPT_DRAWS or rest.sum() < MODE_ACCEPT_DRAWS:
            continue
        ratio = float(accept[mine].mean() / max(accept[rest].mean(), 1e-12))
        if worst is None or ratio < worst[0]:
            worst = (ratio, k)
    return worst
