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
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path

from pemc_stan.errors import CmdStanRunError

__all__ = ["collapse_repeats", "run_error", "is_cmdstan_failure", "collapse_cmdstanpy_messages"]

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


def run_error(exc: RuntimeError, what: str = "CmdStan") -> CmdStanRunError:
    """A :class:`~pemc_stan.errors.CmdStanRunError` with the reason CmdStan gave.

    Parameters
    ----------
    exc
        cmdstanpy's error.
    what
        What was running (``"sampling"``, ``"Pathfinder"``, ...), for the message.

    Returns
    -------
    CmdStanRunError
        ``exc`` itself if it already is one.

    Raises
    ------
    Nothing.
    """
    if isinstance(exc, CmdStanRunError):
        return exc
    text = str(exc)
    head, _, tail = text.partition("Command and output files:")
    first, _, rest = head.partition("\n")
    reasons = _reason_lines(rest)
    match = _CONSOLE_RE.search(text)
    console = Path(match.group(1)) if match else None
    if not reasons and console is not None and console.is_file():
        try:
            body = console.read_text(errors="replace")
        except OSError:
            body = ""
        candidates = _reason_lines(body)
        reasons = [ln for ln in candidates if _REASON_RE.search(ln)][-6:] or candidates[-3:]
    if not reasons:
        codes = _RETCODES_RE.search(text)
        reasons = [f"CmdStan exited with return code(s) {codes.group(1)}" if codes
                   else first.strip() or type(exc).__name__]
    reason = "\n".join(collapse_repeats(reasons))
    where = f" (console output: {console})" if console is not None else ""
    return CmdStanRunError(f"{what} failed: {reason}{where}", reason, console)


class _CollapseRepeats(logging.Filter):
    """Rewrite a record's multi-line message with :func:`collapse_repeats`."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.count("\n") > 3:
            record.msg = "\n".join(collapse_repeats(message.splitlines()))
            record.args = ()
        return True


def collapse_cmdstanpy_messages() -> None:
    """Collapse repeated lines in cmdstanpy's log messages (e.g. its "Non-fatal error
    during sampling" warning, hundreds of identical lines for a NaN density).

    Idempotent.

    Raises
    ------
    Nothing.
    """
    import cmdstanpy.utils

    log = cmdstanpy.utils.get_logger()
    if not any(isinstance(f, _CollapseRepeats) for f in log.filters):
        log.addFilter(_CollapseRepeats())
