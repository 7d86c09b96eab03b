"""Is the prior of a program normalised?  Evidence needs a proper, normalised prior.

``log Z`` is the log integral of the model's density as written.  It is the log
marginal likelihood only when the prior part of that density integrates to one:

* a parameter with no prior statement and an unbounded support has an implicit
  flat, improper prior: ``Z`` is then meaningless (its scale is arbitrary), and
  :func:`pemc_stan.evidence` refuses such a program, naming the parameter
  (:class:`~pemc_stan.errors.ImproperPriorError`); sampling still works;
* a bounded parameter given an untruncated density, ``real<lower=0> sigma;
  sigma ~ normal(0, 3);``, has a prior of mass ``F(U) - F(L) < 1`` on its
  support (here 1/2): the estimate is of the model as written, ``-log(F(U) -
  F(L))`` per element below the evidence with the intended prior (``log 2``
  here), and a warning says so and how to close the gap (``T[0, ]``);
* a bounded parameter without a prior statement has the implicit density 1 on
  its box: the gap is ``log(U - L)`` per element (``~ uniform(L, U)`` closes it).

The checks read the program's analysis (which statements are prior terms and
what their variates are) and evaluate bounds and arguments from the data;
anything they cannot decide is left alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pemc_stan.errors import ImproperPriorError
from pemc_stan.stan import ast
from pemc_stan.stan.evaluate import evaluate, scalar_definitions, size_of, with_definitions
from pemc_stan.stan.inputs import StanProgram
from pemc_stan.stan.printer import print_expr

__all__ = ["PriorGap", "PriorReport", "prior_report", "improper_prior"]


@dataclass(frozen=True)
class PriorGap:
    """A parameter whose prior, as written, does not integrate to one on its support.

    Attributes
    ----------
    parameter
        Its name.
    line
        The line of the prior statement (or of the declaration).
    log_gap
        ``log Z(intended) - log Z(as written)``: minus the log of the prior's mass on
        the support (summed over elements).
    message
        What is wrong and how to close the gap.
    """

    parameter: str
    line: int
    log_gap: float
    message: str


@dataclass(frozen=True)
class PriorReport:
    """What :func:`prior_report` found.

    Attributes
    ----------
    flat
        ``(parameter, line of its declaration)`` of parameters with no prior and an
        unbounded support (improper).
    gaps
        Parameters whose prior as written has a mass other than one on the support.
    """

    flat: tuple[tuple[str, int], ...] = ()
    gaps: tuple[PriorGap, ...] = field(default=())

    @property
    def log_gap(self) -> float:
        """The total gap, summed over parameters."""
        return float(sum(g.log_gap for g in self.gaps))


def _cdf(distribution: str, args: list[Any]) -> Any | None:
    """A scipy distribution for a Stan density with these arguments, or None."""
    from scipy import stats

    try:
        a = [float(np.asarray(x)) for x in args]
    except (TypeError, ValueError):
        return None
    table = {
        "normal": lambda: stats.norm(a[0], a[1]),
        "std_normal": lambda: stats.norm(0.0, 1.0),
        "student_t": lambda: stats.t(a[0], a[1], a[2]),
        "cauchy": lambda: stats.cauchy(a[0], a[1]),
        "logistic": lambda: stats.logistic(a[0], a[1]),
        "double_exponential": lambda: stats.laplace(a[0], a[1]),
        "gumbel": lambda: stats.gumbel_r(a[0], a[1]),
        "lognormal": lambda: stats.lognorm(a[1], scale=math.exp(a[0])),
        "exponential": lambda: stats.expon(scale=1.0 / a[0]),
        "gamma": lambda: stats.gamma(a[0], scale=1.0 / a[1]),
        "weibull": lambda: stats.weibull_min(a[0], scale=a[1]),
        "uniform": lambda: stats.uniform(a[0], a[1] - a[0]),
        "beta": lambda: stats.beta(a[0], a[1]),
    }
    try:
        return table[distribution]() if distribution in table else None
    except (IndexError, ValueError, ZeroDivisionError, OverflowError):
        return None


def _n_elements(decl_type: ast.Type, data: Mapping[str, Any]) -> int | None:
    from pemc_stan.stan.symbols import type_sizes

    n = 1
    for s in type_sizes(decl_type):
        k = size_of(s, data)
        if k is None:
            return None
        n *= k
    return n


def _bound(expr: ast.Expr | None, data: Mapping[str, Any], default: float) -> float | None:
    if expr is None:
        return default
    try:
        value = np.asarray(evaluate(expr, data), dtype=float)
    except Exception:
        return None
    return float(value) if value.ndim == 0 else None


def prior_report(program: StanProgram, data: Mapping[str, Any] | None = None) -> PriorReport:
    """Find improper (flat) priors and priors of the wrong mass (see the module docstring).

    Raises
    ------
    Nothing (programs the analysis cannot handle give an empty report).
    """
    data = with_definitions(data, scalar_definitions(program.tree))
    try:
        analysis = program.analysis
    except Exception:
        return PriorReport()
    params = {name: t for t, name in program.parameters}
    covered: set[str] = set()
    priors: dict[str, list[ast.Tilde]] = {}
    data_names = _data_names(program)
    for c in analysis.prior_contributions():
        if c.variate is None:  # target += f(...): every parameter it reads may have its prior there
            node_deps = (analysis.stmt_deps(c.node) if isinstance(c.node, ast.Stmt)
                         else analysis.expr_deps(c.node) if isinstance(c.node, ast.Expr)
                         else None)
            covered |= ast.names_in(c.node)
            if node_deps is not None:
                covered |= {n for _, n in node_deps.variables}
            continue
        names = {n for _, n in analysis.expr_deps(c.variate).variables}
        covered |= names & set(params)
        if names - set(params) - data_names:  # a transformed parameter or local: undecided
            covered |= set(params)
        if isinstance(c.node, ast.Tilde) and isinstance(c.variate, ast.Variable):
            priors.setdefault(c.variate.name, []).append(c.node)
    flat: list[tuple[str, int]] = []
    gaps: list[PriorGap] = []
    for name, decl_type in params.items():
        from pemc_stan.stan.symbols import base_type

        basic = base_type(decl_type)
        bounds = basic.constraint if isinstance(basic, ast.BasicType) else None
        constrained = isinstance(basic, ast.BasicType) and basic.name not in (
            "real", "vector", "row_vector", "matrix")
        lower = upper = None
        if isinstance(bounds, ast.Bounds):
            lower, upper = bounds.lower, bounds.upper
        if name not in covered:
            if constrained:
                continue  # simplex, correlation matrix, ...: compact or not decided here
            lo = _bound(lower, data, -math.inf)
            hi = _bound(upper, data, math.inf)
            if lo is None or hi is None:
                continue
            if math.isinf(lo) or math.isinf(hi):
                flat.append((name, decl_type.line))
                continue
            n = _n_elements(decl_type, data)
            if n is not None and hi > lo and abs(math.log(hi - lo)) > 1e-12:
                gap = n * math.log(hi - lo)
                gaps.append(PriorGap(name, decl_type.line, gap,
                                     f"'{name}' has no prior statement, so its prior is the "
                                     f"density 1 on ({lo:g}, {hi:g}), of mass {hi - lo:g}: log Z "
                                     f"is of the model as written, {-gap:.3f} from the evidence "
                                     f"with a normalised uniform prior; add '{name} ~ "
                                     f"uniform({lo:g}, {hi:g});'"))
            continue
        if bounds is None or constrained or name not in priors:
            continue
        lo = _bound(lower, data, -math.inf)
        hi = _bound(upper, data, math.inf)
        if lo is None or hi is None or (math.isinf(lo) and math.isinf(hi)):
            continue
        for stmt in priors[name]:
            if stmt.truncation is not None:
                continue
            try:
                args = [evaluate(a, data) for a in stmt.args]
            except Exception:
                continue
            dist = _cdf(stmt.distribution, args)
            n = _n_elements(decl_type, data)
            if dist is None or n is None:
                continue
            mass = float(dist.cdf(hi) - dist.cdf(lo))
            if not 0.0 < mass < 1.0 - 1e-9:
                continue
            gap = -n * math.log(mass)
            lo_text = "" if math.isinf(lo) else print_expr(lower) if lower is not None else ""
            hi_text = "" if math.isinf(hi) else print_expr(upper) if upper is not None else ""
            gaps.append(PriorGap(
                name, stmt.line, gap,
                f"'{name}' is declared on ({lo:g}, {hi:g}) but '{name} ~ {stmt.distribution}("
                f"{', '.join(print_expr(a) for a in stmt.args)})' (line {stmt.line}) is not "
                f"truncated: that prior has mass {mass:.4g} there, so log Z is of the model as "
                f"written, {gap:.3f} below the evidence with the normalised prior; write "
                f"'T[{lo_text}, {hi_text}]' after it to close the gap"))
    return PriorReport(tuple(flat), tuple(gaps))


def _data_names(program: StanProgram) -> set[str]:
    tree = program.tree
    return {n for block in (tree.data, tree.transformed_data) if block is not None
            for s in block.stmts if isinstance(s, ast.VarDecl) for n in s.names}


def improper_prior(program: StanProgram, data: Mapping[str, Any],
                   report: PriorReport | None = None) -> ImproperPriorError | None:
    """The error that refuses ``log Z`` of a program with a flat, improper prior, or None.

    The one test of whether a model's evidence is defined:
    :func:`~pemc_stan.run.evidence_sources.check_prior` raises what it returns, and a fit's
    ``log_z()`` and ``estimates.json`` report it.

    Parameters
    ----------
    program, data
        The user's program and data.
    report
        The program's :func:`~pemc_stan.estimators.normalisation.prior_report`, when
        already made.

    Raises
    ------
    Nothing (the error is returned).
    """
    report = prior_report(program, data) if report is None else report
    if not report.flat:
        return None
    names = ", ".join(f"'{n}' (line {line})" for n, line in report.flat)
    return ImproperPriorError(
        f"{program.name}: log Z needs a proper prior, but {names} "
        f"{'has' if len(report.flat) == 1 else 'have'} no prior statement and an unbounded "
        "support, i.e. a flat, improper prior, so the evidence is undefined (its scale is "
        "arbitrary); give each a proper prior, e.g. '"
        f"{report.flat[0][0]} ~ normal(0, 10);'. Sampling works as the model is.",
        tuple(n for n, _ in report.flat), program.name, report.flat[0][1])
