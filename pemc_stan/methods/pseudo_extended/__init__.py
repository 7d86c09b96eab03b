"""Pseudo-extended MCMC (Nemeth, Lindsten, Filippone & Hensman 2019).

Every parameter becomes N pseudo-samples; the extended target is eq. (8) with
the tempered instrumental ``q(x, beta) ∝ gamma~(x)^beta g(beta)``; within each
draw the pseudo-samples are weighted by Theorem 2.1.  Modules: ``options``
(:class:`PseudoExtendedOptions`), ``transform`` (the Stan program; ``copies``, the
parameters' pseudo-sample copies and their declarations), ``model``
(pilot and NUTS), ``fit`` (weights, expectations, diagnostics) and
``estimators`` (the pooled mixture estimator).
"""

from __future__ import annotations

from pemc_stan.methods import registry
from pemc_stan.methods.pseudo_extended.fit import PseudoExtendedFit
from pemc_stan.methods.pseudo_extended.model import PseudoExtendedModel
from pemc_stan.methods.pseudo_extended.options import BetaDensity, PseudoExtendedOptions
from pemc_stan.methods.pseudo_extended.transform import (
    PseudoExtendedResult,
    transform_pseudo_extended,
)

__all__ = ["BetaDensity", "PseudoExtendedFit", "PseudoExtendedModel", "PseudoExtendedOptions",
           "PseudoExtendedResult", "transform_pseudo_extended", "METHOD"]

#: The registry entry of the method (registered by :mod:`pemc_stan.methods`).
METHOD = registry.Method(
    name="pseudo_extended", short="pe", label="pseudo-extended",
    summary="pseudo-extended MCMC (Nemeth et al. 2019): N tempered pseudo-samples per parameter",
    options=PseudoExtendedOptions, transform=transform_pseudo_extended,
    model=PseudoExtendedModel, fit=PseudoExtendedFit)
