"""The notebooks in ``notebooks/`` run top to bottom.

Each notebook reads ``PEMC_NOTEBOOK_SMALL``; with ``PEMC_NOTEBOOK_SMALL=1`` it
runs with few chains and draws.  The compiled tests execute every notebook with
nbclient in a fresh kernel (working directory ``notebooks/``, matplotlib's inline
backend, which renders every figure); a notebook fails its test when any cell raises, including the checks
against exact answers the notebooks make themselves.  Fast tests check that the
committed notebooks carry no outputs and read the settings variable.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="notebook tests need the test extra (nbformat)")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT = 900  # seconds; the small settings need far less


def _missing_ct() -> str | None:
    try:
        from pemc_stan import pipeline as sampling
        from pemc_stan.methods.continuous_tempering.fit import ContinuousTemperingFit  # noqa: F401
    except ImportError as exc:
        return f"pemc_stan.methods.continuous_tempering.fit.ContinuousTemperingFit ({exc})"
    params = inspect.signature(sampling.sample).parameters
    if not {"log_zeta", "bootstrap_rounds"} <= set(params):
        return "pemc_stan.sample(..., method='ct', log_zeta=..., bootstrap_rounds=...)"
    return None


def _missing_inference_data() -> str | None:
    from pemc_stan.methods.pseudo_extended.fit import PseudoExtendedFit

    try:
        import pemc_stan.output.inference_data  # noqa: F401
    except ImportError as exc:
        return f"pemc_stan.output.inference_data ({exc})"
    if not hasattr(PseudoExtendedFit, "to_inference_data"):
        return "PseudoExtendedFit.to_inference_data"
    return None


def _missing_evidence() -> str | None:
    import pemc_stan

    for name in ("evidence", "bayes_factor"):
        try:
            obj = getattr(pemc_stan, name)
        except AttributeError:
            return f"pemc_stan.{name}"
        if not callable(obj):
            return f"pemc_stan.{name} (not exported as a function)"
    return _missing_ct()  # the notebook also estimates evidence with method="ct"


def _missing_ct_notebook() -> str | None:
    return _missing_ct() or _missing_inference_data()


#: The APIs each notebook needs beyond pseudo-extended sampling; a check returns the
#: name of a missing API (the test is skipped naming it) or None.
REQUIREMENTS: dict[str, Callable[[], str | None]] = {
    "01_quick_start": _missing_inference_data,
    "02_pseudo_extended_mixture": lambda: None,
    "03_continuous_tempering": _missing_ct_notebook,
    "04_model_comparison": _missing_evidence,
}


def test_expected_notebooks_exist() -> None:
    assert [p.stem for p in NOTEBOOKS] == sorted(REQUIREMENTS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    nbformat.validate(book)
    for i, cell in enumerate(book.cells):
        if cell.cell_type == "code":
            assert not cell.outputs, f"{path.name} cell {i} has outputs: clear them before committing"
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
    nbclient = pytest.importorskip("nbclient", reason="notebook tests need nbclient")
    missing = REQUIREMENTS[path.stem]()
    if missing is not None:
        pytest.skip(f"{path.name} needs {missing}, which does not exist yet")
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
