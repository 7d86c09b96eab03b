"""The wide check of a tempered run's moments on a model with exact answers, through
CmdStan (compiled): a banana beside a Student-t mode (the validation case
``banana_beside_t_2d``), where CT's split is refused and the tempered chains visit the
banana's arms at half their rate, every chain agreeing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pemc_stan
from pemc_stan.modes.wide import MOMENT_K_MAX, WideMomentsCheck

pytestmark = pytest.mark.compiled

#: The validation case (benchmarks/validation_cases/make_cases.py writes it, with its
#: exact answers in closed form).
CASE = Path(__file__).resolve().parents[2] / "benchmarks" / "validation_cases" / "multimodal" \
    / "banana_beside_t_2d"
TRUTH = json.loads((CASE / "truth.json").read_text())
MEAN = np.array([TRUTH["mean"]["x[1]"], TRUTH["mean"]["x[2]"]])
VAR = np.array([TRUTH["sd"]["x[1]"], TRUTH["sd"]["x[2]"]]) ** 2


def test_a_tempered_run_that_misses_a_banana_s_arms_is_flagged(compiled: Any) -> None:
    """The importance estimates are right (within 4 of their errors of the exact
    moments), and every mean or variance of the run more than 4 of its own errors off is
    named by ``wide_moments``.  A long tempered run that misses the arms is precise and
    wrong: tempering alone at seed 2 with 4,000 draws a chain (what the follow-ups reached
    before the cells ended them), its variances are several standard errors low; were CT
    to reach the arms there, this test would need a case where it does not, or it would
    stop checking the flag."""
    fit = pemc_stan.sample(str(CASE / "model.stan"), method="ct", seed=2, iter_sampling=4000,
                           split_modes="never", show_progress=False)
    checks = [c for c in fit.later_checks if isinstance(c, WideMomentsCheck)]
    assert len(checks) == 1, "seed 2's split was refused and the run tempered"
    mo = checks[0].moments
    assert mo.columns == ("x[1]", "x[2]") and mo.pareto_k <= MOMENT_K_MAX
    assert np.all(np.abs(mo.mean - MEAN) <= 4 * mo.mean_se), (mo.mean, mo.mean_se)
    assert np.all(np.abs(mo.var - VAR) <= 4 * mo.var_se), (mo.var, mo.var_se)
    off = []
    for j, column in enumerate(mo.columns):  # the run's own estimate, not the cells'
        run = fit.run_expectation(column)
        spread = fit.run_expectation(lambda d, c=column, m=float(run.mean): (d[c] - m) ** 2)
        off += [f"mean {column}"] * bool(abs(run.mean - MEAN[j]) > 4 * run.mcse)
        off += [f"var {column}"] * bool(abs(spread.mean - VAR[j]) > 4 * spread.mcse)
    fit.cell_estimate = None  # judged as the run's own estimate: the cells reach the arms
    verdict = fit.check()
    assert off, "CT now reaches the arms at seed 2: the flag is no longer exercised"
    assert not verdict.ok and "wide_moments" in verdict.names(), (off, verdict)
