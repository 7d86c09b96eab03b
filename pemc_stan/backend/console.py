"""CmdStan's console output: why a run failed, and repeated messages collapsed.

cmdstanpy reports a failed CmdStan run as ``RuntimeError("Error during
sampling:\\n<lines starting with 'Error' or 'Exception'>\\nCommand and output
files: ...")``; when CmdStan words its reason otherwise, the cause is empty.
:func:`run_error` finds the reason -- in the message, else in the console file
the message names -- and returns a :class:`~pemc_stan.errors.CmdStanRunError`
whose ``reason`` is never empty.  :func:`collapse_repeats` turns the hundreds
of identical lines CmdStan prints for, e.g., a NaN log density into one line
with a count; :func:`collapse_cmdstanpy_messages` applies it to cmdstanpy's
log records.

cmdstanpy logs its progress chatter ("Chain [1] start processing", about fifty
lines a run) at INFO on a handler of its own.  Within
:func:`routed_cmdstanpy_logging` (every run of the pipeline:
:func:`~pemc_stan.backend.processes.ending_children` enters it) its records go to
pemc-stan's logger ``pemc_stan.backend.cmdstanpy`` instead: CmdStan's own
messages (cmdstanpy's "Non-fatal error during sampling" warning) as a warning, one
line per kind of message (:func:`condense`), each kind once; everything else (the
chatter, errors that an exception follows, warnings about how pemc-stan calls
cmdstanpy) at DEBUG.  The cmdstanpy logger's handlers, level and propagation are
restored when the block ends.  Within :func:`rewriting_messages`, CmdStan's text in
those records and in the errors of :func:`run_error` is passed through a rewrite (a
generated program's lines told in the user's:
:meth:`pemc_stan.stan.line_map.LineMap.rewrite`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pemc_stan.errors import CmdStanRunError

logger = logging.getLogger(__name__)

__all__ = ["collapse_repeats", "condense", "failure_reason", "run_error", "console_error",
           "is_cmdstan_failure",
           "collapse_cmdstanpy_messages", "routed_cmdstanpy_logging", "rewriting_messages",
           "rewrite_message", "CMDSTANPY_LOGGER", "message_shapes"]

#: The logger cmdstanpy's records go to within :func:`routed_cmdstanpy_logging`.
CMDSTANPY_LOGGER = "pemc_stan.backend.cmdstanpy"
#: cmdstanpy's advice that only its own users can follow.
_SHOW_CONSOLE_RE = re.compile(r"\n?Consider re-running with show_console=True if the above "
                              r"output is unclear!")

_CONSOLE_RE = re.compile(r"console_msgs \(if any\):[ \t]*\n[ \t]*(.+?)[ \t]*$", re.M)
_RETCODES_RE = re.compile(r"retcodes=\[([^\]]*)\]")
#: Console lines that are progress or configuration, never a reason.
_NOISE_RE = re.compile(
    r"^(Iteration:|Chain \[|Gradient evaluation|Adjust your expectations|Elapsed Time|"
    r"\d+(\.\d+)? seconds|[\w ]+=\s*\S*(\s*\(Default\))?$|method =|Consider re-running|"
    r"Command and output files|RunSet:|cmd \(chain|retcodes=|per-chain output|csv_file|"
    r"console_msgs|\S+\.(csv|txt|json)$|Path \[|Begin eval|Iter\s+log prob|\s*\d+\s+-?\d)")
_REASON_RE = re.compile(r"(rror|xception|must be|not |invalid|failed|mismatch|nan|"
                        r"Rejecting|cannot|unable|expected)", re.IGNORECASE)


def collapse_repeats(lines: Iterable[str]) -> list[str]:
    """Each distinct line once, in order of first appearance, with a count when repeated.

    Raises
    ------
    Nothing.
    """
    counts: dict[str, int] = {}
    for line in lines:
        counts[line] = counts.get(line, 0) + 1
    return [line if n == 1 else f"{line} [repeated {n} times]" for line, n in counts.items()]


#: CmdStan's messages that cmdstanpy passes on as a warning ("Non-fatal error during
#: sampling:" and the messages, one a line).
_CMDSTAN_MESSAGES_RE = re.compile(r"^Non-fatal error during \w+")
#: Numbers in a message: two messages that differ only in them are alike.
_NUMBER_RE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|\b(nan|inf)\b")
_REPEATED_RE = re.compile(r" \[repeated (\d+) times\]$")
#: Where a message arose, as Stan says it ("(in 'model.stan', line 9, column 2 to column
#: 29)") or as the rewrite tells it in the user's lines ("(in your model.stan, line 9;
#: generated program line 98)"): one message in either form is one kind.
_LOCATION_RE = re.compile(r"\s*\(in [^()]*\)\s*$")


def _alike(lines: Iterable[str]) -> list[tuple[str, str, int, bool]]:
    """``(shape, first line, count, all identical)`` of each kind of line, in order of
    first appearance; lines are alike when they differ only in their numbers and in how
    their location is told (:data:`_LOCATION_RE`)."""
    kinds: dict[str, list[Any]] = {}
    for line in lines:
        count = 1
        repeated = _REPEATED_RE.search(line)
        if repeated:  # collapsed already (collapse_cmdstanpy_messages)
            count, line = int(repeated.group(1)), line[:repeated.start()]
        shape = _NUMBER_RE.sub("#", _LOCATION_RE.sub("", line))
        if shape in kinds:
            kinds[shape][1] += count
            kinds[shape][2] = kinds[shape][2] and line == kinds[shape][0]
        else:
            kinds[shape] = [line, count, True]
    return [(shape, line, n, same) for shape, (line, n, same) in kinds.items()]


def _counted(line: str, n: int, same: bool) -> str:
    if n == 1:
        return line
    return f"{line} [repeated {n} times]" if same else f"{line} [and {n - 1} alike]"


def message_shapes(text: str) -> list[str]:
    """The shapes (numbers as ``#``) of the lines of ``text`` that carry a Stan message
    (an ``Exception:``), its prefixes ("Rejecting initial value:", "Error", "Exception:")
    left out: two runs whose density failed the same way share one.

    Raises
    ------
    Nothing.
    """
    shapes = []
    for line in text.splitlines():
        at = line.rfind("Exception:")
        if at >= 0:
            shapes.append(_NUMBER_RE.sub("#", line[at + len("Exception:"):].strip()))
    return shapes


def condense(lines: Iterable[str]) -> list[str]:
    """Each kind of line once, in order of first appearance, with how many there were:
    lines that differ only in their numbers (CmdStan's "x is too large: 1.52",
    "... 2.07", hundreds of them) are one kind.

    Raises
    ------
    Nothing.
    """
    return [_counted(line, n, same) for _, line, n, same in _alike(lines)]


def _reason_lines(text: str) -> list[str]:
    lines = [ln.strip() for ln in text.splitlines()]
    return [ln for ln in lines if ln and not _NOISE_RE.match(ln)]


def is_cmdstan_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is cmdstanpy's report of a failed CmdStan run.

    Raises
    ------
    Nothing.
    """
    text = str(exc)
    return isinstance(exc, CmdStanRunError) or (
        isinstance(exc, RuntimeError)
        and ("Command and output files" in text or text.startswith("Error during")
             or "console_msgs" in text))


def run_error(exc: RuntimeError, what: str = "CmdStan",
              rewrite: Callable[[str], str] | None = None) -> CmdStanRunError:
    """A :class:`~pemc_stan.errors.CmdStanRunError` with the reason CmdStan gave.

    Parameters
    ----------
    exc
        cmdstanpy's error.
    what
        What was running (``"sampling"``, ``"Pathfinder"``, ...), for the message.
    rewrite
        Applied to the message and the reason (e.g. a generated program's lines told
        in the user's); default: the rewrites of the enclosing
        :func:`rewriting_messages` blocks.

    Returns
    -------
    CmdStanRunError
        ``exc`` itself if it already is one and the rewrite changes nothing.

    Raises
    ------
    Nothing.
    """
    fix = rewrite if rewrite is not None else rewrite_message
    if isinstance(exc, CmdStanRunError):
        message, reason = fix(str(exc)), fix(exc.reason)
        if message == str(exc) and reason == exc.reason:
            return exc
        return CmdStanRunError(message, reason, exc.console)
    text = str(exc)
    head, _, tail = text.partition("Command and output files:")
    first, _, rest = head.partition("\n")
    reasons = _reason_lines(rest)
    # a message that carries the whole console (optimize's) has its configuration too
    reasons = [ln for ln in reasons if _REASON_RE.search(ln)] or reasons
    match = _CONSOLE_RE.search(text)
    console = Path(match.group(1)) if match else None
    if not reasons and console is not None:
        reasons = _console_reasons(console)
    if not reasons:
        codes = _RETCODES_RE.search(text)
        reasons = [f"CmdStan exited with return code(s) {codes.group(1)}" if codes
                   else first.strip() or type(exc).__name__]
    reason = fix("\n".join(condense(reasons)))
    where = f" (console output: {console})" if console is not None else ""
    return CmdStanRunError(f"{what} failed: {reason}{where}", reason, console)


def failure_reason(exc: BaseException, limit: int = 160) -> str:
    """Why ``exc`` happened, in one line of at most ``limit`` characters, for a log
    message: CmdStan's own reason for a failed CmdStan run (:func:`run_error`), never
    cmdstanpy's command line; the exception's text (or its type) otherwise.

    Raises
    ------
    Nothing.
    """
    if isinstance(exc, CmdStanRunError):
        text = exc.reason
    elif isinstance(exc, RuntimeError) and is_cmdstan_failure(exc):
        text = run_error(exc).reason
    else:
        text = str(exc)
    return " ".join(text.split())[:limit] or type(exc).__name__


def _console_reasons(console: Path) -> list[str]:
    """The lines of a console file that say why a run failed (the last few when none
    does); none for a file that cannot be read."""
    try:
        body = console.read_text(errors="replace")
    except OSError:
        return []
    candidates = _reason_lines(body)
    return [ln for ln in candidates if _REASON_RE.search(ln)][-6:] or candidates[-3:]


def console_error(what: str, console: Path, returncode: int) -> CmdStanRunError:
    """A :class:`~pemc_stan.errors.CmdStanRunError` for a CmdStan executable run
    without cmdstanpy that exited with ``returncode``, its reason read from its
    ``console`` file (as :func:`run_error`'s).

    Raises
    ------
    Nothing.
    """
    reasons = _console_reasons(console) or [f"CmdStan exited with return code {returncode}"]
    reason = rewrite_message("\n".join(condense(reasons)))
    return CmdStanRunError(f"{what} failed: {reason} (console output: {console})", reason,
                           console)


#: cmdstanpy's line for a chain ended by SIGINT, SIGTERM or SIGHUP ("error: code '-2'
#: Unknown error -2"): an interrupted run, which pemc-stan reports in one line of its own.
_INTERRUPTED_RE = re.compile(r"error: code '-(?:2|15|1)'")


class _CollapseRepeats(logging.Filter):
    """Rewrite a record's multi-line message with :func:`collapse_repeats`; drop
    cmdstanpy's error line for a chain that an interruption ended."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.levelno >= logging.ERROR and _INTERRUPTED_RE.search(message):
            return False
        if message.count("\n") > 3:
            record.msg = "\n".join(collapse_repeats(message.splitlines()))
            record.args = ()
        return True


def collapse_cmdstanpy_messages() -> None:
    """Collapse repeated lines in cmdstanpy's log messages (e.g. its "Non-fatal error
    during sampling" warning, hundreds of identical lines for a NaN density), and leave
    out its error line for chains ended by Ctrl-C (SIGINT), SIGTERM or SIGHUP.

    Idempotent.

    Raises
    ------
    Nothing.
    """
    import cmdstanpy.utils

    log = cmdstanpy.utils.get_logger()
    if not any(isinstance(f, _CollapseRepeats) for f in log.filters):
        log.addFilter(_CollapseRepeats())


# --------------------------------------------------------------------------- #
# Rewriting CmdStan's messages
# --------------------------------------------------------------------------- #

_rewrites: list[Callable[[str], str]] = []
_rewrites_lock = threading.Lock()


@contextlib.contextmanager
def rewriting_messages(rewrite: Callable[[str], str] | None) -> Iterator[None]:
    """Within the block, CmdStan's text in cmdstanpy's routed records and in
    :func:`run_error` is passed through ``rewrite`` (None: nothing changes).

    Process-wide (cmdstanpy logs from its own threads); blocks may nest and
    overlap across threads, every active rewrite is applied in the order entered.

    Raises
    ------
    Nothing.
    """
    if rewrite is None:
        yield
        return
    with _rewrites_lock:
        _rewrites.append(rewrite)
    try:
        yield
    finally:
        with _rewrites_lock:
            _rewrites.remove(rewrite)


def rewrite_message(text: str) -> str:
    """``text`` through the rewrites of the active :func:`rewriting_messages` blocks.

    Raises
    ------
    Nothing (a failing rewrite is skipped, and logged at DEBUG).
    """
    with _rewrites_lock:
        active = list(_rewrites)
    for rewrite in active:
        try:
            text = rewrite(text)
        except Exception as exc:  # a message must never be lost to its rewrite
            logger.debug("rewriting a CmdStan message failed: %s", exc)
    # Stan prefixes an error once more for each function it passes through: the generated
    # program's density functions add one that the user's program does not have
    return _REPEATED_PREFIX.sub("Exception: ", text)


_REPEATED_PREFIX = re.compile(r"(?:Exception: ){2,}")


# --------------------------------------------------------------------------- #
# cmdstanpy's records to pemc-stan's logger
# --------------------------------------------------------------------------- #


class _ToLibrary(logging.Handler):
    """Re-log cmdstanpy's records on :data:`CMDSTANPY_LOGGER`.

    CmdStan's own messages (cmdstanpy's "Non-fatal error during sampling" warning) stay
    a warning, rewritten (:func:`rewrite_message`), one line per kind of message with
    how many alike followed, each kind once per routing (a later run's messages of the
    same kinds go to DEBUG); everything else goes to DEBUG: cmdstanpy's chatter, its
    errors (an exception follows that says why) and its other warnings (about how
    pemc-stan calls it, e.g. divergences of the extended program, which the fit's
    verdict reports).
    """

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def _cmdstan_messages(self, message: str) -> tuple[int, str]:
        head, _, body = _SHOW_CONSOLE_RE.sub("", message).partition("\n")
        lines = [rewrite_message(ln.strip()) for ln in body.splitlines() if ln.strip()]
        kinds = _alike(lines)
        new = [kind for kind in kinds if kind[0] not in self.seen]
        self.seen.update(kind[0] for kind in new)
        shown = new or kinds
        during = head.rstrip(":").split()[-1]  # "sampling", "warmup", ...
        head = (f"Stan rejected some proposals during {during}: the model's density raised "
                "an error there, so each counts as zero density (the fit's verdict says "
                "whether the run is still sound); Stan's messages")
        text = "\n".join([head + ":",
                          *(f"  {_counted(line, n, same)}" for _, line, n, same in shown)])
        return (logging.WARNING if new else logging.DEBUG), text

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            level = logging.DEBUG
            if record.levelno == logging.WARNING and _CMDSTAN_MESSAGES_RE.match(message):
                level, message = self._cmdstan_messages(message)
            target = logging.getLogger(CMDSTANPY_LOGGER)
            if not target.isEnabledFor(level):
                return
            if level == logging.DEBUG:
                message = rewrite_message(message)
            copy = logging.makeLogRecord(record.__dict__)
            copy.name, copy.msg, copy.args = target.name, message, ()
            copy.levelno, copy.levelname = level, logging.getLevelName(level)
            target.handle(copy)
        except Exception:
            self.handleError(record)


_route_lock = threading.Lock()
_route_depth = 0
_route_saved: tuple[list[logging.Handler], int, bool] | None = None


@contextlib.contextmanager
def routed_cmdstanpy_logging() -> Iterator[None]:
    """cmdstanpy's log records go to pemc-stan's logger within the block (module docstring).

    cmdstanpy's logger is configured first (its own default, as on its first use),
    then its handlers, level and propagation are swapped for a handler that re-logs
    each record on :data:`CMDSTANPY_LOGGER`, and restored when the outermost block
    ends.  Process-wide (cmdstanpy logs from worker threads); blocks may nest and
    overlap across threads.

    Raises
    ------
    Nothing.
    """
    global _route_depth, _route_saved
    import cmdstanpy.utils

    with _route_lock:
        if _route_depth == 0:
            log = cmdstanpy.utils.get_logger()
            _route_saved = (list(log.handlers), log.level, log.propagate)
            for handler in _route_saved[0]:
                log.removeHandler(handler)
            log.addHandler(_ToLibrary())
            log.setLevel(logging.DEBUG)
            log.propagate = False
        _route_depth += 1
    try:
        yield
    finally:
        with _route_lock:
            _route_depth -= 1
            if _route_depth == 0 and _route_saved is not None:
                log = cmdstanpy.utils.get_logger()
                for handler in list(log.handlers):
                    if isinstance(handler, _ToLibrary):
                        log.removeHandler(handler)
                handlers, level, propagate = _route_saved
                for handler in handlers:
                    log.addHandler(handler)
                log.setLevel(level)
                log.propagate = propagate
                _route_saved = None
