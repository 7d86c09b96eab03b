"""Marginalising a parameter the model uses only in comparisons (a change point).

A parameter ``s`` that the density reads only through comparisons such as
``t < s ? mu1 : mu2`` makes the density piecewise constant along ``s``: between two
consecutive points where a comparison changes (the values of the comparisons' other
sides, and the bounds), nothing depends on ``s``.  HMC has no gradient along it, its
trajectories drift to the tree depth limit, and the chains do not mix between the
intervals.  The integral over ``s`` is then a
finite sum, as the Stan User's Guide writes a change point:

    p(theta, y) = int p(theta, s, y) ds = sum_k (c_k - c_{k-1}) p(theta, m_k, y),

with ``c_0 < c_1 < ... < c_K`` the distinct points (clipped to ``s``'s bounds) and
``m_k`` the midpoint of interval ``k`` (any point of it gives the same density).  The
marginalised program samples ``theta`` only, with the same normalising constant, and
draws ``s`` back in generated quantities from its conditional: an interval with
probability proportional to its term, then uniformly within it.

:func:`marginalise` rewrites a program so when exactly one parameter qualifies:

* a ``real`` declared alone, with a lower and an upper bound of data;
* in the model block (and nowhere in transformed parameters), every use of it is an
  operand of a comparison, ``s < e``, ``e >= s``, ..., whose other side ``e`` is
  an expression of data and of the loop variables of the ``for`` loops around it
  (their bounds data too), or its own prior, ``s ~ uniform(a, b)`` with data ``a``,
  ``b`` (a density constant along ``s``, so the sum stays exact; ``a`` and ``b``
  join the points);
* a comparison under a condition that is not copied (a parameter's ``if``, a branch of
  ``?:``, the right side of ``&&``/``||``, a loop that can ``break``) has a side that
  cannot fail to evaluate (variables, literals, ``+ - *``); the data conditions of
  ``if`` statements are copied with the loops;
* the model block's statements that use it, with every statement sharing a top-level
  local variable with them, go into the summed density; the model block reads no
  ``target()`` and has no ``reject``/``fatal_error`` (a rejection in one interval would
  reject every draw), no ``while`` loop holds a comparison with it, no other declaration
  uses it, and the program defines no ``_lp`` function.

The summed density keeps every constant (each ``~`` its full ``_lpdf``), as all of
pemc-stan does; Stan's own ``~`` drops a statement whose arguments are constants given
the comparisons (``y ~ poisson(t < s ? 3 : 5)``), so plain Stan would sample ``s`` flat
there.  A density that throws in some interval (a scale that a comparison makes
negative) throws for every draw once summed: the user's model must be valid on all of
``s``'s range.

The points are computed in transformed data (loops copied from the model), so the
rewritten program takes the user's data unchanged.  Other programs are returned as
they are.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from pemc_stan.core.templates import block_text, functions_text, render
from pemc_stan.errors import StanProgramError
from pemc_stan.stan import ast
from pemc_stan.stan.analysis import (
    COMPARISONS,
    check_reserved_prefix,
    compared_only_parameters,
    reserved_identifiers,
)
from pemc_stan.stan.inputs import StanProgram
from pemc_stan.stan.logdensity import log_density_functions
from pemc_stan.stan.parser import parse
from pemc_stan.stan.printer import print_expr, print_type
from pemc_stan.stan.symbols import SymbolTable, build_symbol_table, is_scalar_expr

logger = logging.getLogger(__name__)

__all__ = ["Site", "marginalise", "refusal"]

#: The template of the marginalised program.
_TEMPLATE = "marginalised.stan.jinja"
#: The generated log density with the marginalised parameter as an argument.
_JOINT = "pemc_marginal_log_density"


#: What surrounds a comparison in the model: ``for`` loops, and the data conditions of the
#: ``if`` statements it is under (the expression, or its negation in an ``else``).
Around = ast.For | ast.ForEach | ast.Expr


@dataclass(frozen=True)
class Site:
    """A point where the density may change along the parameter: ``point``, evaluated
    inside ``loops`` (the ``for`` loops and data ``if`` conditions around the comparison,
    outermost first)."""

    point: ast.Expr
    loops: tuple[Around, ...] = ()


class _Refused(Exception):
    """The parameter cannot be marginalised (the message says why, for the log)."""


def _calls(node: ast.Node) -> set[str]:
    return {n.name for n in ast.walk(node) if isinstance(n, ast.Call)}


def _globals(block: ast.ProgramBlock | None) -> set[str]:
    return set() if block is None else {
        n for st in block.stmts if isinstance(st, ast.VarDecl) for n in st.names}


class _Sites:
    """The comparison sites of ``name`` in the statements that use it (raises
    :class:`_Refused` for any other use)."""

    def __init__(self, name: str, data: set[str]) -> None:
        self.name, self.data = name, data
        self.sites: list[Site] = []

    def _require_data(self, expr: ast.Expr, loops: tuple[Around, ...], what: str) -> None:
        known = self.data | {lp.var for lp in loops if isinstance(lp, (ast.For, ast.ForEach))}
        if not ast.names_in(expr) <= known \
                or any(c.endswith(("_rng", "_lp")) for c in _calls(expr)):
            raise _Refused(f"{what} {print_expr(expr)} is not a function of data and loop "
                           "variables")

    def visit(self, node: ast.Node, loops: tuple[Around, ...], guarded: bool = False) -> None:
        """Collect the sites under ``node``; ``guarded``: under a condition not copied
        into transformed data (a parameter's ``if``, a branch of ``?:``, the right side of
        ``&&``/``||``, a loop that can ``break`` or ``continue``), where only a point that
        cannot fail to evaluate is collected."""
        if self.name not in ast.names_in(node):
            return
        if isinstance(node, ast.While):
            raise _Refused("a while loop uses it")
        if isinstance(node, (ast.For, ast.ForEach)):
            bounds = (node.lower, node.upper) if isinstance(node, ast.For) else (node.iterable,)
            for b in bounds:
                self._require_data(b, loops, "a loop bound")
            stops = any(isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(node.body))
            self.visit(node.body, (*loops, node), guarded or stops)
            return
        if isinstance(node, ast.If):
            self.visit(node.cond, loops, guarded)
            known = self.data | {lp.var for lp in loops if not isinstance(lp, ast.Expr)}
            data_cond = ast.names_in(node.cond) <= known and not guarded
            for branch, cond in ((node.then, node.cond),
                                 (node.otherwise, ast.UnaryOp("!", node.cond, parens=True))):
                if branch is not None:
                    self.visit(branch, (*loops, cond) if data_cond else loops,
                               guarded or not data_cond)
            return
        if isinstance(node, ast.Conditional):
            self.visit(node.cond, loops, guarded)
            self.visit(node.if_true, loops, True)
            self.visit(node.if_false, loops, True)
            return
        if isinstance(node, ast.BinaryOp) and node.op in ("&&", "||"):
            self.visit(node.left, loops, guarded)
            self.visit(node.right, loops, True)
            return
        if isinstance(node, ast.BinaryOp) and node.op in COMPARISONS:
            for mine, other in ((node.left, node.right), (node.right, node.left)):
                if mine == ast.Variable(self.name) and self.name not in ast.names_in(other):
                    self._require_data(other, loops, "a comparison's other side")
                    if guarded and not _cannot_fail(other):
                        raise _Refused(f"the comparison with {print_expr(other)} (line "
                                       f"{node.line}) is under a condition of parameters")
                    self.sites.append(Site(other, loops))
                    return
        if isinstance(node, ast.Variable):
            raise _Refused(f"line {node.line} uses it outside a plain comparison")
        for child in ast.children(node):
            self.visit(child, loops, guarded)


def _cannot_fail(expr: ast.Expr) -> bool:
    """Whether evaluating ``expr`` cannot throw: variables, literals, ``+ - *``."""
    return all(isinstance(n, (ast.Variable, ast.IntLit, ast.RealLit))
               or (isinstance(n, ast.UnaryOp) and n.op in "+-")
               or (isinstance(n, ast.BinaryOp) and n.op in ("+", "-", "*"))
               for n in ast.walk(expr))


def _declaration(tree: ast.Program, name: str) -> ast.VarDecl:
    assert tree.parameters is not None
    for st in tree.parameters.stmts:
        if isinstance(st, ast.VarDecl) and name in st.names:
            t = st.type
            if len(st.names) == 1 and isinstance(t, ast.BasicType) and t.name == "real" \
                    and isinstance(t.constraint, ast.Bounds) \
                    and t.constraint.lower is not None and t.constraint.upper is not None:
                return st
            raise _Refused("it is not a real declared alone with a lower and an upper bound")
    raise _Refused("no declaration")


def _bounds(decl: ast.VarDecl) -> tuple[ast.Expr, ast.Expr]:
    """The lower and upper bound of a declaration :func:`_declaration` accepted."""
    t = decl.type
    assert isinstance(t, ast.BasicType) and isinstance(t.constraint, ast.Bounds)
    assert t.constraint.lower is not None and t.constraint.upper is not None
    return t.constraint.lower, t.constraint.upper


def _prior_points(stmt: ast.Stmt, name: str, data: set[str], table: SymbolTable
                  ) -> tuple[ast.Expr, ...] | None:
    """The bounds of ``name ~ uniform(a, b)`` (None when ``stmt`` is not its prior)."""
    if not (isinstance(stmt, ast.Tilde) and stmt.arg == ast.Variable(name)):
        return None
    if stmt.distribution != "uniform" or stmt.truncation is not None \
            or not all(ast.names_in(a) <= data and is_scalar_expr(a, table) for a in stmt.args):
        raise _Refused(f"its prior (line {stmt.line}) is not uniform with scalar data bounds")
    return stmt.args


def _split_model(model: ast.ProgramBlock, name: str) -> tuple[list[ast.Stmt], list[ast.Stmt]]:
    """The model block's statements that go into the summed density (those using ``name``,
    and every statement using a top-level local they use, until none is left out), and
    the others, each in program order."""
    local, stmts = _globals(model), model.stmts
    moved = [name in ast.names_in(st) for st in stmts]
    while True:
        shared = set().union(*((ast.names_in(st) | _declared(st)) & local
                               for st, m in zip(stmts, moved, strict=True) if m))
        more = [m or bool(shared & (ast.names_in(st) | _declared(st)))
                for st, m in zip(stmts, moved, strict=True)]
        if more == moved:
            break
        moved = more
    return ([st for st, m in zip(stmts, moved, strict=True) if m],
            [st for st, m in zip(stmts, moved, strict=True) if not m])


def _declared(stmt: ast.Stmt) -> set[str]:
    return set(stmt.names) if isinstance(stmt, ast.VarDecl) else set()


def _analyse(tree: ast.Program, name: str) -> tuple[ast.VarDecl, list[Site], list[ast.Expr]]:
    decl = _declaration(tree, name)
    if len(_globals(tree.parameters)) == 1:
        raise _Refused("it is the only parameter: there would be nothing left to sample")
    data = _globals(tree.data) | _globals(tree.transformed_data)
    low, high = _bounds(decl)
    if not (ast.names_in(low) | ast.names_in(high)) <= data:
        raise _Refused("its bounds are not data")
    for block in (tree.transformed_parameters, tree.parameters):
        others = [st for st in block.stmts if st is not decl] if block is not None else []
        if name in ast.names_in(ast.Block(tuple(others))):
            raise _Refused(f"the {block.name if block else ''} block uses it")
    if tree.functions is not None and any(
            f.name.endswith("_lp") for f in tree.functions.functions):
        raise _Refused("the program defines _lp functions")
    assert tree.model is not None
    if any(isinstance(n, (ast.TargetValue, ast.Reject, ast.FatalError))
           for n in ast.walk(tree.model)):
        raise _Refused("the model block reads target() or may reject a draw")
    sites = _Sites(name, data)
    points: list[ast.Expr] = [low, high]
    table = build_symbol_table(tree)
    for st in _split_model(tree.model, name)[0]:
        if name not in ast.names_in(st):
            continue
        prior = _prior_points(st, name, data, table)
        if prior is not None:
            points.extend(prior)
        else:
            sites.visit(st, ())
    return decl, sites.sites, points


def _summed_likelihood(program: StanProgram, uses: list[ast.Stmt], name: str) -> bool:
    """Whether the summed density is a likelihood of the other parameters: the statements
    summed hold a likelihood term and no prior term but ``name``'s own.

    ``name``'s prior integrates out, so the sum is ``int p(s) p(y | theta, s) ds =
    p(y | theta)``; classed as prior, a model whose data all meet ``s`` would have no
    likelihood left, and pseudo-extended MCMC would temper its whole posterior, whose hot
    pseudo-samples roam a widely flattened prior.
    """
    inside = {id(n) for st in uses for n in ast.walk(st)}
    kinds = {c.kind for c in program.analysis.contributions if id(c.node) in inside
             and not (isinstance(c.variate, ast.Variable) and c.variate.name == name)}
    return kinds == {"likelihood"}


def _indent(text: str, depth: int) -> str:
    return "\n".join("  " * depth + line if line else line for line in text.split("\n"))


def _point_code(sites: list[Site], fill: bool, lower: str, upper: str) -> Iterator[str]:
    """Statements counting (``fill`` False) or storing the sites' points, clipped."""
    for site in sites:
        if fill:
            body = ("pemc_marginal_i += 1;\n"
                    f"pemc_marginal_points[pemc_marginal_i] = fmin(fmax({print_expr(site.point)}"
                    f", {lower}), {upper});")
        else:
            body = "pemc_marginal_n += 1;"
        for loop in reversed(site.loops):
            head = (f"for ({loop.var} in {print_expr(loop.lower)}:{print_expr(loop.upper)})"
                    if isinstance(loop, ast.For)
                    else f"for ({loop.var} in {print_expr(loop.iterable)})"
                    if isinstance(loop, ast.ForEach) else f"if ({print_expr(loop)})")
            body = f"{head} {{\n{_indent(body, 1)}\n}}"
        yield body


