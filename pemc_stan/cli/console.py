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
import re
import sys
import warnings
from collections.abc import Iterable
from typing import Any

from pemc_stan.backend import progress
from pemc_stan.backend.progress import StageLines

#: The command line's flags (``--split-modes``, ...), set by :func:`use_flags` when the
#: command line starts: advice written as Python keywords is shown as these flags.
_FLAGS: set[str] = set()
#: ``name=value`` as Python advice writes it (``split_modes='never'``, ``adapt_delta=0.95``).
_NAMED = re.compile(r"\(([a-z][a-z0-9]*_[a-z0-9_]*)\)")  # "(iter_sampling)"
_KEYWORD = re.compile(r"(?<![\w.-])([a-z][a-z0-9_]*)=('[^']*'|\"[^\"]*\"|[^\s,;)]+)")


def use_flags(flags: Iterable[str]) -> None:
    """The flags :func:`cli_words` may name (the command line's, when it starts)."""
    _FLAGS.clear()
    _FLAGS.update(flags)


def cli_words(text: str) -> str:
    """``text`` with Python keyword advice in the command line's words:
    ``split_modes='never'`` -> ``--split-modes never``, ``overwrite=True`` ->
    ``--overwrite``, ``plots=False`` -> ``--no-plots``, ``(iter_sampling)`` ->
    ``(--iter-sampling)`` (a name that is no flag is left as it is).

    Raises
    ------
    Nothing.
    """
    def flag(match: re.Match[str]) -> str:
        name, value = match.group(1), match.group(2)
        dashed = "--" + name.replace("_", "-")
        negated = "--no-" + name.replace("_", "-")
        if value == "True" and dashed in _FLAGS:  # a switch: overwrite=True
            return dashed
        if value == "False" and negated in _FLAGS:  # plots=False
            return negated
        if dashed not in _FLAGS:
            return match.group(0)
        return f"{dashed} {value.strip(chr(39) + chr(34))}"

    def named(match: re.Match[str]) -> str:  # "run longer (iter_sampling)"
        dashed = "--" + match.group(1).replace("_", "-")
        return f"({dashed})" if dashed in _FLAGS else match.group(0)

    return _NAMED.sub(named, _KEYWORD.sub(flag, text))

__all__ = ["configure_logging"]


class _FlagWords(logging.Formatter):
    """Log records as the command line says them: Python keyword advice as flags
    (:func:`cli_words`; a follow-up's reason says ``max_treedepth=10`` in the library)."""

    def format(self, record: logging.LogRecord) -> str:
        return cli_words(super().format(record))


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
    handler.setFormatter(_FlagWords("%(levelname)s: %(message)s"))
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
        print(f"WARNING: {cli_words(text)}", file=sys.stderr)

    if not debug:
        warnings.showwarning = show

