"""Logging, warnings and progress lines on the terminal (only the command line configures
them).

Progress: each stage of a run (:mod:`pemc_stan.backend.progress`) is one line on
standard error when it starts, ``[pemc-stan 00:42] CT round 2 of 3: sampling 4
chains x 1000 draws`` (elapsed time since the command started), never repeated (a
redirected run's log holds what happened; its last lines say where the time went).
``--quiet`` shows none of them.
"""

from __future__ import annotations

import logging
import sys
import warnings
from typing import Any

from pemc_stan.backend import progress
from pemc_stan.backend.progress import StageLines

__all__ = ["configure_logging"]


class _OncePerMessage(logging.Filter):
    """Drop log records whose message was already shown (as a warning or a record)."""

    def __init__(self, shown: set[str]) -> None:
        super().__init__()
        self.shown = shown

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in self.shown:
            return False
        self.shown.add(message)
        return True


def configure_logging(debug: bool, quiet: bool) -> None:
    """pemc-stan's log records on standard error, each message once; warnings likewise;
    the stages of a run as progress lines (module docstring).

    Raises
    ------
    Nothing.
    """
    level = logging.DEBUG if debug else logging.WARNING if quiet else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    shown: set[str] = set()
    handler.addFilter(_OncePerMessage(shown))
    root = logging.getLogger("pemc_stan")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    stages = logging.getLogger(progress.__name__)
    for old in stages.handlers:
        old.close()
    stages.handlers[:] = [StageLines(sys.stderr)]
    stages.propagate = False

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        text = str(message)
        if text in shown:  # the library logs what it warns
            return
        shown.add(text)
        print(f"WARNING: {text}", file=sys.stderr)

    if not debug:
        warnings.showwarning = show

