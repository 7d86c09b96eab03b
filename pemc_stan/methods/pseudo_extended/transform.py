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
import math
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pemc_stan.stan import ast
from pemc_stan.stan.analysis import (
    CONTAINER_BUILDERS,
    analyse,
    build_symbol_table,
    dims_of,
    is_scalar_expr,
)
from pemc_stan.errors import UnsupportedConstructError
from pemc_stan.stan.logdensity import log_density_functions
from pemc_stan.stan.printer import print_expr, print_type
from pemc_stan.methods.templates import block_text, functions_text, prepare_program, render

logger = logging.getLogger(__name__)

__all__ = [
    "BetaDensity",
    "PseudoExtendedOptions",
    "PseudoExtendedWarning",
    "ParameterCopies",
    "TransformResult",
    "transform_pseudo_extended",
    "HEAVY_TAILED_DISTRIBUTIONS",
]

#: Priors whose density decays polynomially: ``p(x)^beta`` is not integrable
#: for small ``beta`` (e.g. Cauchy: only for ``beta > 1/2``).
HEAVY_TAILED_DISTRIBUTIONS = frozenset({
    "cauchy", "student_t", "pareto", "pareto_type_2", "inv_gamma", "inv_chi_square",
    "scaled_inv_chi_square", "frechet", "loglogistic",
})

_TEMPLATE = "pseudo_extended.stan.jinja"


class PseudoExtendedWarning(UserWarning):
    """A pseudo-extended setting that is likely to work badly."""


@dataclass(frozen=True)
class BetaDensity:
    """A Beta(a, b) density on (0, 1) for ``pi(beta)`` or ``g(beta)``; Beta(1, 1) is uniform."""

    a: float = 1.0
    b: float = 1.0

    @property
    def is_uniform(self) -> bool:
        """True for Beta(1, 1)."""
        return self.a == 1.0 and self.b == 1.0

    def stan(self, arg: str) -> str:
        """Stan expression of the log density at ``arg`` (``""`` when uniform)."""
        if self.is_uniform:
            return ""
        return f"beta_lpdf({arg} | {_num(self.a)}, {_num(self.b)})"


def _num(x: float) -> str:
    text = repr(float(x))
    return text if ("." in text or "e" in text) else text + ".0"


def _as_beta(value: Any, argument: str) -> BetaDensity:
    if value is None or value == "uniform":
        return BetaDensity()
    if isinstance(value, BetaDensity):
        out = value
    elif isinstance(value, (tuple, list)) and len(value) == 3 and value[0] == "beta":
        out = BetaDensity(float(value[1]), float(value[2]))
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        out = BetaDensity(float(value[0]), float(value[1]))
    else:
        raise ValueError(
            f"{argument}={value!r} is not understood; expected 'uniform', a BetaDensity, "
            "(a, b) or ('beta', a, b) with a, b > 0")
    if not (math.isfinite(out.a) and math.isfinite(out.b) and out.a > 0 and out.b > 0):
        raise ValueError(f"{argument}={value!r}: Beta shape parameters must be finite and > 0")
    return out


