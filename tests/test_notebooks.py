"""The notebooks in ``notebooks/`` run top to bottom.

Each notebook reads ``PEMC_NOTEBOOK_SMALL``; with ``PEMC_NOTEBOOK_SMALL=1`` it
runs with few chains and draws.  The compiled tests execute every notebook with
nbclient in a fresh kernel (working directory ``notebooks/``, matplotlib's inline
backend, which renders every figure); a notebook fails its test when any cell
raises, including the checks against exact answers the notebooks make
themselves.  Fast tests check that the committed notebooks carry no outputs and
read the settings variable.
"""

from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT = 900  # seconds; the small settings need far less


#: The notebooks, in order.
EXPECTED = ["01_quick_start", "02_pseudo_extended_mixture", "03_continuous_tempering",
            "04_model_comparison"]


def test_expected_notebooks_exist() -> None:
    assert [p.stem for p in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    nbformat.validate(book)
    for i, cell in enumerate(book.cells):
        if cell.cell_type == "code":
            assert not cell.outputs, (f"{path.name} cell {i} has outputs: "
                                      "clear them before committing")
            assert cell.execution_count is None, f"{path.name} cell {i} has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_reads_small_settings(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    code = [c.source for c in book.cells if c.cell_type == "code"]
    assert code and "PEMC_NOTEBOOK_SMALL" in code[0], (
        f"the first code cell of {path.name} must read PEMC_NOTEBOOK_SMALL")
    assert book.cells[0].cell_type == "markdown", f"{path.name} must start with a title cell"


@pytest.mark.compiled
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, cmdstan_installation: object,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    # the kernel inherits the environment: small settings, the same CmdStan; figures are
    # rendered by the kernel's inline backend (headless)
    monkeypatch.setenv("PEMC_NOTEBOOK_SMALL", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    book = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        book, timeout=CELL_TIMEOUT, kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:
        pytest.fail(f"{path.name} failed:\n{exc}", pytrace=False)
