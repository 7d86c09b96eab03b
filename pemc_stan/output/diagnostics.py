"""NUTS transition problems shared by the pseudo-extended and tempered fits.

Both fit classes run CmdStan's NUTS on an extended target and report, besides
their method-specific diagnostics, the two things Stan itself flags about the
transitions: divergences (the sampler may be biased: the step size is too
large for some region) and trajectories stopped at ``max_treedepth`` (not a
bias, but each iteration then moves less than NUTS would have let it, which
on tempered multimodal targets means fewer moves between modes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["TREEDEPTH_WARN_SHARE", "TransitionCounts", "transition_counts", "treedepth_advice"]

#: Share of transitions at ``max_treedepth`` above which the fits advise a deeper tree.
TREEDEPTH_WARN_SHARE = 0.01


@dataclass(frozen=True)
class TransitionCounts:
    """Counts over all chains' sampling transitions.

    ``max_treedepth`` is None when the fit does not record it (then
    ``max_treedepth_hits`` is 0).
    """

    transitions: int
    divergences: int
    max_treedepth: int | None
    max_treedepth_hits: int


def _max_treedepth(fit: Any) -> int | None:
    """``max_depth`` of the run, as cmdstanpy parsed it from the Stan CSV header."""
    try:
        return int(fit.metadata.cmdstan_config["max_depth"])
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def transition_counts(fit: Any, draws: NDArray[np.float64],
                      columns: Mapping[str, int]) -> TransitionCounts:
    """Divergences and max-treedepth hits of a NUTS run.

    Parameters
    ----------
    fit
        The ``cmdstanpy.CmdStanMCMC`` (only ``fit.metadata.cmdstan_config`` is
        read, for ``max_depth``; an object without it skips the tree-depth count).
    draws
        Sampling draws, shape ``(iterations, chains, columns)``.
    columns
        Column name -> index into the last axis of ``draws``.

    Returns
    -------
    TransitionCounts

    Raises
    ------
    ValueError
        If ``draws`` is not three-dimensional.
    """
    arr = np.asarray(draws)
    if arr.ndim != 3:
        raise ValueError(f"draws have shape {arr.shape}; expected (iterations, chains, columns)")
    transitions = int(arr.shape[0] * arr.shape[1])
    div = columns.get("divergent__")
    divergences = int(np.sum(arr[:, :, div] != 0)) if div is not None else 0
    depth = _max_treedepth(fit)
    tree = columns.get("treedepth__")
    hits = int(np.sum(arr[:, :, tree] >= depth)) if depth is not None and tree is not None else 0
    return TransitionCounts(transitions, divergences, depth, hits)


def treedepth_advice(counts: TransitionCounts) -> str | None:
    """The advice for trajectories cut short, or None when few were.

    Parameters
    ----------
    counts
        From :func:`transition_counts`.

    Returns
    -------
    str or None
        A message when more than :data:`TREEDEPTH_WARN_SHARE` of the
        transitions stopped at ``max_treedepth``.
    """
    if counts.max_treedepth is None or counts.transitions == 0:
        return None
    share = counts.max_treedepth_hits / counts.transitions
    if share <= TREEDEPTH_WARN_SHARE:
        return None
    return (f"{counts.max_treedepth_hits} of {counts.transitions} transitions "
            f"({100 * share:.1f}%) stopped at max_treedepth={counts.max_treedepth}: their "
            "trajectories were cut short, so each iteration moves less than NUTS would have "
            f"let it. Pass max_treedepth={counts.max_treedepth + 2} (each extra level can "
            "double the cost of an iteration).")
