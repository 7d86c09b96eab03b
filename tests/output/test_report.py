"""pemc_stan.output.report: report.html from a run folder's files (no compilation)."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from report_runs import ct_run, pe_run

from pemc_stan.core.search import ModeSearch
from pemc_stan.output import report, run_record
from pemc_stan.output.figures import PLOTS_DIR
from pemc_stan.run.pipeline import transform_result

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_user_lines_recognises_the_users_own_lines() -> None:
    original = """data {
  int<lower=1> N;   // observations
}
parameters { real mu; }
model {
  target += normal_lpdf(mu | 0, 1);
}
"""
    generated = """// generated
data {
  int<lower = 1> N;
  int pemc_K;
}
functions {
  real f(real mu) {
    real pemc_lp = 0;
    pemc_lp += normal_lpdf(mu | 0, 1);
    return pemc_lp;
  }
}
"""
    flags = report.user_lines(generated, original)
    lines = generated.splitlines()
    own = [line.strip() for line, flag in zip(lines, flags, strict=True) if flag]
    # comments and spacing ignored; target += E carried into an accumulator; braces never
    assert own == ["data {", "int<lower = 1> N;", "pemc_lp += normal_lpdf(mu | 0, 1);"]
    # statements on one line, sampling statements as the _lpdf / _lpmf they add
    one_line = ("parameters { real x; int<lower=0> k; } "
                "model { x ~ normal(1, 0.7); k ~ poisson(3); }")
    generated = "real x;\npemc_lp += normal_lpdf(x | 1, 0.7);\nlp += poisson_lpmf(k | 3);\nx;"
    assert report.user_lines(generated, one_line) == [True, True, True, False]


def test_report_of_an_ok_ct_run(tmp_path: Path) -> None:
    folder = ct_run(tmp_path / "run")
    written = report.write_report(folder)
    assert written[-1] == report.REPORT_NAME
    assert {"plots/trace.png", "plots/temperature.png", "plots/weights.png",
            "plots/modes.png", "plots/log_z.png"} <= set(written)
    page = (folder / report.REPORT_NAME).read_text()
    estimates = json.loads((folder / "estimates.json").read_text())
    assert estimates["verdict"]["status"] == "ok"
    assert '<section class="verdict ok" id="verdict">' in page
    assert "Verdict: OK" in page
    for check in estimates["verdict"]["checks"]:
        assert check in page
    # every picture embedded, and a valid PNG
    payloads = report.png_payloads(page)
    assert len(payloads) == len(written) - 1
    assert all(p.startswith(PNG_SIGNATURE) for p in payloads)
    # log Z with its error bar and the estimates
    log_z = estimates["log_z"]
    assert f"{log_z['log_z']:.4f}" in page and log_z["method"] in page
    assert 'id="log-z-estimates"' in page and 'class="bar"' in page
    # the summary table printed by `pemc-stan sample` (summary.csv)
    assert 'id="summary"' in page and ">x</td>" in page
    # the modes, in the parameters' own space
    assert 'id="modes"' in page and "80%" in page
    # the programs: saved in the folder, shown escaped, the user's lines highlighted
    assert (folder / "stan" / "toy.stan").is_file()
    assert (folder / "stan" / "toy_ct.stan").is_file()
    assert 'class="line user"' in page
    assert "x ~ normal(1, 0.7);" in page
    # self-contained: nothing loaded from anywhere
    for needle in ("<script", "<link", 'src="http', "url(http", "@import"):
        assert needle not in page


def test_report_of_a_suspect_pe_run(tmp_path: Path) -> None:
    folder = pe_run(tmp_path / "run")
    report.write_report(folder)
    page = (folder / report.REPORT_NAME).read_text()
    verdict = json.loads((folder / "estimates.json").read_text())["verdict"]
    assert verdict["status"] == "suspect"
    assert '<section class="verdict suspect" id="verdict">' in page
    assert "Verdict: SUSPECT" in page
    for reason in verdict["reasons"]:
        assert html.escape(reason["message"]) in page
        assert html.escape(reason["remedy"]) in page
    assert 'class="fail"' in page
    assert "real&lt;lower=0&gt; tau;" in page  # the program is escaped
    assert "no estimate of log Z" in page
    assert not (folder / run_record.MODES_NAME).exists()  # no search: no modes
    assert 'class="bad"' in page  # ESS below the verdict's threshold marked


def test_report_without_plots(tmp_path: Path) -> None:
    folder = ct_run(tmp_path / "run")
    assert report.write_report(folder, plots=False) == [report.REPORT_NAME]
    assert not (folder / PLOTS_DIR).exists()
    page = (folder / report.REPORT_NAME).read_text()
    assert "Pictures were not asked for" in page and "<img" not in page


def test_report_of_an_older_run_folder(tmp_path: Path) -> None:
    folder = ct_run(tmp_path / "run")
    shutil.rmtree(folder / run_record.SOURCES_DIR)
    for name in (run_record.SUMMARY_NAME, run_record.MODES_NAME):
        (folder / name).unlink()
    report.write_report(folder, plots=False)
    page = (folder / report.REPORT_NAME).read_text()
    assert "not in this run folder" in page
    assert 'id="summary"' in page and ">x</td>" in page  # recomputed from the NetCDF


def test_read_run_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(run_record.RunFolderError, match="does not exist") as info:
        run_record.read_run(tmp_path / "nope")
    assert "output folder" in info.value.remedy and "--" not in info.value.remedy
    (tmp_path / "empty").mkdir()
    with pytest.raises(run_record.RunFolderError, match="no estimates.json"):
        run_record.read_run(tmp_path / "empty")
    partial = tmp_path / "failed" / "partial-run"
    partial.mkdir(parents=True)
    (partial / "estimates.json").write_text("{}")
    with pytest.raises(run_record.RunFolderError, match="partial-run"):
        run_record.read_run(tmp_path / "failed")
    (tmp_path / "no_nc").mkdir()
    (tmp_path / "no_nc" / "estimates.json").write_text("{}")
    with pytest.raises(run_record.RunFolderError, match="no InferenceData"):
        run_record.read_run(tmp_path / "no_nc")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "estimates.json").write_text("{not json")
    with pytest.raises(run_record.RunFolderError, match="cannot be read"):
        run_record.read_run(tmp_path / "bad")


def test_mode_centres_are_mapped_to_the_parameters_own_space() -> None:
    code = """parameters { real<lower=0> s; vector[2] v; }