def refusal(tree: ast.Program) -> str:
    """Why a program's compared-only parameters cannot be summed out (``""`` when it has
    none, or when :func:`marginalise` would sum one out), for the verdict's advice.

    Raises
    ------
    Nothing.
    """
    flat = compared_only_parameters(tree)
    if len(flat) > 1:
        return f"{len(flat)} parameters are used only in comparisons (one can be summed out)"
    try:
        if flat:
            _analyse(tree, flat[0][0])
    except _Refused as why:
        return str(why)
    return ""


def marginalise(program: StanProgram) -> StanProgram:
    """The program with its one compared-only parameter summed out (module docstring),
    or ``program`` itself when no parameter qualifies.

    The result's ``marginalised`` names the parameter (now a generated quantity drawn
    from its conditional) and ``original`` is ``program``.

    Raises
    ------
    ReservedPrefixError
        If the program uses an identifier starting with ``pemc_``.
    """
    tree = program.tree
    check_reserved_prefix(tree, program.path.name if program.path else program.name)
    flat = compared_only_parameters(tree)
    if len(flat) != 1 or program.marginalised:
        return program
    name, line = flat[0]
    try:
        decl, sites, points = _analyse(tree, name)
    except _Refused as why:
        logger.info("%s uses %s (line %d) only in comparisons but it is not marginalised: %s",
                    program.name, name, line, why)
        return program
    text = _render(program, name, line, decl, sites, points)
    try:
        new = parse(text, f"{program.name}.stan")
    except StanProgramError as err:  # a case this module should have refused
        logger.warning("%s: summing out %s (line %d) gave a program stanc rejects, so it is "
                       "sampled as written; please report: %s", program.name, name, line, err)
        return program
    new = dataclasses.replace(new, generated=reserved_identifiers(new))
    logger.info("%s: %s (line %d) is used only in comparisons: summed over the intervals "
                "between the points where they change, and drawn back in generated "
                "quantities", program.name, name, line)
    return StanProgram(text, program.name, new, program.path, marginalised=(name,),
                       original=program)


