"""Non-centring of hierarchical normal priors by ``offset``/``multiplier``.

A parameter with a normal prior whose scale is another parameter,
``vector[J] theta; ... theta ~ normal(mu, tau);``, makes a *funnel*: where
``tau`` is small, ``theta`` is confined to a narrow neck that no single
Hamiltonian step size fits, so NUTS diverges or never enters it, and a tempered
or pseudo-extended version of the model inherits the neck.  Declaring the
parameter with the prior's location and scale as its offset and multiplier,
``vector<offset=mu, multiplier=tau>[J] theta;``, makes Stan sample
``(theta - mu) / tau`` instead, which is ``N(0, 1)`` a priori whatever ``tau``:
the non-centred parameterisation, as a change of *coordinates* only.  The
model, its parameters, their posterior and its normalising constant are
unchanged (Stan adds the affine map's log-Jacobian itself); every draw is still
of ``theta``.

:func:`noncentre` finds such parameters conservatively and returns the
rewritten parameter declarations; the method transforms use them in the
programs they generate (``reparameterize=True``, the default), and the user's
program itself is never modified.  A parameter qualifies when

* it is a ``real``, ``vector`` or ``row_vector`` (not an array), declared alone
  and without bounds, offset or multiplier;
* exactly one statement of the whole model is a density of it, and that
  statement is ``name ~ normal(loc, scale)`` or ``target += normal_lpdf(name |
  loc, scale)`` (``_lupdf`` too) at the top level of the model block, without
  truncation;
* ``scale`` depends on a parameter (else there is no funnel to remove);
* ``loc`` and ``scale`` are scalar expressions of literals, scalar data and
  scalar parameters declared before it, by arithmetic and the elementwise
  functions in :data:`EVALUABLE_CALLS` (a declaration may use only earlier
  variables, and the base density's Python mirror must evaluate them draw by
  draw, with the parameters' draws along a leading axis: no indexing, no
  containers, no transformed data).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from pemc_stan.stan import ast
from pemc_stan.stan.analysis import density_variate
from pemc_stan.stan.printer import print_expr
from pemc_stan.stan.symbols import SymbolTable, build_symbol_table, dims_of

logger = logging.getLogger(__name__)

__all__ = ["EVALUABLE_CALLS", "NonCentred", "noncentre"]

_TYPES = ("real", "vector", "row_vector")
#: Functions a location or scale may call: those :mod:`pemc_stan.stan.evaluate` computes
#: elementwise (one argument; ``pow``/``fmin``/``fmax`` two; constants none).
EVALUABLE_CALLS = {
    1: frozenset({"exp", "log", "sqrt", "square", "inv", "fabs", "abs", "expm1", "log1p",
                  "log2", "log10", "inv_logit", "logit"}),
    2: frozenset({"pow", "fmin", "fmax"}),
    0: frozenset({"pi", "e", "sqrt2", "log2", "log10"}),
}
_ARITHMETIC = ("+", "-", "*", "/", "^", ".*", "./")


@dataclass(frozen=True)
class NonCentred:
    """One parameter declared with its prior's location and scale as offset/multiplier.

    Attributes
    ----------
    name
        The parameter.
    offset
        The prior's location (None when it is the literal 0).
    multiplier
        The prior's scale.
    line
        Line of the prior statement in the user's program.
    """

    name: str
    offset: ast.Expr | None
    multiplier: ast.Expr
    line: int

    def describe(self) -> str:
        """A one-line account for comments and logs."""
        loc = "0" if self.offset is None else print_expr(self.offset)
        shifted = self.name if self.offset is None else f"({self.name} - {loc})"
        return (f"{self.name} is sampled as {shifted} / "
                f"{print_expr(self.multiplier)}, the non-centred coordinates of its prior "
                f"normal({loc}, {print_expr(self.multiplier)}) (line {self.line}); the model "
                "is unchanged")


def _density_of(stmt: ast.Stmt) -> tuple[str, str, tuple[ast.Expr, ...], bool] | None:
    """``(variate name, distribution, args, untruncated)`` of a density statement whose
    variate is a bare variable, else None."""
    if isinstance(stmt, ast.Tilde) and isinstance(stmt.arg, ast.Variable):
        return stmt.arg.name, stmt.distribution, stmt.args, stmt.truncation is None
    if isinstance(stmt, ast.TargetIncrement):
        variate = density_variate(stmt.value)
        if isinstance(variate, ast.Variable):
            assert isinstance(stmt.value, ast.Call)
            return (variate.name, stmt.value.name.rsplit("_", 1)[0], stmt.value.args[1:],
                    True)
    return None


def _variates(node: ast.Node) -> list[str]:
    """Every variable that is the variate of a density anywhere under ``node``."""
    out: list[str] = []
    for n in ast.walk(node):
        variate = n.arg if isinstance(n, ast.Tilde) else (
            density_variate(n) if isinstance(n, ast.Expr) else None)
        if variate is not None:
            out += [v.name for v in ast.walk(variate) if isinstance(v, ast.Variable)]
    return out


def _evaluable_scalar(expr: ast.Expr, allowed: set[str], table: SymbolTable) -> bool:
    """Whether ``expr`` is a scalar of allowed scalar variables that the Python mirror of
    the base coordinates can evaluate with one value per draw."""
    if isinstance(expr, (ast.IntLit, ast.RealLit)):
        return True
    if isinstance(expr, ast.Variable):
        sym = table.lookup(expr.name)
        return expr.name in allowed and sym is not None and dims_of(sym.type) == 0
    if isinstance(expr, ast.UnaryOp):
        return expr.op in ("-", "+") and _evaluable_scalar(expr.operand, allowed, table)
    if isinstance(expr, ast.BinaryOp):
        return expr.op in _ARITHMETIC and all(
            _evaluable_scalar(e, allowed, table) for e in (expr.left, expr.right))
    if isinstance(expr, ast.Call):
        return (expr.name in EVALUABLE_CALLS.get(len(expr.args), frozenset())
                and expr.name not in table.functions
                and all(_evaluable_scalar(a, allowed, table) for a in expr.args))
    return False


def noncentre(program: ast.Program, table: SymbolTable | None = None
              ) -> tuple[ast.ProgramBlock | None, tuple[NonCentred, ...]]:
    """The parameters block with every qualifying parameter non-centred.

    Parameters
    ----------
    program
        The parsed program (not modified).
    table
        Its symbol table (built when not given).

    Returns
    -------
    (ProgramBlock or None, tuple of NonCentred)
        The rewritten parameters block (the original one when nothing
        qualifies) and the parameters rewritten, in declaration order.

    Raises
    ------
    Nothing: a parameter that does not clearly qualify is left as it is.
    """
    block = program.parameters
    if block is None or program.model is None:
        return block, ()
    table = table if table is not None else build_symbol_table(program)
    model_variates = _variates(program.model)
    others = [b for b in (program.transformed_parameters, program.generated_quantities)
              if b is not None]
    elsewhere = {v for b in others for v in _variates(b)}
    priors: dict[str, tuple[ast.Expr, ast.Expr, int]] = {}
    for stmt in program.model.stmts:
        found = _density_of(stmt)
        if found is None:
            continue
        name, dist, args, untruncated = found
        if dist == "normal" and len(args) == 2 and untruncated:
            priors.setdefault(name, (args[0], args[1], stmt.line))
    data_names = {d.name for s in (program.data.stmts if program.data is not None else ())
                  if isinstance(s, ast.VarDecl) for d in s.declarators}
    declared: set[str] = set()
    params = {d.name for s in block.stmts if isinstance(s, ast.VarDecl) for d in s.declarators}
    stmts: list[ast.Stmt] = []
    done: list[NonCentred] = []
    for stmt in block.stmts:
        new = stmt
        if isinstance(stmt, ast.VarDecl) and len(stmt.declarators) == 1:
            name = stmt.declarators[0].name
            t = stmt.type
            prior = priors.get(name)
            if (prior is not None and isinstance(t, ast.BasicType) and t.name in _TYPES
                    and t.constraint is None and model_variates.count(name) == 1
                    and name not in elsewhere):
                loc, scale, line = prior
                allowed = data_names | declared
                scale_params = {v.name for v in ast.walk(scale) if isinstance(v, ast.Variable)
                                } & params
                if scale_params and all(_evaluable_scalar(e, allowed, table)
                                        for e in (loc, scale)):
                    zero = isinstance(loc, (ast.IntLit, ast.RealLit)) and float(
                        loc.text.replace("_", "")) == 0.0
                    offset = None if zero else replace(loc, parens=False)
                    affine = ast.Affine(offset, replace(scale, parens=False))
                    new = replace(stmt, type=replace(t, constraint=affine))
                    done.append(NonCentred(name, offset, affine.multiplier or scale, line))
                    logger.info("%s", done[-1].describe())
            declared.add(name)
        elif isinstance(stmt, ast.VarDecl):
            declared.update(d.name for d in stmt.declarators)
        stmts.append(new)
    if not done:
        return block, ()
    return replace(block, stmts=tuple(stmts)), tuple(done)
