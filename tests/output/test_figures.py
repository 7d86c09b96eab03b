"""pemc_stan.output.figures: the run folder's PNG files (synthetic data, no compilation)."""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from report_runs import CT_MODES, ct_run, pe_run

from pemc_stan.output import figures
from pemc_stan.output.run_record import read_run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _posterior(sizes: dict[str, tuple[int, ...]], chains: int = 2, draws: int = 50,
               seed: int = 0) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    data = {}
    for name, shape in sizes.items():
        dims = ["chain", "draw", *[f"{name}_dim_{i}" for i in range(len(shape))]]
        data[name] = (dims, rng.normal(size=(chains, draws, *shape)))
    return xr.Dataset(data)


def _png_size(path: Path) -> tuple[int, int]:
    raw = path.read_bytes()
    assert raw.startswith(PNG_SIGNATURE), f"{path} is not a PNG file"
    return int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")


def test_scalar_columns_in_stan_notation() -> None:
    ds = _posterior({"a": (), "v": (3,), "m": (2, 2)})
    assert figures.scalar_columns(ds) == ["a", "v[1]", "v[2]", "v[3]", "m[1,1]", "m[1,2]",
                                          "m[2,1]", "m[2,2]"]
    assert figures.scalar_columns(ds, ["m", "nope", "a"])[-1] == "a"


def test_panel_columns_share_the_panels_between_parameters() -> None:
    cols = [f"v[{i}]" for i in range(1, 21)] + ["sigma", "m[1,1]", "m[2,1]"]
    chosen = figures.panel_columns(cols, limit=6)
    # each parameter's first elements in turn, in the original order
    assert chosen == ["v[1]", "v[2]", "v[3]", "sigma", "m[1,1]", "m[2,1]"]
    assert figures.panel_columns(cols[:3], limit=12) == cols[:3]
    assert len(figures.panel_columns(cols)) == figures.MAX_PANELS


def test_trace_figure_caps_rows_and_marks_the_weighted_mean() -> None:
    ds = _posterior({"v": (20,), "sigma": ()})
    cols = figures.scalar_columns(ds)
    panels = figures.panel_columns(cols)
    fig = figures.trace_figure(ds, panels, total=len(cols), means={"sigma": 0.25})
    assert len(fig.axes) == 2 * figures.MAX_PANELS
    assert f"{figures.MAX_PANELS} of 21" in fig._suptitle.get_text()
    sigma_hist = fig.axes[2 * panels.index("sigma")]
    assert any(np.allclose(line.get_xdata(), 0.25) for line in sigma_hist.get_lines())
    trace = fig.axes[1]
    assert len(trace.get_lines()) == 2  # one line per chain
    np.testing.assert_allclose(trace.get_lines()[1].get_ydata(), ds["v"].values[1, :, 0])
    with pytest.raises(ValueError, match="no parameter"):
        figures.trace_figure(ds, [])


def test_modes_figure_overlays_the_centres() -> None:
    ds = _posterior({"x": (), "y": ()})
    modes = {"columns": ["x", "y"], "centres": [[1.0, 2.0], [-1.0, -3.0]], "shares": [0.6, 0.4]}
    fig = figures.modes_figure(ds, ["x", "y"], modes, {"search_paths": 8, "search_radius": 2.0})
    lower = fig.axes[2]  # row y, column x
    offsets = [np.asarray(c.get_offsets()) for c in lower.collections]
    assert any(o.shape == (2, 2) and np.allclose(o, [[1.0, 2.0], [-1.0, -3.0]])
               for o in offsets)
    diag = fig.axes[0]
    assert sorted(line.get_xdata()[0] for line in diag.get_lines()) == [-1.0, 1.0]
    assert "2 mode(s)" in fig._suptitle.get_text()
    one = figures.modes_figure(ds, ["y"], modes)
    assert sorted(line.get_xdata()[0] for line in one.axes[0].get_lines()) == [-3.0, 2.0]
    bare = figures.modes_figure(ds, ["x"], None)  # no search: the draws alone
    assert not bare.axes[0].get_lines()
    assert "no search" in bare._suptitle.get_text()


