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
    parameters (:mod:`pemc_stan.methods.base_density`, fitted by the pilot of
    :mod:`pemc_stan.methods.pilot`), the instrumental is
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
Rendered from ``stan_templates/pseudo_extended.stan.jinja``: the user's
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
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pemc_stan.errors import PseudoExtendedWarning, UnsupportedConstructError
from pemc_stan.inputs import ProgramSource, StanProgram
from pemc_stan.methods.base import TransformResult
from pemc_stan.methods.base_density import (
    BaseCoordinates,
    BaseDensity,
    base_coordinates,
    stan_base_functions,
    stan_base_lpdf,
    stan_coordinate_code,
    stan_dim_expr,
)
from pemc_stan.methods.options import resolve
from pemc_stan.methods.pseudo_extended.options import (
    AUTO_BETA_MIN,
    BetaDensity,
    PseudoExtendedOptions,
    as_beta,
    is_auto,
    stan_number,
)
from pemc_stan.methods.templates import (
    block_text,
    functions_text,
    no_likelihood_message,
    parameter_declarations,
    prepare_program,
    render,
)
from pemc_stan.stan import ast
from pemc_stan.stan.analysis import (
    CONTAINER_BUILDERS,
    build_symbol_table,
    dims_of,
    heavy_tailed_priors,
    is_scalar_expr,
)
from pemc_stan.stan.evaluate import scalar_definitions
from pemc_stan.stan.logdensity import log_density_functions
from pemc_stan.stan.printer import print_expr, print_type

logger = logging.getLogger(__name__)

__all__ = ["ParameterCopies", "PseudoExtendedResult", "transform_pseudo_extended"]


_TEMPLATE = "pseudo_extended.stan.jinja"


@dataclass(frozen=True)
class ParameterCopies:
    """Where the pseudo-sample copies of one user parameter live in the PE output.

    Attributes
    ----------
    name
        The user's parameter name.
    declared_type
        The user's declaration type, as Stan text.
    unrolled
        False: one variable ``name`` of type ``array[pemc_N] T`` (copy ``k`` is
        ``name[k]``, CSV columns ``name.k...``); True: ``N`` variables
        ``pemc_<name>_<k>`` (bounds depending on other parameters).
    """

    name: str
    declared_type: str
    unrolled: bool

    def stan_variable(self, k: int) -> str:
        """Stan variable name holding copy ``k`` (1-based) when unrolled, else ``name``."""
        return f"pemc_{self.name}_{k}" if self.unrolled else self.name

    def column_prefix(self, k: int) -> str:
        """CSV column (prefix) of copy ``k`` (1-based): ``name.k`` or ``pemc_name_k``."""
        return f"pemc_{self.name}_{k}" if self.unrolled else f"{self.name}.{k}"


