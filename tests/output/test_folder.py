"""Output folders hold one run: checked paths, a lock, no overwriting, no mixed runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pemc_stan.errors import OutputFolderBusyError, OutputPathError
from pemc_stan.output.folder import (
    LOCK_NAME,
    MANIFEST_NAME,
    PARTIAL_NAME,
    RunFolder,
    check_output_file,
)


def _run(folder: Path, files: dict[str, str], *, overwrite: bool = False) -> list[str]:
    with RunFolder(folder, overwrite=overwrite) as run:
        for name, text in files.items():
            target = run.staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        return run.commit()


def test_a_run_lands_only_when_committed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _run(out, {"estimates.json": "1", "cmdstan/a.csv": "a"}) == ["cmdstan",
                                                                        "estimates.json"]
    assert (out / "estimates.json").read_text() == "1"
    assert json.loads((out / MANIFEST_NAME).read_text())["files"] == ["cmdstan",
                                                                     "estimates.json"]
    assert not (out / PARTIAL_NAME).exists()
    assert not (out / LOCK_NAME).exists()  # a finished run leaves no lock behind


def test_a_lock_file_removed_by_its_holder_is_not_locked_again(tmp_path: Path) -> None:
    """A run removes its lock file while it still holds it. A run that opened that file
    just before and locks it once it is released holds a removed file, not the folder:
    it opens the folder's lock file again."""

    class Raced(RunFolder):
        opened = 0

        def _acquire_once(self) -> None:
            super()._acquire_once()
            Raced.opened += 1
            if Raced.opened == 1:  # the earlier holder removed the file as it released it
                (self.path / LOCK_NAME).unlink()

    out = tmp_path / "out"
    with Raced(out) as run:
        assert Raced.opened == 2
        assert os.stat(out / LOCK_NAME).st_ino == os.fstat(run._lock.fileno()).st_ino
        with pytest.raises(OutputFolderBusyError):
            with RunFolder(out):
                pass


def test_an_earlier_run_is_kept_without_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(out, {"estimates.json": "1"})
    with pytest.raises(OutputPathError, match="holds the results of an earlier run") as info:
        _run(out, {"estimates.json": "2"})
    assert "overwrite=True" in info.value.remedy and "--" not in info.value.remedy
    assert (out / "estimates.json").read_text() == "1"


def test_overwrite_replaces_only_the_earlier_runs_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(out, {"estimates.json": "1", "gq/x.csv": "old", "cmdstan/1.csv": "old"})
    (out / "notes.txt").write_text("the user's")
    _run(out, {"estimates.json": "2", "cmdstan/2.csv": "new"}, overwrite=True)
    assert (out / "estimates.json").read_text() == "2"
    assert not (out / "gq").exists()  # the earlier run's, not written by this one
    assert [p.name for p in (out / "cmdstan").iterdir()] == ["2.csv"]  # no mix of runs
    assert (out / "notes.txt").read_text() == "the user's"


def test_a_failed_run_leaves_the_earlier_results_and_its_partial_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(out, {"estimates.json": "1", "cmdstan/1.csv": "old"})
    with pytest.raises(KeyboardInterrupt):
        with RunFolder(out, overwrite=True) as run:
            (run.staging / "cmdstan").mkdir()
            (run.staging / "cmdstan" / "2.csv").write_text("partial")
            raise KeyboardInterrupt
    assert (out / "estimates.json").read_text() == "1"
    assert [p.name for p in (out / "cmdstan").iterdir()] == ["1.csv"]
    assert (out / PARTIAL_NAME / "cmdstan" / "2.csv").read_text() == "partial"
    _run(out, {"estimates.json": "3"}, overwrite=True)  # the next run clears it
    assert not (out / PARTIAL_NAME).exists()
    with pytest.raises(RuntimeError):  # an empty partial folder is not left behind
        with RunFolder(out, overwrite=True):
            raise RuntimeError("compile failed")
    assert not (out / PARTIAL_NAME).exists()
    with pytest.raises(RuntimeError):  # nor a folder created for a run that wrote nothing
        with RunFolder(tmp_path / "new"):
            raise RuntimeError("the transformation failed")
    assert not (tmp_path / "new").exists()


