"""``pemc-stan report``: rebuild the pictures and ``report.html`` of a finished run.

The report is built from the files of the run folder only
(:mod:`pemc_stan.output.report`), so a run can be re-reported after pemc-stan
is upgraded, after a run made with ``--no-plots``, or on another machine.
``pemc-stan sample`` writes the same files through :func:`report_files`, which
never lets a failing picture cost the run.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pemc_stan.cli.console import cli_words
from pemc_stan.cli.errors import ExitCode
from pemc_stan.errors import CliError, OutputFolderBusyError, OutputPathError
from pemc_stan.output.figures import PLOTS_DIR
from pemc_stan.output.folder import LOCK_NAME, MANIFEST_NAME, write_text_atomically
from pemc_stan.output.report import REPORT_NAME, write_report
from pemc_stan.output.run_record import RunFolderError

__all__ = ["add_parser", "run", "report_files"]

logger = logging.getLogger(__name__)

EPILOG = """\
written into RUN_DIR (replacing earlier ones):
  plots/trace.png        marginal and trace of each original parameter (at most
                         12 scalar elements, shared out between the parameters)
  plots/temperature.png  the inverse temperature beta: marginal and trace
  plots/weights.png      the importance weights
  plots/modes.png        the modes the pilot found over the resampled draws
  plots/log_z.png        log Z with its error bar (when the run has an estimate)
  report.html            one self-contained page: the verdict, its reasons and
                         remedies, the summary table, log Z, the diagnostics, the
                         pictures and the generated Stan program

exit codes: 0 ok (whatever the run's verdict), 3 not a finished run folder,
9 the folder cannot be written or a run is writing into it
"""


def add_parser(sub: Any) -> None:
    """Add the ``report`` subcommand.

    Raises
    ------
    Nothing.
    """
    p = sub.add_parser(
        "report", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="rebuild the pictures and report.html of a finished run's output folder",
        description=textwrap.fill(
            "Draw the pictures (plots/*.png) and write report.html in RUN_DIR, the output "
            "folder of a finished 'pemc-stan sample' run, from the files in it only "
            "(<model>.nc, estimates.json, summary.csv, stan/, modes.json).", 79),
        epilog=EPILOG)
    p.add_argument("run_dir", metavar="RUN_DIR", help="output folder of a finished run")
    p.add_argument("--plots", action=argparse.BooleanOptionalAction, default=True,
                   help="draw the pictures (default); --no-plots writes report.html "
                        "without them")
    p.set_defaults(handler=run)


def report_files(folder: Path, plots: bool = True) -> list[str]:
    """The pictures and ``report.html`` of a run being written into ``folder``.

    For ``pemc-stan sample``: any failure is logged as a warning (naming the
    picture, or the report) and the files that could be written are returned, so
    the run itself is never lost.

    Returns
    -------
    list of str
        The files written, relative to ``folder``.

    Raises
    ------
    KeyboardInterrupt
        Passed on (an interrupted run keeps its partial output).
    """
    try:
        return write_report(folder, plots=plots, words=cli_words)
    except Exception as exc:
        logger.warning("%s was not written: %s: %s (the run's results are complete; "
                       "'pemc-stan report %s' tries again)", REPORT_NAME,
                       type(exc).__name__, exc, folder)
        written = sorted(f"{PLOTS_DIR}/{p.name}" for p in (folder / PLOTS_DIR).glob("*.png"))
        return written


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold the run folder's lock (when it has one), so that no run writes meanwhile.

    Raises
    ------
    OutputFolderBusyError
        If a run holds the lock.
    """
    lock_path = folder / LOCK_NAME
    if not lock_path.exists():
        yield
        return
    try:
        handle = open(lock_path, "a+")
    except OSError:  # a read-only lock: writing the report fails with its own message
        yield
        return
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = " ".join(handle.read().split()) or "another process"
            raise OutputFolderBusyError(
                f"a pemc-stan run is writing into {folder} ({holder})",
                "wait for that run to finish, then run 'pemc-stan report' again",
                folder) from None
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}: {' '.join(sys.argv)}\n")
            handle.flush()
            yield
        finally:
            with contextlib.suppress(OSError):
                handle.seek(0)
                handle.truncate()


def _record_in_manifest(folder: Path, names: list[str]) -> None:
    """Add the report's files to the run's manifest, so that the next run into the folder
    replaces them with its own (a folder without a manifest is left without one)."""
    manifest = folder / MANIFEST_NAME
    if not manifest.is_file():
        return
    try:
        content = json.loads(manifest.read_text())
        files = [str(f) for f in content.get("files", [])]
    except (OSError, ValueError, AttributeError):
        return
    tops = {n.split("/", 1)[0] for n in names}
    added = sorted(tops - set(files))
    if added:
        content["files"] = sorted(files + added)
        write_text_atomically(manifest, json.dumps(content, indent=1) + "\n")


def run(args: argparse.Namespace) -> ExitCode:
    """Rebuild the pictures and report.html of ``args.run_dir``.

    Raises
    ------
    CliError
        If RUN_DIR is not a finished run's folder (exit code 3).
    OutputPathError
        If the folder cannot be written, or a run is writing into it.
    """
    folder = Path(args.run_dir).expanduser()
    try:
        with _locked(folder):
            written = write_report(folder, plots=args.plots, words=cli_words)
            _record_in_manifest(folder, written)
    except RunFolderError as exc:
        raise CliError(str(exc), exc.remedy, ExitCode.MISSING_FILE) from exc
    except PermissionError as exc:
        raise OutputPathError(f"cannot write the report into {folder}: permission denied",
                              "copy the run folder somewhere you can write, and report "
                              "that copy", folder) from exc
    print(f"wrote {', '.join(written)} in {folder}")
    return ExitCode.OK
