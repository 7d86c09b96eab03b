"""pemc-stan: pseudo-extended and continuously tempered MCMC for Stan programs.

The public API: :func:`transform`, :func:`sample`, :func:`evidence`,
:func:`bayes_factor`, the fit classes and the options classes.  Where the rest
lives is described in the README ("Where things live").
"""

from __future__ import annotations

from pemc_stan._version import __version__
from pemc_stan.errors import OptionsError, PemcStanError
from pemc_stan.evidence import bayes_factor, evidence
from pemc_stan.methods.continuous_tempering import (
    ContinuousTemperingFit,
    ContinuousTemperingOptions,
)
from pemc_stan.methods.pseudo_extended import (
    PseudoExtendedFit,
    PseudoExtendedOptions,
)
from pemc_stan.pipeline import sample, transform, transform_result

__all__ = ["__version__", "transform", "transform_result", "sample", "evidence",
           "bayes_factor", "PseudoExtendedFit", "ContinuousTemperingFit",
           "PseudoExtendedOptions", "ContinuousTemperingOptions", "PemcStanError",
           "OptionsError"]
