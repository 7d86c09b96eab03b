"""Logging, warnings and progress lines on the terminal (only the command line configures
them).

Progress: each stage of a run (:mod:`pemc_stan.backend.progress`) is one line on
standard error when it starts, ``[pemc-stan 00:42] CT round 2 of 3: sampling 4
chains x 1000 draws`` (elapsed time since the command started); off a terminal
(a log file, a batch job) the running stage is repeated every
:data:`PROGRESS_INTERVAL` seconds, so that a long run shows that it is alive.
``--quiet`` shows none of them.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, TextIO

from pemc_stan.backend import progress

__all__ = ["configure_logging", "StageLines", "PROGRESS_INTERVAL"]

#: Seconds between the lines that repeat a running stage off a terminal.
PROGRESS_INTERVAL = 20.0


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


class StageLines(logging.Handler):
    """The records of :mod:`pemc_stan.backend.progress` as ``[pemc-stan MM:SS] message``
    lines; with ``periodic``, :meth:`tick` repeats the running stage every ``interval``
    seconds (a daemon thread calls it once the first stage has started).

    Parameters
    ----------
    stream
        Where the lines go (standard error).
    periodic
        Repeat the running stage (off a terminal, where no progress bar moves).
    interval
        Seconds between lines about the same running stage.
    clock
        ``time.monotonic`` (tests pass their own).
    """

    def __init__(self, stream: TextIO, *, periodic: bool, interval: float = PROGRESS_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.stream = stream
        self.periodic = periodic
        self.interval = float(interval)
        self.clock = clock
        self.start = clock()
        self.last = self.start
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def line(self, message: str) -> str:
        """``message`` with the time since the command started."""
        return f"[pemc-stan {progress.format_elapsed(self.clock() - self.start)}] {message}"

    def _write(self, message: str) -> None:
        self.acquire()
        try:
            self.stream.write(self.line(message) + "\n")
            self.stream.flush()
            self.last = self.clock()
        finally:
            self.release()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._write(record.getMessage())
        except Exception:
            self.handleError(record)
        if self.periodic and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pemc-stan progress",
                                            daemon=True)
            self._thread.start()

    def tick(self) -> bool:
        """Repeat the running stage if nothing was written for ``interval`` seconds.

        Returns
        -------
        bool
            Whether a line was written.

        Raises
        ------
        Nothing.
        """
        running = progress.current()
        if running is None or self.clock() - self.last < self.interval:
            return False
        try:
            self._write(f"{running.description} (running for "
                        f"{progress.format_elapsed(running.elapsed())})")
        except Exception:  # a closed stream must not end the run
            return False
        return True

    def _run(self) -> None:
        while not self._stop.wait(min(self.interval / 4, 5.0)):
            self.tick()

    def close(self) -> None:
        self._stop.set()
        super().close()


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
    stages.handlers[:] = [StageLines(sys.stderr, periodic=not _is_terminal(sys.stderr))]
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


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
