"""Resolve the CmdStan installation that pemc-stan runs through.

Resolution order (:func:`resolve`):

1. an explicit path given by the caller;
2. the ``CMDSTAN`` environment variable;
3. whatever cmdstanpy finds on its own (``~/.cmdstan``, a conda environment);
4. otherwise a *CmdStan-compatible installation* built once, in a per-user
   cache directory, from the installed ``httpstan`` wheel (stanc 2.35, the
   Stan C++ library, TBB and Sundials) and pemc-stan's own driver
   (:func:`build_compatible`).

Whatever is chosen is handed to cmdstanpy with ``cmdstanpy.set_cmdstan_path``
(:func:`activate`); from then on every model goes through the same cmdstanpy
calls, whether the installation is a real CmdStan or the compatible one.

The compatible installation lives in ``<cache>/cmdstan-compat/<version>-<key>``
where *key* hashes everything it is built from (httpstan's version and the
content of its stanc, headers and libraries, the C++ compiler, pemc-stan's C++
sources and makefile): not where httpstan is installed, so every virtualenv on
the machine shares one build. The build uses its own copy of httpstan's files
(``<cache>/httpstan/<digest>``, hard links where possible), so removing the
virtualenv it came from breaks neither the runtime nor its models. A build
takes a file lock, happens in a temporary sibling directory and is renamed into
place only when complete, so concurrent processes never see a half-built
installation; a directory without its completion stamp is removed and rebuilt.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import importlib.metadata
import importlib.resources
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pemc_stan.errors import CmdStanNotFoundError, RuntimeBuildError

logger = logging.getLogger(__name__)

#: Files of :mod:`pemc_stan.backend.cmdstan_compat` copied into ``src/`` of the build.
_CPP_SOURCES = ("driver.cpp", "stansummary.cpp", "diagnose.cpp")
#: Bumped whenever the layout of the compatible installation changes.
_LAYOUT_VERSION = "1"
_STAMP = ".pemc-stan-complete.json"

Kind = Literal["explicit", "environment", "cmdstanpy", "compatible"]




@dataclasses.dataclass(frozen=True)
class CmdStanInstallation:
    """A CmdStan installation that cmdstanpy can use.

    Attributes
    ----------
    path
        The CmdStan directory (what ``CMDSTAN`` points to).
    version
        ``CMDSTAN_VERSION`` from its makefile, e.g. ``"2.35.0"``.
    kind
        How it was found: ``"explicit"``, ``"environment"``, ``"cmdstanpy"`` or
        ``"compatible"`` (built by pemc-stan from httpstan).
    """

    path: Path
    version: str
    kind: Kind

    @property
    def stanc(self) -> Path:
        """The installation's ``bin/stanc``."""
        return self.path / "bin" / "stanc"

    def describe(self) -> str:
        """One line for humans: kind, version and path."""
        what = {
            "explicit": "CmdStan (given explicitly)",
            "environment": "CmdStan (from $CMDSTAN)",
            "cmdstanpy": "CmdStan (found by cmdstanpy)",
            "compatible": "pemc-stan's CmdStan-compatible runtime (built from httpstan)",
        }[self.kind]
        return f"{what}, Stan {self.version}, at {self.path}"


# --------------------------------------------------------------------------- #
# Locations
# --------------------------------------------------------------------------- #


def cache_root() -> Path:
    """Return pemc-stan's per-user cache directory.

    ``$PEMC_STAN_CACHE`` if set, else ``$XDG_CACHE_HOME/pemc-stan``, else
    ``~/.cache/pemc-stan``. The directory is created if needed.
    """
    explicit = os.environ.get("PEMC_STAN_CACHE")
    if explicit:
        root = Path(explicit).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = (Path(xdg) if xdg else Path.home() / ".cache") / "pemc-stan"
    root.mkdir(parents=True, exist_ok=True)
    return root


