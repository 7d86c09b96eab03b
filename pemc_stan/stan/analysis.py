"""Static analysis of Stan programs: symbols, signatures, dependencies, target contributions.

What it computes
----------------
:func:`analyse` returns an :class:`Analysis` of a parsed :class:`~pemc_stan.stan.ast.Program`:

* a :class:`SymbolTable`: every variable declared in a program block (its
  block, declared type, size expressions and constraint) and every local
  variable (model/transformed-parameters/generated-quantities locals, function
  arguments and function locals, loop variables) with its scope;
* the :class:`FunctionSignature` of each user function, with its suffix kind
  (``lpdf``, ``lpmf``, ``lcdf``, ``lccdf``, ``rng``, ``lp`` or None);
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
from dataclasses import dataclass, field

from pemc_stan.errors import ReservedPrefixError, UnsupportedConstructError
from pemc_stan.stan import ast

logger = logging.getLogger(__name__)

__all__ = [
    "RESERVED_PREFIX",
    "ReservedPrefixError",
    "UnsupportedConstructError",
    "Symbol",
    "FunctionSignature",
    "SymbolTable",
    "CONTAINER_BUILDERS",
    "dims_of",
    "is_scalar_expr",
    "Dependencies",
    "Contribution",
    "Analysis",
    "analyse",
    "build_symbol_table",
    "check_reserved_prefix",
    "suffix_kind",
    "density_variate",
    "DISCRETE_DISTRIBUTIONS",
    "DATA_BLOCKS",
    "PARAMETER_BLOCKS",
]

#: Prefix of every identifier pemc-stan generates; user programs may not use it.
RESERVED_PREFIX = "pemc_"

#: Blocks whose variables count as data.
DATA_BLOCKS = frozenset({"data", "transformed data"})
#: Blocks whose variables count as parameters.
PARAMETER_BLOCKS = frozenset({"parameters", "transformed parameters"})

#: Built-in distributions of stanc 2.35 with a ``_lpmf`` (discrete variate)
#: rather than a ``_lpdf`` (from ``stanc --dump-stan-math-signatures``).
DISCRETE_DISTRIBUTIONS = frozenset(
    {
        "bernoulli", "bernoulli_logit", "bernoulli_logit_glm", "beta_binomial", "binomial",
        "binomial_logit", "binomial_logit_glm", "categorical", "categorical_logit",
        "categorical_logit_glm", "dirichlet_multinomial", "discrete_range", "hypergeometric",
        "multinomial", "multinomial_logit", "neg_binomial", "neg_binomial_2",
        "neg_binomial_2_log", "neg_binomial_2_log_glm", "ordered_logistic",
        "ordered_logistic_glm", "ordered_probit", "poisson", "poisson_log", "poisson_log_glm",
    }
)

_SUFFIXES = ("_lpdf", "_lpmf", "_lupdf", "_lupmf", "_lcdf", "_lccdf", "_rng", "_lp")
_DENSITY_SUFFIXES = ("_lpdf", "_lpmf", "_lupdf", "_lupmf")



def suffix_kind(name: str) -> str | None:
    """Return the suffix kind of a function name.

    Parameters
    ----------
    name
        Function name.

    Returns
    -------
    str or None
        ``"lpdf"``, ``"lpmf"``, ``"lupdf"``, ``"lupmf"``, ``"lcdf"``,
        ``"lccdf"``, ``"rng"``, ``"lp"`` or None.

    Raises
    ------
    Nothing.
    """
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return suffix[1:]
    return None


# --------------------------------------------------------------------------- #
# Symbols
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Symbol:
    """A declared variable.

    Attributes
    ----------
    name
        Identifier.
    block
        Program block it was declared in (``"data"``, ``"transformed data"``,
        ``"parameters"``, ``"transformed parameters"``, ``"model"``,
        ``"generated quantities"``) or ``"function <name>"``.
    type
        Declared type (sized, with constraints) or, for function arguments,
        the unsized argument type; None for loop variables.
    scope
        ``"global"`` for block-level variables of the data, transformed data,
        parameters, transformed parameters and generated quantities blocks;
        otherwise ``"local"``, ``"argument"`` or ``"loop"``.
    depth
        Nesting depth of the enclosing braces (0 at block level).
    line, column
        Position of the declaration.
    """

    name: str
    block: str
    type: ast.Type | None
    scope: str
    depth: int = 0
    line: int = 0
    column: int = 0

    @property
    def is_global(self) -> bool:
        """True for program-block variables visible in later blocks."""
        return self.scope == "global"

    @property
    def sizes(self) -> tuple[ast.Expr, ...]:
        """Size expressions: array dimensions, then the element type's sizes."""
        return type_sizes(self.type) if self.type is not None else ()

    @property
    def constraint(self) -> ast.Bounds | ast.Affine | None:
        """The bounds or offset/multiplier of the (innermost) basic type, if any."""
        base = base_type(self.type) if self.type is not None else None
        return base.constraint if isinstance(base, ast.BasicType) else None

    @property
    def base_type_name(self) -> str | None:
        """Name of the innermost basic type (``real``, ``simplex``, ...); None for tuples."""
        base = base_type(self.type) if self.type is not None else None
        return base.name if isinstance(base, ast.BasicType) else None


