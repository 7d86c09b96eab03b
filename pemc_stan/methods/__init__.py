"""The sampling methods, side by side behind :mod:`pemc_stan.methods.registry`.

Each method lives in its own package (options, transform, model, fit and its
own estimators) and registers itself here; :mod:`pemc_stan.methods.base` holds
what they share.
"""

from __future__ import annotations

from pemc_stan.methods import continuous_tempering, pseudo_extended, registry

__all__ = ["registry", "pseudo_extended", "continuous_tempering"]