def test_a_second_run_into_a_locked_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with RunFolder(out) as first:
        with pytest.raises(OutputFolderBusyError, match=f"{out} is in use by another "
                           f"pemc-stan run \\(pid {os.getpid()}"):
            with RunFolder(out, overwrite=True):
                pass
        (first.staging / "estimates.json").write_text("1")
        first.commit()
    assert (out / "estimates.json").read_text() == "1"
    _run(out, {"estimates.json": "2"}, overwrite=True)  # the lock is released


def test_unusable_output_paths_say_what_is_wrong(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    cases = [(a_file, "is a file, not a folder"),
             (a_file / "sub", f"cannot be created: {a_file} is a file"),
             (Path("/proc/pemc-x"), "cannot be created in /proc"),
             (Path("/sys/pemc-x"), "cannot be created in /sys")]
    for path, fragment in cases:
        with pytest.raises(OutputPathError, match=fragment) as info:
            with RunFolder(path):
                pass
        assert info.value.remedy


def test_output_files_are_checked_before_any_work(tmp_path: Path) -> None:
    assert check_output_file(tmp_path / "e.json") == tmp_path / "e.json"
    for path, fragment in [(tmp_path, "is a folder"),
                           (tmp_path / "missing" / "e.json", "does not exist"),
                           (Path("/proc/e.json"), "not writable")]:
        with pytest.raises(OutputPathError, match=fragment):
            check_output_file(path)


def test_files_a_run_would_replace_are_not_taken_for_results(tmp_path: Path) -> None:
    """--output-dir ~ with the user's own ~/cmdstan: refused, and nothing is deleted."""
    out = tmp_path / "home"
    (out / "cmdstan" / "bin").mkdir(parents=True)
    (out / "weights.csv").write_text("the user's")
    with pytest.raises(OutputPathError, match="holds files a run would replace "
                       r"\(cmdstan, weights.csv\)"):
        _run(out, {"estimates.json": "1", "cmdstan/1.csv": "new"})
    assert (out / "cmdstan" / "bin").is_dir() and (out / "weights.csv").read_text() == "the user's"


def test_a_damaged_manifest_never_names_the_folder_or_outside_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(out, {"estimates.json": "1"})
    (tmp_path / "x").write_text("outside")
    (out / "notes.txt").write_text("the user's")
    (out / MANIFEST_NAME).write_text(json.dumps(
        {"files": ["", ".", "..", "../x", str(tmp_path / "x"), "estimates.json"]}))
    _run(out, {"estimates.json": "2"}, overwrite=True)
    assert (tmp_path / "x").read_text() == "outside"
    assert (out / "notes.txt").read_text() == "the user's"
    assert (out / "estimates.json").read_text() == "2"


def test_atomic_writes_get_the_usual_permissions(tmp_path: Path) -> None:
    from pemc_stan.output.folder import write_text_atomically

    umask = os.umask(0o022)
    try:
        write_text_atomically(tmp_path / "e.json", "{}")
    finally:
        os.umask(umask)
    assert (tmp_path / "e.json").stat().st_mode & 0o777 == 0o644


def test_output_folders_are_checked_without_creating_them(tmp_path: Path) -> None:
    from pemc_stan.output.folder import check_output_folder

    assert check_output_folder(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()
    blocker = tmp_path / "results.txt"
    blocker.write_text("")
    for path, fragment in [(blocker, "is a file, not a folder"),
                           (blocker / "sub", f"{blocker} is a file"),
                           (Path("/proc/pemc-x"), "not writable")]:
        with pytest.raises(OutputPathError, match=fragment) as info:
            check_output_folder(path)
        assert info.value.remedy and "\n" not in str(info.value)


@pytest.mark.parametrize("method", ["pe", "ct"])
def test_sample_names_a_file_given_as_output_dir_before_any_pilot_or_compile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    import pemc_stan

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was compiled or a pilot run")

    monkeypatch.setattr("pemc_stan.sampling.model.compile_model", never)
    monkeypatch.setattr("pemc_stan.sampling.model.MethodModel.sample", never)
    blocker = tmp_path / "draws.csv"
    blocker.write_text("")
    program = "parameters { real x; } model { x ~ normal(0, 1); }"
    with pytest.raises(OutputPathError, match="draws.csv is a file, not a folder"):
        pemc_stan.sample(program, method=method, output_dir=blocker)
