"""Rewrite a Stan program's model block into log-density functions (with all constants).

:func:`log_density_functions` turns the transformed parameters and model blocks
of a program into three Stan functions::

    real pemc_log_density(<parameters>, data <data used>)
    real pemc_log_prior(<parameters>, data <data used>)
    real pemc_log_likelihood(<parameters>, data <data used>)

taking every parameter (constrained value, unsized type, declaration order)
and, as ``data`` arguments, the data and transformed-data variables the body
uses (declaration order).  Prior and likelihood are the split of
:mod:`pemc_stan.stan.analysis`; ``pemc_log_prior + pemc_log_likelihood ==
pemc_log_density`` at every point.  The density is on the constrained space
(no Jacobian) and keeps every normalising constant.

The rewrite
-----------
* Transformed-parameter declarations become local declarations (constraints
  stripped, constrained types replaced by their underlying vector/matrix
  type); their statements follow; then each declared constraint is checked
  and a violation returns ``negative_infinity()`` (what Stan's rejection of
  the draw amounts to for a density); the types and the checks are built by
  :mod:`pemc_stan.stan.declared_types`.
* ``y ~ dist(args)`` becomes ``pemc_lp += dist_lpdf(y | args)`` (``_lpmf`` for
  the discrete built-ins of :data:`~pemc_stan.stan.symbols.DISCRETE_DISTRIBUTIONS`
  and for user distributions defined with ``_lpmf``).
* ``_lupdf``/``_lupmf`` calls become ``_lpdf``/``_lpmf`` calls;
  ``target += e`` becomes ``pemc_lp += e`` and ``target()`` becomes ``pemc_lp``.
* Truncation is expanded exactly as stanc 2.35 generates it
  (``stanc --print-cpp``)::

      y ~ D(p) T[L, U];   pemc_lp += D_lpdf(y | p);
                          if (y < L) pemc_lp += negative_infinity();
                          else if (y > U) pemc_lp += negative_infinity();
                          else pemc_lp += -log_diff_exp(D_lcdf(U | p), D_lcdf(L | p));
      y ~ D(p) T[L, ];    ... if (y < L) -inf else pemc_lp += -D_lccdf(L | p);
      y ~ D(p) T[, U];    ... if (y > U) -inf else pemc_lp += -D_lcdf(U | p);

  with ``L - 1`` in place of ``L`` inside the cdf/ccdf for discrete
  distributions (``_lpmf``).  A container variate (``vector y ~ D(p) T[L, ]``)
  is checked with ``min(y)`` / ``max(y)`` and its normaliser multiplied by
  ``size(y)``, as stanc does when the arguments ``p`` are scalars; container
  arguments are rejected (write the statement in a loop).
* A user ``void foo_lp(...)`` function gets a counterpart
  ``real pemc_foo_lpacc(..., real pemc_target)`` returning the increment it
  adds to the target (``pemc_target`` is the target value at the call, so
  ``target()`` inside reads ``pemc_target + pemc_lp``); a non-void
  ``T foo_lp(...)`` gets ``tuple(T, real) pemc_foo_lpacc(...)`` returning
  (value, increment).  A call statement ``foo_lp(x);`` becomes
  ``pemc_lp += pemc_foo_lpacc(x, pemc_lp);``; a call inside an expression is
  hoisted into ``tuple(T, real) pemc_lpcall_<n> = ...;`` (scalar ``T`` only)
  followed by ``pemc_lp += pemc_lpcall_<n>.2;`` and the call is replaced by
  ``pemc_lpcall_<n>.1``.
* ``print``, ``reject`` and ``fatal_error`` are kept; profile blocks are kept.
  Stan 2.35 has no ``jacobian +=`` statement, so there is nothing to drop.

In the prior (likelihood) function the contributions of the other kind are
dropped; when ``target()`` is read somewhere, both parts are accumulated
instead (``pemc_lp_prior``, ``pemc_lp_likelihood``) so ``target()`` keeps its
meaning, and only the requested part is returned.

Unsupported (raises :class:`~pemc_stan.errors.UnsupportedConstructError`):
calls of a non-void ``_lp`` function with a non-scalar return type inside an
expression, and ``_lp`` calls in ``while`` conditions or under ``?:``/``&&``/``||``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pemc_stan.errors import UnsupportedConstructError
from pemc_stan.stan import ast
from pemc_stan.stan.analysis import Analysis, analyse, check_reserved_prefix
from pemc_stan.stan.declared_types import (
    _call,
    _neg_inf,
    _var,
    constraint_checks,
    local_type,
    unsized_type,
)
from pemc_stan.stan.symbols import DATA_BLOCKS, DISCRETE_DISTRIBUTIONS, dims_of, is_scalar_expr

logger = logging.getLogger(__name__)

__all__ = ["LogDensityFunctions",
    "log_density_functions",
    "add_log_density_functions",
    "DENSITY_FUNCTION",
    "PRIOR_FUNCTION",
    "LIKELIHOOD_FUNCTION"]

DENSITY_FUNCTION = "pemc_log_density"
PRIOR_FUNCTION = "pemc_log_prior"
LIKELIHOOD_FUNCTION = "pemc_log_likelihood"

_ACC = "pemc_lp"
_TARGET_ARG = "pemc_target"


def _unsupported(what: str, node: ast.Node) -> UnsupportedConstructError:
    return UnsupportedConstructError(
        f"line {node.line}, column {node.column}: {what} is not supported by pemc-stan's "
        "log-density rewrite", "<string>", node.line, node.column, construct=what,
    )


# --------------------------------------------------------------------------- #
# Statement rewriting
# --------------------------------------------------------------------------- #


@dataclass
class _Mode:
    """How contributions are accumulated in one generated function."""

    dest: Callable[[str], str | None]  # contribution kind -> accumulator (None: drop)
    target: ast.Expr  # what target() becomes
    classify: bool  # look up the analysis (False inside _lpacc functions: keep all)


class _Rewriter:
    def __init__(self, analysis: Analysis) -> None:
        self.analysis = analysis
        self.table = analysis.table
        self.hoist_counter = 0

    # names -------------------------------------------------------------- #
    def density_name(self, dist: str, node: ast.Node) -> str:
        """``dist_lpdf`` or ``dist_lpmf`` for a ``~`` statement."""
        if f"{dist}_lpdf" in self.table.functions:
            return f"{dist}_lpdf"
        if f"{dist}_lpmf" in self.table.functions:
            return f"{dist}_lpmf"
        if dist in DISCRETE_DISTRIBUTIONS:
            return f"{dist}_lpmf"
        return f"{dist}_lpdf"

    def _kind(self, node: ast.Node, mode: _Mode) -> str:
        if not mode.classify:
            return "prior"
        try:
            return self.analysis.kind_of(node)
        except KeyError:
            logger.debug("unclassified contribution at line %d: prior", node.line)
            return "prior"

    # expressions -------------------------------------------------------- #
    def expr(self, e: ast.Expr, mode: _Mode, pre: list[ast.Stmt]) -> ast.Expr:
        """Rewrite an expression; hoisted ``_lp`` calls are appended to ``pre``."""

        def check_short_circuit(node: ast.Node) -> None:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Conditional) or (
                        isinstance(sub, ast.BinaryOp) and sub.op in ("&&", "||")):
                    for inner in ast.walk(sub):
                        if isinstance(inner, ast.Call) and self.analysis.is_lp_function(
                                inner.name):
                            raise _unsupported(
                                f"a call of the _lp function {inner.name} under ?:, && or ||",
                                inner)

        check_short_circuit(e)

        def fn(node: ast.Node, original: ast.Node) -> ast.Node:
            if isinstance(node, ast.TargetValue):
                return dataclasses.replace(
                    mode.target, parens=isinstance(mode.target, ast.BinaryOp))
            if isinstance(node, ast.Variable):
                if node.name.endswith(("_lupdf", "_lupmf")):
                    return dataclasses.replace(node, name=node.name[:-6] + "_lp" + node.name[-3:])
                return node
            if isinstance(node, ast.Call):
                name = node.name
                if name.endswith(("_lupdf", "_lupmf")):
                    node = dataclasses.replace(node, name=name[: -len("_lupdf")] + (
                        "_lpdf" if name.endswith("_lupdf") else "_lpmf"))
                if self.analysis.is_lp_function(node.name):
                    return self._hoist(node, original, mode, pre)
                return node
            return node

        def rewrite(node: ast.Node) -> ast.Node:
            # bottom-up, like ast.transform, but fn also sees the original node
            # (the analysis identifies contributions by the original nodes)
            return fn(ast.map_children(node, rewrite), node)

        return rewrite(e)  # type: ignore[return-value]

    def _hoist(self, call: ast.Call, original: ast.Node, mode: _Mode,
               pre: list[ast.Stmt]) -> ast.Expr:
        sig = self.table.definition(call.name)
        assert sig is not None
        if sig.is_void:
            raise _unsupported(f"void _lp function {call.name} used as a value", call)
        ret = sig.return_type
        if not (isinstance(ret, ast.BasicType) and ret.name in ("int", "real", "complex")):
            raise _unsupported(
                f"a call of the _lp function {call.name} (returning a container) inside an "
                "expression", call)
        self.hoist_counter += 1
        name = f"pemc_lpcall_{self.hoist_counter}"
        acc_call = self._lpacc_call(call, mode)
        pre.append(ast.VarDecl(ast.TupleType((ast.BasicType(ret.name), ast.BasicType("real"))),
                               (ast.Declarator(name, acc_call),)))
        dest = mode.dest(self._kind(original, mode))
        if dest is not None:
            pre.append(ast.Assign(_var(dest), "+=", ast.TupleProjection(_var(name), 2)))
        return ast.TupleProjection(_var(name), 1)

    def _lpacc_call(self, call: ast.Call, mode: _Mode) -> ast.Call:
        return ast.Call(f"pemc_{call.name}acc", tuple(call.args) + (mode.target,), False)

    # statements --------------------------------------------------------- #
    def stmts(self, stmts: Sequence[ast.Stmt], mode: _Mode) -> list[ast.Stmt]:
        out: list[ast.Stmt] = []
        for s in stmts:
            out.extend(self.stmt(s, mode))
        return out

    def _single(self, s: ast.Stmt, mode: _Mode) -> ast.Stmt:
        rewritten = self.stmt(s, mode)
        if len(rewritten) == 1 and not isinstance(rewritten[0], ast.VarDecl):
            return rewritten[0]
        return ast.Block(tuple(rewritten), line=s.line, column=s.column)

    def _add(self, dest: str, value: ast.Expr, node: ast.Node) -> ast.Stmt:
        return ast.Assign(_var(dest), "+=", value, line=node.line, column=node.column)

    def stmt(self, s: ast.Stmt, mode: _Mode) -> list[ast.Stmt]:
        pre: list[ast.Stmt] = []
        pos = {"line": s.line, "column": s.column}
        if isinstance(s, ast.Tilde):
            return self._tilde(s, mode)
        if isinstance(s, ast.TargetIncrement):
            dest = mode.dest(self._kind(s, mode))
            value = self.expr(s.value, mode, pre)
            if dest is None:
                return [st for st in pre]
            return [*pre, self._add(dest, value, s)]
        if isinstance(s, ast.CallStmt) and self.analysis.is_lp_function(s.call.name):
            args = tuple(self.expr(a, mode, pre) for a in s.call.args)
            call = dataclasses.replace(s.call, args=args)
            dest = mode.dest(self._kind(s.call, mode))
            if dest is None:
                return pre
            sig = self.table.definition(call.name)
            value = self._lpacc_call(call, mode)
            if sig is not None and not sig.is_void:
                value = ast.TupleProjection(value, 2)
            return [*pre, self._add(dest, value, s)]
        if isinstance(s, ast.VarDecl) and len(s.declarators) > 1 and any(
                self._has_lp_call(d.init) for d in s.declarators):
            return self.stmts([dataclasses.replace(s, declarators=(d,)) for d in s.declarators],
                              mode)
        if isinstance(s, ast.If):
            cond = self.expr(s.cond, mode, pre)
            then = self._single(s.then, mode)
            otherwise = None if s.otherwise is None else self._single(s.otherwise, mode)
            return [*pre, ast.If(cond, then, otherwise, **pos)]
        if isinstance(s, ast.While):
            if self._has_lp_call(s.cond):
                raise _unsupported("a call of an _lp function in a while condition", s)
            return [ast.While(self.expr(s.cond, mode, pre), self._single(s.body, mode), **pos)]
        if isinstance(s, ast.For):
            lower = self.expr(s.lower, mode, pre)
            upper = self.expr(s.upper, mode, pre)
            return [*pre, ast.For(s.var, lower, upper, self._single(s.body, mode), **pos)]
        if isinstance(s, ast.ForEach):
            it = self.expr(s.iterable, mode, pre)
            return [*pre, ast.ForEach(s.var, it, self._single(s.body, mode), **pos)]
        if isinstance(s, ast.Block):
            return [ast.Block(tuple(self.stmts(s.stmts, mode)), **pos)]
        if isinstance(s, ast.Profile):
            return [ast.Profile(s.name, tuple(self.stmts(s.stmts, mode)), **pos)]
        # simple statements: rewrite their expressions
        new = ast.map_children(
            s, lambda c: self.expr(c, mode, pre) if isinstance(c, ast.Expr) else
            (self._declarator(c, mode, pre) if isinstance(c, ast.Declarator) else c))
        return [*pre, new]

    def _declarator(self, d: ast.Declarator, mode: _Mode, pre: list[ast.Stmt]) -> ast.Declarator:
        if d.init is None:
            return d
        return dataclasses.replace(d, init=self.expr(d.init, mode, pre))

    def _has_lp_call(self, e: ast.Node | None) -> bool:
        if e is None:
            return False
        return any(isinstance(n, ast.Call) and self.analysis.is_lp_function(n.name)
                   for n in ast.walk(e))

    def _tilde(self, s: ast.Tilde, mode: _Mode) -> list[ast.Stmt]:
        pre: list[ast.Stmt] = []
        dest = mode.dest(self._kind(s, mode))
        y = self.expr(s.arg, mode, pre)
        args = tuple(self.expr(a, mode, pre) for a in s.args)
        if dest is None:
            return pre
        lpdf = self.density_name(s.distribution, s)
        discrete = lpdf.endswith("_lpmf")
        out = [*pre, self._add(dest, _call(lpdf, y, *args, conditional=bool(args)), s)]
        t = s.truncation
        if t is None:
            return out
        lower = None if t.lower is None else self.expr(t.lower, mode, out)
        upper = None if t.upper is None else self.expr(t.upper, mode, out)
        dist = s.distribution

        def cdf(kind: str, at: ast.Expr) -> ast.Call:
            return _call(f"{dist}_{kind}", at, *args, conditional=bool(args))

        def below(at: ast.Expr) -> ast.Expr:
            return ast.BinaryOp("-", at, ast.IntLit("1"), parens=True) if discrete else at

        minus_inf = self._add(dest, _neg_inf(), s)
        # A container variate (stanc 2.35): the bounds are checked against
        # min(y) / max(y) and, with scalar distribution arguments, the
        # normaliser counts size(y) times.
        container = self._is_container(s.arg)
        if container and not all(is_scalar_expr(a, self.analysis.table) for a in s.args):
            raise _unsupported("truncation of a container variate with container distribution "
                               "arguments (write the statement in a loop over elements)", s)
        y_lo = _call("min", y) if container else y
        y_hi = _call("max", y) if container else y

        def scaled(e: ast.Expr) -> ast.Expr:
            if not container:
                return ast.UnaryOp("-", e)
            return ast.UnaryOp("-", ast.BinaryOp("*", e, _call("size", y), parens=True))

        if lower is not None and upper is not None:
            norm = scaled(_call("log_diff_exp", cdf("lcdf", upper), cdf("lcdf", below(lower))))
            out.append(ast.If(ast.BinaryOp("<", y_lo, lower), minus_inf,
                              ast.If(ast.BinaryOp(">", y_hi, upper), minus_inf,
                                     self._add(dest, norm, s))))
        elif lower is not None:
            norm = scaled(cdf("lccdf", below(lower)))
            out.append(ast.If(ast.BinaryOp("<", y_lo, lower), minus_inf,
                              self._add(dest, norm, s)))
        elif upper is not None:
            norm = scaled(cdf("lcdf", upper))
            out.append(ast.If(ast.BinaryOp(">", y_hi, upper), minus_inf,
                              self._add(dest, norm, s)))
        return out

    def _is_container(self, e: ast.Expr) -> bool:
        """True if ``e`` is a block-level variable (or indexing of one) that is not a scalar."""
        name = e.name if isinstance(e, ast.Variable) else (
            e.value.name if isinstance(e, ast.Indexed) and isinstance(e.value, ast.Variable)
            else None)
        if name is None:
            return False
        sym = self.analysis.table.lookup(name)
        dims = dims_of(sym.type) if sym is not None else None
        if dims is None:
            return False
        if isinstance(e, ast.Indexed):
            for index in e.indices:  # a slice or an integer-array index keeps a dimension
                if isinstance(index, ast.Slice):
                    continue
                if isinstance(index, ast.Variable):
                    isym = self.analysis.table.lookup(index.name)
                    if isym is not None and (dims_of(isym.type) or 0) > 0:
                        continue
                dims -= 1
        return dims > 0

    # _lp functions ------------------------------------------------------ #
    def lpacc_function(self, fn: ast.FunctionDef) -> ast.FunctionDef:
        """The ``pemc_<name>acc`` counterpart of a user ``_lp`` function."""
        assert fn.body is not None
        target = ast.BinaryOp("+", _var(_TARGET_ARG), _var(_ACC))
        mode = _Mode(dest=lambda _kind: _ACC, target=target, classify=False)
        void = isinstance(fn.return_type, ast.VoidType)

        def fix_returns(stmt: ast.Node) -> ast.Node:
            if isinstance(stmt, ast.Return):
                if void:
                    return ast.Return(_var(_ACC), line=stmt.line, column=stmt.column)
                assert stmt.value is not None
                return ast.Return(ast.TupleLit((stmt.value, _var(_ACC))), line=stmt.line,
                                  column=stmt.column)
            return stmt

        body_stmts = fn.body.stmts if isinstance(fn.body, ast.Block) else (fn.body,)
        rewritten = self.stmts(body_stmts, mode)
        rewritten = [_fix_returns_deep(s, fix_returns) for s in rewritten]
        stmts: list[ast.Stmt] = [
            ast.VarDecl(ast.BasicType("real"), (ast.Declarator(_ACC, ast.IntLit("0")),)),
            *rewritten,
        ]
        if void:
            stmts.append(ast.Return(_var(_ACC)))
            ret: ast.Type = ast.BasicType("real")
        else:
            ret = ast.TupleType((fn.return_type, ast.BasicType("real")))
        params = fn.params + (ast.Param(ast.BasicType("real"), _TARGET_ARG),)
        return ast.FunctionDef(ret, f"pemc_{fn.name}acc", params, ast.Block(tuple(stmts)),
                               line=fn.line, column=fn.column)


def _fix_returns_deep(stmt: ast.Stmt, fn: Callable[[ast.Node], ast.Node]) -> ast.Stmt:
    """Apply ``fn`` to every ``Return`` statement in ``stmt`` (expressions untouched).

    Raises
    ------
    Whatever ``fn`` raises.
    """
    if isinstance(stmt, ast.Return):
        return fn(stmt)  # type: ignore[return-value]
    return ast.map_children(
        stmt, lambda c: _fix_returns_deep(c, fn) if isinstance(c, ast.Stmt) else c)


# --------------------------------------------------------------------------- #
# Public API
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class LogDensityFunctions:
    """The generated log-density functions of a program.

    Attributes
    ----------
    density, prior, likelihood
        ``pemc_log_density``, ``pemc_log_prior``, ``pemc_log_likelihood``.
    helpers
        The ``pemc_<name>_lpacc`` counterparts of user ``_lp`` functions
        (they must precede the three functions in the functions block).
    parameters
        Names of the parameter arguments, in order (declaration order).
    data
        Names of the data arguments, in order (declaration order).
    """

    density: ast.FunctionDef
    prior: ast.FunctionDef
    likelihood: ast.FunctionDef
    helpers: tuple[ast.FunctionDef, ...]
    parameters: tuple[str, ...]
    data: tuple[str, ...]

    @property
    def functions(self) -> tuple[ast.FunctionDef, ...]:
        """Every generated function, in the order they go into the functions block."""
        return (*self.helpers, self.density, self.prior, self.likelihood)

    def call_expr(
        self,
        which: str = "density",
        parameters: Mapping[str, str] | Sequence[str] | None = None,
        data: Mapping[str, str] | Sequence[str] | None = None,
    ) -> ast.Call:
        """The call of one function with (possibly renamed) arguments.

        Parameters
        ----------
        which
            ``"density"``, ``"prior"`` or ``"likelihood"``.
        parameters
            Argument names replacing the parameters: a mapping from parameter
            name to the name to pass (missing names passed unchanged) or a
            sequence in :attr:`parameters` order; None passes the parameters
            under their own names.
        data
            Same for the data arguments.

        Returns
        -------
        ast.Call

        Raises
        ------
        ValueError
            If ``which`` is unknown or a sequence has the wrong length.
        """
        names = {"density": DENSITY_FUNCTION, "prior": PRIOR_FUNCTION,
                 "likelihood": LIKELIHOOD_FUNCTION}
        if which not in names:
            raise ValueError(f"unknown log-density function {which!r}")

        def resolve(own: tuple[str, ...], given: Mapping[str, str] | Sequence[str] | None,
                    what: str) -> list[str]:
            if given is None:
                return list(own)
            if isinstance(given, Mapping):
                return [given.get(n, n) for n in own]
            given = list(given)
            if len(given) != len(own):
                raise ValueError(f"expected {len(own)} {what} names, got {len(given)}")
            return given

        args = resolve(self.parameters, parameters, "parameter") + resolve(self.data, data,
                                                                           "data")
        return ast.Call(names[which], tuple(_var(a) for a in args))

    def call(
        self,
        which: str = "density",
        parameters: Mapping[str, str] | Sequence[str] | None = None,
        data: Mapping[str, str] | Sequence[str] | None = None,
    ) -> str:
        """Stan source of :meth:`call_expr` (same parameters and errors).

        Raises
        ------
        ValueError
            As :meth:`call_expr`.
        """
        from pemc_stan.stan.printer import print_expr

        return print_expr(self.call_expr(which, parameters, data))


def _block_stmts(program: ast.Program, attr: str) -> tuple[ast.Stmt, ...]:
    block = getattr(program, attr)
    return () if block is None else block.stmts


def _free_data(stmts: Sequence[ast.Node], analysis: Analysis) -> set[str]:
    used: set[str] = set()
    for s in stmts:
        for node in ast.walk(s):
            if isinstance(node, ast.Variable):
                sym = analysis.table.lookup(node.name)
                if sym is not None and sym.block in DATA_BLOCKS:
                    used.add(node.name)
    return used


def log_density_functions(program: ast.Program, filename: str = "<string>") -> LogDensityFunctions:
    """Build the log-density functions of a program.

    Parameters
    ----------
    program
        Parsed program accepted by stanc, using no ``pemc_`` identifier.
    filename
        Name of the program in error messages.

    Returns
    -------
    LogDensityFunctions

    Raises
    ------
    pemc_stan.errors.ReservedPrefixError
        If the program uses an identifier starting with ``pemc_``.
    UnsupportedConstructError
        For the constructs listed in the module docstring.
    """
    check_reserved_prefix(program, filename)
    analysis = analyse(program)
    rewriter = _Rewriter(analysis)
    try:
        return _build(program, analysis, rewriter)
    except UnsupportedConstructError as exc:
        exc.filename = filename
        raise


def _build(program: ast.Program, analysis: Analysis, rewriter: _Rewriter) -> LogDensityFunctions:
    table = analysis.table
    params: list[ast.Param] = []
    for s in _block_stmts(program, "parameters"):
        if isinstance(s, ast.VarDecl):
            for d in s.declarators:
                params.append(ast.Param(unsized_type(s.type), d.name))

    # transformed parameters: local declarations, statements, constraint checks
    tp_stmts: list[ast.Stmt] = []
    checks: list[ast.Stmt] = []
    tp_source = _block_stmts(program, "transformed_parameters")
    for s in tp_source:
        if isinstance(s, ast.VarDecl):
            for d in s.declarators:
                checks.extend(constraint_checks(d.name, s.type, analysis, s))
            s = dataclasses.replace(s, type=local_type(s.type))
        tp_stmts.append(s)
    model_source = _block_stmts(program, "model")

    reads_target = any(analysis.reads_target(s) for s in (*tp_source, *model_source))

    def body(which: str) -> ast.Block:
        if which == "density":
            mode = _Mode(lambda _k: _ACC, _var(_ACC), True)
            accs = [_ACC]
            result: ast.Expr = _var(_ACC)
        elif not reads_target:
            mode = _Mode(lambda k: _ACC if k == which else None, _var(_ACC), True)
            accs = [_ACC]
            result = _var(_ACC)
        else:
            names = {"prior": "pemc_lp_prior", "likelihood": "pemc_lp_likelihood"}
            mode = _Mode(lambda k: names[k],
                         ast.BinaryOp("+", _var(names["prior"]), _var(names["likelihood"])),
                         True)
            accs = list(names.values())
            result = _var(names[which])
        rewriter.hoist_counter = 0
        stmts: list[ast.Stmt] = [
            ast.VarDecl(ast.BasicType("real"), (ast.Declarator(a, ast.IntLit("0")),))
            for a in accs
        ]
        stmts.extend(rewriter.stmts(tp_stmts, mode))
        stmts.extend(checks)
        stmts.extend(rewriter.stmts(model_source, mode))
        stmts.append(ast.Return(result))
        return ast.Block(tuple(stmts))

    bodies = {w: body(w) for w in ("density", "prior", "likelihood")}
    used = _free_data([bodies["density"]], analysis)
    data_names = tuple(s.name for s in table.globals.values()
                       if s.block in DATA_BLOCKS and s.name in used)
    data_params = tuple(ast.Param(unsized_type(type_), n, data_only=True)
                        for n in data_names if (type_ := table.globals[n].type) is not None)
    all_params = tuple(params) + data_params
    real = ast.BasicType("real")
    fns = {w: ast.FunctionDef(real, name, all_params, bodies[w])
           for w, name in (("density", DENSITY_FUNCTION), ("prior", PRIOR_FUNCTION),
                           ("likelihood", LIKELIHOOD_FUNCTION))}
    helpers: list[ast.FunctionDef] = []
    if program.functions is not None:
        done: set[str] = set()
        for fn in program.functions.functions:
            if fn.body is not None and analysis.is_lp_function(fn.name):
                key = fn.name + repr(tuple(p.type for p in fn.params))
                if key in done:
                    continue
                done.add(key)
                helpers.append(rewriter.lpacc_function(fn))
    return LogDensityFunctions(
        density=fns["density"], prior=fns["prior"], likelihood=fns["likelihood"],
        helpers=tuple(helpers), parameters=tuple(p.name for p in params), data=data_names,
    )


def add_log_density_functions(
    program: ast.Program, filename: str = "<string>",
) -> ast.Program:
    """Return ``program`` with the log-density functions appended to its functions block.

    Parameters
    ----------
    program
        Parsed program.
    filename
        Name of the program in error messages.

    Returns
    -------
    ast.Program
        The program, with a functions block created if it had none.

    Raises
    ------
    pemc_stan.errors.ReservedPrefixError, UnsupportedConstructError
        As :func:`log_density_functions`.
    """
    functions = log_density_functions(program, filename)
    existing = program.functions.functions if program.functions is not None else ()
    block = ast.FunctionsBlock(tuple(existing) + functions.functions)
    return dataclasses.replace(program, functions=block)