@dataclass
class PseudoExtendedOptions:
    """Settings of the pseudo-extended transformation.

    Attributes
    ----------
    n_pseudo
        Number of pseudo-samples ``N >= 1``.
    beta
        ``"estimate"`` (sample ``beta_i`` with prior ``pi`` and instrumental
        ``g``) or a fixed ladder: a sequence of ``N`` values in (0, 1].
    temper
        ``"posterior"`` (eq 7, temper the whole density) or ``"likelihood"``
        (temper only the likelihood; the prior enters fully).
    beta_prior
        ``pi(beta)``: ``"uniform"``, ``(a, b)`` or ``BetaDensity`` (Beta(a, b)).
        It is the law of ``beta_i`` of the pseudo-sample that carries the
        weight (whose ``x_i`` follows the target); choosing ``pi = g`` makes
        the weight ``gamma~(x_i)^(1 - beta_i)`` and, with ``g = (a, 1)``,
        ``a < 1``, keeps that pseudo-sample often hot, so it leaves its mode
        soon after another one takes the weight over.
    instrumental
        ``g(beta)`` on (0, 1), same forms as ``beta_prior``.  ``(a, 1)`` with
        ``a < 1`` gives each pseudo-sample more time at small ``beta``, where
        it leaves its mode.  On the 20-Gaussian mixture
        (``models/gaussian_mixture_20``) ``(0.7, 1)`` lowered the Monte-Carlo
        error of the moments, ``pi = g = (0.5, 1)`` lowered it further, and
        ``(0.1, 1)`` left too few pseudo-samples cold and raised it.
    log_scale
        ``log Z^``; None means "estimate with a pilot run" (see
        :mod:`pemc_stan.pipeline`); the transformation itself only declares it
        as data.
    beta_min
        Lower end of the support of ``beta`` (``pi`` and ``g`` live on
        ``(beta_min, 1)``; default 0, the paper's ``(0, 1)``).  Under
        whole-posterior tempering ``C = int Z~(beta) g(beta) dbeta`` of eq 7
        must be finite, but ``Z~(beta) = int gamma~(x)^beta dx`` grows like
        ``beta^(-d/2)`` (Gaussian tails, ``d`` unconstrained dimensions) or
        ``beta^(-d)`` (exponential tails) as ``beta -> 0``: with a uniform
        ``g`` the instrumental is improper for ``d >= 2`` and ``beta`` drifts
        to 0.  Remedies: ``beta_min > 0``, ``instrumental=(a, 1)`` with
        ``a`` above that exponent, a fixed ladder, or
        ``temper="likelihood"`` (then ``Z~(beta) <= 1`` for a proper
        prior).  ``beta_min`` also sets how far the hottest pseudo-samples
        roam: around a mode of width ``s``, ``gamma^beta`` has width
        ``s / sqrt(beta)``.  Choose it so that ``s / sqrt(beta_min)`` is one
        to a few times the distance between modes; a much smaller value makes
        the hot pseudo-samples spend their time far away from every mode
        (measured in ``models/gaussian_mixture_20/README.md``: 0.001 suits
        its scenario (a), 0.01 its scenario (b)).
    noncentring
        Partial non-centring exponent ``alpha`` in [0, 1] (default 0: off).
        With ``alpha > 0`` NUTS moves ``v_i`` and the unconstrained coordinates
        of pseudo-sample ``i`` are ``u_i = v_i * beta_i^(-alpha/2)`` (Stan's
        own constraining transforms then give ``x_i``, and the log-Jacobian
        ``-(alpha/2) dim(u) log beta_i`` is added), so a hot pseudo-sample,
        ``s / sqrt(beta)`` wide around a mode of width ``s``, is no longer
        that much wider than a cold one in the coordinates NUTS moves.  The
        target is unchanged; only the sampler's geometry is.  Supported for
        ``real``, ``vector``, ``row_vector`` and ``matrix`` parameters (not
        arrays of them) with no constraint or ``lower``/``upper`` bounds that
        do not depend on other parameters.  On the 20-Gaussian mixture
        (scenario (a)) ``0.5`` lowered the Monte-Carlo error per iteration by
        about 18% at N = 2 (pilots, where warm-up succeeded) and 8-15% at
        N = 10 (ten 50,000-iteration benchmark seeds, none failed), for 1.3
        and 1.8 times the gradient evaluations: fewer iterations for the same
        error, but more gradients.  At N = 2 warm-up ended with a too large
        step size (divergences, doubled error) in 4 of 18 runs against 1 of 12
        without it, so check the divergences.  ``1`` was worse than ``0``.
    """

    n_pseudo: int = 2
    beta: str | Sequence[float] = "estimate"
    temper: str = "posterior"
    beta_prior: Any = "uniform"
    instrumental: Any = "uniform"
    log_scale: float | None = None
    beta_min: float = 0.0
    noncentring: float = 0.0

    def validate(self) -> PseudoExtendedOptions:
        """Check the options.

        Returns
        -------
        PseudoExtendedOptions
            ``self``, for chaining.

        Raises
        ------
        ValueError
            Naming the argument, the value and what was expected.
        """
        n = self.n_pseudo
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n_pseudo={n!r} is invalid; expected an integer >= 1 "
                             "(the number of pseudo-samples)")
        if isinstance(self.beta, str):
            if self.beta != "estimate":
                raise ValueError(f"beta={self.beta!r} is invalid; expected 'estimate' or a "
                                 f"ladder of {n} values in (0, 1]")
        else:
            ladder = list(self.beta)
            if len(ladder) != n:
                raise ValueError(f"beta has {len(ladder)} values but n_pseudo={n}; expected "
                                 "one inverse temperature per pseudo-sample")
            for b in ladder:
                if not isinstance(b, (int, float)) or not (0.0 < float(b) <= 1.0):
                    raise ValueError(f"beta={ladder!r} is invalid: {b!r} is outside (0, 1]; "
                                     "expected inverse temperatures in (0, 1]")
            if not (_as_beta(self.beta_prior, "beta_prior").is_uniform
                    and _as_beta(self.instrumental, "instrumental").is_uniform):
                raise ValueError("beta_prior/instrumental are only used when beta='estimate'; "
                                 "a fixed ladder has no beta densities")
        if self.temper not in ("posterior", "likelihood"):
            raise ValueError(f"temper={self.temper!r} is invalid; expected 'posterior' or "
                             "'likelihood'")
        _as_beta(self.beta_prior, "beta_prior")
        _as_beta(self.instrumental, "instrumental")
        bm = self.beta_min
        if isinstance(bm, bool) or not isinstance(bm, (int, float)) or not 0.0 <= bm < 1.0:
            raise ValueError(f"beta_min={bm!r} is invalid; expected a number in [0, 1)")
        if self.fixed_ladder is not None and bm != 0.0:
            raise ValueError("beta_min is only used when beta='estimate'")
        a = self.noncentring
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0.0 <= a <= 1.0:
            raise ValueError(f"noncentring={a!r} is invalid; expected a number in [0, 1] "
                             "(0: off, 1: fully non-centred)")
        if self.log_scale is not None and not math.isfinite(float(self.log_scale)):
            raise ValueError(f"log_scale={self.log_scale!r} is invalid; expected a finite "
                             "number or None (pilot estimate)")
        return self

    @property
    def fixed_ladder(self) -> tuple[float, ...] | None:
        """The ladder as a tuple, or None when ``beta="estimate"``."""
        return None if isinstance(self.beta, str) else tuple(float(b) for b in self.beta)


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