def base_type(type_: ast.Type) -> ast.Type:
    """Strip array levels of a (sized or unsized) type.

    Raises
    ------
    Nothing.
    """
    while isinstance(type_, (ast.ArrayType, ast.UnsizedArrayType)):
        type_ = type_.element
    return type_


def type_sizes(type_: ast.Type) -> tuple[ast.Expr, ...]:
    """All size expressions of a declared type (array dims first, tuples flattened).

    Raises
    ------
    Nothing.
    """
    if isinstance(type_, ast.ArrayType):
        return tuple(type_.dims) + type_sizes(type_.element)
    if isinstance(type_, ast.BasicType):
        return type_.sizes
    if isinstance(type_, ast.TupleType):
        return tuple(s for t in type_.elements for s in type_sizes(t))
    return ()


@dataclass(frozen=True)
class FunctionSignature:
    """Signature of a user function.

    Attributes
    ----------
    name
        Function name.
    return_type
        Return type (``VoidType`` for void functions).
    params
        The parameters.
    suffix
        Suffix kind (see :func:`suffix_kind`).
    defined
        True when this is a definition, False for a forward declaration.
    line
        Line of the definition.
    """

    name: str
    return_type: ast.Type
    params: tuple[ast.Param, ...]
    suffix: str | None
    defined: bool
    line: int = 0

    @property
    def is_void(self) -> bool:
        """True for void functions."""
        return isinstance(self.return_type, ast.VoidType)


@dataclass
class SymbolTable:
    """Variables and user functions of a program.

    Attributes
    ----------
    globals
        Block-level variables by name, in declaration order.
    locals
        Every other variable (locals, arguments, loop variables), in source order.
    functions
        User function signatures by name (overloads and forward declarations
        all listed).
    """

    globals: dict[str, Symbol] = field(default_factory=dict)
    locals: list[Symbol] = field(default_factory=list)
    functions: dict[str, list[FunctionSignature]] = field(default_factory=dict)

    def lookup(self, name: str) -> Symbol | None:
        """The global symbol ``name`` (None if there is none).

        Raises
        ------
        Nothing.
        """
        return self.globals.get(name)

    def block_of(self, name: str) -> str | None:
        """Block of the global variable ``name`` (None for locals/unknown).

        Raises
        ------
        Nothing.
        """
        symbol = self.globals.get(name)
        return symbol.block if symbol is not None else None

    def in_block(self, block: str) -> list[Symbol]:
        """Global symbols of one block in declaration order.

        Raises
        ------
        Nothing.
        """
        return [s for s in self.globals.values() if s.block == block]

    def locals_of(self, block: str) -> list[Symbol]:
        """Local symbols declared in a block or function (``"function foo"``).

        Raises
        ------
        Nothing.
        """
        return [s for s in self.locals if s.block == block]

    def is_user_function(self, name: str) -> bool:
        """True when ``name`` is a user-defined function.

        Raises
        ------
        Nothing.
        """
        return name in self.functions

    def definition(self, name: str) -> FunctionSignature | None:
        """The (first) defining signature of a user function.

        Raises
        ------
        Nothing.
        """
        for sig in self.functions.get(name, ()):
            if sig.defined:
                return sig
        sigs = self.functions.get(name)
        return sigs[0] if sigs else None

    def lp_functions(self) -> list[str]:
        """Names of user ``_lp`` functions, in definition order.

        Raises
        ------
        Nothing.
        """
        return [n for n, sigs in self.functions.items() if sigs and sigs[0].suffix == "lp"]


_GLOBAL_BLOCKS = ("data", "transformed data", "parameters", "transformed parameters",
                  "generated quantities")


def _collect_locals(
    stmts: Iterable[ast.Stmt], block: str, depth: int, out: list[Symbol],
    top_level_global: bool,
) -> None:
    for stmt in stmts:
        if isinstance(stmt, ast.VarDecl):
            if top_level_global and depth == 0:
                continue
            for d in stmt.declarators:
                out.append(Symbol(d.name, block, stmt.type, "local", depth, d.line or stmt.line,
                                  d.column if d.line else stmt.column))
        elif isinstance(stmt, (ast.For, ast.ForEach)):
            out.append(Symbol(stmt.var, block, None, "loop", depth + 1, stmt.line, stmt.column))
            _collect_locals((stmt.body,), block, depth + 1, out, top_level_global)
        elif isinstance(stmt, ast.Block):
            _collect_locals(stmt.stmts, block, depth + 1, out, top_level_global)
        elif isinstance(stmt, ast.Profile):
            # profile blocks open a scope too
            _collect_locals(stmt.stmts, block, depth + 1, out, top_level_global)
        elif isinstance(stmt, ast.If):
            _collect_locals((stmt.then,), block, depth + 1, out, top_level_global)
            if stmt.otherwise is not None:
                _collect_locals((stmt.otherwise,), block, depth + 1, out, top_level_global)
        elif isinstance(stmt, ast.While):
            _collect_locals((stmt.body,), block, depth + 1, out, top_level_global)


