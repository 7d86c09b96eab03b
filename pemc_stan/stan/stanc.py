"""Running stanc on Stan source text.

pemc-stan never second-guesses stanc: a program is first checked by stanc
(:func:`check_with_stanc`), and errors are reported with stanc's own message.
:func:`canonical` and :func:`stanc_info` expose ``--print-canonical`` and
``--info``.

Every function writes the text to a file in a fresh temporary directory and
runs the stanc of :func:`pemc_stan.backend.runtime.stanc_path` on it with
``--filename-in-msg`` so messages name the caller's ``filename``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from pemc_stan.errors import (
    CmdStanNotFoundError,
    StancError,
    StanProgramError,
    StanSemanticError,
    StanSyntaxError,
)

logger = logging.getLogger(__name__)

__all__ = ["check_with_stanc", "canonical", "stanc_info", "run_stanc", "parse_stanc_error"]

#: First line of a stanc error report, e.g.
#: ``Syntax error in 'm.stan', line 1, column 20 to column 21, parsing error:``.
#: The column is -1 for a lexing error at the start of a line (stanc places
#: lexing errors one column before the offending character).
_ERROR_HEADER = re.compile(
    r"^(?P<kind>Syntax|Semantic) error in '(?P<file>.*)', line (?P<line>\d+), "
    r"column (?P<col>-?\d+)",
    re.MULTILINE,
)
_GENERIC_ERROR = re.compile(
    r"^Error in '(?P<file>.*)', line (?P<line>\d+), column (?P<col>-?\d+)", re.M
)


def run_stanc(
    text: str,
    filename: str = "<string>",
    args: tuple[str, ...] = (),
    *,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """Run stanc on ``text`` and return the completed process (never raises on exit code).

    Parameters
    ----------
    text
        Stan program.
    filename
        Name used in stanc's messages (``--filename-in-msg``).  When it names
        an existing file, its directory is passed as ``--include-paths``.
    args
        Extra stanc arguments.
    timeout
        Seconds before stanc is abandoned.

    Returns
    -------
    subprocess.CompletedProcess
        With ``stdout`` and ``stderr`` as text.

    Raises
    ------
    StancError
        If stanc cannot be started or times out.
    pemc_stan.backend.runtime.CmdStanNotFoundError
        If there is no stanc executable.
    """
    from pemc_stan.backend import runtime  # imported lazily: runtime is heavier

    stanc = runtime.stanc_path()
    with tempfile.TemporaryDirectory(prefix="pemc-stanc-") as tmp:
        model = Path(tmp) / "model.stan"
        model.write_text(text, encoding="utf-8")
        command = [str(stanc), *args, "--filename-in-msg", filename]
        include_dir = Path(filename).parent if filename and Path(filename).is_file() else None
        if include_dir is not None:
            command.append(f"--include-paths={include_dir}")
        command.append(str(model))
        logger.debug("running %s", command)
        try:
            return subprocess.run(
                command, capture_output=True, text=True, timeout=timeout, cwd=tmp, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise StancError(f"could not run stanc ({stanc}): {exc}") from exc


def parse_stanc_error(output: str, filename: str = "<string>") -> StanProgramError:
    """Turn stanc's error report into a :class:`StanProgramError`.

    Parameters
    ----------
    output
        What stanc printed (its error goes to stderr).
    filename
        Used when the report names no file.

    Returns
    -------
    StanProgramError
        :class:`StanSyntaxError` or :class:`StanSemanticError` carrying the
        report verbatim (``message``) and the file, line and column it names.

    Raises
    ------
    StancError
        If ``output`` is not a stanc error report.
    """
    message = output.strip()
    match = _ERROR_HEADER.search(output)
    if match is not None:
        cls: type[StanProgramError] = (
            StanSyntaxError if match["kind"] == "Syntax" else StanSemanticError
        )
        message = output[match.start():].strip()
        return cls(message, match["file"], int(match["line"]), max(int(match["col"]), 0))
    generic = _GENERIC_ERROR.search(output)
    if generic is not None:  # e.g. errors in #include directives
        return StanSyntaxError(
            output[generic.start():].strip(), generic["file"], int(generic["line"]),
            max(int(generic["col"]), 0),
        )
    raise StancError(f"stanc failed with an unrecognised report:\n{message}")


def _checked(proc: subprocess.CompletedProcess[str], filename: str) -> str:
    """Return stdout of a successful stanc run; raise its error otherwise."""
    if proc.stderr.strip():
        if proc.returncode == 0:
            logger.debug("stanc said: %s", proc.stderr.strip())
        else:
            raise parse_stanc_error(proc.stderr, filename)
    if proc.returncode != 0:
        raise parse_stanc_error(proc.stdout + proc.stderr, filename)
    return proc.stdout


def check_with_stanc(text: str, filename: str = "<string>") -> None:
    """Check a Stan program with stanc (parsing, type checking, code generation).

    Parameters
    ----------
    text
        Stan program.
    filename
        Name of the program in messages.

    Returns
    -------
    None
        When stanc accepts the program (its warnings are logged at DEBUG).

    Raises
    ------
    StanSyntaxError
        On a syntax error; ``message`` is stanc's message verbatim.
    StanSemanticError
        On a semantic error; ``message`` is stanc's message verbatim.
    StancError
        If stanc cannot be run or fails in an unexpected way.
    """
    marker = _accepted_marker(text)
    if marker is not None and marker.exists():
        logger.debug("stanc accepted this program before (%s)", marker.name)
        return
    with tempfile.TemporaryDirectory(prefix="pemc-stanc-out-") as out:
        proc = run_stanc(text, filename, ("--o", str(Path(out) / "model.hpp")))
    _checked(proc, filename)
    if marker is not None:
        try:
            marker.touch()
        except OSError:  # a read-only cache: stanc runs again next time
            pass


def _accepted_marker(text: str) -> Path | None:
    """The cache file that records that this stanc accepted ``text`` (None without a
    cache folder).  Keyed by the program and the stanc executable (path, size, time), so
    a new stanc checks every program again; only acceptance is recorded, as an error's
    message names the caller's file."""
    from pemc_stan.backend import runtime

    try:
        stanc = runtime.stanc_path()
        stat = stanc.stat()
        folder = runtime.cache_root() / "stanc-accepted"
        folder.mkdir(exist_ok=True)
    except (OSError, CmdStanNotFoundError):  # run_stanc says what is wrong
        return None
    key = hashlib.sha256(repr((text, str(stanc), stat.st_size, stat.st_mtime_ns))
                         .encode()).hexdigest()[:32]
    return folder / key


