"""The symbol table of a Stan program: every declared variable, every function signature.

:func:`build_symbol_table` records each variable declared in a program block (its block,
declared type, size expressions and constraint), each local variable (block locals,
function arguments and locals, loop variables) with its scope, and the
:class:`FunctionSignature` of each user function with its suffix kind.  It is the part
of the static analysis that needs no dependencies; :mod:`pemc_stan.stan.analysis` builds
the dependencies and the prior/likelihood classification on top of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pemc_stan.stan import ast
from pemc_stan.stan.vocabulary import BLOCK_NAMES

__all__ = [
    "Symbol",
    "FunctionSignature",
    "SymbolTable",
    "CONTAINER_BUILDERS",
    "base_type",
    "build_symbol_table",
    "dims_of",
    "is_scalar_expr",
    "suffix_kind",
    "type_sizes",
    "DISCRETE_DISTRIBUTIONS",
    "DATA_BLOCKS",
    "PARAMETER_BLOCKS",
]

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
    for attr, name in BLOCK_NAMES[1:]:
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
