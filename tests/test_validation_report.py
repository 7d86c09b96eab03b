"""The validation benchmark's table times each method against the NUTS run made beside it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "validation.py"


@pytest.fixture(scope="module")
def validation() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pemc_validation_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _rec(method: str, seconds: float, run: str | None = None) -> dict:
    out = {"case": "kidiq", "kind": "posteriordb", "method": method, "seed": 1,
           "seconds": seconds, "verdict": "ok", "error": 0.01, "match": True}
    if run is not None:
        out["run"] = run
    return out


def _median(table: str, method: str) -> str:
    line = next(ln for ln in table.splitlines() if ln.startswith(f"{method}:"))
    return line.rsplit("median wall time ", 1)[1]


def test_a_method_is_timed_against_the_nuts_run_beside_it(validation: ModuleType) -> None:
    # old records without a run id: the NUTS record written before each one
    records = [_rec("nuts", 2.0), _rec("pe", 10.0),
               # a later run of NUTS and CT only, with run ids
               _rec("nuts", 4.0, "b"), _rec("ct", 10.0, "b")]
    table = validation.report(records, 1)
    assert _median(table, "pe") == "5.00x NUTS"  # not 10 / 4
    assert _median(table, "ct") == "2.50x NUTS"


def test_the_same_run_wins_over_order(validation: ModuleType) -> None:
    # a Dask run writes records as they finish: CT may come before its NUTS
    records = [_rec("nuts", 1.0, "a"), _rec("ct", 9.0, "b"), _rec("nuts", 3.0, "b")]
    assert _median(validation.report(records, 1), "ct") == "3.00x NUTS"
