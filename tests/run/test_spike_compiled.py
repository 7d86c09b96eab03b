"""A spike inside a slab (one maximum, a phase transition), run with the defaults through
CmdStan: the search climbs each mode to its top and weighs a spike its Gaussian missed
(modes/peaks.py), the cells reach a spike that shares the slab's centre, and a tempered
run that reports the slab's draws with the spike's mass is flagged (search_mass).

    gamma(x) = [w_s N(x; 0, s_s^2 I) + w_b N(x; 0, s_b^2 I)] / (2a)^D   on [-a, a]^D

with ``w_s P_s + w_b P_b = 1`` (``P``: each part's mass inside the box), so that
``log Z = -D log(2a)`` exactly and the spike holds ``share`` of it.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytest
from scipy.special import erf

import pemc_stan

pytestmark = pytest.mark.compiled

SPIKE_IN_SLAB = """
data {
  int<lower=1> D;
  real<lower=0> a;
  real log_ws;
  real log_wb;
  real<lower=0> s_s;
  real<lower=0> s_b;
}
parameters {
  vector<lower=-a, upper=a>[D] x;
}
model {
  target += log_sum_exp(log_ws + normal_lpdf(x | 0, s_s), log_wb + normal_lpdf(x | 0, s_b))
            - D * log(2 * a);
}
"""


def _data(d: int, s_spike: float, s_slab: float, share: float, a: float) -> dict[str, Any]:
    inside = [float(erf(a / (math.sqrt(2) * s))) ** d for s in (s_spike, s_slab)]
    return {"D": d, "a": a, "s_s": s_spike, "s_b": s_slab,
            "log_ws": math.log(share / inside[0]), "log_wb": math.log((1 - share) / inside[1])}


def _run(data: dict[str, Any]) -> tuple[float, float, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pemc_stan.sample(SPIKE_IN_SLAB, data=data, method="ct", seed=1)
        est = fit.log_z()
    return est.log_z, est.std_error, fit.check()


def test_a_spike_pathfinder_never_weighed_is_found_and_weighed(compiled) -> None:
    # 99.9% of the mass in a spike of sd 0.01 inside a slab of sd 1 in 5-D: Pathfinder's
    # Gaussians are all slab-wide (log Z would be log 0.001 = -6.9 off); the spike's top
    # stands 30 nats above the slab Gaussian's, and its Laplace Gaussian weighs it
    data = _data(5, 0.01, 1.0, 0.999, 10.0)
    exact = -5 * math.log(20.0)
    log_z, se, verdict = _run(data)
    assert se < 0.1, se
    assert abs(log_z - exact) <= 4 * se, (log_z, se, exact)
    assert verdict.status == "ok", verdict


def test_a_slab_the_tempered_run_misweighs_is_flagged(compiled) -> None:
    # half the mass in a spike of sd 0.05, half in a slab of sd 1, 20-D: the search finds
    # the spike (the only maximum) alone, and a tempered run from there may report the
    # slab's draws with the spike's mass; right, or flagged by the search's own draws
    data = _data(20, 0.05, 1.0, 0.5, 3.0)
    exact = -20 * math.log(6.0)
    log_z, se, verdict = _run(data)
    right = abs(log_z - exact) <= 4 * max(se, 1e-12)
    assert right or "search_mass" in verdict.names(), (log_z, se, exact, verdict)


def test_pe_s_slab_without_the_spike_is_flagged(compiled) -> None:
    # the same target with pseudo-extended MCMC, which has no log Z of its own: its
    # tempered copies stay in the slab, and the search's draws are weighed against the
    # bridge estimate of what its resampled draws hold (it was wrong with an ok verdict)
    data = _data(20, 0.05, 1.0, 0.5, 3.0)
    slab_var = 1.0 - 6.0 * math.exp(-4.5) / math.sqrt(2 * math.pi) / float(erf(3 / math.sqrt(2)))
    exact = 0.5 * 0.05**2 + 0.5 * slab_var  # E[x1^2]: the spike's and the truncated slab's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pemc_stan.sample(SPIKE_IN_SLAB, data=data, method="pe", seed=1)
        second = fit.expectation(lambda v: v["x[1]"] ** 2)
        verdict = fit.check()
    right = abs(float(second.mean) - exact) <= 4 * float(second.mcse)
    assert right or "search_mass" in verdict.names(), (second, exact, verdict)
