"""pemc-stan: pseudo-extended and continuously tempered MCMC for Stan programs.

The public API: :func:`transform`, :func:`sample`, :func:`evidence`,
:func:`bayes_factor`, the fit classes and the options classes.  Where the rest
lives is described in the README ("Where things live").
"""

from __future__ import annotations

import warnings

# ArviZ 0.23 announces its coming refactor once a day, on import, as a FutureWarning: it
# says nothing about a user's run, so it is not shown (only that message is filtered).
warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor",
                        category=FutureWarning)

from pemc_stan._version import __version__  # noqa: E402
from pemc_stan.errors import OptionsError, PemcStanError  # noqa: E402
from pemc_stan.estimators.log_z import bayes_factor  # noqa: E402
from pemc_stan.methods.continuous_tempering import (  # noqa: E402
                        ContinuousTemperingFit,
                        ContinuousTemperingOptions,
)
from pemc_stan.methods.pseudo_extended import (  # noqa: E402
                        PseudoExtendedFit,
                        PseudoExtendedOptions,
)
from pemc_stan.run.evidence import evidence  # noqa: E402
from pemc_stan.run.pipeline import sample, transform, transform_result  # noqa: E402

__all__ = ["__version__", "transform", "transform_result", "sample", "evidence",
           "bayes_factor", "PseudoExtendedFit", "ContinuousTemperingFit",
           "PseudoExtendedOptions", "ContinuousTemperingOptions", "PemcStanError",
           "OptionsError"]