#: Name prefixes of functions that build containers from scalars.
CONTAINER_BUILDERS = ("rep_", "linspaced_", "one_hot", "zeros_", "ones_", "uniform_simplex",
                       "to_vector", "to_row_vector", "to_matrix", "to_array", "identity_matrix",
                       "diag_matrix", "append_", "head", "tail", "segment", "reverse", "sort_",
                       "cumulative_sum", "softmax", "log_softmax")


def dims_of(type_: ast.Type | None) -> int | None:
    """Total number of indexable dimensions of a declared type (None: unknown).

    Raises
    ------
    Nothing.
    """
    if type_ is None:
        return None
    if isinstance(type_, ast.ArrayType):
        inner = dims_of(type_.element)
        return None if inner is None else inner + len(type_.dims)
    if isinstance(type_, ast.BasicType):
        if type_.name in ("int", "real"):
            return 0
        if type_.name in ("vector", "row_vector", "simplex", "ordered", "positive_ordered",
                          "unit_vector", "sum_to_zero_vector"):
            return 1
        return 2
    return None


def is_scalar_expr(expr: ast.Expr, table: SymbolTable) -> bool:
    """Conservatively decide whether an expression is a scalar (False when unsure).

    Only block-level variables are known (``table``); locals count as unknown.

    Raises
    ------
    Nothing.
    """
    if isinstance(expr, ast.Variable):
        sym = table.lookup(expr.name)
        return sym is not None and dims_of(sym.type) == 0
    if isinstance(expr, ast.Indexed):
        if not isinstance(expr.value, ast.Variable):
            return False
        sym = table.lookup(expr.value.name)
        dims = dims_of(sym.type) if sym is not None else None
        singles = [i for i in expr.indices if not isinstance(i, ast.Slice)]
        return (dims is not None and len(singles) == len(expr.indices) == dims
                and all(is_scalar_expr(i, table) for i in singles))
    if isinstance(expr, ast.Call):
        if expr.name.startswith(CONTAINER_BUILDERS):
            return False
        return all(is_scalar_expr(a, table) for a in expr.args)
    if isinstance(expr, (ast.IntLit, ast.RealLit)):
        return True
    if isinstance(expr, (ast.UnaryOp, ast.BinaryOp, ast.Conditional)):
        return all(is_scalar_expr(c, table) for c in ast.children(expr)
                   if isinstance(c, ast.Expr))
    return False


def build_symbol_table(program: ast.Program) -> SymbolTable:
    """Build the symbol table of a program.

    Parameters
    ----------
    program
        Parsed program (assumed accepted by stanc).

    Returns
    -------
    SymbolTable

    Raises
    ------
    Nothing.
    """
    table = SymbolTable()
    if program.functions is not None:
        for fn in program.functions.functions:
            sig = FunctionSignature(fn.name, fn.return_type, fn.params, suffix_kind(fn.name),
                                    fn.body is not None, fn.line)
            table.functions.setdefault(fn.name, []).append(sig)
            if fn.body is None:
                continue
            block = f"function {fn.name}"
            for p in fn.params:
                table.locals.append(Symbol(p.name, block, p.type, "argument", 0, p.line, p.column))
            body = fn.body.stmts if isinstance(fn.body, ast.Block) else (fn.body,)
            _collect_locals(body, block, 0, table.locals, top_level_global=False)
    for attr, name in ast.BLOCK_NAMES[1:]:
        block = getattr(program, attr)
        if block is None:
            continue
        is_global = name in _GLOBAL_BLOCKS
        if is_global:
            for stmt in block.stmts:
                if isinstance(stmt, ast.VarDecl):
                    for d in stmt.declarators:
                        table.globals[d.name] = Symbol(
                            d.name, name, stmt.type, "global", 0, d.line or stmt.line,
                            d.column if d.line else stmt.column,
                        )
        _collect_locals(block.stmts, name, 0, table.locals, top_level_global=is_global)
    return table


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


def check_reserved_prefix(program: ast.Program, filename: str = "<string>") -> None:
    """Reject programs with an identifier starting with ``pemc_``.

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
        if name.startswith(RESERVED_PREFIX):
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
        Its :class:`SymbolTable`.
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