@dataclass(frozen=True, kw_only=True)
class PseudoExtendedResult(TransformResult):
    """A pseudo-extended program and what is needed to run and post-process it.

    Attributes
    ----------
    stan_code, options, program, warnings
        As :class:`~pemc_stan.methods.base.TransformResult`.
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
    """

    options: PseudoExtendedOptions
    parameters: tuple[ParameterCopies, ...]
    data_additions: dict[str, Any]
    n_in_data: bool
    temper: str = "posterior"
    g_shape_from_data: bool = False
    pi_equals_g: bool = False
    coordinates: BaseCoordinates = BaseCoordinates(())

    #: The base's covariance form under ``temper="base"``.
    BASE_COVARIANCE = "dense"

    def data(self, user_data: Mapping[str, Any] | None, log_scale: float | None = None,
             g_shape: float | None = None, base: BaseDensity | None = None, **values: Any
             ) -> dict[str, Any]:
        """The PE program's data: ``user_data`` plus :attr:`data_additions` (and the base).

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
                                 "a pemc_stan.methods.base_density.BaseDensity or let "
                                 "pemc_stan.sample fit one")
            base.validate()
            d = self.coordinates.dim(user_data)
            if base.dim != d or base.covariance != self.BASE_COVARIANCE:
                raise ValueError(f"the base density has {base.dim} coordinates and covariance "
                                 f"{base.covariance!r}; the program needs {d} and "
                                 f"{self.BASE_COVARIANCE!r}")
            extra.update(base.stan_data())
        out.update(values)
        out.update(extra)
        return out


# --------------------------------------------------------------------------- #
# Helpers
# --------------------------------------------------------------------------- #


def _constraint_exprs(type_: ast.Type) -> list[ast.Expr]:
    out: list[ast.Expr] = []
    if isinstance(type_, ast.ArrayType):
        return _constraint_exprs(type_.element)
    if isinstance(type_, ast.TupleType):
        for t in type_.elements:
            out.extend(_constraint_exprs(t))
        return out
    if isinstance(type_, ast.BasicType) and type_.constraint is not None:
        c = type_.constraint
        for e in ((c.lower, c.upper) if isinstance(c, ast.Bounds) else (c.offset, c.multiplier)):
            if e is not None:
                out.append(e)
    return out


def _referenced(exprs: Sequence[ast.Expr], names: set[str]) -> set[str]:
    found: set[str] = set()
    for e in exprs:
        for node in ast.walk(e):
            if isinstance(node, ast.Variable) and node.name in names:
                found.add(node.name)
    return found


_CONTAINER_BUILDERS = CONTAINER_BUILDERS
_dims_of = dims_of
_is_scalar = is_scalar_expr


def _rename_params(node: ast.Node, copies: dict[str, ParameterCopies], k: int) -> ast.Node:
    """Replace each parameter by its pseudo-sample ``k`` copy."""

    def fn(n: ast.Node) -> ast.Node:
        if isinstance(n, ast.Variable) and n.name in copies:
            c = copies[n.name]
            if c.unrolled:
                return ast.Variable(c.stan_variable(k), parens=n.parens)
            return ast.Indexed(ast.Variable(n.name), (ast.IntLit(str(k)),), parens=n.parens)
        return n

    return ast.transform(node, fn)


_NONCENTRING_TYPES = ("real", "vector", "row_vector", "matrix")


def _atom(text: str) -> str:
    """``text`` parenthesised unless it is a name or an unsigned number."""
    return text if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|[0-9.]+(?:[eE][-+]?[0-9]+)?",
                                text) else f"({text})"


def _noncentred_blocks(param_decls: Sequence[tuple[ast.Type, str]], alpha: float,
                       filename: str) -> tuple[list[str], list[str]]:
    """Declarations of the raw parameters and the transformed-parameters body.

    Pseudo-sample ``k`` of parameter ``p`` has unconstrained coordinates
    ``pemc_raw_p[k] * pemc_scale`` with ``pemc_scale = beta_k^(-alpha/2)``,
    constrained as Stan does (``lb + exp(u)``, ``ub - exp(u)``,
    ``lb + (ub - lb) inv_logit(u)``).

    Raises
    ------
    UnsupportedConstructError
        For a parameter type or constraint the option does not cover.
    """
    raw: list[str] = []
    body: list[str] = [f"real pemc_scale = pow(pemc_beta[pemc_k], {stan_number(-alpha / 2)});"]
    for type_, pname in param_decls:
        ok = isinstance(type_, ast.BasicType) and type_.name in _NONCENTRING_TYPES and (
            type_.constraint is None or isinstance(type_.constraint, ast.Bounds))
        if not ok:
            raise UnsupportedConstructError(
                f"{filename}, line {type_.line}: parameter '{pname}' is declared "
                f"'{print_type(type_)}'; noncentring supports only real, vector, row_vector "
                "and matrix parameters with lower/upper bounds (or none). Use noncentring=0.",
                filename, type_.line, type_.column, construct=print_type(type_))
        assert isinstance(type_, ast.BasicType)
        free = ast.BasicType(type_.name, type_.sizes, None, line=type_.line,
                             column=type_.column)
        raw.append(f"  array[pemc_N] {print_type(free)} pemc_raw_{pname};")
        u = f"pemc_raw_{pname}[pemc_k] * pemc_scale"
        scalar = type_.name == "real"
        size = "1" if scalar else f"num_elements(pemc_raw_{pname}[pemc_k])"
        total = (lambda e: e) if scalar else (lambda e: f"sum({e})")
        c = type_.constraint
        assert c is None or isinstance(c, ast.Bounds)  # checked by the caller
        lb = None if c is None or c.lower is None else _atom(print_expr(c.lower))
        ub = None if c is None or c.upper is None else _atom(print_expr(c.upper))
        body.append(f"{{  // {pname}")
        body.append(f"  {print_type(free)} pemc_u = {u};")
        per_coord = "log(pemc_scale)" if scalar else f"{size} * log(pemc_scale)"
        body.append(f"  pemc_log_jacobian += {per_coord};  // d u / d raw")
        if lb is None and ub is None:
            body.append(f"  {pname}[pemc_k] = pemc_u;")
        else:
            if ub is None:
                body.append(f"  {pname}[pemc_k] = {lb} + exp(pemc_u);")
                jac = total("pemc_u")
            elif lb is None:
                body.append(f"  {pname}[pemc_k] = {ub} - exp(pemc_u);")
                jac = total("pemc_u")
            else:
                body.append(f"  {pname}[pemc_k] = {lb} + ({ub} - {lb}) * inv_logit(pemc_u);")
                width = f"log({ub} - {lb})" if scalar else f"{size} * log({ub} - {lb})"
                jac = f"{width} + " + total("log_inv_logit(pemc_u) + log1m_inv_logit(pemc_u)")
            body.append(f"  pemc_log_jacobian += {jac};  // d {pname} / d u")
        body.append("}")
    return raw, body


def _indent(text: str, depth: int) -> str:
    pad = "  " * depth
    return "\n".join(pad + line if line else line for line in text.splitlines())


def resolve_temper(temper: str, program: StanProgram, hierarchical: bool = False) -> str:
    """``temper`` with ``"auto"`` resolved.

    ``"base"`` when a parameter has a flat (improper) prior; else ``"likelihood"`` when
    the model has likelihood terms; else ``"base"`` when ``hierarchical`` (a normal prior
    whose scale is a parameter, non-centred in the program) or when a prior is
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

    if prior_report(program).flat:
        return "base"
    try:
        has_likelihood = bool(program.analysis.likelihood_contributions())
    except Exception:  # noqa: BLE001 - analysis failures are reported by the rewrite
        return "posterior"
    if has_likelihood:
        return "likelihood"
    if hierarchical or heavy_tailed_priors(program.tree, program.analysis):
        return "base"
    return "posterior"


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
# The transformation
# --------------------------------------------------------------------------- #


