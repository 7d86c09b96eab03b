"""pemc-stan: pseudo-extended and continuously tempered MCMC for Stan programs."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]

# Eager: binds the function over the same-named submodule pemc_stan.transform.
from pemc_stan.transform import transform  # noqa: E402

__all__ += ["transform", "sample"]


def __getattr__(name: str) -> object:
    """Lazily import :func:`sample` (keeps ``import pemc_stan`` light)."""
    if name == "sample":
        from pemc_stan.sampling import sample

        return sample
    raise AttributeError(f"module 'pemc_stan' has no attribute {name!r}")