def httpstan_dir() -> Path:
    """Return the directory of the installed httpstan package.

    Raises
    ------
    CmdStanNotFoundError
        If httpstan is not installed.
    """
    import importlib.util

    spec = importlib.util.find_spec("httpstan")
    if spec is None or spec.origin is None:
        raise CmdStanNotFoundError(
            "httpstan is not installed, and pemc-stan needs it (stanc and the Stan C++ "
            "library) when no CmdStan is installed. Run: pip install httpstan"
        )
    return Path(spec.origin).parent


def stanc_path() -> Path:
    """Return a stanc executable without building anything.

    The stanc of ``$CMDSTAN`` when that is set and has one, else the stanc
    shipped in the httpstan wheel.

    Raises
    ------
    CmdStanNotFoundError
        If no stanc executable can be found.
    """
    cmdstan = os.environ.get("CMDSTAN")
    if cmdstan:
        candidate = Path(cmdstan) / "bin" / "stanc"
        if candidate.exists():
            return candidate
    candidate = httpstan_dir() / "stanc"
    if not candidate.exists():
        raise CmdStanNotFoundError(
            f"no stanc executable at {candidate}; reinstall httpstan "
            "(pip install --force-reinstall httpstan) or set CMDSTAN"
        )
    return candidate


# --------------------------------------------------------------------------- #
# Resolution
# --------------------------------------------------------------------------- #


def read_cmdstan_version(path: Path) -> str | None:
    """Return ``CMDSTAN_VERSION`` from ``path/makefile``, or None if absent."""
    makefile = path / "makefile"
    try:
        text = makefile.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("CMDSTAN_VERSION"):
            _, _, value = line.partition(":=")
            value = value.strip()
            if value:
                return value
    return None


def _validated(path: Path, kind: Kind) -> CmdStanInstallation:
    path = path.expanduser().resolve()
    if not path.is_dir():
        raise CmdStanNotFoundError(
            f"CmdStan directory {path} does not exist; give the path of a CmdStan "
            "installation (the folder holding its makefile), or leave it unset to use "
            "pemc-stan's compatible runtime"
        )
    version = read_cmdstan_version(path)
    if version is None:
        raise CmdStanNotFoundError(
            f"{path} is not a CmdStan installation: it has no makefile declaring "
            "CMDSTAN_VERSION; point to the top folder of CmdStan"
        )
    if not (path / "bin" / "stanc").exists():
        raise CmdStanNotFoundError(
            f"CmdStan at {path} has no bin/stanc: it was not built; run `make build` there"
        )
    return CmdStanInstallation(path=path, version=version, kind=kind)


def _found_by_cmdstanpy() -> Path | None:
    """What cmdstanpy's own search (``~/.cmdstan``) finds, without side effects."""
    from cmdstanpy.utils import cmdstan as cmdstan_utils

    saved = os.environ.pop("CMDSTAN", None)
    try:
        found = cmdstan_utils.cmdstan_path()
    except (ValueError, OSError):
        found = None
    finally:
        if saved is None:
            os.environ.pop("CMDSTAN", None)
        else:
            os.environ["CMDSTAN"] = saved
    return Path(found) if found else None


def resolve(
    path: str | os.PathLike[str] | None = None,
    *,
    build: bool = True,
    show_progress: bool = False,
) -> CmdStanInstallation:
    """Find the CmdStan installation to use, building the compatible one if needed.

    Parameters
    ----------
    path
        An explicit CmdStan directory; takes precedence over everything else.
    build
        Build the compatible installation when nothing else is found (otherwise
        raise).
    show_progress
        Print build progress to stderr.

    Returns
    -------
    CmdStanInstallation

    Raises
    ------
    CmdStanNotFoundError
        If the explicit path or ``$CMDSTAN`` is not a CmdStan installation, or
        nothing is found and ``build`` is False.
    RuntimeBuildError
        If building the compatible installation fails.
    """
    if path is not None:
        return _validated(Path(path), "explicit")
    env = os.environ.get("CMDSTAN")
    if env:
        env_path = Path(env)
        kind: Kind = "compatible" if _is_compatible(env_path) else "environment"
        return _validated(env_path, kind)
    found = _found_by_cmdstanpy()
    if found is not None:
        return _validated(found, "cmdstanpy")
    existing = find_compatible()
    if existing is not None:
        return existing
    if not build:
        raise CmdStanNotFoundError(
            "no CmdStan installation found and the compatible runtime is not built; "
            "run `pemc-stan runtime --build` (or set CMDSTAN to a CmdStan installation)"
        )
    return _validated(build_compatible(show_progress=show_progress), "compatible")


