"""Child processes are ended when a block is left by an interrupt (no CmdStan, no compiler)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from pemc_stan.backend.processes import (
    adopt_orphans,
    descendants,
    end_processes,
    ending_children,
    still_running,
)
from pemc_stan.errors import Interrupted


def _wait_for(predicate: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_descendants_include_grandchildren() -> None:
    # a shell whose own child (sleep) is our grandchild
    proc = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        _wait_for(lambda: len(descendants()) >= 2)
        found = descendants()
        assert proc.pid in found and len(found) >= 2
        ended = end_processes({p: s for p, s in found.items()}, grace=1.0)
        assert proc.pid in ended
        assert still_running(found) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_ignores_sigterm_is_killed() -> None:
    proc = subprocess.Popen([sys.executable, "-c",
                             "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
                             " print('ready', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    started = time.monotonic()
    assert end_processes({proc.pid: descendants()[proc.pid]}, grace=0.5) == [proc.pid]
    assert proc.wait(5) == -signal.SIGKILL  # not reaped by end_processes: Popen sees why
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, lambda: Interrupted(signal.SIGTERM)])
def test_leaving_the_block_by_an_interrupt_ends_what_it_started(
        interrupt: type[BaseException]) -> None:
    adopt_orphans()  # as the command line does: the orphaned sleep stays ours
    older = subprocess.Popen(["sleep", "30"])  # started before the block: left alone
    inner: subprocess.Popen[bytes] | None = None
    try:
        with pytest.raises(KeyboardInterrupt):
            with ending_children(grace=1.0):
                # a "make" that is killed first, leaving its "compiler" (sleep) orphaned
                inner = subprocess.Popen(["sh", "-c", "sleep 30 & echo $!; wait"],
                                         stdout=subprocess.PIPE, text=True)
                assert inner.stdout is not None
                grandchild = int(inner.stdout.readline())
                inner.kill()
                inner.wait()
                _wait_for(lambda: grandchild in descendants())  # adopted
                raise interrupt()
        assert still_running([grandchild]) == []
        assert older.poll() is None
    finally:
        older.kill()
        older.wait()


def test_sigterm_within_the_block_raises_interrupted_and_restores_the_handler() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as info:
        with ending_children():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert info.value.signum == signal.SIGTERM
    assert isinstance(info.value, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) == before


def test_other_errors_leave_processes_alone() -> None:
    """A CmdStan error in one thread must not end what another thread's run started."""
    child: subprocess.Popen[bytes] | None = None
    try:
        with pytest.raises(RuntimeError):
            with ending_children(grace=0.5):
                child = subprocess.Popen(["sleep", "30"])
                raise RuntimeError("Error during sampling")
        assert child is not None and child.poll() is None
    finally:
        if child is not None:
            child.kill()
            child.wait()
