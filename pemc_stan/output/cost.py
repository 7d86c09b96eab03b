"""Where a run's time went, as its reader sees it: the stages' wall seconds in one line."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["STAGE_LABELS", "cost_line"]

#: How a run's stages are named to its reader.
STAGE_LABELS = {"search": "search", "split": "mode split",
                "refused_split": "refused split", "method": "tempered run",
                "estimate": "estimate and checks", "follow_ups": "follow-ups"}


def cost_line(stage_seconds: Mapping[str, float]) -> str:
    """``"12.4 s: search 1.1, mode split 9.8, estimate and checks 1.5"`` (stages
    under 0.05 s left out).

    Raises
    ------
    Nothing.
    """
    shown = [f"{STAGE_LABELS.get(k, k)} {v:.1f}" for k, v in stage_seconds.items()
             if v >= 0.05]
    return f"{sum(stage_seconds.values()):.1f} s: {', '.join(shown)}"
