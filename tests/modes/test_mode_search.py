"""The pilot looks for modes where they are, not only where Stan starts its chains.

Compiled.  The target: 0.6 N(0, 1) + 0.4 N(14, 0.5^2), normalised (log Z = 0).  Every
Pathfinder path started where CmdStan starts (uniform on (-2, 2)) ends at the mode at 0;
the mode at 14 holds 40% of the mass, so a base and log zeta from those paths alone
would give P(x > 7) = 0 and log Z = log 0.6.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import numpy as np
import pytest

import pemc_stan
from pemc_stan.run import pipeline

pytestmark = pytest.mark.compiled

FAR = """parameters {
  real x;
}
model {
  target += log_mix(0.6, normal_lpdf(x | 0, 1), normal_lpdf(x | 14, 0.5));
}
"""
FAR_SHARE = 0.4


def test_the_pilot_finds_a_mode_far_outside_where_stan_starts(cmdstan_installation: Any
                                                              ) -> None:
    pilot = pipeline.method_model(FAR, None, method="ct").pilot()
    z, _ = pilot._pathfinder_round(11, 2.0, 16, None)  # CmdStan's own start box, 16 paths
    assert np.all(np.abs(z) < 6), "a path from (-2, 2) reached the far mode"
    base, log_z = pilot.fit(11, want_base=True)
    search = pilot.search
    assert search is not None and search.major_modes == 2 and search.radius == 32.0
    order = np.argsort(search.centres.ravel())
    assert search.centres.ravel()[order] == pytest.approx([0.0, 14.0], abs=0.2)
    assert np.asarray(search.major_shares)[order] == pytest.approx([0.6, 0.4], abs=0.05)
    assert abs(log_z) < 0.05  # one mode found would give log 0.6 = -0.51
    # the base covers both modes: the moments of the mixture with the defensive masses
    # (half the weight even over the two modes: 0.55 / 0.45), mean 6.3 and sd 7.0
    from pemc_stan.modes.pilot import DEFENSIVE_SHARE

    q = (1 - DEFENSIVE_SHARE) * np.array([0.6, 0.4]) + DEFENSIVE_SHARE * np.array([0.5, 0.5])
    mean = 14.0 * q[1]
    sd = math.sqrt(q[0] * 1.0 + q[1] * 0.25 + q[0] * q[1] * 14.0**2)
    assert base is not None
    assert base.mean[0] == pytest.approx(mean, abs=0.3) and base.sd[0] == pytest.approx(sd,
                                                                                        abs=0.3)


def test_ct_with_the_defaults_gets_the_far_mode_and_says_how_it_searched(
        cmdstan_installation: Any, tmp_path: Any) -> None:
    fit = pemc_stan.sample(FAR, method="ct", seed=1)
    far = fit.expectation(lambda v: (v["x"] > 7).astype(float))
    est = fit.log_z()
    assert far.mcse < 0.05 and abs(far.mean - FAR_SHARE) < 4 * far.mcse, far
    assert est.std_error < math.log(0.6) / -4 and abs(est.log_z) < 4 * est.std_error, est
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert fit.check().ok, fit.check()
        info = fit.diagnostics(warn=False)
    assert info["modes_found"] == 2 and info["search_radius"] == 32.0
    assert "2 mode(s) found" in info["pilot_modes"]
    idata = fit.to_inference_data(output_dir=str(tmp_path))
    attrs = idata.posterior.attrs
    assert attrs["pemc_modes_found"] == 2 and attrs["pemc_search_radius"] == 32.0
    assert json.loads(attrs["pemc_search"])["major_modes_found"] == 2
    assert "steps" in json.loads(attrs["pemc_follow_up"])


RIDGE = """data {
  int N;
  vector[N] x;
  vector[N] y;
}
parameters {
  real a;
  real b;
  real<lower=0> s;
}
model {
  a ~ normal(0, 100);
  b ~ normal(0, 100);
  s ~ normal(0, 10);
  y ~ normal(a + b * x, s);
}
"""


def test_a_regression_ridge_is_one_mode(cmdstan_installation: Any) -> None:
    """Years as the covariate put the posterior of (a, b) on a long, thin ridge
    (kilpisjarvi); Pathfinder's paths stop at different points of it, and by the 3-sd rule
    alone the search reported 17-31 modes on seeds 1-3 and ran to its path limit.  The
    density between their centres has no valley: one mode, and the search stops on its
    unseen share."""
    rng = np.random.default_rng(0)
    x = np.arange(1990.0, 2020.0)
    data = {"N": x.size, "x": x.tolist(),
            "y": (0.02 * (x - 1990) + rng.normal(0, 0.5, x.size)).tolist()}
    pilot = pipeline.method_model(RIDGE, data, method="ct").pilot()
    pilot.fit(1, want_base=True)
    search = pilot.search
    assert search is not None and search.modes == 1, search.describe()
    assert search.stopped.startswith("unseen share"), search.describe()