def activate(
    path: str | os.PathLike[str] | None = None,
    *,
    build: bool = True,
    show_progress: bool = False,
) -> CmdStanInstallation:
    """Resolve the installation (see :func:`resolve`) and point cmdstanpy at it.

    Sets ``CMDSTAN`` for this process (through ``cmdstanpy.set_cmdstan_path``),
    so child processes and later cmdstanpy calls use the same installation.

    Raises
    ------
    CmdStanNotFoundError, RuntimeBuildError
        As :func:`resolve`.
    """
    import cmdstanpy

    installation = resolve(path, build=build, show_progress=show_progress)
    cmdstanpy.set_cmdstan_path(str(installation.path))
    os.environ["CMDSTAN"] = str(installation.path)
    logger.info("using %s", installation.describe())
    return installation


# --------------------------------------------------------------------------- #
# The compatible installation
# --------------------------------------------------------------------------- #


def _package_file(name: str) -> bytes:
    try:
        package = importlib.resources.files("pemc_stan.backend.cmdstan_compat")
        return package.joinpath(name).read_bytes()
    except OSError as exc:
        raise CmdStanNotFoundError(
            f"pemc-stan is installed without its C++ source {name} ({exc}); "
            "reinstall pemc-stan (pip install --force-reinstall pemc-stan)"
        ) from exc


def _compiler() -> str:
    return os.environ.get("CXX", "g++")


