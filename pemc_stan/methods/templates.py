"""From a parsed program to the Jinja templates: the steps both transformations share.

Data flows Stan text → AST (:mod:`pemc_stan.stan.parser`) → template context (here
and in each method's module) → Stan text (``stan_templates/*.stan.jinja``).
This module reads and checks the user's program (:func:`prepare_program`),
prints the pieces every template embeds unchanged (:func:`functions_text`,
:func:`block_text`) and renders a template (:func:`render`).
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from pemc_stan.inputs import ProgramSource, StanProgram, read_program
from pemc_stan.stan import ast
from pemc_stan.stan.analysis import SymbolTable, check_reserved_prefix
from pemc_stan.stan.printer import print_program, print_stmt
from pemc_stan.stan.reparameterize import NonCentred, noncentre

__all__ = ["ParameterDeclarations", "block_text", "functions_text", "load_template",
           "no_likelihood_message", "parameter_declarations", "prepare_program", "render"]


def prepare_program(program: ProgramSource, name: str | None, method: str) -> StanProgram:
    """Read (parsing only what is not parsed yet) and check a program before transforming it.

    Parameters
    ----------
    program
        Stan text, a ``.stan`` path, a parsed program or a
        :class:`~pemc_stan.inputs.StanProgram` (used as is: not parsed again).
    name
        The model's name (default: the file stem, or ``"model"``).
    method
        The transformation's name, for messages ("pseudo-extended", ...).

    Returns
    -------
    StanProgram

    Raises
    ------
    ReservedPrefixError
        If the program uses an identifier starting with ``pemc_``.
    StanProgramError
        If the program cannot be parsed or declares no parameters.
    """
    prepared = read_program(program, name)
    check_reserved_prefix(prepared.tree, prepared.name)
    prepared.require_parameters(f"{method} transformation")
    return prepared


def no_likelihood_message(prepared: StanProgram) -> str | None:
    """The warning for likelihood tempering of a model with no likelihood term, or None.

    Raises
    ------
    Nothing (analysis failures are reported by the log-density rewrite).
    """
    try:
        if prepared.analysis.likelihood_contributions():
            return None
    except Exception:
        return None
    return (f"{prepared.name}: temper='likelihood' but no statement of the model is classified "
            "as likelihood (it has no data-dependent density terms), so nothing is tempered; "
            "use temper='posterior'.")


def functions_text(tree: ast.Program, extra: tuple[ast.FunctionDef, ...]) -> str:
    """The body of a functions block: the user's functions, then ``extra``.

    Raises
    ------
    Nothing.
    """
    user = tree.functions.functions if tree.functions is not None else ()
    block = ast.FunctionsBlock(tuple(user) + tuple(extra))
    text = print_program(ast.Program(functions=block)).strip()
    return "\n".join(text.splitlines()[1:-1])  # drop "functions {" and "}"


def block_text(block: ast.ProgramBlock | None) -> str:
    """The statements of a block, printed one level deep ("" for an empty block).

    Raises
    ------
    Nothing.
    """
    if block is None or not block.stmts:
        return ""
    return "\n".join(print_stmt(s, 1) for s in block.stmts)


@dataclass(frozen=True)
class ParameterDeclarations:
    """The parameter declarations a generated program uses.

    Attributes
    ----------
    block
        The parameters block (the user's, or with non-centred declarations).
    noncentred
        The parameters declared with their prior's offset/multiplier.
    """

    block: ast.ProgramBlock
    noncentred: tuple[NonCentred, ...] = ()

    @property
    def decls(self) -> list[tuple[ast.Type, str]]:
        """``(declared type, name)`` of every parameter, in declaration order."""
        return [(s.type, d.name) for s in self.block.stmts if isinstance(s, ast.VarDecl)
                for d in s.declarators]

    def note(self, name: str) -> str | None:
        """A comment line for the declaration of ``name`` (None when it is as written)."""
        for nc in self.noncentred:
            if nc.name == name:
                return f"// pemc-stan: {nc.describe()}"
        return None

    def text(self) -> str:
        """The block's statements, printed one level deep, each non-centred declaration
        preceded by a comment that says so."""
        lines = []
        for s in self.block.stmts:
            if isinstance(s, ast.VarDecl):
                for d in s.declarators:
                    note = self.note(d.name)
                    if note:
                        lines.append("  " + note)
            lines.append(print_stmt(s, 1))
        return "\n".join(lines)


def parameter_declarations(prepared: StanProgram, reparameterize: str,
                           table: SymbolTable | None = None) -> ParameterDeclarations:
    """The parameters block of a generated program: with ``reparameterize="auto"``, every
    hierarchical normal prior non-centred (:func:`pemc_stan.stan.reparameterize.noncentre`).

    Raises
    ------
    Nothing.
    """
    block = prepared.tree.parameters
    assert block is not None  # prepare_program requires parameters
    if reparameterize != "auto":
        return ParameterDeclarations(block)
    new, done = noncentre(prepared.tree, table)
    assert new is not None
    return ParameterDeclarations(new, done)


def load_template(name: str) -> str:
    """Read a template from the ``pemc_stan.stan_templates`` package (or the source tree).

    Raises
    ------
    FileNotFoundError
        If the template is missing from both.
    """
    try:
        return importlib.resources.files("pemc_stan.stan_templates").joinpath(name).read_text()
    except (ModuleNotFoundError, FileNotFoundError):  # running from an uninstalled checkout
        path = Path(__file__).resolve().parents[2] / "stan_templates" / name
        return path.read_text()


def render(template_name: str, **context: Any) -> str:
    """Render a Stan template; a missing context variable is an error.

    Raises
    ------
    jinja2.UndefinedError
        If the template uses a variable ``context`` does not define.
    """
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(load_template), undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True, autoescape=False,
    )
    return env.get_template(template_name).render(**context)
