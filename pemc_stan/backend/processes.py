"""The child processes of a run (CmdStan, make, the compiler), ended when the run is.

cmdstanpy starts CmdStan and ``make`` with :mod:`subprocess`; when the Python
process is interrupted (Ctrl-C, ``kill -INT``, ``kill -TERM``, a closed
terminal) those children would keep running: a signal sent to one process
reaches neither CmdStan nor the compiler that ``make`` started, and a killed
``make`` leaves its compiler jobs to PID 1.  :func:`ending_children` wraps a
stage of the pipeline: within it SIGTERM and SIGHUP raise
:class:`~pemc_stan.errors.Interrupted` (as SIGINT raises
``KeyboardInterrupt``), and when the block is left by any exception, every
process started within it is sent SIGTERM and, after a grace period, SIGKILL.

The block is also where cmdstanpy's log records go to pemc-stan's logger
(:func:`~pemc_stan.backend.console.routed_cmdstanpy_logging`): a run of the
pipeline prints nothing but warnings unless logging is configured.

Processes are found through ``/proc`` (Linux).  The command line also makes
pemc-stan a *child subreaper* (:func:`adopt_orphans`), so that the compiler
jobs of a killed ``make`` stay its descendants and are found too.  Elsewhere
the functions do nothing and only Python's own cleanup runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from pemc_stan.backend.console import routed_cmdstanpy_logging
from pemc_stan.errors import Interrupted

logger = logging.getLogger(__name__)

__all__ = ["usable_cores", "descendants", "end_processes", "ending_children", "adopt_orphans",
           "still_running", "GRACE_SECONDS"]

#: Seconds between SIGTERM and SIGKILL.
GRACE_SECONDS = 3.0

_PROC = Path("/proc")
_PR_SET_CHILD_SUBREAPER = 36


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it).

    Raises
    ------
    Nothing.
    """
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return os.cpu_count() or 1


def _stat(pid: int) -> tuple[int, str, int] | None:
    """``(parent pid, state, start time)`` of a process, or None if it is gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # the command name may hold spaces
    try:
        return int(fields[1]), fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def descendants(pid: int | None = None) -> dict[int, int]:
    """Every living descendant of ``pid`` (default: this process), with its start time.

    Returns
    -------
    dict
        ``{pid: start time}`` (start times tell a process from a later one that
        reuses its number); empty where ``/proc`` is not available.

    Raises
    ------
    Nothing.
    """
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    try:
        entries = [int(p.name) for p in _PROC.iterdir() if p.name.isdigit()]
    except OSError:
        return {}
    for child in entries:
        stat = _stat(child)
        if stat is None or stat[1] == "Z":
            continue
        children.setdefault(stat[0], []).append(child)
        starts[child] = stat[2]
    found: dict[int, int] = {}
    todo = list(children.get(root, ()))
    while todo:
        child = todo.pop()
        if child in found:
            continue
        found[child] = starts[child]
        todo.extend(children.get(child, ()))
    return found


def _alive(pid: int, start: int) -> bool:
    # A zombie has ended.  It is not reaped here: subprocess.Popen reaps its own
    # children and would otherwise see a killed CmdStan as a success (ECHILD -> 0).
    stat = _stat(pid)
    return stat is not None and stat[2] == start and stat[1] != "Z"


def end_processes(processes: dict[int, int], grace: float = GRACE_SECONDS) -> list[int]:
    """Send SIGTERM to ``processes``, then SIGKILL to those alive after ``grace`` seconds.

    Parameters
    ----------
    processes
        ``{pid: start time}`` as returned by :func:`descendants`; a pid whose
        start time no longer matches belongs to another process and is left
        alone.
    grace
        Seconds to wait for the processes to exit after SIGTERM.

    Returns
    -------
    list of int
        The pids that were still running and were signalled.

    Raises
    ------
    Nothing.
    """
    me = os.getpid()
    parents = {pid: stat[0] for pid in processes if (stat := _stat(pid)) is not None}
    signalled = [pid for pid, start in processes.items() if _alive(pid, start)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in signalled:
            if _alive(pid, processes[pid]):
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline and any(_alive(p, processes[p]) for p in signalled):
            time.sleep(0.05)
    for pid in signalled:  # orphans adopted by this process (adopt_orphans): reap them,
        if parents.get(pid) != me:  # but never a child a subprocess.Popen waits for
            with contextlib.suppress(OSError):
                os.waitpid(pid, os.WNOHANG)
    return signalled


def adopt_orphans() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux ``prctl``).

    Then the compiler jobs of a killed ``make`` stay descendants of pemc-stan
    and :func:`ending_children` ends them too.  Only the command line calls
    this: it changes the whole process.

    Returns
    -------
    bool
        Whether it took effect.

    Raises
    ------
    Nothing.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP ignored within the block (main thread only)."""
    saved: list[tuple[signal.Signals, Any]] = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            handler = signal.getsignal(sig)
            if handler is not None:
                saved.append((sig, handler))
                signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in saved:
            signal.signal(sig, handler)


@contextlib.contextmanager
def ending_children(grace: float = GRACE_SECONDS) -> Iterator[None]:
    """End the processes started within the block if it is left by an interrupt; route
    cmdstanpy's log records to pemc-stan's logger meanwhile.

    In the main thread, SIGTERM and SIGHUP raise
    :class:`~pemc_stan.errors.Interrupted` within the block (their earlier
    handlers are restored after it), so that a terminated run cleans up as an
    interrupted one does: children ended, ``finally`` clauses and ``atexit``
    handlers (temporary folders) run.  Blocks may nest.  Other exceptions leave
    processes alone: cmdstanpy has waited for its own by then, and processes
    another thread started in the meantime are not this block's.  Within the block
    cmdstanpy's chatter is debug logging of ``pemc_stan.backend.cmdstanpy``
    (:func:`~pemc_stan.backend.console.routed_cmdstanpy_logging`).

    Raises
    ------
    Interrupted
        When SIGTERM or SIGHUP arrives within the block.
    """
    before = descendants()
    previous: list[tuple[signal.Signals, Any]] = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            handler = signal.getsignal(sig)
            if handler == signal.SIG_DFL or handler is _raise_interrupted:
                previous.append((sig, handler))
                signal.signal(sig, _raise_interrupted)
    try:
        with routed_cmdstanpy_logging():
            yield
    except KeyboardInterrupt as exc:  # also Interrupted; other errors come after cmdstanpy
        # has waited for its processes, and another thread's runs must be left alone
        started = {p: s for p, s in descendants().items() if before.get(p) != s}
        if started:
            with _signals_ignored():  # a second Ctrl-C must not cut the cleanup short
                ended = end_processes(started, grace)
            if ended:
                logger.info("%s: ended %d process(es) of the run (%s)",
                            type(exc).__name__, len(ended),
                            ", ".join(map(str, sorted(ended))))
        raise
    finally:
        for sig, handler in previous:
            signal.signal(sig, handler)


def still_running(processes: Iterable[int]) -> list[int]:
    """The pids of ``processes`` that are still running (for tests and reports).

    Raises
    ------
    Nothing.
    """
    return [p for p in processes if (s := _stat(p)) is not None and s[1] != "Z"]
