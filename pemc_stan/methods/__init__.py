"""The sampling methods, side by side behind :mod:`pemc_stan.methods.registry`.

Each method lives in its own package (options, transform, model, fit and its
own estimators) and registers itself when imported; :mod:`pemc_stan.methods.base`
holds what they share.  Importing this package registers the built-in methods.
"""

from __future__ import annotations

from pemc_stan.methods import continuous_tempering, pseudo_extended, registry  # noqa: F401

__all__ = ["registry"]
