"""Output folders that hold one run, and output files checked before any work.

A :class:`RunFolder` is entered before anything is compiled:

* the path is checked (a file, a parent that is a file, a read-only or
  unwritable place are reported as such);
* a lock (``.pemc-stan.lock``, ``flock``) is held for the run's duration, so a
  second run into the same folder stops at once, naming the folder and the
  process that holds it; the run removes it when it ends;
* results of an earlier run (listed in the folder's manifest
  ``.pemc-stan-run.json``) are kept unless ``overwrite`` is given;
* the run writes into ``partial-run/`` inside the folder, and
  :meth:`RunFolder.commit` moves its files into place only when it has
  succeeded, replacing the earlier run's files (and only those: other files a
  user keeps in the folder are left alone).  A failed or interrupted run
  leaves the earlier results as they were and its own output in
  ``partial-run/``: never a mix of two runs.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import IO

from pemc_stan.errors import OutputFolderBusyError, OutputPathError

logger = logging.getLogger(__name__)

__all__ = ["RunFolder", "check_output_file", "check_output_folder", "write_text_atomically",
           "LOCK_NAME",
           "MANIFEST_NAME", "PARTIAL_NAME"]

LOCK_NAME = ".pemc-stan.lock"
MANIFEST_NAME = ".pemc-stan-run.json"
PARTIAL_NAME = "partial-run"
#: What a run writes (besides ``<model>.nc``), and what an older pemc-stan (without a
#: manifest) left (``weights.csv``, ``gq``).
_RUN_NAMES = ("estimates.json", "weights.csv", "cmdstan", "gq")
_RESERVED = (LOCK_NAME, MANIFEST_NAME, PARTIAL_NAME)


def _reason(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.EROFS:
        return "the file system is read-only"
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    return exc.strerror or str(exc)


def _make_folder(path: Path, what: str) -> None:
    """Create ``path`` (and its parents) or say what is wrong with it.

    Raises
    ------
    OutputPathError
    """
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"the {what} {path} is a file, not a folder",
                              "pass the path of a folder (it is created if needed)", path)
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise OutputPathError(f"the {what} {path} cannot be created: {parent} is a file",
                                  "pass a path inside an existing folder", path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        existing = next((p for p in path.parents if p.is_dir()), Path("/"))
        raise OutputPathError(
            f"the {what} {path} cannot be created in {existing}: {_reason(exc)}",
            "pass a folder you can write to, e.g. one under your home folder or the current "
            "folder", path) from None


def _probe_writable(folder: Path, what: str) -> None:
    """Create and remove a file in ``folder`` (``os.access`` is wrong for root and for
    read-only mounts).

    Raises
    ------
    OutputPathError
    """
    try:
        fd, name = tempfile.mkstemp(prefix=".pemc-stan-probe-", dir=folder)
    except OSError as exc:
        raise OutputPathError(f"the {what} {folder} is not writable: {_reason(exc)}",
                              "pass a folder you can write to", folder) from None
    os.close(fd)
    os.unlink(name)


def _nearest_existing(path: Path, what: str) -> Path:
    """The nearest existing folder ``path`` would be created in.

    Raises
    ------
    OutputPathError
        If an existing ancestor of ``path`` is a file.
    """
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise OutputPathError(f"the {what} {path} cannot be created: {parent} is a "
                                      "file", "pass a path inside an existing folder", path)
            return parent
    return Path(path.anchor or ".")


def check_output_folder(path: str | os.PathLike[str], what: str = "output folder") -> Path:
    """Check, before any work, that ``path`` can be (or is) a writable folder; nothing is
    created.

    The front doors call it before any pilot or compilation, so a file given as a
    folder is named at once, not after minutes of work.

    Returns
    -------
    Path

    Raises
    ------
    OutputPathError
        If it is a file, an existing ancestor is a file, or the folder it is or would
        be created in is not writable.
    """
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise OutputPathError(f"the {what} {p} is a file, not a folder",
                              "pass the path of a folder (it is created if needed)", p)
    _probe_writable(p if p.is_dir() else _nearest_existing(p, what), what
                    if p.is_dir() else f"folder the {what} would be created in")
    return p


def check_output_file(path: str | os.PathLike[str], *, example: str = "estimate.json",
                      make_parents: bool = False) -> Path:
    """Check, before any work, that ``path`` can be written as a file.

    Parameters
    ----------
    path
        The output file.
    example
        A file name the remedy for a folder suggests.
    make_parents
        Missing folders of ``path`` will be created (then only the nearest existing
        one must be a writable folder).

    Returns
    -------
    Path

    Raises
    ------
    OutputPathError
        If it is a folder, its folder does not exist (without ``make_parents``) or
        is a file, or cannot be written.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        raise OutputPathError(f"the output file {p} is a folder, not a file",
                              f"pass a file name, e.g. {example}", p)
    parent = p.parent if str(p.parent) else Path(".")
    if make_parents and not parent.exists():
        parent = _nearest_existing(p, "output file")
    if not parent.exists():
        raise OutputPathError(f"the folder of the output file {p} does not exist",
                              f"create {parent} first, or pass another path", p)
    if not parent.is_dir():
        raise OutputPathError(f"the output file {p} cannot be written: {parent} is a file",
                              "pass a path inside an existing folder", p)
    _probe_writable(parent, "folder of the output file")
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputPathError(f"the output file {p} exists and is not writable",
                              "pass another path, or make the file writable", p)
    return p


