"""Which modes NUTS chains move between: the split's groups of cells, and statistics
of each group's chains.

A draw's cell is its nearest mode centre; chains that share cells are sampled together,
so their cells form one group (:func:`cell_groups`), judged by its own chains
(:func:`group_stats`).  A curved or heavy-tailed mode reaches past the midpoint to its
neighbour's centre, so its draws there can be relabelled by the chains that sampled
them (:func:`draw_cells`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import solve_triangular
from scipy.spatial import cKDTree

from pemc_stan.output.diagnostics import convergence_stats

__all__ = ["LEFT_SHARE_MAX", "DrawCells", "cell_groups", "draw_cells", "draw_partition",
           "group_stats", "thinned_index", "worst_rhat"]

#: Draws per chain that :func:`draw_cells` keeps (evenly spaced).
THINNED_DRAWS = 250
#: A chain stayed in its cell when at most this share of its draws lie nearer another
#: cell's centre (draws in a wide mode's tail can be nearer a narrow neighbour's).
LEFT_SHARE_MAX = 0.01


def cell_groups(cells: NDArray[np.intp], n_cells: int
                ) -> tuple[NDArray[np.intp], NDArray[np.float64], list[list[int]]]:
    """Group the cells that chains move between, and the chains by their group.

    Every cell holding more than :data:`LEFT_SHARE_MAX` of a chain's draws joins one
    group with the chain's other such cells (NUTS moves between them, so they are
    sampled together), transitively; a chain belongs to the group of the cell holding
    most of its draws.  Where a chain started does not count: early warm-up, with its
    large steps, can throw a chain across a barrier it never crosses again.  Cells no
    chain stays in belong to no group: their mass is left out, so the verdict's
    ``mode_groups`` check fails when such a mode holds a material share.

    Parameters
    ----------
    cells
        The cell of every draw, shape (chains, draws), in ``0 .. n_cells - 1``.
    n_cells
        The number of cells.

    Returns
    -------
    (groups, outside, members)
        ``groups[c]``: chain ``c``'s group, numbered in order of their smallest cell;
        ``outside[c]``: the share of its draws outside its group's cells;
        ``members[g]``: the cells of group ``g``.

    Raises
    ------
    ValueError
        If a cell index is out of range.
    """
    labels = np.atleast_2d(np.asarray(cells, dtype=np.intp))
    if labels.size and (labels.min() < 0 or labels.max() >= n_cells):
        raise ValueError(f"cell indices must lie in 0..{n_cells - 1}")
    root = list(range(n_cells))

    def find(k: int) -> int:
        while root[k] != k:
            root[k] = root[root[k]]
            k = root[k]
        return k

    shares = np.stack([np.bincount(row, minlength=n_cells) / max(row.size, 1)
                       for row in labels])
    majority = np.argmax(shares, axis=1)
    for c, home in enumerate(majority):
        for k in np.flatnonzero(shares[c] > LEFT_SHARE_MAX):
            root[find(int(k))] = find(int(home))
    roots = {find(int(k)) for k in majority}
    smallest = sorted(min(k for k in range(n_cells) if find(k) == r) for r in roots)
    number = {find(k): g for g, k in enumerate(smallest)}
    cell_group = np.array([number.get(find(k), -1) for k in range(n_cells)], dtype=np.intp)
    groups = cell_group[majority]
    outside = np.array([float(np.sum(shares[c][cell_group != groups[c]]))
                        for c in range(len(groups))])
    members = [np.flatnonzero(cell_group == g).tolist() for g in range(len(smallest))]
    return groups, outside, members


def group_stats(values: NDArray[np.float64], groups: NDArray[np.intp], n_groups: int
                 ) -> NDArray[np.float64]:
    """:func:`~pemc_stan.output.diagnostics.convergence_stats` of each group's chains of
    one column (``values`` shaped (chains, draws)): (groups, 3)."""
    return np.array([convergence_stats(_two_halves(values[groups == g]))
                     for g in range(n_groups)], dtype=float).reshape(n_groups, 3)


def worst_rhat(stats: NDArray[np.float64]) -> float:
    """The largest finite R-hat of :func:`group_stats` (NaN when none is finite): a group
    whose draws are constant (NaN) must not hide another group's failure."""
    finite = np.isfinite(stats[:, 0])
    return float(np.max(stats[finite, 0])) if finite.any() else float("nan")


def _two_halves(draws: NDArray[np.float64]) -> NDArray[np.float64]:
    """A group's draws (chains, draws), one chain cut into two halves (split R-hat's own
    cut, so that the diagnostics, which want two chains, can run)."""
    if draws.shape[0] != 1:
        return draws
    half = draws.shape[1] // 2
    return np.stack([draws[0, :half], draws[0, half:2 * half]])