def _compiler_identity(cxx: str) -> str:
    try:
        out = subprocess.run(
            [cxx, "--version"], capture_output=True, text=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise CmdStanNotFoundError(
            f"the C++ compiler {cxx!r} cannot be run ({exc}); install g++ (e.g. "
            "apt-get install g++) or set CXX to a C++17 compiler"
        ) from exc
    resolved = shutil.which(cxx) or cxx
    return f"{resolved}\n{out.strip()}"


def build_ingredients() -> dict[str, str]:
    """What the compatible installation is built from; its hash names the build.

    Raises
    ------
    CmdStanNotFoundError
        If httpstan is missing or the compiler cannot be run.
    """
    hdir = httpstan_dir()
    sources = hashlib.sha256()
    for name in ("makefile.in", *_CPP_SOURCES, *_extra_headers()):
        sources.update(name.encode())
        sources.update(_package_file(name))
    return {
        "layout": _LAYOUT_VERSION,
        "httpstan_version": importlib.metadata.version("httpstan"),
        "httpstan_content": _httpstan_content(hdir),
        "stan_version": _stan_version(hdir),
        "compiler": _compiler_identity(_compiler()),
        "sources_sha256": sources.hexdigest(),
    }


#: What the runtime takes from the httpstan wheel.
_HTTPSTAN_PARTS = ("include", "lib", "stanc")


def _httpstan_content(hdir: Path) -> str:
    """Digest of the content of the httpstan files the runtime is built from.

    Read off the wheel's ``RECORD`` (the hash pip checked of every installed file),
    so it costs no reading of the 180 MB of headers; without a ``RECORD`` (a
    development install) the files' sizes and modification times stand in.
    """
    digest = hashlib.sha256()
    wanted = tuple(f"httpstan/{part}" for part in _HTTPSTAN_PARTS)
    try:
        record = importlib.metadata.distribution("httpstan").read_text("RECORD")
    except importlib.metadata.PackageNotFoundError:
        record = None
    if record:
        lines = sorted(line for line in record.splitlines() if line.startswith(wanted))
        digest.update("\n".join(lines).encode())
        return "record:" + digest.hexdigest()
    for part in _HTTPSTAN_PARTS:
        base = hdir / part
        files = sorted(base.rglob("*")) if base.is_dir() else [base]
        for path in files:
            if path.is_file():
                info = path.stat()
                digest.update(f"{path.relative_to(hdir)}|{info.st_size}|{info.st_mtime_ns}".encode())
    return "stat:" + digest.hexdigest()


def _httpstan_copy(ingredients: dict[str, str]) -> Path:
    """The runtime's own copy of httpstan's stanc, headers and libraries.

    Hard-linked from the installed wheel where the cache is on the same file
    system (pip replaces files rather than rewriting them, so a link keeps the
    content it was made with), copied otherwise. Made once per content digest,
    in a temporary sibling renamed into place. Call it under the build lock.
    """
    root = cache_root() / "httpstan"
    root.mkdir(parents=True, exist_ok=True)
    name = f"{ingredients['httpstan_version']}-{ingredients['httpstan_content'][-12:]}"
    final = root / name
    if (final / _STAMP).exists():
        return final
    hdir = httpstan_dir()
    with _staged(final, f".{name}.copy-", ingredients) as tmp:
        for part in _HTTPSTAN_PARTS:
            source = hdir / part
            if source.is_dir():
                shutil.copytree(source, tmp / part, copy_function=_link_or_copy)
            else:
                _link_or_copy(str(source), str(tmp / part))
    return final


@contextmanager
def _staged(final: Path, prefix: str, stamp: dict[str, str]) -> Iterator[Path]:
    """A temporary sibling of ``final`` to build in, renamed into place with its completion
    stamp only when the block succeeds (removed otherwise)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=final.parent))
    try:
        yield tmp
        (tmp / _STAMP).write_text(json.dumps(stamp, indent=1, sort_keys=True))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _link_or_copy(source: str, target: str) -> str:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
    return target


def _extra_headers() -> list[str]:
    root = importlib.resources.files("pemc_stan.backend.cmdstan_compat")
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".hpp"))


def _stan_version(hdir: Path) -> str:
    header = hdir / "include" / "stan" / "version.hpp"
    parts: dict[str, str] = {}
    try:
        for line in header.read_text().splitlines():
            for key in ("MAJOR", "MINOR", "PATCH"):
                prefix = f"#define STAN_{key} "
                if line.startswith(prefix):
                    parts[key] = line[len(prefix) :].strip()
    except OSError as exc:
        raise CmdStanNotFoundError(
            f"httpstan at {hdir} has no Stan headers ({exc}); reinstall httpstan"
        ) from exc
    if len(parts) != 3:
        raise CmdStanNotFoundError(
            f"cannot read the Stan version from {header}; reinstall httpstan"
        )
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"


def _compat_root() -> Path:
    root = cache_root() / "cmdstan-compat"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _build_name(ingredients: dict[str, str]) -> str:
    digest = hashlib.sha256(json.dumps(ingredients, sort_keys=True).encode()).hexdigest()
    return f"{ingredients['stan_version']}-{digest[:12]}"


def _is_compatible(path: Path) -> bool:
    return (path / _STAMP).exists()


def _complete(path: Path, ingredients: dict[str, str]) -> bool:
    try:
        stamp = json.loads((path / _STAMP).read_text())
    except (OSError, ValueError):
        return False
    needed = ["makefile", "bin/stanc", "bin/stansummary", "bin/diagnose", "src/driver.o"]
    return stamp == ingredients and all((path / p).exists() for p in needed)


def find_compatible() -> CmdStanInstallation | None:
    """Return the up-to-date compatible installation if it is already built."""
    try:
        ingredients = build_ingredients()
    except CmdStanNotFoundError:
        return None
    path = _compat_root() / _build_name(ingredients)
    if _complete(path, ingredients):
        return CmdStanInstallation(
            path=path, version=ingredients["stan_version"], kind="compatible"
        )
    return None


@contextmanager
def file_lock(path: Path, what: str = "the same work") -> Iterator[None]:
    """An exclusive advisory lock held for the duration of the block; when another
    process holds it, a warning says so (naming ``what`` it is doing and the lock file)
    before the wait, which can last minutes.

    Raises
    ------
    OSError
        If the lock file cannot be opened.
    """
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.warning("waiting for another process doing %s (it holds %s)", what, path)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_compatible(*, force: bool = False, show_progress: bool = False) -> Path:
    """Build (once) the CmdStan-compatible installation and return its path.

    Safe to call from several processes at once: one builds under a file
    lock, in a temporary directory renamed into place when complete; the others
    wait and then use it. A directory left half-built by an interrupted build
    (no completion stamp) or built from other ingredients is not used.

    Parameters
    ----------
    force
        Rebuild even if an up-to-date installation exists.
    show_progress
        Print one line per build step to stderr.

    Raises
    ------
    CmdStanNotFoundError
        If httpstan or the C++ compiler is missing.
    RuntimeBuildError
        If a build step fails; the message names the command and the log keeps
        the full compiler output.
    """
    ingredients = build_ingredients()
    root = _compat_root()
    name = _build_name(ingredients)
    final = root / name

    def say(message: str) -> None:
        if show_progress:
            print(f"pemc-stan: {message}", file=sys.stderr, flush=True)
        else:
            logger.info(message)

    with file_lock(root / f"{name}.lock", "the build of the CmdStan-compatible runtime"):
        if not force and _complete(final, ingredients):
            return final
        say(
            "building the CmdStan-compatible runtime "
            f"(Stan {ingredients['stan_version']}) in {final}"
        )
        with _staged(final, f".{name}.build-", ingredients) as tmp:
            _populate(tmp, ingredients)
            _run_make(tmp, say)
        say(f"CmdStan-compatible runtime ready at {final}")
    return final


def _populate(target: Path, ingredients: dict[str, str]) -> None:
    hdir = _httpstan_copy(ingredients)
    (target / "bin").mkdir()
    (target / "src" / "pch").mkdir(parents=True)
    makefile = (
        _package_file("makefile.in")
        .decode()
        .replace("@STAN_VERSION@", ingredients["stan_version"])
        .replace("@HTTPSTAN@", str(hdir))
        .replace("@CXX@", _compiler())
    )
    (target / "makefile").write_text(makefile)
    for name in (*_CPP_SOURCES, *_extra_headers()):
        (target / "src" / name).write_bytes(_package_file(name))
    (target / "src" / "pch" / "model_header.hpp").write_text(
        "// Precompiled for every model of this installation.\n"
        "#include <stan/model/model_header.hpp>\n"
    )
    shutil.copy2(hdir / "stanc", target / "bin" / "stanc")


def _run_make(target: Path, say: Callable[[str], None]) -> None:
    jobs = str(max(1, min(os.cpu_count() or 1, 4)))
    command = ["make", "-j", jobs, "build"]
    say(
        "compiling the driver, the precompiled header and bin/ tools "
        f"({' '.join(command)}; a few minutes)"
    )
    started = time.monotonic()
    try:
        proc = subprocess.run(
            command, cwd=target, capture_output=True, text=True, check=False, timeout=3600
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeBuildError(
            f"could not run {' '.join(command)} in {target}: {exc}; install make and g++",
            command,
            str(exc),
            None,
        ) from exc
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        log = _compat_root() / "last-build-failure.log"
        log.write_text(f"$ cd {target} && {' '.join(command)}\n{output}")
        tail = "\n".join(output.strip().splitlines()[-40:])
        raise RuntimeBuildError(
            f"building the CmdStan-compatible runtime failed: `{' '.join(command)}` exited "
            f"with {proc.returncode}. Full log: {log}. Last lines:\n{tail}\n"
            "Check that g++ (C++17) works, or install CmdStan and set CMDSTAN.",
            command,
            output,
            log,
        )
    say(f"built in {time.monotonic() - started:.0f} s")

