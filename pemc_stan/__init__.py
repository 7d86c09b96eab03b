"""pemc-stan: pseudo-extended and continuously tempered MCMC for Stan programs."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]

# Eager: binds the function over the same-named submodule pemc_stan.methods.registry.
from pemc_stan.methods.registry import transform  # noqa: E402

__all__ += ["transform", "sample", "ContinuousTemperingFit", "PseudoExtendedFit", "evidence",
            "bayes_factor"]


def __getattr__(name: str) -> object:
    """Lazily import :func:`sample` and the fit classes (keeps ``import pemc_stan`` light)."""
    if name == "sample":
        from pemc_stan.pipeline import sample

        return sample
    if name == "ContinuousTemperingFit":
        from pemc_stan.methods.continuous_tempering.fit import ContinuousTemperingFit

        return ContinuousTemperingFit
    if name in ("evidence", "bayes_factor"):
        from pemc_stan.estimators import evidence as marginal_likelihood

        return getattr(marginal_likelihood, name)
    if name == "PseudoExtendedFit":
        from pemc_stan.methods.pseudo_extended.fit import PseudoExtendedFit

        return PseudoExtendedFit
    raise AttributeError(f"module 'pemc_stan' has no attribute {name!r}")
