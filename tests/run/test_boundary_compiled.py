"""A density that diverges at the edges of its simplex, run with the defaults.

Three Dirichlet densities on a 4-simplex, one with alpha = 0.3 (infinite at every edge),
two concentrated towards two corners: the search finds modes and the split draws
importance points around them, some within 1e-12 of an edge.  When the density program
round-tripped those points through Stan's stick-breaking it returned +inf or wrongly huge
values there, and the split was refused for a mode the search had "missed" (10^300 %
more mass) and tempered at 30-200 x NUTS.  Exact answers: log Z = 0, the means in closed
form.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import pemc_stan

pytestmark = pytest.mark.compiled

PROGRAM = """
data {
  int<lower=2> K;
  vector<lower=0>[3] w;
  array[3] vector<lower=0>[K] alpha;
}
parameters {
  simplex[K] theta;
}
model {
  vector[3] lp;
  for (j in 1:3) lp[j] = log(w[j]) + dirichlet_lpdf(theta | alpha[j]);
  target += log_sum_exp(lp);
}
"""
WEIGHTS = np.array([0.4, 0.3, 0.3])
ALPHAS = np.array([[0.3] * 4, [30.0, 2, 2, 2], [2.0, 2, 30, 2]])
DATA = {"K": 4, "w": WEIGHTS.tolist(), "alpha": ALPHAS.tolist()}


def test_a_dirichlet_mixture_with_alpha_below_one_is_split_without_a_false_missed_mode(
        compiled) -> None:
    fit = pemc_stan.sample(PROGRAM, DATA, method="pe", seed=1, show_progress=False)
    said = str(fit.check()) + json.dumps(fit.diagnostics(warn=False), default=str)
    assert "missed a mode" not in said and "could not weigh" not in said, said
    assert fit.check().ok, fit.check()
    assert type(fit).__name__ == "ModeSplitFit"  # split, not tempered
    mean = WEIGHTS @ (ALPHAS / ALPHAS.sum(axis=1, keepdims=True))
    for k in range(4):
        e = fit.expectation(f"theta[{k + 1}]")
        assert abs(e.mean - mean[k]) < 4 * e.mcse, (k, e.mean, mean[k], e.mcse)
    lz = fit.log_z()
    assert abs(lz.log_z) < 4 * lz.std_error, lz
