"""Continuously tempered (CT) transformation of a Stan program.

Implements *joint continuous tempering* of Graham & Storkey (2017),
"Continuously tempered Hamiltonian Monte Carlo" (sections 5-6).

Notation
--------
``gamma(x)`` is the model's full density (every normalising constant, on the
constrained space, no Jacobian) from
:func:`pemc_stan.stan.logdensity.log_density_functions`, ``Z = int gamma``;
``b(x) = exp(-psi(x))`` a normalised base density on the same space
(:mod:`pemc_stan.core.base_density`); ``log zeta`` an
approximation of ``log Z``.

Whole-posterior tempering (``temper="posterior"``, the paper's method)
    The temperature control ``u`` has ``beta(u) = logistic(u)`` and the joint
    target (eq 15) is::

        log p(x, u) = beta(u) [log gamma(x) - log zeta] + (1 - beta(u)) log b(x)
                      + log |dbeta/du|,     log |dbeta/du| = log beta + log(1 - beta).

    Its ``beta`` marginal is ``z(beta) / (C zeta^beta)`` (eq 19) with
    ``z(0) = 1`` and ``z(1) = Z``, uniform on (0, 1) when ``zeta = Z`` and
    ``b`` equals the target.  ``Delta(x) = log zeta + log b(x) - log gamma(x)``
    (eq 17) drives the Rao-Blackwellised estimators of
    :mod:`pemc_stan.methods.continuous_tempering.tempering`; the estimate of eq 20 is of ``Z``.

Likelihood-only tempering (``temper="likelihood"``)
    With ``gamma = p(x) L(x)`` (prior times likelihood, split by
    :mod:`pemc_stan.stan.analysis`), the family is ``p(x) L(x)^beta``::

        log p(x, u) = log p(x) + beta(u) [log L(x) - log zeta] + log |dbeta/du|.

    This is the same construction with the prior as base density
    (``psi = -log p``): ``Delta(x) = log zeta - log L(x)`` and eq 20 estimates
    ``int p L / int p``, which equals the evidence ``Z`` when the prior, as
    written with all its constants, integrates to one on the constrained space
    (a proper prior with truncations written out; e.g. ``sigma ~ normal(0, 1)``
    on ``real<lower=0> sigma`` without ``T[0, ]`` has mass 1/2 and the estimate
    is then ``2 Z``).  No Gaussian base is needed; an improper prior makes the
    joint improper.

The generated program
---------------------
Rendered from ``stan_templates/continuous_tempering.stan.jinja``: the user's
functions plus the log-density functions and the base-coordinate helpers; the
user's data plus ``pemc_log_zeta`` and (posterior tempering) the base
``pemc_D``, ``pemc_base_mean`` and ``pemc_base_sd`` (diagonal) or
``pemc_base_chol`` (dense); the user's transformed data; the user's
parameters plus ``real pemc_u``.  Transformed parameters ``pemc_beta``,
``pemc_z`` (base coordinates) and ``pemc_log_jacobian``; generated quantities
``pemc_log_gamma``, ``pemc_log_base`` and ``pemc_delta``.  The user's
transformed parameters and generated quantities are not in the CT program
(they are recomputed on resampled draws by standalone generated quantities of
the original model).  Stan adds the Jacobian of its own unconstraining
transforms for the declared parameters, so ``b`` and ``gamma`` are both
densities on the constrained space, as eq 15 requires.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pemc_stan.core.base_density import BaseDensity, stan_base_lpdf
from pemc_stan.core.coordinate_code import (
    stan_base_functions,
    stan_coordinate_code,
    stan_dim_expr,
)
from pemc_stan.core.coordinates import BaseCoordinates, base_coordinates
from pemc_stan.core.result import TransformResult
from pemc_stan.core.templates import (
    block_text,
    functions_text,
    no_likelihood_message,
    parameter_declarations,
    prepare_program,
    render_mapped,
)
from pemc_stan.errors import ContinuousTemperingWarning, emit_warning
from pemc_stan.methods.continuous_tempering.options import ContinuousTemperingOptions
from pemc_stan.methods.tempering import BetaBias
from pemc_stan.stan.analysis import heavy_tailed_priors
from pemc_stan.stan.evaluate import scalar_definitions
from pemc_stan.stan.inputs import StanProgram
from pemc_stan.stan.logdensity import log_density_functions
from pemc_stan.stan.symbols import build_symbol_table

logger = logging.getLogger(__name__)

__all__ = ["ContinuousTemperingResult", "transform_continuous_tempering"]

_TEMPLATE = "continuous_tempering.stan.jinja"


@dataclass(frozen=True, kw_only=True)
class ContinuousTemperingResult(TransformResult):
    """A continuously tempered program and what is needed to run and post-process it.

    Attributes
    ----------
    stan_code, options, program, warnings
        As :class:`~pemc_stan.core.result.TransformResult`.
    coordinates
        The base coordinate map of the parameters (Python mirror of the Stan code).
    """

    options: ContinuousTemperingOptions
    coordinates: BaseCoordinates

    def data(self, user_data: Mapping[str, Any] | None, log_zeta: float | None = None,
             base: BaseDensity | None = None, bias: BetaBias | None = None, **values: Any
             ) -> dict[str, Any]:
        """The CT program's data: ``user_data`` plus ``pemc_log_zeta``, the bias of beta
        and the base.

        Parameters
        ----------
        user_data
            The model's data.
        log_zeta
            ``log zeta`` (default: ``options.log_zeta``).
        base
            The Gaussian base (default: ``options.base`` when it is a
            BaseDensity); not used under likelihood tempering.
        bias
            The :class:`~pemc_stan.methods.tempering.BetaBias`
            ``g(beta)`` (default: none, the paper's flat joint).

        Raises
        ------
        ValueError
            If ``log zeta`` or the base is unknown, or the base has the wrong
            dimension or covariance form.
        """
        out = dict(user_data or {})
        lz = self.options.log_zeta if log_zeta is None else log_zeta
        if lz is None or not math.isfinite(float(lz)):
            raise ValueError(f"log_zeta={lz!r}: a finite log zeta is needed; pass log_zeta= "
                             "or let pemc_stan.sample estimate it")
        out["pemc_log_zeta"] = float(lz)
        out.update((bias or BetaBias()).stan_data())
        if self.options.temper == "likelihood":
            return out
        if base is None and isinstance(self.options.base, BaseDensity):
            base = self.options.base
        if base is None:
            raise ValueError("base=None: the CT program needs a Gaussian base density; pass "
                             "a pemc_stan.methods.continuous_tempering.BaseDensity or let "
                             "pemc_stan.sample fit one")
        base.validate()
        d = self.coordinates.dim(user_data)
        if base.dim != d:
            raise ValueError(f"the base density has {base.dim} coordinates but the parameters "
                             f"have {d}")
        if base.covariance != self.options.covariance_form:
            raise ValueError(f"the base has covariance={base.covariance!r} but the program was "
                             f"generated for base_covariance={self.options.covariance_form!r}")
        if base.df != self.options.base_df:
            raise ValueError(f"the base has df={base.df!r} but the program was generated for "
                             f"base_df={self.options.base_df!r}")
        out.update(base.stan_data())
        return out


# --------------------------------------------------------------------------- #
# The transformation
# --------------------------------------------------------------------------- #


def transform_continuous_tempering(program: StanProgram, options: ContinuousTemperingOptions
                                   ) -> ContinuousTemperingResult:
    """Build the continuously tempered program (eq 15) of a Stan program.

    Parameters
    ----------
    program
        The user's program, read once (:func:`pemc_stan.stan.inputs.read_program`).
    options
        Validated options (the registry's front doors build and validate them).

    Returns
    -------
    ContinuousTemperingResult

    Raises
    ------
    ReservedPrefixError
        For identifiers starting with ``pemc_``.
    StanProgramError
        For a program that declares no parameters.
    UnsupportedConstructError
        For constructs the log-density rewrite does not support, and
        (:class:`~pemc_stan.errors.UnsupportedBaseError`) for parameter
        types without a base density (posterior tempering only).
    """
    prepared = prepare_program(program, None, "continuous-tempering")
    tree = prepared.tree
    table = build_symbol_table(tree)
    # the declarations, hierarchical normal priors non-centred: the base coordinates of
    # such a parameter are then Stan's own unconstrained ones, (x - offset) / multiplier
    declarations = parameter_declarations(prepared, options.reparameterize, table)
    coords = (base_coordinates(declarations.decls, table, scalar_definitions(tree),
                               method="continuous-tempering")
              if options.temper == "posterior" else BaseCoordinates(()))
    functions = log_density_functions(tree, prepared.name)
    stan_code, line_map = render_mapped(
        _TEMPLATE, prepared.path.name if prepared.path is not None else "",
        model_name=prepared.name, temper=options.temper, covariance=options.covariance_form,
        tails=math.isfinite(options.base_df),
        functions=functions_text(tree, functions.functions),
        base_functions=stan_base_functions(coords.blocks),
        data=block_text(tree.data), transformed_data=block_text(tree.transformed_data),
        parameters=declarations.text(), coordinates=stan_coordinate_code(coords.blocks),
        dim_expr=stan_dim_expr(coords.blocks) if coords.blocks else "0",
        base_lpdf=stan_base_lpdf(options.covariance_form,
                                 tails=math.isfinite(options.base_df)),
        log_density=functions.call("density"),
        log_prior=functions.call("prior"), log_likelihood=functions.call("likelihood"),
    )
    issued = _warning_messages(prepared) if options.temper == "likelihood" else []
    for msg in issued:
        emit_warning(msg, ContinuousTemperingWarning, stacklevel=2)
    return ContinuousTemperingResult(
        stan_code=stan_code, options=options, program=prepared, coordinates=coords,
        warnings=tuple(issued), noncentred=declarations.noncentred, line_map=line_map)


def _warning_messages(prepared: StanProgram) -> list[str]:
    """The warnings about likelihood tempering of ``prepared``, in the order they are issued.

    Raises
    ------
    Nothing.
    """
    out: list[str] = []
    no_likelihood = no_likelihood_message(prepared)
    if no_likelihood is not None:
        out.append(no_likelihood)
    heavy = heavy_tailed_priors(prepared.tree, prepared.analysis)
    if heavy:
        where = ", ".join(f"{d} (line {line})" for d, line in heavy)
        out.append(f"{prepared.name}: heavy-tailed prior(s) {where} with temper='likelihood': "
                   "the base is the prior, so at beta = 0 the chain explores the prior's heavy "
                   "tails (slow mixing, large Delta); consider temper='posterior'.")
    return out
