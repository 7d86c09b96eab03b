"""The PE model's inits from the base (fast: nothing compiles)."""

from __future__ import annotations

import numpy as np

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.run.pipeline import method_model

PROGRAM = """
parameters {
  real<lower=0> tau;
  real<lower=-tau, upper=tau> x;
  vector[2] m;
}
model { tau ~ cauchy(0, 1); x ~ normal(0, 1); m ~ normal(0, 1); target += -square(x); }
"""


def test_every_copy_of_every_chain_starts_at_its_own_draw_from_the_base() -> None:
    model = method_model(PROGRAM, {}, method="pe", n_pseudo=3)
    result = model.result
    assert result.temper == "base"  # a Cauchy prior and no likelihood split
    assert [c.unrolled for c in result.parameters] == [False, True, False]
    base = BaseDensity(np.array([0.0, 0.5, 1.0, -1.0]), np.diag([0.2, 1.0, 0.3, 0.3]),
                       "dense").validate()
    inits = model.inits_from_base(base, chains=4, seed=5)
    assert inits is not None and len(inits) == 4
    for init in inits:
        # names and shapes of the PE program: array[N] for tau and m, one x per copy
        assert set(init) == {"tau", "m", "pemc_x_1", "pemc_x_2", "pemc_x_3"}
        tau = np.asarray(init["tau"])
        assert tau.shape == (3,) and np.all(tau > 0)
        assert np.asarray(init["m"]).shape == (3, 2)
        for k in range(3):  # copy k's bound is copy k's tau
            assert abs(init[f"pemc_x_{k + 1}"]) < tau[k]
    # independent draws: no two copies or chains share a value; reproducible by seed
    taus = np.concatenate([np.asarray(i["tau"]) for i in inits])
    assert len(np.unique(taus)) == 12
    assert model.inits_from_base(base, chains=4, seed=5) == inits
    # with noncentring NUTS moves raw coordinates: Stan's own inits
    raw = method_model(PROGRAM.replace("real<lower=-tau, upper=tau> x;", "real x;"), {},
                       method="pe", n_pseudo=3, noncentring=0.5)
    assert raw.inits_from_base(base, chains=4, seed=5) is None