def canonical(text: str, filename: str = "<string>", *, strip_comments: bool = False) -> str:
    """Return stanc's canonical form of a program (``--print-canonical``).

    Parameters
    ----------
    text
        Stan program.
    filename
        Name of the program in messages.
    strip_comments
        Also drop comments (``--canonicalize ...,strip-comments``), so the
        result depends only on the program's syntax tree.

    Returns
    -------
    str
        The canonical program text.

    Raises
    ------
    StanSyntaxError, StanSemanticError
        If stanc rejects the program.
    StancError
        If stanc cannot be run.
    """
    if strip_comments:
        args: tuple[str, ...] = (
            "--auto-format",
            "--canonicalize=deprecations,includes,parentheses,braces,strip-comments",
        )
    else:
        args = ("--print-canonical",)
    return _checked(run_stanc(text, filename, args), filename)


def stanc_info(text: str, filename: str = "<string>") -> dict[str, Any]:
    """Return stanc's ``--info`` report of a program as a dict.

    The report lists ``inputs``, ``parameters``, ``transformed parameters``,
    ``generated quantities`` (name → type and dimensions), ``functions``,
    ``distributions`` and ``included_files``.

    Raises
    ------
    StanSyntaxError, StanSemanticError
        If stanc rejects the program.
    StancError
        If stanc cannot be run or its report is not JSON.
    """
    out = _checked(run_stanc(text, filename, ("--info",)), filename)
    try:
        info: dict[str, Any] = json.loads(out)
    except json.JSONDecodeError as exc:
        raise StancError(f"stanc --info printed something that is not JSON:\n{out}") from exc
    return info
