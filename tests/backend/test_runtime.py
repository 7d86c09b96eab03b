"""Unit tests of CmdStan resolution and the compatible-runtime builder (no compilation)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from pemc_stan.backend import runtime


def _fake_cmdstan(path: Path, version: str = "2.36.0") -> Path:
    (path / "bin").mkdir(parents=True)
    (path / "makefile").write_text(f"# fake\nCMDSTAN_VERSION := {version}\n")
    (path / "bin" / "stanc").write_text("#!/bin/sh\n")
    return path


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No CMDSTAN, no ~/.cmdstan, a private cache directory."""
    monkeypatch.delenv("CMDSTAN", raising=False)
    monkeypatch.setenv("PEMC_STAN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path


def test_explicit_path_wins_over_environment(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    explicit = _fake_cmdstan(isolated / "explicit", "2.34.1")
    env = _fake_cmdstan(isolated / "env", "2.36.0")
    monkeypatch.setenv("CMDSTAN", str(env))
    found = runtime.resolve(explicit)
    assert (found.kind, found.version, found.path) == ("explicit", "2.34.1", explicit.resolve())


def test_environment_variable_used(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _fake_cmdstan(isolated / "env", "2.36.0")
    monkeypatch.setenv("CMDSTAN", str(env))
    found = runtime.resolve()
    assert found.kind == "environment" and found.version == "2.36.0"


def test_cmdstanpy_default_location_used(isolated: Path) -> None:
    _fake_cmdstan(isolated / "home" / ".cmdstan" / "cmdstan-2.35.0", "2.35.0")
    found = runtime.resolve(build=False)
    assert found.kind == "cmdstanpy"
    assert found.path.name == "cmdstan-2.35.0"


def test_not_a_cmdstan_directory_is_named(isolated: Path) -> None:
    bad = isolated / "not-cmdstan"
    bad.mkdir()
    with pytest.raises(runtime.CmdStanNotFoundError, match="no makefile declaring CMDSTAN_VERSION"):
        runtime.resolve(bad)
    with pytest.raises(runtime.CmdStanNotFoundError, match="does not exist"):
        runtime.resolve(isolated / "missing")


def test_nothing_found_without_build_says_what_to_do(isolated: Path) -> None:
    with pytest.raises(runtime.CmdStanNotFoundError, match="pemc-stan runtime --build"):
        runtime.resolve(build=False)


def test_ingredients_name_the_build(isolated: Path) -> None:
    ingredients = runtime.build_ingredients()
    assert ingredients["stan_version"].startswith("2.")
    name = runtime._build_name(ingredients)
    changed = dict(ingredients, compiler="g++ (other) 13.1")
    assert runtime._build_name(changed) != name
    upgraded = dict(ingredients, httpstan_version="99.0.0")
    assert runtime._build_name(upgraded) != name


def test_every_virtualenv_shares_one_build(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build is named by httpstan's content, not by where it is installed."""
    here = runtime._build_name(runtime.build_ingredients())
    elsewhere = isolated / "another-venv" / "httpstan"
    elsewhere.mkdir(parents=True)
    real = runtime.httpstan_dir()
    (elsewhere / "include").symlink_to(real / "include")
    monkeypatch.setattr(runtime, "httpstan_dir", lambda: elsewhere)
    ingredients = runtime.build_ingredients()
    assert runtime._build_name(ingredients) == here
    assert str(elsewhere) not in json.dumps(ingredients)


def test_the_build_uses_its_own_copy_of_httpstan(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime, "_run_make", _FakeMake())
    final = runtime.build_compatible()
    makefile = (final / "makefile").read_text()
    copy = Path(next(
        line.split(":=", 1)[1].strip() for line in makefile.splitlines()
        if line.startswith("HTTPSTAN :=")
    ))
    assert copy.is_relative_to(isolated / "cache")
    assert str(runtime.httpstan_dir()) not in makefile
    real = runtime.httpstan_dir()
    header = Path("stan/version.hpp")
    assert (copy / "include" / header).read_bytes() == (real / "include" / header).read_bytes()
    assert sorted(p.name for p in (copy / "lib").iterdir()) == sorted(
        p.name for p in (real / "lib").iterdir()
    )
    assert (copy / "stanc").exists()


class _FakeMake:
    """Stands in for `make build`: slow, counts calls, creates the outputs."""

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, target: Path, say: object) -> None:
        with self.lock:
            self.calls += 1
        time.sleep(0.3)
        if self.fail:
            raise runtime.RuntimeBuildError("boom", ["make"], "compiler said no", None)
        for name in ("bin/stansummary", "bin/diagnose", "src/driver.o"):
            (target / name).write_text("built")


def test_concurrent_builds_build_once(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeMake()
    monkeypatch.setattr(runtime, "_run_make", fake)
    results: list[Path] = []

    def build() -> None:
        results.append(runtime.build_compatible())

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake.calls == 1
    assert len(set(results)) == 1
    final = results[0]
    assert runtime.read_cmdstan_version(final) == runtime.build_ingredients()["stan_version"]
    stamp = json.loads((final / runtime._STAMP).read_text())
    assert stamp == runtime.build_ingredients()
    # no temporary build directories are left behind
    assert not [p for p in final.parent.iterdir() if ".build-" in p.name]
    # the next resolution finds it without building
    found = runtime.resolve(build=False)
    assert found.kind == "compatible" and found.path == final


def test_half_built_installation_is_rebuilt(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _FakeMake()
    monkeypatch.setattr(runtime, "_run_make", fake)
    final = runtime.build_compatible()
    (final / runtime._STAMP).unlink()  # as if interrupted before the stamp
    assert runtime.find_compatible() is None
    assert runtime.build_compatible() == final
    assert fake.calls == 2
    assert runtime.find_compatible() is not None


def test_stale_stamp_is_rebuilt(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeMake()
    monkeypatch.setattr(runtime, "_run_make", fake)
    final = runtime.build_compatible()
    stamp = json.loads((final / runtime._STAMP).read_text())
    (final / runtime._STAMP).write_text(json.dumps(dict(stamp, httpstan_version="0.0.1")))
    assert runtime.find_compatible() is None
    runtime.build_compatible()
    assert fake.calls == 2


def test_failed_build_leaves_nothing_half_built(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime, "_run_make", _FakeMake(fail=True))
    with pytest.raises(runtime.RuntimeBuildError, match="boom"):
        runtime.build_compatible()
    root = Path(isolated / "cache" / "cmdstan-compat")
    assert not [p for p in root.iterdir() if p.is_dir()]
    assert runtime.find_compatible() is None


def test_makefile_template_declares_version(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime, "_run_make", _FakeMake())
    final = runtime.build_compatible()
    text = (final / "makefile").read_text()
    assert "CMDSTAN_VERSION := 2." in text
    assert "@HTTPSTAN@" not in text and "@CXX@" not in text
    assert (final / "bin" / "stanc").exists()
    assert (final / "src" / "pch" / "model_header.hpp").exists()


def test_waiting_on_another_process_s_lock_is_said(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    import subprocess
    import sys

    lock = tmp_path / "m.lock"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"h = open({str(lock)!r}, 'a+'); fcntl.flock(h, fcntl.LOCK_EX)\n"
        "print('held', flush=True); time.sleep(1.0)")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with caplog.at_level("WARNING", logger="pemc_stan.backend.runtime"):
        with runtime.file_lock(lock, "the compilation of m"):
            pass
    holder.wait()
    assert any("waiting for another process doing the compilation of m" in r.getMessage()
               and str(lock) in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING", logger="pemc_stan.backend.runtime"):
        with runtime.file_lock(lock, "the compilation of m"):  # free: nothing said
            pass
    assert not caplog.records
