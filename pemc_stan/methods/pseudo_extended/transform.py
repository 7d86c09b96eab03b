"""Pseudo-extended (PE) transformation of a Stan program.

Implements the pseudo-extended method of Nemeth, Lindsten, Filippone & Hensman
(2019), "Pseudo-extended Markov chain Monte Carlo" (sections 2-4).

Notation
--------
``gamma(x)`` is the model's full density (every normalising constant, on the
constrained space, no Jacobian), obtained from the model block by
:func:`pemc_stan.stan.logdensity.log_density_functions`.  ``gamma~ = gamma / Z^``
with ``log Z^ = pemc_log_scale`` a user-set or pilot-estimated offset.

Whole-posterior tempering (``temper="posterior"``)
    Instrumental (eq 7): ``q(x, beta) ∝ gamma~(x)^beta g(beta)``.  The extended
    target (eq 8), up to a constant, is::

        log pi^N(x_{1:N}, beta_{1:N}) =
            log_sum_exp_i [ (1 - beta_i) log gamma~(x_i) + log pi(beta_i) - log g(beta_i) ]
          + sum_j [ beta_j log gamma~(x_j) + log g(beta_j) ]

    and the weights (Theorem 2.1, eq 3), normalised over ``i`` within a draw::

        log w_i = log gamma~(x_i) + log pi(beta_i) - beta_i log gamma~(x_i) - log g(beta_i).

Likelihood-only tempering (``temper="likelihood"``)
    With ``gamma = p(x) L(x)`` (prior times likelihood, split by
    :mod:`pemc_stan.stan.analysis`) and ``L~ = L / Z^``, the instrumental is
    ``q(x, beta) ∝ p(x) L~(x)^beta g(beta)``.  Substituting into eq 2,
    ``pi(x_i) pi(beta_i) / q(x_i, beta_i) ∝ L~(x_i)^(1 - beta_i) pi(beta_i) / g(beta_i)``,
    so::

        log pi^N = log_sum_exp_i [ (1 - beta_i) log L~(x_i) + log pi(beta_i) - log g(beta_i) ]
                 + sum_j [ log p(x_j) + beta_j log L~(x_j) + log g(beta_j) ]
        log w_i  = (1 - beta_i) log L~(x_i) + log pi(beta_i) - log g(beta_i).

    The prior enters every pseudo-sample fully, so ``q`` is proper whenever the
    prior is (no heavy-tail problem), and ``Z^`` is again the evidence.

Tempering towards a base density (``temper="base"``)
    With ``b`` a normalised Gaussian density in the base coordinates of the
    parameters (:mod:`pemc_stan.core.base_density`, fitted by the pilot of
    :mod:`pemc_stan.modes.pilot`), the instrumental is
    ``q(x, beta) ∝ b(x)^(1 - beta) gamma~(x)^beta g(beta)``: likelihood-only
    tempering with ``b`` as the "prior" and ``gamma~ / b`` as the "likelihood",
    so the formulas above hold with ``p = b`` and ``L~ = gamma~ / b``.  By
    Hölder's inequality ``int b^(1 - beta) gamma~^beta dx <= (Z / Z^)^beta``:
    ``q`` is proper for every model with a finite evidence, every ``beta`` and
    a uniform ``g``, with no condition on tails or priors.  The hottest
    pseudo-samples follow ``b``, which covers the modes the pilot found.

Fixed ladder (``beta=[b_1, ..., b_N]``)
    ``beta_i`` are data in (0, 1]; pseudo-sample ``i`` has its own
    instrumental ``q_i ∝ gamma~^(b_i)`` (resp. ``p L~^(b_i)``).  The unknown
    normalising constants of the ``q_i`` multiply every term of the eq-2 sum
    alike and cancel, so the formulas above hold with the ``pi``/``g`` terms
    dropped.

With ``N = 1`` the extended target is ``gamma(x) pi(beta)`` for any ``g``: the
``x`` marginal is the original posterior and the (normalised) weight is 1.

Properness of the instrumental
------------------------------
Eq 7 needs ``C = int int gamma~(x)^beta g(beta) dx dbeta < infinity``.  As
``beta -> 0``, ``int gamma~^beta dx`` grows like ``beta^(-d/2)`` for Gaussian
tails in ``d`` unconstrained dimensions (``beta^(-d)`` for exponential tails,
and is infinite for polynomial tails such as Cauchy priors when ``beta`` is
small), so with the default uniform ``g`` on (0, 1) the instrumental is
improper for ``d >= 2`` and ``beta`` drifts to 0.  The transformation warns
(:class:`PseudoExtendedWarning`) and offers ``beta_min`` (``beta`` declared
``real<lower=beta_min, upper=1>``; ``pi`` and ``g`` restricted to that
interval, their truncation constants cancel in the self-normalised weights),
``instrumental=(a, b)`` (Beta ``g``), a fixed ladder, or likelihood-only
tempering (``int p(x) L~(x)^beta dx`` stays bounded as ``beta -> 0`` for a
proper prior).

The generated program
---------------------
Rendered from ``stan_templates/pseudo_extended.stan.jinja``, which holds the
Stan text; :func:`transform_pseudo_extended` decides the tempering
(:class:`Tempering`) and prints the pieces only Python can print (the
declarations of the copies, :class:`DeclaredParameter` and
:class:`RawCoordinates`, and the calls and base coordinates of each
pseudo-sample, :class:`PseudoSampleCode`).  The program has the user's
functions plus the log-density functions; the user's data (plus ``pemc_N``,
``pemc_log_scale`` and, for a fixed ladder, ``pemc_beta``) and transformed
data unchanged; each parameter ``T name`` becomes ``array[pemc_N] T name``.
A parameter whose bounds (or offset/multiplier) depend on other parameters is
unrolled into ``N`` copies ``pemc_<name>_<k>`` whose bound expressions refer to
the same pseudo-sample ``k`` of the other parameters (``N`` is then baked into
the program).  Transformed parameters and generated quantities of the user are
not in the PE program (they are recomputed on the resampled draws by
standalone generated quantities of the original model).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
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
    ParameterDeclarations,
    block_text,
    functions_text,
    no_likelihood_message,
    parameter_declarations,
    prepare_program,
    render_mapped,
)
from pemc_stan.errors import PseudoExtendedWarning, UnsupportedConstructError, emit_warning
from pemc_stan.methods.pseudo_extended.copies import (
    DeclaredParameter,
    ParameterCopies,
    RawCoordinates,
    container_bound_error,
    copy_bound,
    declared_parameters,
    parameter_copies,
    raw_coordinates,
)
from pemc_stan.methods.pseudo_extended.options import (
    AUTO_BETA_MIN,
    BetaDensity,
    PseudoExtendedOptions,
    as_beta,
    is_auto,
    stan_number,
)
from pemc_stan.methods.tempering import FLAT, BetaBias
from pemc_stan.stan import ast
from pemc_stan.stan.analysis import heavy_tailed_priors
from pemc_stan.stan.evaluate import scalar_definitions
from pemc_stan.stan.inputs import StanProgram
from pemc_stan.stan.logdensity import LogDensityFunctions, log_density_functions
from pemc_stan.stan.symbols import SymbolTable, build_symbol_table

logger = logging.getLogger(__name__)

__all__ = ["PseudoExtendedResult", "transform_pseudo_extended"]


_TEMPLATE = "pseudo_extended.stan.jinja"


@dataclass(frozen=True, kw_only=True)
class PseudoExtendedResult(TransformResult):
    """A pseudo-extended program and what is needed to run and post-process it.

    Attributes
    ----------
    stan_code, options, program, warnings
        As :class:`~pemc_stan.core.result.TransformResult`.
    parameters
        The user's parameters, in declaration order, with where their copies live.
    data_additions
        Data entries the PE program needs besides the user's data, with their
        values where known (``pemc_log_scale`` is None when it must be
        estimated).
    n_in_data
        True when ``pemc_N`` is data (False: baked in).
    temper
        The tempering used (``options.temper`` with ``"auto"`` resolved).
    g_shape_from_data
        True when ``g = Beta(pemc_g_a, 1)`` with ``pemc_g_a = (d + 1)/2`` given as
        data (the ``"auto"`` instrumental under whole-posterior tempering).
    pi_equals_g
        True when ``pi(beta) = g(beta)`` (``beta_prior="auto"``): their terms
        cancel in the weights.
    coordinates
        The base coordinate map of the parameters (empty when a parameter has
        none; then ``temper`` is not ``"base"``).
    shaped
        True when ``g(beta) ∝ exp(-h(beta))`` with ``h`` piecewise linear, given as data
        (``pemc_n_knots``, ``pemc_knots``, ``pemc_bias``; ``h = 0`` is the uniform ``g``):
        ``beta_marginal="length"`` with sampled temperatures, ``pi = g``, a uniform
        ``g`` and likelihood or base tempering.  ``pi = g``, so ``h`` leaves the
        weights unchanged.
    """

    options: PseudoExtendedOptions
    parameters: tuple[ParameterCopies, ...]
    data_additions: dict[str, Any]
    n_in_data: bool
    temper: str = "posterior"
    g_shape_from_data: bool = False
    pi_equals_g: bool = False
    coordinates: BaseCoordinates = BaseCoordinates(())
    shaped: bool = False

    #: The base's covariance form under ``temper="base"``.
    BASE_COVARIANCE = "dense"

    def data(self, user_data: Mapping[str, Any] | None, log_scale: float | None = None,
             g_shape: float | None = None, base: BaseDensity | None = None,
             bias: BetaBias | None = None, **values: Any) -> dict[str, Any]:
        """The PE program's data: ``user_data`` plus :attr:`data_additions` (and the base,
        and when :attr:`shaped` the bias ``h``: ``bias``, or none when it is None).

        Raises
        ------
        ValueError
            If no log scale is known, or under ``temper="base"`` the base is
            missing or has the wrong dimension or covariance form.
        """
        out = dict(user_data or {})
        extra = dict(self.data_additions)
        if log_scale is not None:
            extra["pemc_log_scale"] = float(log_scale)
        if extra.get("pemc_log_scale") is None:
            raise ValueError("pemc_log_scale is unknown: pass log_scale= or run the pilot")
        if self.g_shape_from_data:
            if g_shape is None:
                raise ValueError("pemc_g_a (the shape of the 'auto' instrumental) is unknown: "
                                 "pass g_shape= ((d + 1)/2 for d unconstrained parameters)")
            extra["pemc_g_a"] = float(g_shape)
        if self.temper == "base":
            if base is None:
                raise ValueError("base=None: the program tempers towards a base density; pass "
                                 "a pemc_stan.core.base_density.BaseDensity or let "
                                 "pemc_stan.sample fit one")
            base.validate()
            d = self.coordinates.dim(user_data)
            if base.dim != d or base.covariance != self.BASE_COVARIANCE:
                raise ValueError(f"the base density has {base.dim} coordinates and covariance "
                                 f"{base.covariance!r}; the program needs {d} and "
                                 f"{self.BASE_COVARIANCE!r}")
            extra.update(base.stan_data())
        if self.shaped:
            extra.update((bias or FLAT).stan_data())
        out.update(values)
        out.update(extra)
        return out


def _where(program: StanProgram) -> str:
    """The file name for messages: the ``.stan`` path, or ``"<string>"``.

    Raises
    ------
    Nothing.
    """
    return str(program.path) if program.path is not None else "<string>"


@dataclass(frozen=True)
class PseudoSampleCode:
    """The Stan expressions of pseudo-sample ``k`` that depend on the model.

    Attributes
    ----------
    k
        ``"pemc_k"`` (the loop variable, ``N`` in the data) or the copy's number.
    density, prior, likelihood
        Calls of the log-density functions on copy ``k`` of the parameters.
    coordinates
        Statements filling ``pemc_z`` with the base coordinates of copy ``k``
        (``""`` unless ``temper="base"``).
    """

    k: str
    density: str
    prior: str
    likelihood: str
    coordinates: str = ""


@dataclass(frozen=True)
class Tempering:
    """What the program tempers and how the inverse temperatures enter it.

    Attributes
    ----------
    temper
        ``"posterior"``, ``"likelihood"`` or ``"base"`` (``"auto"`` resolved).
    coordinates
        The base coordinate map (empty when a parameter has none).
    g, pi
        The instrumental ``g(beta)`` and the prior ``pi(beta)``.
    g_from_data
        True when ``g = Beta(pemc_g_a, 1)`` with ``pemc_g_a`` given as data.
    pi_equals_g
        True when ``pi = g`` (their terms cancel in the weights).
    beta_min
        The lower bound of the sampled ``beta`` (0: none).
    fixed_ladder
        The inverse temperatures when they are data, else None.
    shaped
        True when ``g`` carries a piecewise-linear bias ``exp(-h(beta))`` given as data
        (``beta_marginal="length"``; see :attr:`PseudoExtendedResult.shaped`).
    """

    temper: str
    coordinates: BaseCoordinates
    g: BetaDensity
    pi: BetaDensity
    g_from_data: bool
    pi_equals_g: bool
    beta_min: float
    fixed_ladder: tuple[float, ...] | None
    shaped: bool = False


def _choose_temper(options: PseudoExtendedOptions, prepared: StanProgram,
                   declarations: ParameterDeclarations, table: SymbolTable,
                   copies: Mapping[str, ParameterCopies]) -> tuple[str, BaseCoordinates]:
    """The tempering (``"auto"`` resolved) and the base coordinates of the parameters.

    The coordinates serve ``temper="base"`` and, under the other temperings, the
    pilot's fallback estimate of the log scale (importance sampling from a base).

    Raises
    ------
    UnsupportedConstructError
        For an explicit ``temper="base"`` when no base density exists
        (:class:`~pemc_stan.errors.UnsupportedBaseError` for a parameter type).
    """
    decls = declarations.decls
    temper = resolve_temper(options.temper, prepared, bool(declarations.noncentred))
    no_base: UnsupportedConstructError | None = None
    try:
        coords = base_coordinates(decls, table, scalar_definitions(prepared.tree),
                                  method="pseudo-extended")
    except UnsupportedConstructError as exc:  # UnsupportedBaseError included
        coords, no_base = BaseCoordinates(()), exc
    if temper == "base":
        no_base = no_base or container_bound_error(decls, copies, _where(prepared))
        if no_base is not None:
            if not is_auto(options.temper):
                raise no_base
            temper = "likelihood" if _has_likelihood(prepared) else "posterior"
            logger.info("%s: no base density for temper='base' (%s); tempering the %s",
                        prepared.name, no_base, "likelihood" if temper == "likelihood"
                        else "whole posterior")
    return temper, coords


def _tempering(options: PseudoExtendedOptions, temper: str, coords: BaseCoordinates
               ) -> Tempering:
    """The densities of the inverse temperatures under ``temper``.

    Raises
    ------
    OptionsError
        If ``instrumental`` or ``beta_prior`` is not understood (validated options are).
    """
    ladder = options.fixed_ladder
    g = (BetaDensity() if is_auto(options.instrumental)
         else as_beta(options.instrumental, "instrumental"))
    pi_equals_g = is_auto(options.beta_prior)
    beta_min = (options.beta_min if options.beta_min is not None
                else AUTO_BETA_MIN if temper == "posterior" and ladder is None else 0.0)
    g_from_data = ladder is None and is_auto(options.instrumental) and temper == "posterior"
    # the bias is fitted as continuous tempering's: beta uniform on (0, 1) in the round
    # it is fitted from, and pi = g so that it leaves the weights unchanged
    # (with one copy, it always carries the weight: no copy samples q)
    shaped = (options.beta_marginal == "length" and options.n_pseudo > 1
              and ladder is None and pi_equals_g
              and g.is_uniform and not g_from_data and beta_min == 0.0
              and temper in ("likelihood", "base"))
    return Tempering(
        temper=temper, coordinates=coords, g=g,
        pi=g if pi_equals_g else as_beta(options.beta_prior, "beta_prior"),
        g_from_data=g_from_data, pi_equals_g=pi_equals_g, beta_min=beta_min,
        fixed_ladder=ladder, shaped=shaped)


def _pseudo_sample(k: str | int, copies: Mapping[str, ParameterCopies],
                   functions: LogDensityFunctions, tempering: Tempering) -> PseudoSampleCode:
    """The Stan expressions of copy ``k`` (an int when ``N`` is baked in).

    Raises
    ------
    Nothing.
    """
    variable = {p: c.stan_variable(int(k)) if c.unrolled else f"{p}[{k}]"
                for p, c in copies.items()}
    coordinates = ""
    if tempering.temper == "base":
        blocks = tempering.coordinates.blocks
        if isinstance(k, int):  # bounds on other (scalar) parameters: on their copy k
            blocks = tuple(dataclasses.replace(b, lower=copy_bound(b.lower, copies, k),
                                               upper=copy_bound(b.upper, copies, k))
                           for b in blocks)
        coordinates = stan_coordinate_code(blocks, variable, indent=0,
                                           jacobian="pemc_base_jacobian")
    return PseudoSampleCode(str(k), functions.call("density", variable),
                            functions.call("prior", variable),
                            functions.call("likelihood", variable), coordinates)



def _template_context(prepared: StanProgram, options: PseudoExtendedOptions,
                      functions: LogDensityFunctions, parameters: tuple[DeclaredParameter, ...],
                      raw: tuple[RawCoordinates, ...], tempering: Tempering) -> dict[str, Any]:
    """The variables of ``pseudo_extended.stan.jinja``.

    Raises
    ------
    Nothing.
    """
    tree, t, n = prepared.tree, tempering, options.n_pseudo
    copies = {p.copies.name: p.copies for p in parameters}
    n_in_data = not any(c.unrolled for c in copies.values())
    ks: list[str | int] = ["pemc_k"] if n_in_data else list(range(1, n + 1))
    blocks = t.coordinates.blocks
    return dict(
        model_name=prepared.name, n_pseudo=n, temper=t.temper, n_in_data=n_in_data,
        fixed_ladder=t.fixed_ladder is not None, g=t.g, pi=t.pi, g_from_data=t.g_from_data,
        pi_equals_g=t.pi_equals_g, beta_min=stan_number(t.beta_min) if t.beta_min > 0 else "0",
        shaped=t.shaped,
        functions=functions_text(tree, functions.functions), data=block_text(tree.data),
        transformed_data=block_text(tree.transformed_data), parameters=parameters, raw=raw,
        scale_power=stan_number(-options.noncentring / 2),
        samples=[_pseudo_sample(k, copies, functions, t) for k in ks],
        base_functions=stan_base_functions(blocks) if t.temper == "base" else "",
        base_lpdf=stan_base_lpdf(PseudoExtendedResult.BASE_COVARIANCE),
        dim_expr=stan_dim_expr(blocks) if blocks else "0")


def resolve_temper(temper: str, program: StanProgram, hierarchical: bool = False) -> str:
    """``temper`` with ``"auto"`` resolved.

    ``"base"`` when a parameter has a flat (improper) prior, when the model has
    likelihood terms (the pilot's base is a shorter bridge than the prior), when
    ``hierarchical`` (a normal prior whose scale is a parameter, non-centred in the
    program) or when a prior is
    heavy-tailed (``gamma^beta`` of a Cauchy prior is not integrable for ``beta <= 1/2``:
    the hot pseudo-samples fly off along its tails), else ``"posterior"``.  (The
    transformation falls back to ``"posterior"`` when no base density exists for the
    parameters.)

    Why a hierarchy is not tempered whole: ``int N(theta; mu, tau)^beta dtheta`` is
    proportional to ``tau^(1 - beta)`` per coordinate, so ``gamma^beta`` carries an
    extra ``tau^(J (1 - beta))`` that drives a hot pseudo-sample's scale ``tau`` far up
    (Neal's funnel, ``tau = exp(v / 2)`` with ``v ~ normal(0, 3)`` and ``J = 4``: the
    tempered ``v`` peaks near ``18 (1 - beta) / beta``, where NUTS diverges).  Tempering
    towards the base, ``b^(1 - beta) gamma^beta``, is proper and shaped like ``b`` for
    every beta (Hoelder); the likelihood split keeps the prior untempered.
    """
    if not is_auto(temper):
        return temper
    from pemc_stan.estimators.normalisation import prior_report

    if prior_report(program).flat or _has_likelihood(program):
        return "base"
    if hierarchical or heavy_tailed_priors(program.tree, program.analysis):
        return "base"
    return "posterior"


def _has_likelihood(program: StanProgram) -> bool:
    """True when the program's analysis finds likelihood terms (False when it fails: its
    failures are reported by the log-density rewrite)."""
    try:
        return bool(program.analysis.likelihood_contributions())
    except Exception:
        return False


def _probably_multidimensional(param_decls: Sequence[tuple[ast.Type, str]]) -> bool:
    """True unless there is exactly one scalar (``real``) parameter."""
    if len(param_decls) != 1:
        return True
    type_ = param_decls[0][0]
    return not (isinstance(type_, ast.BasicType) and type_.name == "real")


#: Constrained types whose support is compact (bounded) whatever their size.
_COMPACT_TYPES = frozenset({"simplex", "unit_vector", "corr_matrix", "cholesky_factor_corr"})


def _compact_support(param_decls: Sequence[tuple[ast.Type, str]]) -> bool:
    """True if every parameter lives on a bounded set (both bounds, or a compact type).

    Then ``gamma(x)^beta`` stays integrable as ``beta -> 0`` for a bounded
    ``gamma`` (its limit is the uniform density on the support), so a uniform
    ``g(beta)`` gives a proper instrumental.
    """
    def compact(t: ast.Type) -> bool:
        if isinstance(t, ast.ArrayType):
            return compact(t.element)
        if isinstance(t, ast.TupleType):
            return all(compact(e) for e in t.elements)
        if isinstance(t, ast.BasicType):
            if t.name in _COMPACT_TYPES:
                return True
            c = t.constraint
            return isinstance(c, ast.Bounds) and c.lower is not None and c.upper is not None
        return False

    return all(compact(t) for t, _ in param_decls)


# --------------------------------------------------------------------------- #
# Warnings
# --------------------------------------------------------------------------- #


def _improper(param_decls: Sequence[tuple[ast.Type, str]], tempering: Tempering, n: int
              ) -> bool:
    """True when the instrumental is probably improper: the paper's uniform ``g`` on (0, 1)
    under whole-posterior tempering of several unbounded dimensions.

    Raises
    ------
    Nothing.
    """
    t = tempering
    return (t.temper == "posterior" and t.fixed_ladder is None and t.beta_min == 0.0
            and t.g.is_uniform and not t.g_from_data and n > 1
            and _probably_multidimensional(param_decls) and not _compact_support(param_decls))


def _warning_messages(prepared: StanProgram, param_decls: Sequence[tuple[ast.Type, str]],
                      tempering: Tempering, n: int) -> list[str]:
    """The warnings about the generated program, in the order they are issued.

    Raises
    ------
    Nothing.
    """
    name, temper = prepared.name, tempering.temper
    out: list[str] = []
    heavy = heavy_tailed_priors(prepared.tree, prepared.analysis) if temper == "posterior" else []
    if heavy:
        where = ", ".join(f"{d} (line {line})" for d, line in heavy)
        out.append(f"{name}: heavy-tailed prior(s) {where} with whole-posterior "
                   "tempering: gamma(x)^beta is not integrable for small beta (for a Cauchy "
                   "prior, for beta <= 1/2) unless the likelihood controls the tails, so the "
                   "instrumental q may be improper. Use temper='likelihood' (the prior then "
                   "enters untempered) or a fixed ladder of large inverse temperatures.")
    if _improper(param_decls, tempering, n):
        out.append(f"{name}: whole-posterior tempering with beta sampled uniformly on (0, 1): "
                   "int gamma(x)^beta dx grows like beta^(-d/2) or faster as beta -> 0, so for "
                   "d >= 2 parameters the instrumental q(x, beta) of eq 7 is improper and beta "
                   "drifts to 0. Set beta_min (e.g. 0.05), instrumental=(a, 1) with a > d/2, a "
                   "fixed ladder, or temper='likelihood'.")
    no_likelihood = no_likelihood_message(prepared) if temper == "likelihood" else None
    if no_likelihood is not None:
        out.append(no_likelihood)
    return out


# --------------------------------------------------------------------------- #
# The transformation
# --------------------------------------------------------------------------- #


def transform_pseudo_extended(program: StanProgram, options: PseudoExtendedOptions
                              ) -> PseudoExtendedResult:
    """Build the pseudo-extended program (eq 8) of a Stan program.

    Parameters
    ----------
    program
        The user's program, read once (:func:`pemc_stan.stan.inputs.read_program`).
    options
        Validated options (the registry's front doors build and validate them).

    Returns
    -------
    PseudoExtendedResult

    Raises
    ------
    ReservedPrefixError
        If the program uses an identifier starting with ``pemc_``.
    StanProgramError
        If the program has no parameters.
    UnsupportedConstructError
        For constructs the log-density rewrite does not support, parameters
        partial non-centring does not cover, or an explicit ``temper="base"``
        without a base density.
    """
    prepared = prepare_program(program, None, "pseudo-extended")
    table = build_symbol_table(prepared.tree)
    # hierarchical normal priors non-centred (not with noncentring > 0, whose raw
    # coordinates need declarations without parameter-dependent constraints)
    declarations = parameter_declarations(
        prepared, options.reparameterize if options.noncentring == 0 else "none", table)
    decls = declarations.decls
    functions = log_density_functions(prepared.tree, prepared.name)
    copies = parameter_copies(decls, table)
    raw = raw_coordinates(decls, copies, _where(prepared)) if options.noncentring > 0 else ()
    tempering = _tempering(options, *_choose_temper(options, prepared, declarations, table,
                                                    copies))
    parameters = declared_parameters(declarations, copies, options.n_pseudo)
    stan_code, line_map = render_mapped(
        _TEMPLATE, prepared.path.name if prepared.path is not None else "",
        **_template_context(prepared, options, functions, parameters, raw, tempering))
    issued = _warning_messages(prepared, decls, tempering, options.n_pseudo)
    for msg in issued:
        emit_warning(msg, PseudoExtendedWarning, stacklevel=2)
    n_in_data = not any(c.unrolled for c in copies.values())
    additions: dict[str, Any] = {"pemc_log_scale": options.log_scale}
    if n_in_data:
        additions["pemc_N"] = options.n_pseudo
    if tempering.fixed_ladder is not None:
        additions["pemc_beta"] = list(tempering.fixed_ladder)
    return PseudoExtendedResult(
        stan_code=stan_code, options=options, program=prepared,
        parameters=tuple(copies.values()), data_additions=additions, n_in_data=n_in_data,
        temper=tempering.temper, g_shape_from_data=tempering.g_from_data,
        pi_equals_g=tempering.pi_equals_g, coordinates=tempering.coordinates,
        shaped=tempering.shaped,
        warnings=tuple(issued), noncentred=declarations.noncentred, line_map=line_map)
