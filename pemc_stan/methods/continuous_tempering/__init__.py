"""Continuous tempering (Graham & Storkey 2017, "Continuously tempered HMC").

NUTS runs on ``(x, u)`` with ``beta(u) = logistic(u)`` and the bridge
``beta [log gamma(x) - log zeta] + (1 - beta) log b(x)`` between a normalised
base density ``b`` and the target.  Modules: ``options``
(:class:`ContinuousTemperingOptions`), ``base_density`` (the Gaussian base in
per-type unconstrained coordinates), ``transform`` (the Stan program),
``model`` (base fit, NUTS, bootstrap), ``fit`` and ``tempering`` (the
Rao-Blackwellised estimators of eqs 20-22).
"""

from __future__ import annotations

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.methods import registry
from pemc_stan.methods.continuous_tempering.fit import ContinuousTemperingFit
from pemc_stan.methods.continuous_tempering.model import ContinuousTemperingModel
from pemc_stan.methods.continuous_tempering.options import ContinuousTemperingOptions
from pemc_stan.methods.continuous_tempering.transform import (
    ContinuousTemperingResult,
    transform_continuous_tempering,
)

__all__ = ["BaseDensity", "ContinuousTemperingFit", "ContinuousTemperingModel",
           "ContinuousTemperingOptions", "ContinuousTemperingResult",
           "transform_continuous_tempering", "METHOD"]

#: The registry entry of the method (registered by :mod:`pemc_stan.methods`).
METHOD = registry.Method(
    name="continuous_tempering", short="ct", label="continuous-tempering",
    summary="continuous tempering (Graham & Storkey 2017): one chain over x and beta, with log Z",
    options=ContinuousTemperingOptions, transform=transform_continuous_tempering,
    model=ContinuousTemperingModel, fit=ContinuousTemperingFit, estimators=("ct", "ti"))
