"""``pemc-stan report`` and the pictures/report.html that ``pemc-stan sample`` writes.

The fast tests report synthetic run folders (``report_runs``); the compiled ones run
``pemc-stan sample example:bimodal_1d --method ct`` and rebuild its report.
"""

from __future__ import annotations

import fcntl
import json
import logging
import shutil
from pathlib import Path

import pytest
from report_runs import ct_run

from pemc_stan.cli import ExitCode, main
from pemc_stan.cli import report as report_command
from pemc_stan.output.folder import LOCK_NAME, MANIFEST_NAME
from pemc_stan.output.report import REPORT_NAME, png_payloads

PICTURES = ("trace", "temperature", "weights", "modes", "log_z")


def _manifest(folder: Path) -> list[str]:
    return list(json.loads((folder / MANIFEST_NAME).read_text())["files"])


def test_report_rebuilds_pictures_and_page(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    folder = ct_run(tmp_path / "run")
    assert "report.html" not in _manifest(folder)
    assert main(["report", str(folder)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert f"report.html in {folder}" in out
    for name in PICTURES:
        assert (folder / "plots" / f"{name}.png").is_file()
        assert f"plots/{name}.png" in out
    page = (folder / REPORT_NAME).read_text()
    assert "Verdict: OK" in page and len(png_payloads(page)) == len(PICTURES)
    # the next run into the folder replaces the report with its own
    assert {"plots", "report.html"} <= set(_manifest(folder))
    # --no-plots: the page alone, without pictures
    assert main(["report", str(folder), "--no-plots"]) == ExitCode.OK
    assert "<img" not in (folder / REPORT_NAME).read_text()


def test_report_of_a_folder_that_is_not_a_run(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing")]) == ExitCode.MISSING_FILE
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("pemc-stan: error: the run folder") and "does not exist" in err[0]
    assert err[1].startswith("pemc-stan: remedy: pass the output folder of a finished run")
    assert main(["report", str(tmp_path)]) == ExitCode.MISSING_FILE
    assert "no estimates.json" in capsys.readouterr().err


def test_report_waits_for_no_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = ct_run(tmp_path / "run")
    with open(folder / LOCK_NAME, "a+") as held:  # a run writing into the folder
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("pid 1: pemc-stan sample model.stan\n")
        held.flush()
        assert main(["report", str(folder)]) == ExitCode.OUTPUT
    err = capsys.readouterr().err
    assert "is writing into" in err and "pemc-stan sample model.stan" in err
    assert not (folder / REPORT_NAME).exists()


def test_a_failing_report_never_costs_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    folder = ct_run(tmp_path / "run")

    def broken(*args: object, **kwargs: object) -> list[str]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(report_command, "write_report", broken)
    with caplog.at_level(logging.WARNING, logger="pemc_stan.cli.report"):
        assert report_command.report_files(folder) == []
    assert any("report.html was not written" in r.getMessage()
               and "disk on fire" in r.getMessage() for r in caplog.records)


def test_sample_help_names_the_flag_and_the_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sample", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--no-plots" in out and "report.html" in out and "plots/" in out
    assert main(["report", "--help"]) == 0
    assert "RUN_DIR" in capsys.readouterr().out


# --------------------------------------------------------------------------- compiled
@pytest.mark.compiled
def test_sample_writes_pictures_and_report_then_report_rebuilds_them(
        cmdstan_installation: object, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ct"
    code = main(["sample", "example:bimodal_1d", "--method", "ct", "--split-modes", "never",
                 "--seed", "1", "--output-dir", str(out)])
    assert code in (ExitCode.OK, ExitCode.SUSPECT,
                ExitCode.SUSPECT_FINAL)
    printed = capsys.readouterr().out
    estimates = json.loads((out / "estimates.json").read_text())
    status = estimates["verdict"]["status"]
    assert (code == ExitCode.OK) == (status == "ok")
    for name in PICTURES:
        assert (out / "plots" / f"{name}.png").stat().st_size > 1000, name
        assert f"plots/{name}.png" in printed
    assert "report.html" in printed and "stan/" in printed
    page = (out / REPORT_NAME).read_text()
    assert f"Verdict: {status.upper()}" in page
    assert f'class="verdict {status}"' in page
    assert len(png_payloads(page)) == len(PICTURES)
    # the folder holds what the report is built from: the programs and the modes
    user = (out / "stan" / "bimodal_1d.stan").read_text()
    assert "log_mix(w, normal_lpdf(x | mu1, sigma)" in user
    assert (out / "stan" / "bimodal_1d_ct.stan").is_file()
    assert 'class="line user"' in page
    modes = json.loads((out / "modes.json").read_text())
    assert modes["columns"] == ["x"]
    assert sorted(round(c[0]) for c in modes["centres"]) == [-3, 3]  # the two modes
    assert {"plots", "report.html", "stan", "modes.json", "summary.csv"} <= set(_manifest(out))
    # rebuilt from the folder alone
    shutil.rmtree(out / "plots")
    (out / REPORT_NAME).unlink()
    assert main(["report", str(out)]) == ExitCode.OK
    rebuilt = (out / REPORT_NAME).read_text()
    assert f"Verdict: {status.upper()}" in rebuilt
    assert all((out / "plots" / f"{name}.png").is_file() for name in PICTURES)


@pytest.mark.compiled
def test_sample_no_plots_writes_neither(cmdstan_installation: object, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ct"
    code = main(["sample", "example:bimodal_1d", "--method", "ct", "--seed", "2",
                 "--iter-sampling", "300", "--no-plots", "--output-dir", str(out)])
    assert code in (ExitCode.OK, ExitCode.SUSPECT,
                ExitCode.SUSPECT_FINAL)
    assert "report.html" not in capsys.readouterr().out
    assert not (out / "plots").exists() and not (out / REPORT_NAME).exists()
    assert (out / "stan").is_dir()  # what a later 'pemc-stan report' needs is there


def test_the_report_speaks_the_surface_that_wrote_it(tmp_path: Path) -> None:
    """#76 'advice in the surface's own words': the command line's report gives flags
    where the record's advice names keyword arguments; Python's keeps the keywords."""
    from pemc_stan.output.report import write_report

    folder = ct_run(tmp_path / "run")
    record = json.loads((folder / "estimates.json").read_text())
    record["verdict"]["status"] = "suspect"
    record["verdict"]["reasons"] = [{"name": "rhat", "message": "R-hat 1.2 (> 1.05)",
                                     "remedy": "run longer (iter_sampling), or pass "
                                               "split_modes='never'", "note": False}]
    (folder / "estimates.json").write_text(json.dumps(record))
    write_report(folder, plots=False)
    page = (folder / REPORT_NAME).read_text()
    assert "(iter_sampling)" in page and "split_modes=" in page and "--split-modes" not in page
    assert main(["report", str(folder), "--no-plots"]) == ExitCode.OK
    page = (folder / REPORT_NAME).read_text()
    assert "(--iter-sampling)" in page and "--split-modes never" in page
    assert "split_modes=" not in page and "(iter_sampling)" not in page