def transform_pseudo_extended(
    program: ProgramSource,
    options: PseudoExtendedOptions | None = None,
    *,
    name: str | None = None,
    **option_kwargs: Any,
) -> PseudoExtendedResult:
    """Build the pseudo-extended program (eq 8) of a Stan program.

    ``program`` is Stan text, a ``.stan`` path, a parsed program or a
    :class:`~pemc_stan.inputs.StanProgram` (not parsed again); ``options`` a
    :class:`PseudoExtendedOptions`, whose fields ``option_kwargs`` replace;
    ``name`` the model name of the header comment.

    Returns
    -------
    PseudoExtendedResult

    Raises
    ------
    OptionsError
        For invalid options (before anything else).
    ReservedPrefixError
        If the program uses an identifier starting with ``pemc_``.
    StanProgramError
        If the program has no parameters, or cannot be parsed.
    UnsupportedConstructError
        For constructs the log-density rewrite does not support.
    """
    options = resolve(PseudoExtendedOptions, options, option_kwargs)
    prepared = prepare_program(program, name, "pseudo-extended")
    tree, model_name = prepared.tree, prepared.name
    table = build_symbol_table(tree)
    # hierarchical normal priors non-centred (not with noncentring > 0, whose raw
    # coordinates need declarations without parameter-dependent constraints)
    declarations = parameter_declarations(
        prepared, options.reparameterize if options.noncentring == 0 else "none", table)
    param_decls = declarations.decls

    functions = log_density_functions(tree, model_name)
    n = options.n_pseudo
    param_names = {p for _, p in param_decls}

    # A parameter is unrolled into N separate declarations when a bound (or
    # offset/multiplier) depends on another parameter (copy k must use copy k
    # of that parameter) or is a container (stanc rejects container bounds on
    # an array of containers).
    copies: dict[str, ParameterCopies] = {}
    for type_, pname in param_decls:
        bounds = _constraint_exprs(type_)
        unroll = bool(_referenced(bounds, param_names)) or not all(
            _is_scalar(e, table) for e in bounds)
        copies[pname] = ParameterCopies(pname, print_type(type_), unroll)
    n_in_data = not any(c.unrolled for c in copies.values())

    # parameters block
    lines: list[str] = []
    tp_decls: list[str] = []
    tp_body: list[str] = []
    if options.noncentring > 0:
        where = (str(program) if isinstance(program, (str, os.PathLike))
                 and str(program).endswith(".stan") else "<string>")
        for type_, pname in param_decls:
            if copies[pname].unrolled:
                raise UnsupportedConstructError(
                    f"{where}, line {type_.line}: the bounds of parameter '{pname}' depend on "
                    "other parameters or are containers; noncentring supports only constant "
                    "or data scalar bounds. Use noncentring=0.", where, type_.line,
                    type_.column, construct=pname)
        lines.append("  // pemc_raw_p[k] * beta_k^(-noncentring/2) are the unconstrained "
                     "coordinates of copy k of p")
        raw, tp_body = _noncentred_blocks(param_decls, options.noncentring, where)
        lines.extend(raw)
    for type_, pname in param_decls:
        c = copies[pname]
        note = declarations.note(pname)
        if note:
            lines.append("  " + note)
        if not c.unrolled:
            if isinstance(type_, ast.ArrayType):
                new_type: ast.Type = ast.ArrayType(type_.element,
                                                   (ast.Variable("pemc_N"), *type_.dims))
            else:
                new_type = ast.ArrayType(type_, (ast.Variable("pemc_N"),))
            (tp_decls if options.noncentring > 0 else lines).append(
                f"  {print_type(new_type)} {pname};")
        else:
            lines.append(f"  // {pname}: one declaration per pseudo-sample (its bounds depend "
                         "on other parameters or are containers)")
            for k in range(1, n + 1):
                renamed = _rename_params(type_, copies, k)
                assert isinstance(renamed, ast.Type)
                lines.append(f"  {print_type(renamed)} {c.stan_variable(k)};")
    parameters_text = "\n".join(lines)

    ladder = options.fixed_ladder
    temper = resolve_temper(options.temper, prepared, bool(declarations.noncentred))
    # the base coordinates: for temper='base', and for the pilot's fallback estimate of
    # log_scale (importance sampling from a base) under the other temperings
    no_base: UnsupportedConstructError | None = None
    try:
        coords = base_coordinates(param_decls, table, scalar_definitions(tree))
    except UnsupportedConstructError as exc:  # UnsupportedBaseError included
        coords, no_base = BaseCoordinates(()), exc
    if temper == "base":
        # copy k of a parameter whose bounds name other parameters has the bounds renamed
        # to copy k of those; fine when they are scalars (the analysis cannot tell the type
        # of an indexed copy of a container parameter)
        scalars = {p for t, p in param_decls if isinstance(t, ast.BasicType) and t.name == "real"}
        for type_, pname in param_decls:
            others = _referenced(_constraint_exprs(type_), param_names) - scalars
            if no_base is None and copies[pname].unrolled and others:
                where = (str(program) if isinstance(program, (str, os.PathLike))
                         and str(program).endswith(".stan") else "<string>")
                no_base = UnsupportedConstructError(
                    f"{where}, line {type_.line}: the bounds of parameter '{pname}' depend on "
                    f"the container parameter(s) {', '.join(sorted(others))}; temper='base' "
                    "supports bounds on scalar parameters only. Use temper='posterior' or "
                    "'likelihood'.", where, type_.line, type_.column, construct=pname)
        if no_base is not None:
            if not is_auto(options.temper):
                raise no_base
            logger.info("%s: no base density for temper='base' (%s); tempering the whole "
                        "posterior", model_name, no_base)
            temper = "posterior"
    g_from_data = ladder is None and is_auto(options.instrumental) and temper == "posterior"
    g_beta = (BetaDensity() if is_auto(options.instrumental) and not g_from_data
              else BetaDensity(1.0, 1.0) if g_from_data
              else as_beta(options.instrumental, "instrumental"))
    pi_equals_g = is_auto(options.beta_prior)
    beta_min = (options.beta_min if options.beta_min is not None
                else AUTO_BETA_MIN if temper == "posterior" and ladder is None else 0.0)
    pi_beta = g_beta if pi_equals_g else as_beta(options.beta_prior, "beta_prior")

    def g_stan(arg: str) -> str:
        return f"beta_lpdf({arg} | pemc_g_a, 1)" if g_from_data else g_beta.stan(arg)

    def call(which: str, k: str | int) -> str:
        mapping = {}
        for pname, c in copies.items():
            mapping[pname] = (c.stan_variable(int(k)) if c.unrolled else f"{pname}[{k}]")
        return functions.call(which, mapping)

    def weight_stmt(k: str) -> str:
        beta = f"pemc_beta[{k}]"
        expr = f"(1 - {beta}) * pemc_log_tempered[{k}]"
        if ladder is None and not pi_equals_g:  # pi = g: their terms cancel
            if not pi_beta.is_uniform:
                expr += f" + {pi_beta.stan(beta)}"
            if g_stan(beta):
                expr += f" - {g_stan(beta)}"
        return f"pemc_log_weight[{k}] = {expr};"

    def base_block(k: str | int) -> list[str]:
        variable = {p: (c.stan_variable(int(k)) if c.unrolled else f"{p}[{k}]")
                    for p, c in copies.items()}
        blocks = coords.blocks
        if not n_in_data:  # bounds on other (scalar) parameters: on their copy k

            def renamed(e: ast.Expr | None) -> ast.Expr | None:
                return None if e is None else _rename_params(e, copies, int(k))  # type: ignore[return-value]

            blocks = tuple(dataclasses.replace(b, lower=renamed(b.lower), upper=renamed(b.upper))
                           for b in blocks)
        return (["{  // log b(x_k): the base density in the base coordinates z(x_k)",
                 "  vector[pemc_D] pemc_z;",
                 "  real pemc_base_jacobian = 0;  // log |det dz/dx|",
                 "  int pemc_pos = 1;",
                 "  int pemc_n;"]
                + stan_coordinate_code(blocks, variable, indent=2,
                                       jacobian="pemc_base_jacobian").split("\n")
                + [f"  pemc_log_prior_x[{k}] = "
                   f"{stan_base_lpdf(PseudoExtendedResult.BASE_COVARIANCE)} "
                   "+ pemc_base_jacobian;", "}"])

    def body(k: str | int) -> list[str]:
        out = []
        if temper == "posterior":
            out.append(f"pemc_log_tempered[{k}] = {call('density', k)} - pemc_log_scale;")
        elif temper == "base":
            out.extend(base_block(k))
            out.append(f"pemc_log_tempered[{k}] = {call('density', k)} - pemc_log_prior_x[{k}] "
                       "- pemc_log_scale;")
        else:
            out.append(f"pemc_log_prior_x[{k}] = {call('prior', k)};")
            out.append(f"pemc_log_tempered[{k}] = {call('likelihood', k)} - pemc_log_scale;")
        out.append(weight_stmt(str(k)))
        return out

    tempered_what = {"likelihood": "log lik~(x_k)", "base": "log gamma~(x_k) - log b(x_k)"
                     }.get(temper, "log gamma~(x_k)")
    local_lines = [f"vector[pemc_N] pemc_log_tempered;  // {tempered_what}"]
    if temper == "likelihood":
        local_lines.append("vector[pemc_N] pemc_log_prior_x;  // log prior(x_k)")
    elif temper == "base":
        local_lines.append("vector[pemc_N] pemc_log_prior_x;  // log b(x_k)")
    compute: list[str] = []
    if n_in_data:
        compute.append("for (pemc_k in 1:pemc_N) {")
        compute.extend("  " + s for s in body("pemc_k"))
        compute.append("}")
    else:
        for k in range(1, n + 1):
            compute.append(f"// pseudo-sample {k}")
            compute.extend(body(k))
    gamma_tilde = ("pemc_log_prior_x + pemc_log_tempered" if temper in ("likelihood", "base")
                   else "pemc_log_tempered")

    fn_text = functions_text(tree, functions.functions)

    stan_code = render(
        _TEMPLATE,
        model_name=model_name, n_pseudo=n, temper=temper, fixed_ladder=ladder is not None,
        functions=fn_text, data=block_text(tree.data),
        transformed_data=block_text(tree.transformed_data), n_in_data=n_in_data,
        parameters=parameters_text,
        noncentred_declarations="\n".join(tp_decls),
        noncentred_body=_indent("\n".join(tp_body), 2),
        locals=_indent("\n".join(local_lines), 1),
        locals_gq=_indent("\n".join(local_lines), 2),
        compute=_indent("\n".join(compute), 1), compute_gq=_indent("\n".join(compute), 2),
        gamma_tilde=gamma_tilde, n_size="pemc_N" if n_in_data else str(n),
        g_density=g_stan("pemc_beta[pemc_k]") if ladder is None else "", g_from_data=g_from_data,
        pi_equals_g=pi_equals_g,
        beta_min=stan_number(beta_min) if beta_min > 0 else "0",
        base_functions=stan_base_functions(coords.blocks) if temper == "base" else "",
        dim_expr=stan_dim_expr(coords.blocks) if coords.blocks else "0",
    )

    issued: list[str] = []
    if temper == "posterior":
        heavy = heavy_tailed_priors(tree, prepared.analysis)
        if heavy:
            where = ", ".join(f"{d} (line {line})" for d, line in heavy)
            msg = (f"{model_name}: heavy-tailed prior(s) {where} with whole-posterior "
                   "tempering: gamma(x)^beta is not integrable for small beta (for a Cauchy "
                   "prior, for beta <= 1/2) unless the likelihood controls the tails, so the "
                   "instrumental q may be improper. Use temper='likelihood' (the prior then "
                   "enters untempered) or a fixed ladder of large inverse temperatures.")
            warnings.warn(msg, PseudoExtendedWarning, stacklevel=2)
            logger.warning(msg)
            issued.append(msg)

    if (temper == "posterior" and ladder is None and beta_min == 0.0
            and g_beta.is_uniform and not g_from_data and n > 1
            and _probably_multidimensional(param_decls)
            and not _compact_support(param_decls)):
        msg = (f"{model_name}: whole-posterior tempering with beta sampled uniformly on (0, 1): "
               "int gamma(x)^beta dx grows like beta^(-d/2) or faster as beta -> 0, so for "
               "d >= 2 parameters the instrumental q(x, beta) of eq 7 is improper and beta "
               "drifts to 0. Set beta_min (e.g. 0.05), instrumental=(a, 1) with a > d/2, a "
               "fixed ladder, or temper='likelihood'.")
        warnings.warn(msg, PseudoExtendedWarning, stacklevel=2)
        logger.warning(msg)
        issued.append(msg)

    if temper == "likelihood":
        msg_or_none = no_likelihood_message(prepared)
        if msg_or_none is not None:
            msg = msg_or_none
            warnings.warn(msg, PseudoExtendedWarning, stacklevel=2)
            logger.warning(msg)
            issued.append(msg)

    additions: dict[str, Any] = {"pemc_log_scale": options.log_scale}
    if n_in_data:
        additions["pemc_N"] = n
    if ladder is not None:
        additions["pemc_beta"] = list(ladder)
    return PseudoExtendedResult(
        stan_code=stan_code, options=options, program=prepared,
        parameters=tuple(copies.values()), data_additions=additions, n_in_data=n_in_data,
        temper=temper, g_shape_from_data=g_from_data, pi_equals_g=pi_equals_g,
        coordinates=coords, warnings=tuple(issued), noncentred=declarations.noncentred)