@dataclass(frozen=True)
class TransformResult:
    """A pseudo-extended program and what is needed to run and post-process it.

    Attributes
    ----------
    stan_code
        The PE Stan program.
    options
        The (validated) options used.
    parameters
        The user's parameters, in declaration order, with where their copies live.
    data_additions
        Data entries the PE program needs besides the user's data, with their
        values where known (``pemc_log_scale`` is None when it must be
        estimated).
    n_in_data
        True when ``pemc_N`` is data (False: baked in).
    original_code
        The user's program text.
    warnings
        Messages of the warnings issued (e.g. a heavy-tailed prior).
    model_name
        The user's model name.
    """

    stan_code: str
    options: PseudoExtendedOptions
    parameters: tuple[ParameterCopies, ...]
    data_additions: dict[str, Any]
    n_in_data: bool
    original_code: str
    warnings: tuple[str, ...] = field(default=())
    model_name: str = "model"

    def data(self, user_data: dict[str, Any] | None, log_scale: float | None = None
             ) -> dict[str, Any]:
        """The PE program's data: ``user_data`` plus :attr:`data_additions`.

        Raises
        ------
        ValueError
            If no log scale is known.
        """
        out = dict(user_data or {})
        extra = dict(self.data_additions)
        if log_scale is not None:
            extra["pemc_log_scale"] = float(log_scale)
        if extra.get("pemc_log_scale") is None:
            raise ValueError("pemc_log_scale is unknown: pass log_scale= or run the pilot")
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
    body: list[str] = [f"real pemc_scale = pow(pemc_beta[pemc_k], {_num(-alpha / 2)});"]
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


def heavy_tailed_priors(program: ast.Program) -> list[tuple[str, int]]:
    """Heavy-tailed prior statements of a program: ``(distribution, line)`` pairs.

    Raises
    ------
    Nothing (programs the analysis cannot handle yield an empty list).
    """
    try:
        contributions = analyse(program).prior_contributions()
    except Exception:  # pragma: no cover - analysis failures are reported elsewhere
        return []
    found: list[tuple[str, int]] = []
    for c in contributions:
        for node in ast.walk(c.node):
            name = None
            if isinstance(node, ast.Tilde):
                name = node.distribution
            elif isinstance(node, ast.Call):
                for suffix in ("_lpdf", "_lupdf"):
                    if node.name.endswith(suffix):
                        name = node.name[: -len(suffix)]
            if name in HEAVY_TAILED_DISTRIBUTIONS:
                found.append((name, c.line))
    return found


# --------------------------------------------------------------------------- #
# The transformation
# --------------------------------------------------------------------------- #