def write_text_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it into place.

    Raises
    ------
    OutputPathError
        If it cannot be written.
    """
    p = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent if str(p.parent) else ".")
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as open() would create it, not mkstemp's 0600
        os.replace(tmp, p)
    except OSError as exc:
        raise OutputPathError(f"cannot write {p}: {_reason(exc)}", "pass another path",
                              p) from None


class RunFolder:
    """An output folder for one run: checked, locked, written through ``partial-run/``.

    Parameters
    ----------
    path
        The output folder (created if needed).
    overwrite
        Replace the results of an earlier run; without it a folder holding
        them is refused.

    Examples
    --------
    ::

        with RunFolder(out, overwrite=False) as run:   # before compiling
            fit = pemc_stan.sample(..., output_dir=run.staging / "cmdstan")
            save_fit(fit, run.staging)
            run.commit()                                # the run's files into out/

    Raises
    ------
    OutputPathError
        From ``__enter__``: the path cannot be used, or it holds an earlier
        run's results and ``overwrite`` is False.
    OutputFolderBusyError
        From ``__enter__``: another run holds the folder's lock.
    """

    def __init__(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        self.path = Path(path).expanduser()
        self.overwrite = overwrite
        self.staging = self.path / PARTIAL_NAME
        self._lock: IO[str] | None = None
        self._created = False
        self.committed = False

    # ------------------------------------------------------------------ #
    def _earlier_results(self) -> list[str]:
        manifest = self.path / MANIFEST_NAME
        if manifest.is_file():
            try:
                files = json.loads(manifest.read_text()).get("files", [])
            except (OSError, ValueError, AttributeError):
                files = []
            # plain names inside the folder only: a damaged manifest must not name the
            # folder itself, a parent or the folder's own bookkeeping
            return [f for f in map(str, files) if f and Path(f).name == f
                    and f not in (".", "..") and f not in _RESERVED]
        if (self.path / "estimates.json").exists():  # a run of an older pemc-stan
            return [p.name for p in self.path.iterdir()
                    if p.name in _RUN_NAMES or p.suffix == ".nc"]
        return []

    def _acquire(self) -> None:
        """Lock the folder; a lock file its holder removed while this process opened it is
        opened again (its holder unlinks it before releasing it)."""
        for _ in range(3):
            self._acquire_once()
            assert self._lock is not None
            try:
                same = os.stat(self.path / LOCK_NAME).st_ino == os.fstat(self._lock.fileno()).st_ino
            except OSError:
                same = False
            if same:
                return
            self._lock.close()
            self._lock = None
        raise OutputFolderBusyError(
            f"the output folder {self.path} is being locked and released by other runs",
            "wait for them to finish, or pass another folder (output_dir)", self.path)

    def _acquire_once(self) -> None:
        import fcntl

        lock_path = self.path / LOCK_NAME
        try:
            handle = open(lock_path, "a+")
        except OSError as exc:
            raise OutputPathError(f"the output folder {self.path} is not writable: "
                                  f"{_reason(exc)}", "pass a folder you can write to",
                                  self.path) from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = " ".join(handle.read().split()) or "another process"
            handle.close()
            raise OutputFolderBusyError(
                f"the output folder {self.path} is in use by another pemc-stan run "
                f"({holder})",
                "wait for that run to finish, or pass another folder (output_dir)",
                self.path) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}: {' '.join(sys.argv)}\n")
        handle.flush()
        self._lock = handle

    def _release(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):  # removed while held: no one else can have it
                (self.path / LOCK_NAME).unlink()
            self._lock.close()  # closing releases the flock
            self._lock = None

    def __enter__(self) -> RunFolder:
        self._created = not self.path.exists()
        _make_folder(self.path, "output folder")
        self._acquire()
        try:
            _probe_writable(self.path, "output folder")
            earlier = self._earlier_results()
            others = sorted(p.name for p in self.path.iterdir()
                            if (p.name in _RUN_NAMES or p.suffix == ".nc")
                            and p.name not in earlier)
            if others and not self.overwrite:
                raise OutputPathError(
                    f"the output folder {self.path} holds files a run would replace "
                    f"({', '.join(others[:4])}{', ...' if len(others) > 4 else ''}) that are "
                    "not a pemc-stan run's results", "pass another folder (output_dir), or "
                    "overwrite=True if those files may be replaced", self.path)
            if earlier and not self.overwrite:
                raise OutputPathError(
                    f"the output folder {self.path} holds the results of an earlier run "
                    f"({', '.join(sorted(earlier)[:4])}{', ...' if len(earlier) > 4 else ''})",
                    "pass overwrite=True to replace them, or another folder "
                    "(output_dir)", self.path)
            if self.staging.exists():
                logger.info("removing %s, the output of an interrupted or failed run",
                            self.staging)
                shutil.rmtree(self.staging)
            self.staging.mkdir()
        except BaseException:
            self._release()
            raise
        return self

    def commit(self) -> list[str]:
        """Move the run's files from ``partial-run/`` into the folder, replacing the
        earlier run's files.

        Returns
        -------
        list of str
            The names now in the folder from this run.

        Raises
        ------
        OSError
            If moving fails (the earlier run's manifest is then already gone,
            so the folder is not mistaken for a complete run).
        """
        earlier = self._earlier_results()
        (self.path / MANIFEST_NAME).unlink(missing_ok=True)
        for name in earlier:
            _remove(self.path / name)
        files = sorted(p.name for p in self.staging.iterdir())
        for name in files:
            target = self.path / name
            if target.exists() and name not in earlier and not self.overwrite:
                raise OutputPathError(
                    f"{target} appeared during the run and is not an earlier run's result; "
                    f"the run's files are kept in {self.staging}",
                    "move that file away and copy the run's files from there", target)
            _remove(target)
            os.replace(self.staging / name, target)
        self.staging.rmdir()
        write_text_atomically(self.path / MANIFEST_NAME,
                              json.dumps({"files": files}, indent=1) + "\n")
        self.committed = True
        return files

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if exc is not None and self.staging.is_dir():
                if any(self.staging.iterdir()):
                    logger.info("the run's output so far is in %s; %s is unchanged",
                                self.staging, self.path)
                else:
                    self.staging.rmdir()
        finally:
            self._release()
            if exc is not None and self._created:  # a run that wrote nothing leaves nothing
                with contextlib.suppress(OSError):
                    self.path.rmdir()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