@dataclass(frozen=True)
class DrawCells:
    """Cells around the draws themselves: a point's cell is its nearest draw's
    (Euclidean after whitening by ``chol``, a fixed partition of the space).

    Attributes
    ----------
    tree
        The whitened (thinned) draws.
    cells
        Each of them's cell (its chain's home, :func:`draw_cells`).
    mean, chol
        The whitening: ``z -> chol^-1 (z - mean)``.
    """

    tree: cKDTree
    cells: NDArray[np.intp]
    mean: NDArray[np.float64]
    chol: NDArray[np.float64]

    def labels(self, z: NDArray[np.float64]) -> NDArray[np.intp]:
        """The cell of every row of ``z`` (S, D)."""
        _, nearest = self.tree.query(_whiten(z, self.mean, self.chol))
        return self.cells[np.asarray(nearest, dtype=np.intp)]


def _whiten(z: NDArray[np.float64], mean: NDArray[np.float64], chol: NDArray[np.float64]
            ) -> NDArray[np.float64]:
    za = np.atleast_2d(np.asarray(z, dtype=float))
    return np.asarray(solve_triangular(chol, (za - mean).T, lower=True).T)


def thinned_index(n_draws: int) -> NDArray[np.intp]:
    """At most :data:`THINNED_DRAWS` evenly spaced indices of ``n_draws`` draws."""
    return np.unique(np.linspace(0, n_draws - 1, min(n_draws, THINNED_DRAWS)).round()
                     ).astype(np.intp)


def draw_partition(z: NDArray[np.float64], labels: NDArray[np.intp],
                   mean: NDArray[np.float64], cov: NDArray[np.float64]) -> DrawCells:
    """The partition around the chains' thinned draws (:func:`thinned_index`), each
    labelled with its chain's entry of ``labels`` (chains,).

    Raises
    ------
    ValueError
        If ``z`` is not (chains, draws, D) with one label per chain, or ``cov`` is not
        positive definite.
    """
    za = np.asarray(z, dtype=float)
    if za.ndim != 3 or np.shape(labels) != za.shape[:1]:
        raise ValueError(f"draws of shape {za.shape} do not match {np.shape(labels)} "
                         "chain labels")
    try:
        chol = np.linalg.cholesky(np.atleast_2d(np.asarray(cov, dtype=float)))
    except np.linalg.LinAlgError as exc:
        raise ValueError("the metric's covariance is not positive definite") from exc
    keep = thinned_index(za.shape[1])
    m = np.asarray(mean, dtype=float)
    white = _whiten(za[:, keep].reshape(-1, za.shape[2]), m, chol)
    return DrawCells(cKDTree(white), np.repeat(np.asarray(labels, dtype=np.intp), keep.size),
                     m, chol)


def draw_cells(z: NDArray[np.float64], cells: NDArray[np.intp], mean: NDArray[np.float64],
               cov: NDArray[np.float64]) -> tuple[DrawCells, NDArray[np.intp]]:
    """Cells that follow the modes' own shapes, from the chains that sampled them.

    The nearest centre in one metric cuts a banana's arms or a heavy-tailed mode's
    tail off at the midpoint to the next centre, so a chain that never leaves its mode
    seems to visit its neighbour's cell and the two modes are grouped.  Here every
    chain has a home, the cell of most of its draws, and a draw's cell is the home of
    the chain of its nearest draw *in another chain*: a chain's draws in its own
    mode's arm lie among the draws of the mode's other chains, while a chain that
    crosses into another mode meets that mode's chains there.  (Every mode the search
    found has chains started at its centre, so it has at least two.)  Each chain is
    thinned to :data:`THINNED_DRAWS` evenly spaced draws, which stand for the draws
    around them in time: the nearest-draw search over every draw grows with the square
    of the draws and is slow for many chains.

    Parameters
    ----------
    z
        The chains' draws (chains, draws, D) in base coordinates.
    cells
        Their nearest-centre cells (chains, draws).
    mean, cov
        The metric: the search's Gaussian.

    Returns
    -------
    (DrawCells, labels)
        The partition (every thinned draw labelled by its own chain's home, for
        regions) and the draws' cells by the other chains (chains, draws).

    Raises
    ------
    ValueError
        If the shapes do not match, or ``cov`` is not positive definite.
    """
    za = np.asarray(z, dtype=float)
    labels = np.asarray(cells, dtype=np.intp)
    if za.ndim != 3 or labels.shape != za.shape[:2]:
        raise ValueError(f"draws of shape {za.shape} do not match cells of shape "
                         f"{labels.shape}")
    n_chains, n_draws, _ = za.shape
    home = np.array([np.bincount(row).argmax() for row in labels], dtype=np.intp)
    partition = draw_partition(za, home, mean, cov)
    white = np.asarray(partition.tree.data)
    keep = thinned_index(n_draws)
    chain = np.repeat(np.arange(n_chains), keep.size)
    # every draw stands with the thinned draw nearest it in time
    nearest_kept = np.abs(np.arange(n_draws)[:, None] - keep[None, :]).argmin(axis=1)
    out = np.empty_like(labels)
    for c in range(n_chains):
        others = chain != c
        if not others.any():
            out[c] = home[c]
            continue
        _, nearest = cKDTree(white[others]).query(white[chain == c])
        out[c] = partition.cells[others][np.asarray(nearest, dtype=np.intp)][nearest_kept]
    return partition, out
