"""Compile Stan programs through cmdstanpy, cached by content hash.

A program is written to ``<cache>/models/<name>-<hash>/<name>.stan`` where the
hash covers the program text, every file it includes, the stanc and C++
options and the CmdStan installation; cmdstanpy compiles it there and the
executable is reused by every later call, test and process that asks for the
same program. Compilation happens under a per-model file lock, so two
processes asking for the same model at once compile it once; an executable is
only ever produced by a complete, successful compilation.

The executable is keyed by content, not by name: the same program under
another name (another file, or the generated program of a model read from
another file, whose header comment names it) reuses the executable already
built.  Its :func:`content_key` hashes the program with its comments blanked
(lines and columns kept, so CmdStan's locations stay right) together with the
included files, the options and the runtime; ``<cache>/models/by-content/``
maps that key to the folder that holds a built executable, which the new name's
folder then links (a hard link, or a copy) instead of compiling again.  An
adopted executable still names the donor's file in its runtime messages;
:func:`message_file_name` says which name that is.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import cmdstanpy

from pemc_stan.backend import runtime
from pemc_stan.errors import (
    StanCompileError,
)

logger = logging.getLogger(__name__)

_NAME_RE = re.compile(r"[^A-Za-z0-9_]")



def model_cache_dir() -> Path:
    """Directory holding the compiled-model cache (created if needed)."""
    path = runtime.cache_root() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _program_text(program: str | os.PathLike[str]) -> tuple[str, Path | None]:
    if isinstance(program, os.PathLike) or (
        isinstance(program, str) and program.endswith(".stan") and "\n" not in program
    ):
        path = Path(program).expanduser().resolve()
        if not path.exists():
            raise FileNotFoundError(f"Stan file {path} does not exist")
        return path.read_text(), path
    return str(program), None


def _included_files(text: str, source: Path | None, include_paths: list[str]) -> list[Path]:
    """Files a program pulls in with ``#include`` (resolved by stanc)."""
    if "#include" not in text:
        return []
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.stan"
        probe.write_text(text)
        paths = list(include_paths) + ([str(source.parent)] if source else [])
        cmd = [str(runtime.stanc_path()), "--info"]
        if paths:
            cmd.append("--include-paths=" + ",".join(paths))
        proc = subprocess.run([*cmd, str(probe)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return []  # stanc reports the error properly at compile time
    return [Path(p) for p in json.loads(proc.stdout).get("included_files", [])]


def code_only(text: str) -> str:
    """``text`` with every comment blanked: its characters become spaces, its line breaks
    stay, so two programs that differ only in comments map to one text whose lines and
    columns are those of either.  String literals are kept as they are.

    Raises
    ------
    Nothing.
    """
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':  # a string literal, up to its closing quote (escapes skipped)
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(text[i:j])
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(c if c == "\n" else " " for c in text[i:j]))
            i = j
        else:
            out.append(ch)
            i += 1
    return "\n".join(line.rstrip() for line in "".join(out).split("\n"))


def content_key(
    text: str,
    *,
    included: list[Path] | None = None,
    stanc_options: dict[str, Any] | None = None,
    cpp_options: dict[str, Any] | None = None,
    installation: runtime.CmdStanInstallation | None = None,
) -> str:
    """The key of the executable a program compiles to: :func:`program_hash` of its
    :func:`code_only` text (no name, no comments).

    Raises
    ------
    OSError
        If an included file cannot be read.
    """
    return program_hash("content|" + code_only(text), included=included,
                        stanc_options=stanc_options, cpp_options=cpp_options,
                        installation=installation)


def program_hash(
    text: str,
    *,
    included: list[Path] | None = None,
    stanc_options: dict[str, Any] | None = None,
    cpp_options: dict[str, Any] | None = None,
    installation: runtime.CmdStanInstallation | None = None,
) -> str:
    """Content hash of a program's exact text that names its folder in the cache.

    Raises
    ------
    OSError
        If an included file cannot be read.
    """
    digest = hashlib.sha256()
    digest.update(text.encode())
    for path in included or []:
        digest.update(str(path).encode())
        digest.update(path.read_bytes())
    options = [stanc_options or {}, cpp_options or {}]
    digest.update(json.dumps(options, sort_keys=True, default=str).encode())
    if installation is not None:
        digest.update(f"{installation.path}|{installation.version}".encode())
        stamp = installation.path / runtime._STAMP
        if stamp.exists():
            digest.update(stamp.read_bytes())
    return digest.hexdigest()


#: The completion record written next to an executable after a successful build.
RECORD = ".pemc-complete.json"


#: Folder (in the cache) of the content index: ``<content key>`` -> the folder holding it.
CONTENT_INDEX = "by-content"


def _fingerprint(exe_file: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with exe_file.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return {"size": exe_file.stat().st_size, "sha256": digest.hexdigest()}


def _write_record(exe_file: Path, messages_name: str | None = None) -> None:
    """Record the executable's fingerprint (and the Stan file name its messages use)."""
    record = exe_file.parent / RECORD
    tmp = record.with_suffix(".tmp")
    content = _fingerprint(exe_file)
    content["messages_name"] = messages_name or f"{exe_file.name}.stan"
    tmp.write_text(json.dumps(content))
    os.replace(tmp, record)


def _read_record(folder: Path) -> dict[str, Any] | None:
    try:
        content = json.loads((folder / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return content if isinstance(content, dict) else None


def message_file_name(model: cmdstanpy.CmdStanModel) -> str:
    """The Stan file name in the runtime messages of ``model``'s executable
    (``"(in 'm_ct.stan', line 96, ...)"``): the file it was compiled from, which for an
    executable adopted from a program of the same content under another name is that
    program's file.

    Raises
    ------
    Nothing.
    """
    exe = getattr(model, "exe_file", None)
    if isinstance(exe, (str, os.PathLike)):
        record = _read_record(Path(exe).parent)
        if record is not None and isinstance(record.get("messages_name"), str):
            return str(record["messages_name"])
    return Path(model.stan_file).name if model.stan_file else f"{model.name}.stan"


def _index_entry(root: Path, key: str) -> Path:
    return root / CONTENT_INDEX / key[:32]


def _remember(root: Path, key: str, folder: Path) -> None:
    """Point the content index at ``folder`` (which holds a proven executable)."""
    entry = _index_entry(root, key)
    try:
        if entry.is_file() and entry.read_text().strip() == folder.name:
            return
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
        tmp.write_text(folder.name)
        os.replace(tmp, entry)
    except OSError as exc:  # the index only saves compilations
        logger.debug("could not update the content index %s (%s)", entry, exc)


def _donor(root: Path, folder: Path, key: str, text_key: str) -> Path | None:
    """A proven executable of the same content in another folder of the cache, or None.

    Candidates: the folder the content index names, then folders of the same exact
    text under other names.  Only an executable whose completion record matches it
    counts.
    """
    candidates: list[Path] = []
    entry = _index_entry(root, key)
    if entry.is_file():
        try:
            candidates.append(root / entry.read_text().strip())
        except OSError:
            pass
    candidates += sorted(root.glob(f"*-{text_key[:16]}"))
    for candidate in candidates:
        if candidate == folder or not candidate.is_dir():
            continue
        exe = candidate / candidate.name.rsplit("-", 1)[0]
        if exe.is_file() and (candidate / RECORD).is_file() and _cached_problem(exe) is None:
            return exe
    return None


def _adopt(donor: Path, exe_file: Path) -> bool:
    """Link (or copy) the donor executable into place; True when it is there, proven.

    Raises
    ------
    Nothing (False when it cannot be done).
    """
    record = _read_record(donor.parent)
    tmp = exe_file.with_name(f".{exe_file.name}.{os.getpid()}.adopt")
    try:
        tmp.unlink(missing_ok=True)
        try:
            os.link(donor, tmp)
        except OSError:
            shutil.copy2(donor, tmp)
        os.replace(tmp, exe_file)
        found = _fingerprint(exe_file)
    except OSError as exc:
        logger.debug("could not reuse %s for %s (%s)", donor, exe_file, exc)
        tmp.unlink(missing_ok=True)
        return False
    if record is None or any(found[k] != record.get(k) for k in ("size", "sha256")):
        exe_file.unlink(missing_ok=True)  # changed while it was linked: compile instead
        return False
    _write_record(exe_file, str(record.get("messages_name") or f"{donor.name}.stan"))
    return True


def _cached_problem(exe_file: Path) -> str | None:
    """Why a cached executable cannot be used (None: it can).

    It is used only when the completion record written after its build matches
    its size and hash.  An executable from before records existed proves itself
    by answering CmdStan's ``info`` method, and gets its record then.
    """
    record = exe_file.parent / RECORD
    if record.is_file():
        try:
            expected = json.loads(record.read_text())
        except (OSError, ValueError):
            return "has an unreadable completion record"
        if not isinstance(expected, dict):
            return "has an unreadable completion record"
        found = _fingerprint(exe_file)
        if found["size"] != expected.get("size"):
            return (f"does not match its completion record: it has {found['size']} bytes, "
                    f"the record {expected.get('size')} (a build cut short, or a changed file)")
        if found["sha256"] != expected.get("sha256"):
            return (f"does not match its completion record: its sha256 checksum is "
                    f"{found['sha256'][:12]}..., the record's {str(expected.get('sha256'))[:12]}"
                    "... (same size: the file was changed or corrupted after its build)")
        return None
    if exe_file.stat().st_size == 0:
        return "is empty (a build that was interrupted)"
    try:
        proc = subprocess.run([str(exe_file), "info"], capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot be run ({exc})"
    if proc.returncode != 0 or "stan_version" not in proc.stdout:
        return f"does not answer CmdStan's info method (exit code {proc.returncode})"
    _write_record(exe_file)
    return None


def compile_model(
    program: str | os.PathLike[str],
    *,
    name: str | None = None,
    stanc_options: dict[str, Any] | None = None,
    cpp_options: dict[str, Any] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> cmdstanpy.CmdStanModel:
    """Compile a Stan program (text or ``.stan`` path), reusing a cached executable.

    Parameters
    ----------
    program
        Stan program text, or the path of a ``.stan`` file (its folder is
        added to the include paths).
    name
        Model name (default: the file's stem, or ``"model"`` for text).
    stanc_options, cpp_options
        Passed to cmdstanpy; they are part of the cache key.
    cache_dir
        Cache directory (default: :func:`model_cache_dir`).
    force
        Recompile even if a cached executable exists.

    The executable is keyed by content (:func:`content_key`): a program already
    compiled under another name, or differing from one only in comments, reuses
    that executable instead of compiling again.

    Returns
    -------
    cmdstanpy.CmdStanModel

    Raises
    ------
    FileNotFoundError
        If ``program`` is a path that does not exist.
    StanCompileError
        If stanc or the C++ compiler fails; the message carries their output.
    runtime.CmdStanNotFoundError, runtime.RuntimeBuildError
        If no CmdStan can be found or built.
    """
    installation = runtime.activate()
    text, source = _program_text(program)
    if name is None:
        name = source.stem if source is not None else "model"
    name = _NAME_RE.sub("_", name) or "model"
    if name[0].isdigit():
        name = "m_" + name
    stanc_options = dict(stanc_options or {})
    if source is not None and "#include" in text:
        paths = list(stanc_options.get("include-paths", []))
        if str(source.parent) not in paths:
            paths.append(str(source.parent))
        stanc_options["include-paths"] = paths
    included = _included_files(text, source, list(stanc_options.get("include-paths", [])))
    key = program_hash(text, included=included, stanc_options=stanc_options,
                       cpp_options=cpp_options, installation=installation)
    same_code = content_key(text, included=included, stanc_options=stanc_options,
                            cpp_options=cpp_options, installation=installation)
    root = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"{name}-{key[:16]}"
    stan_file = folder / f"{name}.stan"
    exe_file = folder / name

    with runtime.file_lock(root / f"{folder.name}.lock", f"the compilation of {name}"):
        if exe_file.exists() and not force:
            problem = _cached_problem(exe_file)
            if problem is None:
                logger.debug("reusing compiled model %s", exe_file)
                _remember(root, same_code, folder)
                return _model(stan_file, exe_file, stanc_options, cpp_options)
            logger.warning("the cached executable %s %s; compiling it again (if this recurs, "
                           "check the disk, or delete the cache folder %s)", exe_file, problem,
                           folder)
        exe_file.unlink(missing_ok=True)  # a new build never writes through a shared link
        folder.mkdir(parents=True, exist_ok=True)
        if not stan_file.exists() or stan_file.read_text() != text:
            tmp = stan_file.with_suffix(".stan.tmp")
            tmp.write_text(text)
            os.replace(tmp, stan_file)
        donor = None if force else _donor(root, folder, same_code, key)
        if donor is not None and _adopt(donor, exe_file):
            logger.info("reusing the executable of %s for %s (the same program)",
                        donor.parent.name, name)
            _remember(root, same_code, folder)
            return _model(stan_file, exe_file, stanc_options, cpp_options)
        logger.info("compiling %s (%s)", name, folder)
        started = time.monotonic()
        try:
            model = CompiledModel(
                stan_file=str(stan_file),
                stanc_options=stanc_options or None,
                cpp_options=cpp_options,
                force_compile=True,
                info_file=folder / SRC_INFO_FILE,
            )
        except (ValueError, RuntimeError) as exc:
            for leftover in (exe_file, folder / f"{name}.o"):
                leftover.unlink(missing_ok=True)
            origin = f" (from {source})" if source is not None else ""
            raise StanCompileError(
                f"compiling Stan model {name!r}{origin} failed; the Stan file is kept at "
                f"{stan_file}. Compiler output:\n{exc}",
                stan_file,
                str(exc),
            ) from exc
        _write_record(exe_file)
        _remember(root, same_code, folder)
        logger.info("compiled %s in %.1f s", name, time.monotonic() - started)
        return model


def _model(stan_file: Path, exe_file: Path, stanc_options: dict[str, Any],
           cpp_options: dict[str, Any] | None) -> cmdstanpy.CmdStanModel:
    """The cmdstanpy model of a cached, proven executable: one object per built file in a
    process (cmdstanpy's constructor runs stanc to read the program's parameters, a
    process of its own, for CmdStan before 2.36)."""
    try:
        built = exe_file.stat().st_mtime_ns
    except OSError:
        built = -1
    key = (str(stan_file), str(exe_file), built, repr(sorted(stanc_options.items())),
           repr(sorted((cpp_options or {}).items())))
    model = _MODELS.get(key)
    if model is None:
        model = CompiledModel(stan_file=str(stan_file), exe_file=str(exe_file),
                              stanc_options=stanc_options or None, cpp_options=cpp_options,
                              info_file=stan_file.parent / SRC_INFO_FILE)
        _MODELS[key] = model
    return model


#: The models :func:`_model` made in this process, by file, build time and options.
_MODELS: dict[tuple[str, str, int, str, str], cmdstanpy.CmdStanModel] = {}


#: The file beside a cached program that keeps stanc's ``--info`` of it (the folder is
#: keyed by the program, its options and the runtime, so the answer cannot change).
SRC_INFO_FILE = "src_info.json"


class CompiledModel(cmdstanpy.CmdStanModel):
    """A cmdstanpy model that asks its executable's ``info`` once per built file, and
    stanc's ``--info`` of its program once per cache folder.

    cmdstanpy asks the first (a process of its own) on every ``sample``, ``pathfinder``,
    ``optimize`` and ``log_prob`` call to read the CmdStan version; a small model's run
    makes about twenty such calls.  Its constructor asks the second (for CmdStan before
    2.36), 35-60 ms of stanc for every model a run opens.
    """

    _info: tuple[tuple[str, int], dict[str, str]] | None = None
    _info_file: Path | None = None

    def __init__(self, *args: Any, info_file: Path | None = None, **kwargs: Any) -> None:
        self._info_file = info_file  # read by src_info, which the constructor calls
        super().__init__(*args, **kwargs)

    def src_info(self) -> dict[str, Any]:
        """As ``CmdStanModel.src_info``, kept in the model's cache folder."""
        path = self._info_file
        if path is None:
            return super().src_info()
        try:
            saved = json.loads(path.read_text())
            if isinstance(saved, dict):
                return saved
        except (OSError, ValueError):
            pass
        info = super().src_info()
        if info:
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            try:
                tmp.write_text(json.dumps(info))
                os.replace(tmp, path)
            except OSError:  # a read-only cache still runs, asking stanc each time
                tmp.unlink(missing_ok=True)
        return dict(info)

    def exe_info(self) -> dict[str, str]:
        """As ``CmdStanModel.exe_info``, remembered while the executable is unchanged."""
        if self.exe_file is None:
            return {}
        try:
            key = (str(self.exe_file), os.stat(self.exe_file).st_mtime_ns)
        except OSError:
            return super().exe_info()
        if self._info is None or self._info[0] != key:
            self._info = (key, super().exe_info())
        return dict(self._info[1])


def clear_model_cache(cache_dir: str | os.PathLike[str] | None = None) -> None:
    """Remove every cached compiled model."""
    root = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    shutil.rmtree(root, ignore_errors=True)