model { s ~ exponential(1); v ~ normal(0, 1); }"""
    result = transform_result(code, method="ct")
    search = ModeSearch(radii=(2.0,), modes=2, major_modes=2, paths=8, stopped="test",
                        mode_shares=(0.5, 0.5), centres=np.array([[0.0, 1.0, 2.0],
                                                                  [np.log(3.0), -1.0, 0.5]]),
                        major_shares=(0.5, 0.5))
    fit = SimpleNamespace(search=search, result=result, data={},
                          parameter_columns=lambda: ["s", "v[1]", "v[2]"])
    modes = run_record.mode_centres(fit)
    assert modes is not None
    assert modes["columns"] == ["s", "v[1]", "v[2]"]
    np.testing.assert_allclose(modes["centres"], [[1.0, 1.0, 2.0], [3.0, -1.0, 0.5]])
    assert modes["shares"] == [0.5, 0.5]
    assert modes["search"]["search_paths"] == 8
    assert run_record.mode_centres(SimpleNamespace(search=None)) is None


def test_nested_diagnostics_are_rows_a_person_reads() -> None:
    """A split's diagnostics hold a mapping per group: each value gets its own row, and no
    cell shows a Python dictionary."""
    from pemc_stan.output.report import _key_table

    html = _key_table({"divergences": 0, "mode_split": {"groups": 2, "masses": [0.3, 0.7],
                                                        "per_group": [{"rhat": 1.01},
                                                                      {"rhat": 1.02}]}})
    for row in ("divergences", "mode_split.groups", "mode_split.masses",
                "mode_split.per_group[1].rhat", "mode_split.per_group[2].rhat"):
        assert f'<td class="key">{row}</td>' in html, row
    assert "{" not in html
