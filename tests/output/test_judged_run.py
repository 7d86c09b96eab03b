"""The surfaces describe the run the verdict judged, and list the earlier runs as earlier."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from pemc_stan.output.cmdstan_files import earlier_runs
from pemc_stan.output.fit_protocol import judged_run


def _fit(csv: Path) -> SimpleNamespace:
    config = {"num_warmup": 1000, "num_samples": 2000, "thin": 1, "delta": 0.95,
              "max_depth": 10, "seed": 7}
    run = SimpleNamespace(chains=4, runset=SimpleNamespace(csv_files=[str(csv)]),
                          metadata=SimpleNamespace(cmdstan_config=config))
    return SimpleNamespace(fit=run)


def test_the_judged_run_is_read_off_its_own_csv_files(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A follow-up ran 2000 draws at adapt_delta 0.95 where 1000 at 0.8 were asked for:
    the record says what ran, where its CSV files are."""
    fit = _fit(tmp_path / "cmdstan" / "follow_up_1" / "model-1.csv")
    assert judged_run(fit, tmp_path) == {  # type: ignore[arg-type]
        "chains": 4, "iter_warmup": 1000, "iter_sampling": 2000, "thin": 1,
        "adapt_delta": 0.95, "max_treedepth": 10, "csv_folder": "cmdstan/follow_up_1/"}
    # a run folder given as a relative path (the command line's --output-dir run)
    monkeypatch.chdir(tmp_path)
    assert judged_run(fit, Path("."))["csv_folder"] == "cmdstan/follow_up_1/"  # type: ignore[arg-type]
    outside = judged_run(fit, tmp_path / "elsewhere")  # type: ignore[arg-type]
    assert outside["csv_folder"] == f"{(tmp_path / 'cmdstan' / 'follow_up_1').as_posix()}/"
    assert judged_run(SimpleNamespace(fit=object())) == {}  # type: ignore[arg-type]


def test_earlier_runs_are_the_other_csv_folders_in_the_order_written(tmp_path: Path) -> None:
    for k, folder in enumerate(("cmdstan", "cmdstan/round_1", "cmdstan/follow_up_1")):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        csv = tmp_path / folder / "model-1.csv"
        csv.write_text("x\n")
        os.utime(csv, (1000 + k, 1000 + k))
    assert earlier_runs(tmp_path, "cmdstan/follow_up_1/") == ["cmdstan/", "cmdstan/round_1/"]
    assert earlier_runs(tmp_path / "none", None) == []


class _Run:
    """What :func:`arrange_runs` uses of a cmdstanpy fit: its CSV files, and
    ``save_csvfiles`` moving them (as cmdstanpy's does)."""

    def __init__(self, csvs: list[Path]) -> None:
        self.runset = SimpleNamespace(csv_files=[str(c) for c in csvs])

    def save_csvfiles(self, folder: str) -> None:
        moved = []
        for csv in map(Path, self.runset.csv_files):
            moved.append(str(Path(folder) / csv.name))
            csv.rename(moved[-1])
        self.runset.csv_files = moved


def _written(folder: Path, stem: str, chains: int = 2) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}-stdout.txt").write_text("console\n")
    csvs = [folder / f"{stem}_{c + 1}.csv" for c in range(chains)]
    for csv in csvs:
        csv.write_text("lp__\n0\n")
    return csvs


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_the_judged_run_is_at_cmdstan_and_the_earlier_ones_in_named_folders(
        tmp_path: Path) -> None:
    """#76: 'cmdstan/ holds the judged run (earlier attempts in named sub-folders)'.  A
    refused split's run of the user's program left at cmdstan/ goes to mode_split/; a
    follow-up judged in follow_up_1/ comes up, and the method's run it followed goes to
    first_run/; rounds keep their folders; the fit reads its CSVs where they now are."""
    from pemc_stan.output.cmdstan_files import arrange_runs

    root = tmp_path / "cmdstan"
    _written(root, "model-20261206204226")            # the refused split
    _written(root / "round_0", "model_pe-20261206204235")
    _written(root, "model_pe-20261206204248")         # the method's run
    judged = _written(root / "follow_up_1", "model_pe-20261206204301")
    fit = SimpleNamespace(fit=_Run(judged), program=SimpleNamespace(name="model"))
    arrange_runs(tmp_path, fit)
    assert _files(root) == {
        "model_pe-20261206204301-stdout.txt", "model_pe-20261206204301_1.csv",
        "model_pe-20261206204301_2.csv",
        "mode_split/model-20261206204226-stdout.txt", "mode_split/model-20261206204226_1.csv",
        "mode_split/model-20261206204226_2.csv",
        "first_run/model_pe-20261206204248-stdout.txt",
        "first_run/model_pe-20261206204248_1.csv", "first_run/model_pe-20261206204248_2.csv",
        "round_0/model_pe-20261206204235-stdout.txt", "round_0/model_pe-20261206204235_1.csv",
        "round_0/model_pe-20261206204235_2.csv"}
    assert not (root / "follow_up_1").exists()
    assert all(Path(f).parent == root and Path(f).is_file() for f in fit.fit.runset.csv_files)
    assert judged_run(SimpleNamespace(fit=SimpleNamespace(  # type: ignore[arg-type]
        chains=2, runset=fit.fit.runset, metadata=SimpleNamespace(cmdstan_config={}))),
        tmp_path)["csv_folder"] == "cmdstan/"
    assert set(earlier_runs(tmp_path, "cmdstan/")) == {
        "cmdstan/mode_split/", "cmdstan/round_0/", "cmdstan/first_run/"}


def test_an_accepted_split_s_longer_run_comes_up_and_runs_elsewhere_stay(
        tmp_path: Path) -> None:
    from pemc_stan.output.cmdstan_files import arrange_runs

    root = tmp_path / "cmdstan"
    _written(root, "model-20261206204226")                  # the split's first run
    judged = _written(root / "split_again_1", "model-20261206204229")
    fit = SimpleNamespace(fit=_Run(judged), program=SimpleNamespace(name="model"))
    arrange_runs(tmp_path, fit)
    assert {f.split("/")[0] for f in _files(root)} == {
        "model-20261206204229-stdout.txt", "model-20261206204229_1.csv",
        "model-20261206204229_2.csv", "first_run"}
    elsewhere = _written(tmp_path / "mine", "model-20261206204300")
    before = _files(tmp_path)
    arrange_runs(tmp_path, SimpleNamespace(fit=_Run(elsewhere),
                                           program=SimpleNamespace(name="model")))
    assert _files(tmp_path) == before
