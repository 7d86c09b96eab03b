"""Compile Stan programs through cmdstanpy, cached by content hash.

A program is written to ``<cache>/models/<name>-<hash>/<name>.stan`` where the
hash covers the program text, every file it includes, the stanc and C++
options and the CmdStan installation; cmdstanpy compiles it there and the
executable is reused by every later call, test and process that asks for the
same program. Compilation happens under a per-model file lock, so two
processes asking for the same model at once compile it once; an executable is
only ever produced by a complete, successful compilation.
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


def program_hash(
    text: str,
    *,
    included: list[Path] | None = None,
    stanc_options: dict[str, Any] | None = None,
    cpp_options: dict[str, Any] | None = None,
    installation: runtime.CmdStanInstallation | None = None,
) -> str:
    """Content hash that keys a compiled model in the cache."""
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


def _fingerprint(exe_file: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with exe_file.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return {"size": exe_file.stat().st_size, "sha256": digest.hexdigest()}


def _write_record(exe_file: Path) -> None:
    record = exe_file.parent / RECORD
    tmp = record.with_suffix(".tmp")
    tmp.write_text(json.dumps(_fingerprint(exe_file)))
    os.replace(tmp, record)


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
        found = _fingerprint(exe_file)
        if found != expected:
            return (f"does not match its completion record (size {found['size']}, expected "
                    f"{expected.get('size')})")
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
    key = program_hash(
        text,
        included=included,
        stanc_options=stanc_options,
        cpp_options=cpp_options,
        installation=installation,
    )
    root = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"{name}-{key[:16]}"
    stan_file = folder / f"{name}.stan"
    exe_file = folder / name

    with runtime._file_lock(root / f"{folder.name}.lock"):
        if exe_file.exists() and not force:
            problem = _cached_problem(exe_file)
            if problem is None:
                logger.debug("reusing compiled model %s", exe_file)
                return cmdstanpy.CmdStanModel(
                    stan_file=str(stan_file),
                    exe_file=str(exe_file),
                    stanc_options=stanc_options or None,
                    cpp_options=cpp_options,
                )
            logger.warning("the cached executable %s %s; compiling it again", exe_file,
                           problem)
            exe_file.unlink(missing_ok=True)
        folder.mkdir(parents=True, exist_ok=True)
        if not stan_file.exists() or stan_file.read_text() != text:
            tmp = stan_file.with_suffix(".stan.tmp")
            tmp.write_text(text)
            os.replace(tmp, stan_file)
        logger.info("compiling %s (%s)", name, folder)
        started = time.monotonic()
        try:
            model = cmdstanpy.CmdStanModel(
                stan_file=str(stan_file),
                stanc_options=stanc_options or None,
                cpp_options=cpp_options,
                force_compile=True,
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
        logger.info("compiled %s in %.1f s", name, time.monotonic() - started)
        return model


def clear_model_cache(cache_dir: str | os.PathLike[str] | None = None) -> None:
    """Remove every cached compiled model."""
    root = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    shutil.rmtree(root, ignore_errors=True)
