"""What a run is doing: named stages, for the log, the command line and the progress bars.

A method marks each step of a run with :func:`stage` (the pilot's search for modes,
a round of continuous tempering's bootstrap, a follow-up run, CmdStan sampling);
stages nest, and a stage's :attr:`Stage.description` names its enclosing ones
(``"CT round 2 of 3: sampling 4 chains x 1000 draws"``).  Entering a stage logs
its description at INFO on this module's logger (``pemc_stan.backend.progress``,
silent unless logging is configured: the command line prints these records as
progress lines); leaving it logs how long it took at DEBUG.  :func:`current` is
the stage that started last and is still running.

While a stage runs, cmdstanpy's progress bars (``show_progress=True``) carry the
short labels of the stages around them (``"CT round 2/3 chain 1"``): cmdstanpy
makes its bars with the ``tqdm`` of its ``model`` module, which is wrapped for the
time stages are running (and left alone if cmdstanpy no longer has it).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

logger = logging.getLogger(__name__)

__all__ = ["Stage", "stage", "current", "STAGE_ATTRIBUTE", "format_elapsed", "StageLines",
           "interactive", "is_terminal", "stage_lines"]

#: The attribute of the stage log records that holds their :class:`Stage`.
STAGE_ATTRIBUTE = "pemc_stage"


@dataclass(frozen=True, eq=False)
class Stage:
    """A running step of a run.

    Attributes
    ----------
    label
        What runs (``"sampling 4 chains x 1000 draws"``).
    parent
        The stage it runs in (None at the top).
    bar
        Its short label on progress bars (``"CT round 2/3"``); empty: none.
    started
        ``time.monotonic()`` when it started.
    """

    label: str
    parent: Stage | None = None
    bar: str = ""
    started: float = field(default_factory=time.monotonic)

    @property
    def description(self) -> str:
        """The labels from the outermost stage to this one, joined by ``": "``."""
        return self.label if self.parent is None else f"{self.parent.description}: {self.label}"

    @property
    def bar_label(self) -> str:
        """The short labels from the outermost stage to this one (``"follow-up 1, CT round
        4/4"``)."""
        outer = "" if self.parent is None else self.parent.bar_label
        return ", ".join(x for x in (outer, self.bar) if x)

    def elapsed(self) -> float:
        """Seconds since it started."""
        return time.monotonic() - self.started


_lock = threading.Lock()
_running: list[Stage] = []  # every thread's, in the order they started
_local = threading.local()  # this thread's enclosing stages


def _stack() -> list[Stage]:
    stack: list[Stage] | None = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def current() -> Stage | None:
    """The stage that started last, in any thread, and is still running (None: none).

    Raises
    ------
    Nothing.
    """
    with _lock:
        return _running[-1] if _running else None


def format_elapsed(seconds: float) -> str:
    """``MM:SS``, or ``H:MM:SS`` from an hour on.

    Raises
    ------
    Nothing.
    """
    total = max(int(seconds), 0)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


@contextlib.contextmanager
def stage(label: str, *, bar: str = "", announce: bool = True) -> Iterator[Stage]:
    """Mark a step of a run (module docstring): logged when it starts (INFO) and ends
    (DEBUG); its progress bars carry ``bar``.

    Parameters
    ----------
    label
        What runs, in a few words (``"CT round 2 of 3"``).
    bar
        A short label for cmdstanpy's progress bars while it runs (``"CT round 2/3"``).
    announce
        False for a stage whose inner stages start at once and name it anyway (their
        descriptions begin with its label): its start is logged at DEBUG.

    Raises
    ------
    Nothing itself; whatever the block raises passes through.
    """
    stack = _stack()
    entered = Stage(label, stack[-1] if stack else None, bar, time.monotonic())
    stack.append(entered)
    with _lock:
        _running.append(entered)
    logger.log(logging.INFO if announce else logging.DEBUG, "%s", entered.description,
               extra={STAGE_ATTRIBUTE: entered})
    try:
        with _labelled_bars():
            yield entered
    finally:
        stack.remove(entered)
        with _lock:
            _running.remove(entered)
        logger.debug("%s: done after %s", entered.description,
                     format_elapsed(entered.elapsed()), extra={STAGE_ATTRIBUTE: entered})


# --------------------------------------------------------------------------- #
# Labels on cmdstanpy's progress bars
# --------------------------------------------------------------------------- #

_bars_depth = 0
_bars_original: Callable[..., Any] | None = None


def _labelled(original: Callable[..., Any]) -> Callable[..., Any]:
    """cmdstanpy's ``tqdm``, its ``desc`` (``"chain 1"``) prefixed by the stages' bar label."""

    def make(*args: Any, **kwargs: Any) -> Any:
        running = current()
        prefix = running.bar_label if running is not None else ""
        if prefix and isinstance(kwargs.get("desc"), str):
            kwargs["desc"] = f"{prefix} {kwargs['desc']}"
        return original(*args, **kwargs)

    make.pemc_labelled = True  # type: ignore[attr-defined]
    return make


@contextlib.contextmanager
def _labelled_bars() -> Iterator[None]:
    """cmdstanpy's bars labelled while the outermost stage runs."""
    global _bars_depth, _bars_original
    with _lock:
        if _bars_depth == 0:
            import cmdstanpy.model as cmdstanpy_model

            original = getattr(cmdstanpy_model, "tqdm", None)
            if original is not None and not getattr(original, "pemc_labelled", False):
                _bars_original = original
                setattr(cmdstanpy_model, "tqdm", _labelled(original))  # noqa: B010
        _bars_depth += 1
    try:
        yield
    finally:
        with _lock:
            _bars_depth -= 1
            if _bars_depth == 0 and _bars_original is not None:
                import cmdstanpy.model as cmdstanpy_model

                setattr(cmdstanpy_model, "tqdm", _bars_original)  # noqa: B010
                _bars_original = None


# --------------------------------------------------------------------------- #
# Stage lines on a stream
# --------------------------------------------------------------------------- #


class StageLines(logging.Handler):
    """The records of :mod:`pemc_stan.backend.progress` as ``[pemc-stan MM:SS] message``
    lines, one when each stage starts (no line repeats: a redirected run's log holds what
    happened, and the run's last lines say where the time went).

    Parameters
    ----------
    stream
        Where the lines go (standard error).
    clock
        ``time.monotonic`` (tests pass their own).
    """

    def __init__(self, stream: TextIO, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.stream = stream
        self.clock = clock
        self.start = clock()

    def line(self, message: str) -> str:
        """``message`` with the time since the command started."""
        return f"[pemc-stan {format_elapsed(self.clock() - self.start)}] {message}"

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.acquire()
            try:
                self.stream.write(self.line(record.getMessage()) + "\n")
                self.stream.flush()
            finally:
                self.release()
        except Exception:
            self.handleError(record)


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (False for a closed or file-less stream)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def interactive() -> bool:
    """Whether progress is shown by default: standard error is a terminal, or the
    call runs in a Jupyter kernel (as cmdstanpy's ``show_progress``)."""
    import sys

    return is_terminal(sys.stderr) or "ipykernel" in sys.modules


@contextlib.contextmanager
def stage_lines(stream: Any = None) -> Iterator[None]:
    """The stages that start inside the block as lines on ``stream`` (standard error), as
    the command line prints them; nothing is added when the application already shows
    this module's records (the command line, or its own logging at INFO)."""
    import sys

    if logger.isEnabledFor(logging.INFO) and logger.hasHandlers():
        yield
        return
    out = sys.stderr if stream is None else stream
    handler = StageLines(out)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.setLevel(level)
        logger.propagate = propagate