def test_log_z_estimates_lists_the_final_and_the_rounds() -> None:
    estimates = {"log_z": {"log_z": 1.5, "std_error": 0.1, "method": "ct_eq20"},
                 "diagnostics": {"log_z": 1.5, "log_z_se": 0.1,
                                 "bootstrap_log_z": [1.2, 1.5], "bootstrap_log_z_se": [0.3, 0.1],
                                 "log_z_minus_log_zeta": 0.2}}
    rows = figures.log_z_estimates(estimates)
    assert rows == [("final (ct_eq20)", 1.5, 0.1), ("bootstrap log z round 0", 1.2, 0.3),
                    ("bootstrap log z round 1", 1.5, 0.1)]
    assert figures.log_z_estimates({"log_z": None, "diagnostics": {}}) == []
    undefined = {"log_z": {"log_z": None, "std_error": None, "undefined": "flat prior"}}
    assert figures.log_z_estimates(undefined) == []
    no_se = figures.log_z_estimates({"log_z": {"log_z": 0.5, "method": "m"}})
    assert no_se[0][1] == 0.5 and math.isnan(no_se[0][2])
    with pytest.raises(ValueError, match="no evidence estimate"):
        figures.log_z_figure({})


def test_write_figures_of_a_ct_run(tmp_path: Path) -> None:
    record = read_run(ct_run(tmp_path / "run"))
    stale = record.folder / figures.PLOTS_DIR / "old.png"
    stale.parent.mkdir()
    stale.write_bytes(b"old")
    written = figures.write_figures(record.folder, record.idata,
                                    columns=record.parameter_columns(),
                                    estimates=record.estimates, modes=record.modes)
    assert [f.name for f in written] == [f"plots/{k}.png" for k in
                                         ("trace", "temperature", "weights", "modes", "log_z")]
    for f in written:
        width, height = _png_size(f.path)
        assert width > 200 and height > 100
        assert f.title and f.caption
    assert "mode split" not in written[0].caption  # a tempered run's trace says what it is
    assert not stale.exists()  # plots/ is replaced as a whole
    assert not list(record.folder.glob(".plots-new*"))
    assert record.modes is not None
    np.testing.assert_allclose(record.modes["centres"], CT_MODES)


def test_write_figures_of_a_pe_run(tmp_path: Path) -> None:
    record = read_run(pe_run(tmp_path / "run"))
    written = figures.write_figures(record.folder, record.idata,
                                    columns=record.parameter_columns(),
                                    estimates=record.estimates, modes=record.modes)
    # no log Z: no log_z.png; the modes picture shows the draws alone
    assert [Path(f.name).stem for f in written] == ["trace", "temperature", "weights", "modes"]


def test_a_failing_picture_is_a_warning_naming_it(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    record = read_run(ct_run(tmp_path / "run"))
    idata = record.idata
    del idata.sample_stats["weight"]
    with caplog.at_level(logging.WARNING, logger="pemc_stan.output.figures"):
        written = figures.write_figures(record.folder, idata, estimates=record.estimates)
    assert "plots/weights.png" not in [f.name for f in written]
    assert "plots/trace.png" in [f.name for f in written]
    assert any("weights.png" in r.getMessage() and "importance weights" in r.getMessage()
               for r in caplog.records)


def test_a_run_without_a_temperature_has_no_temperature_picture_and_no_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    record = read_run(ct_run(tmp_path / "run"))
    idata = record.idata
    del idata.sample_stats["beta"]  # as a mode split's InferenceData
    with caplog.at_level(logging.WARNING, logger="pemc_stan.output.figures"):
        written = figures.write_figures(record.folder, idata, estimates=record.estimates)
    names = [f.name for f in written]
    assert "plots/temperature.png" not in names and "plots/weights.png" in names
    assert not caplog.records


def test_figures_leave_pyplot_alone(tmp_path: Path) -> None:
    record = read_run(ct_run(tmp_path / "run"))
    figures.write_figures(record.folder, record.idata, estimates=record.estimates)
    pyplot = sys.modules.get("matplotlib.pyplot")
    assert pyplot is None or not pyplot.get_fignums()  # no figure left open