def transform_pseudo_extended(
    program: str | os.PathLike[str] | ast.Program,
    options: PseudoExtendedOptions | None = None,
    *,
    name: str | None = None,
    **option_kwargs: Any,
) -> TransformResult:
    """Build the pseudo-extended version of a Stan program.

    Parameters
    ----------
    program
        Stan program text, a ``.stan`` path or a parsed program.
    options
        :class:`PseudoExtendedOptions`; alternatively pass its fields as
        keyword arguments.
    name
        Model name used in the header comment.

    Returns
    -------
    TransformResult

    Raises
    ------
    ValueError
        For invalid options (before anything else).
    pemc_stan.stan.analysis.ReservedPrefixError
        If the program uses an identifier starting with ``pemc_``.
    StanProgramError
        If the program has no parameters, or cannot be parsed.
    UnsupportedConstructError
        For constructs the log-density rewrite does not support.
    """
    if options is None:
        options = PseudoExtendedOptions(**option_kwargs)
    elif option_kwargs:
        options = dataclasses.replace(options, **option_kwargs)
    options.validate()
    prepared = prepare_program(program, name, "pseudo-extended")
    tree, text, model_name = prepared.tree, prepared.text, prepared.model_name
    param_decls = list(prepared.parameters)

    functions = log_density_functions(tree, model_name)
    n = options.n_pseudo
    param_names = {p for _, p in param_decls}

    # A parameter is unrolled into N separate declarations when a bound (or
    # offset/multiplier) depends on another parameter (copy k must use copy k
    # of that parameter) or is a container (stanc rejects container bounds on
    # an array of containers).
    table = build_symbol_table(tree)
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
                lines.append(f"  {print_type(renamed)} {c.stan_variable(k)};")
    parameters_text = "\n".join(lines)

    temper = options.temper
    ladder = options.fixed_ladder
    pi_beta = _as_beta(options.beta_prior, "beta_prior")
    g_beta = _as_beta(options.instrumental, "instrumental")

    def call(which: str, k: str | int) -> str:
        mapping = {}
        for pname, c in copies.items():
            mapping[pname] = (c.stan_variable(int(k)) if c.unrolled else f"{pname}[{k}]")
        return functions.call(which, mapping)

    def weight_stmt(k: str) -> str:
        beta = f"pemc_beta[{k}]"
        expr = f"(1 - {beta}) * pemc_log_tempered[{k}]"
        if ladder is None:
            if not pi_beta.is_uniform:
                expr += f" + {pi_beta.stan(beta)}"
            if not g_beta.is_uniform:
                expr += f" - {g_beta.stan(beta)}"
        return f"pemc_log_weight[{k}] = {expr};"

    def body(k: str | int) -> list[str]:
        out = []
        if temper == "posterior":
            out.append(f"pemc_log_tempered[{k}] = {call('density', k)} - pemc_log_scale;")
        else:
            out.append(f"pemc_log_prior_x[{k}] = {call('prior', k)};")
            out.append(f"pemc_log_tempered[{k}] = {call('likelihood', k)} - pemc_log_scale;")
        out.append(weight_stmt(str(k)))
        return out

    tempered_what = "log lik~(x_k)" if temper == "likelihood" else "log gamma~(x_k)"
    local_lines = [f"vector[pemc_N] pemc_log_tempered;  // {tempered_what}"]
    if temper == "likelihood":
        local_lines.append("vector[pemc_N] pemc_log_prior_x;  // log prior(x_k)")
    compute: list[str] = []
    if n_in_data:
        compute.append("for (pemc_k in 1:pemc_N) {")
        compute.extend("  " + s for s in body("pemc_k"))
        compute.append("}")
    else:
        for k in range(1, n + 1):
            compute.append(f"// pseudo-sample {k}")
            compute.extend(body(k))
    gamma_tilde = ("pemc_log_prior_x + pemc_log_tempered" if temper == "likelihood"
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
        g_density=g_beta.stan("pemc_beta[pemc_k]") if ladder is None else "",
        beta_min=_num(options.beta_min) if options.beta_min > 0 else "0",
    )

    issued: list[str] = []
    if temper == "posterior":
        heavy = heavy_tailed_priors(tree)
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

    if (temper == "posterior" and ladder is None and options.beta_min == 0.0
            and g_beta.is_uniform and n > 1 and _probably_multidimensional(param_decls)
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
        try:
            no_likelihood = not analyse(tree).likelihood_contributions()
        except Exception:  # pragma: no cover - analysis failures are reported elsewhere
            no_likelihood = False
        if no_likelihood:
            msg = (f"{model_name}: temper='likelihood' but no statement of the model is "
                   "classified as likelihood (it has no data-dependent density terms), so "
                   "nothing is tempered; use temper='posterior'.")
            warnings.warn(msg, PseudoExtendedWarning, stacklevel=2)
            logger.warning(msg)
            issued.append(msg)

    additions: dict[str, Any] = {"pemc_log_scale": options.log_scale}
    if n_in_data:
        additions["pemc_N"] = n
    if ladder is not None:
        additions["pemc_beta"] = list(ladder)
    return TransformResult(
        stan_code=stan_code, options=options, parameters=tuple(copies.values()),
        data_additions=additions, n_in_data=n_in_data, original_code=text,
        warnings=tuple(issued), model_name=model_name,
    )
