"""The surfaces describe the run the verdict judged, and list the earlier runs as earlier."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from pemc_stan.output.fit_protocol import judged_run
from pemc_stan.output.writers import earlier_runs


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
