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


def _median(table: str, method: str, kind: str = "posteriordb") -> str:
    line = next(ln for ln in table.splitlines() if ln.startswith(f"{method}:"))
    medians = line.rsplit("median wall time against NUTS: ", 1)[1]
    return dict(m.split(" ") for m in medians.split(", "))[kind]


def test_a_method_is_timed_against_the_nuts_run_beside_it(validation: ModuleType) -> None:
    # old records without a run id: the NUTS record written before each one
    records = [_rec("nuts", 2.0), _rec("pe", 10.0),
               # a later run of NUTS and CT only, with run ids
               _rec("nuts", 4.0, "b"), _rec("ct", 10.0, "b")]
    table = validation.report(records, 1)
    assert _median(table, "pe") == "5.00x"  # not 10 / 4
    assert _median(table, "ct") == "2.50x"


def test_the_same_run_wins_over_order(validation: ModuleType) -> None:
    # a Dask run writes records as they finish: CT may come before its NUTS
    records = [_rec("nuts", 1.0, "a"), _rec("ct", 9.0, "b"), _rec("nuts", 3.0, "b")]
    assert _median(validation.report(records, 1), "ct") == "3.00x"


def test_a_method_re_run_alone_is_timed_against_the_nuts_run_nearest_in_time(
        validation: ModuleType) -> None:
    # NUTS ran in the morning on another machine; PE was re-run alone in the evening and
    # NUTS again 35 minutes later: PE's ratio is against the evening's NUTS
    records = [_rec("nuts", 1.0, "2026-11-27T06:31:10"), _rec("pe", 12.0, "2026-11-27T19:21:48"),
               _rec("nuts", 4.0, "2026-11-27T19:54:26")]
    assert _median(validation.report(records, 1), "pe") == "3.00x"  # not 12 / 1
    records[2]["run"] = "2026-11-28T12:00:00"  # the morning NUTS is nearer now
    assert _median(validation.report(records, 1), "pe") == "12.00x"


def test_shared_truth_format_is_scored_generically(validation: ModuleType) -> None:
    """A case whose truth.json gives ``mean``, ``sd`` and ``prob`` by column is scored on
    every quantity with no code of its own; exact draws match, a missed mode does not."""
    import numpy as np

    truth = {"log_z": 0.0, "mean": {"x[1]": 2.4}, "sd": {"x[1]": 7.0},
             "prob": {"x[1] < 0": 0.3, "x[1] > 5": 0.5}}
    case = {"kind": "multimodal", "folder": Path("new_case"), "truth": truth}
    keys = [k for k, *_ in validation.generic_quantities(truth)]
    assert keys == ["mean[x[1]]", "var[x[1]]", "P(x[1] < 0)", "P(x[1] > 5)"]
    rng = np.random.default_rng(0)
    left = rng.uniform(size=(4, 20_000)) < 0.3  # two modes at -5 and 5.6 with masses .3/.7
    draws = np.where(left, rng.normal(-5.0, 0.5, left.shape), rng.normal(5.6, 0.5, left.shape))

    def expect_from(x: np.ndarray) -> object:
        def expect(f: object) -> tuple[float, float]:
            values = np.asarray(f(lambda _column: x), dtype=float)  # type: ignore[operator]
            return float(values.mean()), float(values.std() / np.sqrt(values.size))
        return expect

    from scipy.stats import norm

    mean = 0.3 * -5.0 + 0.7 * 5.6  # the mixture's exact moments and probabilities
    second = 0.3 * (25.0 + 0.25) + 0.7 * (5.6**2 + 0.25)
    exact = dict(truth, mean={"x[1]": mean}, sd={"x[1]": float(np.sqrt(second - mean**2))},
                 prob={"x[1] < 0": 0.3 * norm.cdf(10.0) + 0.7 * norm.cdf(-11.2),
                       "x[1] > 5": 0.3 * norm.sf(20.0) + 0.7 * norm.sf(-1.2)})
    good = validation.measure(dict(case, truth=exact), None, None, expect_from(draws))
    assert good["match"], good
    one_mode = draws[~left].reshape(1, -1)  # the chains never left the right mode
    bad = validation.measure(dict(case, truth=exact), None, None, expect_from(one_mode))
    assert not bad["match"] and abs(bad["z"]["P(x[1] < 0)"]) > 4
    with pytest.raises(ValueError, match="NAME < NUMBER"):
        validation.generic_quantities({"mean": {}, "prob": {"x[1] <= 0": 0.3}})
