"""pemc-stan: pseudo-extended and continuously tempered MCMC for Stan programs."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
