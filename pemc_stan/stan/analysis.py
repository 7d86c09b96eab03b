"""Static analysis of Stan programs: symbols, signatures, dependencies, target contributions.

What it computes
----------------
:func:`analyse` returns an :class:`Analysis` of a parsed :class:`~pemc_stan.stan.ast.Program`:

* a :class:`~pemc_stan.stan.symbols.SymbolTable` (built by
  :mod:`pemc_stan.stan.symbols`): every variable declared in a program block (its
  block, declared type, size expressions and constraint) and every local
  variable (model/transformed-parameters/generated-quantities locals, function
  arguments and function locals, loop variables) with its scope, and the
  :class:`~pemc_stan.stan.symbols.FunctionSignature` of each user function, with its
  suffix kind (``lpdf``, ``lpmf``, ``lcdf``, ``lccdf``, ``rng``, ``lp`` or None);
* :func:`Analysis.expr_deps`-style :class:`Dependencies` of the statements that
  add to the target, computed transitively through local variables (a local
  depends on everything assigned to it anywhere in its scope: the analysis is
  flow-insensitive and ignores control dependence);
* which statements add to the target (``~``, ``target +=`` and calls of user
  ``_lp`` functions that, transitively, add to the target), and the
  classification of each such contribution as prior or likelihood.

Classification rule
-------------------
A target contribution is **likelihood** when its *variate* does not depend on
parameters, i.e. depends only on data, transformed data and constants:

* ``y ~ dist(...)``: the variate is ``y``;
* ``target += f_lpdf(y | ...)`` (also ``_lpmf``, ``_lupdf``, ``_lupmf``, with
  or without the conditional bar): the variate is the first argument; for a
  sum ``target += a_lpdf(y | ...) + b_lpmf(z | ...)`` every term must be such a
  call with a data-only variate;
* a call of a user ``_lp`` function: likelihood when every contribution inside
  it (transitively, with the call's argument dependencies substituted for the
  function's arguments) is likelihood.

Everything else is **prior**: a variate that depends on a parameter or a
transformed parameter (or on ``target()``), and ``target += expr`` with no
identifiable variate (e.g. ``target += log_sum_exp(...)``).

The user overrides the rule in standard Stan: every contribution inside
``profile("likelihood") { ... }`` is likelihood and every contribution inside
``profile("prior") { ... }`` is prior (the innermost such profile wins; other
profile names do not matter).

Reserved prefix
---------------
Generated identifiers all start with ``pemc_``; :func:`check_reserved_prefix`
rejects programs that already use it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from pemc_stan.errors import ReservedPrefixError
from pemc_stan.stan import ast
from pemc_stan.stan.symbols import PARAMETER_BLOCKS, build_symbol_table, suffix_kind

logger = logging.getLogger(__name__)

__all__ = ["RESERVED_PREFIX",
    "reserved_identifiers",
    "Dependencies",
    "Contribution",
    "Analysis",
    "analyse",
    "check_reserved_prefix",
    "density_variate"]

#: Prefix of every identifier pemc-stan generates; user programs may not use it.
RESERVED_PREFIX = "pemc_"

_DENSITY_SUFFIXES = ("_lpdf", "_lpmf", "_lupdf", "_lupmf")


# --------------------------------------------------------------------------- #
# Reserved prefix
# --------------------------------------------------------------------------- #


def _identifiers(program: ast.Program) -> Iterator[tuple[str, str, ast.Node]]:
    for node in ast.walk(program):
        if isinstance(node, ast.Variable):
            yield node.name, "variable", node
        elif isinstance(node, ast.Call):
            yield node.name, "function", node
        elif isinstance(node, ast.Declarator):
            yield node.name, "variable", node
        elif isinstance(node, ast.Param):
            yield node.name, "function argument", node
        elif isinstance(node, ast.FunctionDef):
            yield node.name, "function", node
        elif isinstance(node, (ast.For, ast.ForEach)):
            yield node.var, "loop variable", node
        elif isinstance(node, ast.Tilde):
            yield node.distribution, "distribution", node


def reserved_identifiers(program: ast.Program) -> frozenset[str]:
    """Every identifier of ``program`` that starts with the reserved prefix ``pemc_``.

    Raises
    ------
    Nothing.
    """
    return frozenset(n for n, _, _ in _identifiers(program) if n.startswith(RESERVED_PREFIX))


def check_reserved_prefix(program: ast.Program, filename: str = "<string>") -> None:
    """Reject programs with an identifier starting with ``pemc_`` (except those pemc-stan
    wrote itself, ``program.generated``).

    Parameters
    ----------
    program
        Parsed program.
    filename
        Name of the program in the message.

    Returns
    -------
    None

    Raises
    ------
    ReservedPrefixError
        For the first offending identifier, naming it with its line and column.
    """
    for name, what, node in _identifiers(program):
        if name.startswith(RESERVED_PREFIX) and name not in program.generated:
            raise ReservedPrefixError(
                f"{filename}, line {node.line}, column {node.column}: {what} name '{name}' "
                f"uses the prefix '{RESERVED_PREFIX}', which pemc-stan reserves for the "
                "identifiers it generates; please rename it.",
                filename, node.line, node.column, construct=name,
            )


# --------------------------------------------------------------------------- #
# Dependencies
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Dependencies:
    """What an expression or statement depends on.

    Attributes
    ----------
    variables
        Global variables it depends on, transitively through locals, as
        ``(block, name)`` pairs; function arguments appear as
        ``("argument", name)`` while a function body is analysed on its own.
    locals
        Local variables it reads directly.
    target
        True when it reads ``target()``.
    """

    variables: frozenset[tuple[str, str]] = frozenset()
    locals: frozenset[str] = frozenset()
    target: bool = False

    def __or__(self, other: Dependencies) -> Dependencies:
        return Dependencies(self.variables | other.variables, self.locals | other.locals,
                            self.target or other.target)

    @property
    def blocks(self) -> frozenset[str]:
        """Blocks of the global variables depended on."""
        return frozenset(b for b, _ in self.variables)

    @property
    def names(self) -> frozenset[str]:
        """Names of the global variables depended on."""
        return frozenset(n for _, n in self.variables)

    @property
    def on_parameters(self) -> bool:
        """True when it depends on a parameter, transformed parameter or ``target()``."""
        return self.target or bool(self.blocks & PARAMETER_BLOCKS)

    @property
    def data_only(self) -> bool:
        """True when it depends on nothing but data, transformed data and constants."""
        return not self.on_parameters


_NO_DEPS = Dependencies()


@dataclass(frozen=True)
class Contribution:
    """One statement (or ``_lp`` call) that adds to the target.

    Attributes
    ----------
    node
        The :class:`~pemc_stan.stan.ast.Tilde`, :class:`~pemc_stan.stan.ast.TargetIncrement`
        or :class:`~pemc_stan.stan.ast.Call` (of a user ``_lp`` function).
    kind
        ``"prior"`` or ``"likelihood"``.
    reason
        Why: ``"variate depends on data only"``, ``"variate depends on
        parameters"``, ``"no identifiable variate"``, ``"profile override"``, ...
    block
        Where it is (``"model"``, ``"transformed parameters"``).
    variate
        The variate expression, if identifiable.
    """

    node: ast.Node
    kind: str
    reason: str
    block: str
    variate: ast.Expr | None = None

    @property
    def line(self) -> int:
        """Line of the contribution."""
        return self.node.line


def density_variate(expr: ast.Expr) -> ast.Expr | None:
    """The variate of a ``*_lpdf/_lpmf/_lupdf/_lupmf`` call, None for other expressions.

    Raises
    ------
    Nothing.
    """
    if isinstance(expr, ast.Call) and expr.args and expr.name.endswith(_DENSITY_SUFFIXES):
        return expr.args[0]
    return None


def _sum_terms(expr: ast.Expr) -> list[ast.Expr]:
    if isinstance(expr, ast.BinaryOp) and expr.op == "+":
        return _sum_terms(expr.left) + _sum_terms(expr.right)
    return [expr]


class _Local:
    __slots__ = ("name", "deps")

    def __init__(self, name: str) -> None:
        self.name = name
        self.deps: Dependencies = _NO_DEPS


class _BodyAnalyser:
    """Flow-insensitive, scope-aware dependency analysis of one statement list."""

    def __init__(
        self, owner: Analysis, block: str, arguments: Mapping[str, Dependencies],
        top_level_globals: bool,
    ) -> None:
        self.owner = owner
        self.block = block
        self.arguments = dict(arguments)
        self.top_level_globals = top_level_globals
        self.locals: dict[int, _Local] = {}
        self.changed = False
        self.contributions: list[Contribution] = []
        self.stmt_deps: dict[int, Dependencies] = {}
        self.recording = False

    # scopes ------------------------------------------------------------- #
    def _local(self, key: int, name: str) -> _Local:
        local = self.locals.get(key)
        if local is None:
            local = self.locals[key] = _Local(name)
        return local

    def _resolve(self, name: str, scopes: list[dict[str, _Local]]) -> Dependencies:
        for scope in reversed(scopes):
            if name in scope:
                local = scope[name]
                return Dependencies(local.deps.variables, frozenset({name}) | local.deps.locals,
                                    local.deps.target)
        if name in self.arguments:
            return self.arguments[name]
        symbol = self.owner.table.globals.get(name)
        if symbol is not None:
            return Dependencies(frozenset({(symbol.block, name)}))
        return _NO_DEPS  # function names passed to higher-order functions

    def expr(self, expr: ast.Node | None, scopes: list[dict[str, _Local]]) -> Dependencies:
        """Dependencies of an expression in the current scopes."""
        if expr is None:
            return _NO_DEPS
        deps = _NO_DEPS
        for node in ast.walk(expr):
            if isinstance(node, ast.Variable):
                deps = deps | self._resolve(node.name, scopes)
            elif isinstance(node, ast.TargetValue):
                deps = deps | Dependencies(target=True)
        return deps

    def _assign(self, lhs: ast.Expr, deps: Dependencies, scopes: list[dict[str, _Local]]) -> None:
        if isinstance(lhs, ast.TupleLit):
            for element in lhs.elements:
                self._assign(element, deps, scopes)
            return
        root = lhs
        while isinstance(root, (ast.Indexed, ast.TupleProjection)):
            if isinstance(root, ast.Indexed):
                deps = deps | self.expr(ast.Indexed(ast.IntLit("0"), root.indices), scopes)
            root = root.value
        if not isinstance(root, ast.Variable):
            return
        for scope in reversed(scopes):
            if root.name in scope:
                local = scope[root.name]
                new = local.deps | Dependencies(deps.variables, deps.locals, deps.target)
                if new != local.deps:
                    local.deps = new
                    self.changed = True
                return

    # statements --------------------------------------------------------- #
    def run(self, stmts: tuple[ast.Stmt, ...]) -> None:
        """Iterate to a fixpoint, then record contributions."""
        for _ in range(100):
            self.changed = False
            self.stmts(stmts, [{}], None, 0)
            if not self.changed:
                break
        self.recording = True
        self.stmts(stmts, [{}], None, 0)

    def stmts(self, stmts: Iterable[ast.Stmt], scopes: list[dict[str, _Local]],
              override: str | None, depth: int) -> None:
        for stmt in stmts:
            self.stmt(stmt, scopes, override, depth)

    def _nested(self, body: ast.Stmt | tuple[ast.Stmt, ...], scopes: list[dict[str, _Local]],
                override: str | None, depth: int, extra: dict[str, _Local] | None = None) -> None:
        scopes.append(dict(extra or {}))
        self.stmts(body if isinstance(body, tuple) else (body,), scopes, override, depth + 1)
        scopes.pop()

    def stmt(self, stmt: ast.Stmt, scopes: list[dict[str, _Local]], override: str | None,
             depth: int) -> None:
        self._lp_calls_in(stmt, scopes, override)
        if isinstance(stmt, ast.VarDecl):
            for d in stmt.declarators:
                if self.top_level_globals and depth == 0:
                    continue
                local = self._local(id(d), d.name)
                scopes[-1][d.name] = local
                if d.init is not None:
                    self._assign(ast.Variable(d.name), self.expr(d.init, scopes), scopes)
        elif isinstance(stmt, ast.Assign):
            value = self.expr(stmt.value, scopes)
            if stmt.op != "=":
                value = value | self.expr(stmt.target, scopes)
            self._assign(stmt.target, value, scopes)
        elif isinstance(stmt, ast.Tilde):
            self._contribution(stmt, stmt.arg, scopes, override)
        elif isinstance(stmt, ast.TargetIncrement):
            terms = _sum_terms(stmt.value)
            variates = [density_variate(t) for t in terms]
            if all(v is not None for v in variates):
                if len(variates) == 1:
                    self._contribution(stmt, variates[0], scopes, override)
                else:
                    deps = _NO_DEPS
                    for v in variates:
                        deps = deps | self.expr(v, scopes)
                    self._record(stmt, deps, override, None)
            else:
                self._record(stmt, None, override, None)
        elif isinstance(stmt, ast.If):
            self._nested(stmt.then, scopes, override, depth)
            if stmt.otherwise is not None:
                self._nested(stmt.otherwise, scopes, override, depth)
        elif isinstance(stmt, ast.While):
            self._nested(stmt.body, scopes, override, depth)
        elif isinstance(stmt, ast.For):
            var = self._local(id(stmt), stmt.var)
            new = self.expr(stmt.lower, scopes) | self.expr(stmt.upper, scopes)
            if new != var.deps:
                var.deps, self.changed = new, True
            self._nested(stmt.body, scopes, override, depth, {stmt.var: var})
        elif isinstance(stmt, ast.ForEach):
            var = self._local(id(stmt), stmt.var)
            new = self.expr(stmt.iterable, scopes)
            if new != var.deps:
                var.deps, self.changed = new, True
            self._nested(stmt.body, scopes, override, depth, {stmt.var: var})
        elif isinstance(stmt, ast.Block):
            self._nested(stmt.stmts, scopes, override, depth)
        elif isinstance(stmt, ast.Profile):
            inner = stmt.name if stmt.name in ("prior", "likelihood") else override
            self._nested(stmt.stmts, scopes, inner, depth)
        if self.recording:
            self.stmt_deps[id(stmt)] = self._own_deps(stmt, scopes)

    def expr_all(self, exprs: Iterable[ast.Node], scopes: list[dict[str, _Local]]) -> Dependencies:
        deps = _NO_DEPS
        for e in exprs:
            deps = deps | self.expr(e, scopes)
        return deps

    def _own_deps(self, stmt: ast.Stmt, scopes: list[dict[str, _Local]]) -> Dependencies:
        exprs: list[ast.Node] = []
        for child in ast.children(stmt):
            if not isinstance(child, ast.Stmt):
                exprs.append(child)
        return self.expr_all(exprs, scopes)

    def _lp_calls_in(self, stmt: ast.Stmt, scopes: list[dict[str, _Local]],
                     override: str | None) -> None:
        if not self.recording:
            return
        for child in ast.children(stmt):
            if isinstance(child, ast.Stmt):
                continue
            for node in ast.walk(child):
                if isinstance(node, ast.Call) and self.owner.is_lp_function(node.name):
                    self._lp_call(node, scopes, override)

    def _lp_call(self, call: ast.Call, scopes: list[dict[str, _Local]],
                 override: str | None) -> None:
        if override is not None:
            self.contributions.append(Contribution(call, override, "profile override",
                                                   self.block))
            return
        args = tuple(self.expr(a, scopes) for a in call.args)
        kind = self.owner.lp_call_kind(call.name, args)
        if kind is None:
            return  # adds nothing to the target
        reason = ("every contribution inside is likelihood" if kind == "likelihood"
                  else "a contribution inside is prior")
        self.contributions.append(Contribution(call, kind, reason, self.block))

    def _contribution(self, stmt: ast.Stmt, variate: ast.Expr | None,
                      scopes: list[dict[str, _Local]], override: str | None) -> None:
        deps = self.expr(variate, scopes) if variate is not None else None
        self._record(stmt, deps, override, variate)

    def _record(self, stmt: ast.Stmt, deps: Dependencies | None, override: str | None,
                variate: ast.Expr | None) -> None:
        if not self.recording:
            return
        if override is not None:
            kind, reason = override, "profile override"
        elif deps is None:
            kind, reason = "prior", "no identifiable variate"
        elif deps.data_only:
            kind, reason = "likelihood", "variate depends on data only"
        else:
            kind, reason = "prior", "variate depends on parameters"
        self.contributions.append(Contribution(stmt, kind, reason, self.block, variate))


class Analysis:
    """Analysis of a whole program (see the module docstring).

    Attributes
    ----------
    program
        The analysed program.
    table
        Its :class:`~pemc_stan.stan.symbols.SymbolTable`.
    contributions
        Target contributions of the transformed parameters and model blocks,
        in source order.
    """

    def __init__(self, program: ast.Program) -> None:
        self.program = program
        self.table = build_symbol_table(program)
        self._bodies: dict[str, ast.FunctionDef] = {}
        if program.functions is not None:
            for fn in program.functions.functions:
                if fn.body is not None and fn.name not in self._bodies:
                    self._bodies[fn.name] = fn
        self._lp_memo: dict[tuple[str, tuple[Dependencies, ...]], str | None] = {}
        self._in_progress: set[tuple[str, tuple[Dependencies, ...]]] = set()
        self._adds_memo: dict[str, bool] = {}
        self.contributions: list[Contribution] = []
        self._stmt_deps: dict[int, Dependencies] = {}
        self._locals: dict[str, dict[str, Dependencies]] = {}
        for attr, block in (("transformed_parameters", "transformed parameters"),
                            ("model", "model")):
            pb = getattr(program, attr)
            if pb is None:
                continue
            analyser = _BodyAnalyser(self, block, {}, top_level_globals=(attr != "model"))
            analyser.run(pb.stmts)
            self.contributions.extend(analyser.contributions)
            self._stmt_deps.update(analyser.stmt_deps)
            self._locals[block] = {loc.name: loc.deps for loc in analyser.locals.values()}
        self._kinds = {id(c.node): c.kind for c in self.contributions}

    # functions ---------------------------------------------------------- #
    def is_lp_function(self, name: str) -> bool:
        """True for user functions with the ``_lp`` suffix.

        Raises
        ------
        Nothing.
        """
        return name in self.table.functions and suffix_kind(name) == "lp"

    def function_adds_to_target(self, name: str) -> bool:
        """True when the user ``_lp`` function ``name`` (transitively) adds to the target.

        Raises
        ------
        Nothing.
        """
        if name in self._adds_memo:
            return self._adds_memo[name]
        self._adds_memo[name] = False  # recursion guard
        fn = self._bodies.get(name)
        result = fn is not None and fn.body is not None and self.adds_to_target(fn.body)
        self._adds_memo[name] = result
        return result

    def adds_to_target(self, node: ast.Node) -> bool:
        """True when a statement (or expression) adds to the target, also through ``_lp`` calls.

        Raises
        ------
        Nothing.
        """
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Tilde, ast.TargetIncrement)):
                return True
            if isinstance(sub, ast.Call) and self.is_lp_function(sub.name) and \
                    self.function_adds_to_target(sub.name):
                return True
        return False

    def reads_target(self, node: ast.Node) -> bool:
        """True when ``target()`` is read in ``node`` or in an ``_lp`` function it calls.

        Raises
        ------
        Nothing.
        """
        seen: set[str] = set()
        stack: list[ast.Node] = [node]
        while stack:
            current = stack.pop()
            for sub in ast.walk(current):
                if isinstance(sub, ast.TargetValue):
                    return True
                if isinstance(sub, ast.Call) and self.is_lp_function(sub.name) and \
                        sub.name not in seen:
                    seen.add(sub.name)
                    fn = self._bodies.get(sub.name)
                    if fn is not None and fn.body is not None:
                        stack.append(fn.body)
        return False

    def lp_call_kind(self, name: str, args: tuple[Dependencies, ...]) -> str | None:
        """Classification of a call of the user ``_lp`` function ``name``.

        Parameters
        ----------
        name
            The function.
        args
            Dependencies of the call's arguments.

        Returns
        -------
        str or None
            ``"likelihood"`` when every contribution inside is likelihood,
            ``"prior"`` otherwise, None when the call adds nothing.

        Raises
        ------
        Nothing.
        """
        key = (name, args)
        if key in self._lp_memo:
            return self._lp_memo[key]
        if key in self._in_progress:
            return None  # recursive call: neutral
        fn = self._bodies.get(name)
        if fn is None or fn.body is None:
            return None
        self._in_progress.add(key)
        # Overloads share a name, so the arity may differ: pair what is there.
        arguments = {p.name: a for p, a in zip(fn.params, args, strict=False)}
        analyser = _BodyAnalyser(self, f"function {name}", arguments, top_level_globals=False)
        body = fn.body.stmts if isinstance(fn.body, ast.Block) else (fn.body,)
        analyser.run(body)
        self._in_progress.discard(key)
        kinds = {c.kind for c in analyser.contributions}
        result = None if not kinds else ("likelihood" if kinds == {"likelihood"} else "prior")
        self._lp_memo[key] = result
        return result

    # results ------------------------------------------------------------ #
    def kind_of(self, node: ast.Node) -> str:
        """Classification (``"prior"``/``"likelihood"``) of a contribution node.

        Raises
        ------
        KeyError
            If ``node`` is not a contribution of the transformed parameters or
            model block (identity, not equality, is used).
        """
        return self._kinds[id(node)]

    def contribution_of(self, node: ast.Node) -> Contribution | None:
        """The :class:`Contribution` for a node, None if it is not one.

        Raises
        ------
        Nothing.
        """
        for c in self.contributions:
            if c.node is node:
                return c
        return None

    def stmt_deps(self, stmt: ast.Stmt) -> Dependencies:
        """Dependencies of a statement's own expressions (not nested statements).

        Only statements of the transformed parameters and model blocks are known.

        Raises
        ------
        KeyError
            For other statements.
        """
        return self._stmt_deps[id(stmt)]

    def local_deps(self, block: str) -> dict[str, Dependencies]:
        """Transitive dependencies of the locals of ``"model"`` or ``"transformed parameters"``.

        Locals declared several times (in sibling scopes) appear once, last wins.

        Raises
        ------
        Nothing.
        """
        return dict(self._locals.get(block, {}))

    def expr_deps(self, expr: ast.Expr) -> Dependencies:
        """Dependencies of an expression over global variables only (no locals in scope).

        Raises
        ------
        Nothing.
        """
        return _BodyAnalyser(self, "", {}, False).expr(expr, [{}])

    def prior_contributions(self) -> list[Contribution]:
        """Contributions classified as prior.

        Raises
        ------
        Nothing.
        """
        return [c for c in self.contributions if c.kind == "prior"]

    def likelihood_contributions(self) -> list[Contribution]:
        """Contributions classified as likelihood.

        Raises
        ------
        Nothing.
        """
        return [c for c in self.contributions if c.kind == "likelihood"]


def analyse(program: ast.Program) -> Analysis:
    """Analyse a program (symbols, signatures, dependencies, contributions).

    Parameters
    ----------
    program
        Parsed program, accepted by stanc.

    Returns
    -------
    Analysis

    Raises
    ------
    Nothing for programs stanc accepts.
    """
    return Analysis(program)


#: Priors whose density decays polynomially: ``p(x)^beta`` is not integrable
#: for small ``beta`` (e.g. Cauchy: only for ``beta > 1/2``).
HEAVY_TAILED_DISTRIBUTIONS = frozenset({
    "cauchy", "student_t", "pareto", "pareto_type_2", "inv_gamma", "inv_chi_square",
    "scaled_inv_chi_square", "frechet", "loglogistic",
})


def heavy_tailed_priors(program: ast.Program, analysis: Analysis | None = None
                        ) -> list[tuple[str, int]]:
    """Heavy-tailed prior statements of a program: ``(distribution, line)`` pairs.

    Raises
    ------
    Nothing (programs the analysis cannot handle yield an empty list).
    """
    try:
        contributions = (analysis or analyse(program)).prior_contributions()
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


#: Stan's comparison operators (their value is 0 or 1 whatever their operands' change).
COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!="})


def compared_only_parameters(program: ast.Program) -> list[tuple[str, int]]:
    """Parameters that the transformed parameters and model blocks use only as operands
    of comparisons (``t < s ? mu1 : mu2``), apart from their own ``~`` prior: the
    density is piecewise constant along them, so HMC has no gradient there.
    ``(name, line of the first comparison)`` pairs, in name order.

    Raises
    ------
    Nothing.
    """
    if program.parameters is None:
        return []
    names = {n for st in program.parameters.stmts if isinstance(st, ast.VarDecl)
             for n in st.names}
    compared: dict[str, int] = {}
    elsewhere: set[str] = set()

    def visit(node: ast.Node, in_comparison: bool) -> None:
        if isinstance(node, ast.Tilde) and isinstance(node.arg, ast.Variable) \
                and node.arg.name in names:  # the parameter's own prior
            children = [*node.args, *([node.truncation] if node.truncation else [])]
        elif isinstance(node, ast.Variable):
            if node.name in names:
                if in_comparison:
                    compared.setdefault(node.name, node.line)
                else:
                    elsewhere.add(node.name)
            return
        else:
            children = list(ast.children(node))
        inner = in_comparison or (isinstance(node, ast.BinaryOp) and node.op in COMPARISONS)
        for child in children:
            visit(child, inner)

    for block in (program.transformed_parameters, program.model):
        for st in () if block is None else block.stmts:
            visit(st, False)
    return sorted((n, line) for n, line in compared.items() if n not in elsewhere)
