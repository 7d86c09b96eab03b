"""Logging and warnings on the terminal (only the command line configures them)."""

from __future__ import annotations

import logging
import sys
import warnings
from typing import Any

__all__ = ["configure_logging", "quiet_cmdstanpy"]


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
    """pemc-stan's log records on standard error, each message once; warnings likewise.

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

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        text = str(message)
        if text in shown:  # the library logs what it warns
            return
        shown.add(text)
        print(f"WARNING: {text}", file=sys.stderr)

    if not debug:
        warnings.showwarning = show


def quiet_cmdstanpy(debug: bool) -> None:
    """cmdstanpy's own logger: its chatter, warnings and errors only under --debug.

    (pemc-stan prints the diagnostics that matter and reports CmdStan's errors
    as cause + remedy; cmdstanpy configures its logger on first use, so this
    is done after importing it.)

    Raises
    ------
    Nothing.
    """
    import cmdstanpy.utils

    cmdstanpy.utils.get_logger().setLevel(logging.DEBUG if debug else logging.CRITICAL)
