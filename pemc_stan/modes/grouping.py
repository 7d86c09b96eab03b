"""Which modes NUTS chains move between: the split's groups of cells, and statistics
of each group's chains.

A draw's cell is its nearest mode centre; chains that share cells are sampled together,
so their cells form one group (:func:`cell_groups`), judged by its own chains
(:func:`group_stats`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pemc_stan.output.diagnostics import convergence_stats

__all__ = ["LEFT_SHARE_MAX", "cell_groups", "group_stats", "worst_rhat"]

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