def _render(program: StanProgram, name: str, line: int, decl: ast.VarDecl,
            sites: list[Site], points: list[ast.Expr]) -> str:
    tree = program.tree
    assert tree.model is not None and tree.parameters is not None
    uses, rest = _split_model(tree.model, name)
    joint_tree = dataclasses.replace(
        tree, model=ast.ProgramBlock("model", tuple(uses)), generated_quantities=None)
    fns = log_density_functions(joint_tree, program.name)
    joint = dataclasses.replace(fns.density, name=_JOINT)
    others = [p for p in fns.parameters if p != name]
    args = [*others, "pemc_marginal_lower", "pemc_marginal_upper", *fns.data]
    params = [p for p in joint.params if p.name != name]
    at = len(params) - len(fns.data)
    bound_params = [ast.Param(ast.BasicType("vector"), f"pemc_marginal_{b}", data_only=True)
                    for b in ("lower", "upper")]
    signature = ", ".join(_param(p) for p in (*params[:at], *bound_params, *params[at:]))
    # the likelihood as a density of the (data) interval bounds: the analysis classes a
    # density of data as likelihood
    lpdf_signature = ", ".join(_param(p) for p in (bound_params[0], *params[:at],
                                                   bound_params[1], *params[at:]))
    lpdf_args = ", ".join(["pemc_marginal_lower | " + ", ".join(
        [*others, "pemc_marginal_upper"]), *fns.data])
    joint_args = ", ".join(
        "pemc_marginal_lower[pemc_k] + 0.5 * (pemc_marginal_upper[pemc_k] - "
        "pemc_marginal_lower[pemc_k])" if p == name else p
        for p in (*fns.parameters, *fns.data))
    lower, upper = (print_expr(b) for b in _bounds(decl))
    where = {id(st): i for i, st in enumerate(tree.model.stmts)}
    before = [st for st in rest if where[id(st)] < where[id(uses[0])]]
    after = [st for st in rest if where[id(st)] > where[id(uses[0])]]
    params_block = [st for st in tree.parameters.stmts if st is not decl]

    def stmts(block: list[ast.Stmt] | tuple[ast.Stmt, ...] | None) -> str:
        return block_text(ast.ProgramBlock("", tuple(block or ())))

    def blk(b: ast.ProgramBlock | None) -> str:
        return block_text(b)

    return render(
        _TEMPLATE, model_name=program.name, name=name, line=line, joint_name=_JOINT,
        functions=functions_text(tree, ()), joint=functions_text(ast.Program(), (joint,)),
        signature=signature, joint_args=joint_args, args=", ".join(args),
        likelihood=_summed_likelihood(program, uses, name), lpdf_signature=lpdf_signature,
        lpdf_args=lpdf_args,
        data=blk(tree.data), transformed_data=blk(tree.transformed_data),
        n_points=len(points),
        fixed_points="\n".join(
            f"  pemc_marginal_points[{i + 1}] = "
            + (print_expr(p) if i < 2 else f"fmin(fmax({print_expr(p)}, {lower}), {upper})")
            + ";" for i, p in enumerate(points)),
        count="\n".join(_indent(c, 1) for c in _point_code(sites, False, lower, upper)),
        fill="\n".join(_indent(c, 2) for c in _point_code(sites, True, lower, upper)),
        parameters=stmts(params_block), transformed_parameters=blk(tree.transformed_parameters),
        model_before=stmts(before), model_after=stmts(after),
        declared=print_type(decl.type), generated_quantities=blk(tree.generated_quantities),
        has_tp=tree.transformed_parameters is not None,
        has_gq=tree.generated_quantities is not None)


def _param(p: ast.Param) -> str:
    return f"{'data ' if p.data_only else ''}{print_type(p.type)} {p.name}"
