"""The CmdStan files of a run folder: the judged run at ``cmdstan/`` itself, every earlier
run in a sub-folder named for what it was.

A run writes as it goes: the mode split's chains at ``cmdstan/`` (a refused split's too),
a tempered method's earlier rounds in ``round_k/``, the split's longer runs in
``split_again_k/``, the follow-ups in ``follow_up_k/``.  Which run the verdict judges is
known only at the end, so :func:`arrange_runs` then moves the files: the judged run's
CSVs (through cmdstanpy's own ``save_csvfiles``, so that the fit still reads them) and
console files up to ``cmdstan/``, and any other run left there into ``mode_split/`` (a
run of the user's unchanged program) or ``first_run/`` (an earlier run of the judged
run's own program).  :func:`earlier_runs` lists the folders of the runs not judged.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path
from typing import Any

__all__ = ["arrange_runs", "earlier_runs"]

logger = logging.getLogger(__name__)

#: A CmdStan output file's run: ``<program>-<14-digit time>`` (cmdstanpy's names:
#: ``model_pe-20261206204248_3.csv``, ``model_pe-20261206204248-stdout.txt``).
_RUN = re.compile(r"^(?P<program>.+)-(?P<time>\d{14})(?:[-_].*)?$")


def _run_of(name: str) -> tuple[str, str] | None:
    """``(program, run stem)`` of a CmdStan file name, or None for another file."""
    found = _RUN.match(name)
    return None if found is None else (found["program"], f"{found['program']}-{found['time']}")


def arrange_runs(out: Path, fit: Any) -> None:
    """Put ``fit``'s judged run at ``out/cmdstan`` and the runs left there before it in
    named sub-folders (module docstring).  Nothing is done when the judged run's CSVs are
    not under ``out/cmdstan`` (a Python run that wrote them elsewhere), or when the fit
    has no CmdStan run.

    Raises
    ------
    OSError
        If the files cannot be moved.
    """
    root = (out / "cmdstan").resolve()
    try:
        csvs = [Path(f).resolve() for f in fit.fit.runset.csv_files]
    except AttributeError:  # a fit made of draws alone
        return
    if not csvs or not root.is_dir() or not csvs[0].is_relative_to(root):
        return
    judged = {r[1] for r in (_run_of(f.name) for f in csvs) if r is not None}
    judged_program = next((r[0] for r in (_run_of(f.name) for f in csvs) if r), "")
    user_program = str(fit.program.name)
    for path in sorted(p for p in root.iterdir() if p.is_file()):
        run = _run_of(path.name)
        if run is None or run[1] in judged:
            continue
        named = "mode_split" if run[0] == user_program != judged_program else "first_run"
        (root / named).mkdir(exist_ok=True)
        shutil.move(str(path), str(root / named / path.name))
    where = csvs[0].parent
    if where == root:
        return
    fit.fit.save_csvfiles(str(root))  # moves the CSVs and tells the fit where they are
    for path in sorted(where.iterdir()):
        run = _run_of(path.name)
        if run is not None and run[1] in judged and path.is_file():
            shutil.move(str(path), str(root / path.name))
    for folder in (where, *where.parents):  # a judged run's folder it left empty
        if folder == root or not folder.is_relative_to(root) or any(folder.iterdir()):
            break
        folder.rmdir()
    logger.debug("the judged run's CmdStan files moved from %s to %s", where, root)


def earlier_runs(out: Path, judged: str | None) -> list[str]:
    """The CSV folders under ``out/cmdstan`` of runs before the judged one (the first run,
    rounds, the split's runs), in order of writing."""
    root = out / "cmdstan"
    if not root.is_dir():
        return []
    written: dict[Path, float] = {}
    for csv in root.rglob("*.csv"):
        written[csv.parent] = min(written.get(csv.parent, float("inf")), csv.stat().st_mtime)
    names = [f"{d.relative_to(out).as_posix()}/" for d in sorted(written, key=lambda d: written[d])]
    return [n for n in names if n != judged]
