"""From a parsed program to the Jinja templates: the steps both transformations share.

Data flows Stan text → AST (:mod:`pemc_stan.stan.parser`) → template context (here
and in each method's module) → Stan text (``stan_templates/*.stan.jinja``).
This module reads and checks the user's program (:func:`prepare_program`),
prints the pieces every template embeds unchanged (:func:`functions_text`,
:func:`block_text`) and renders a template (:func:`render`; :func:`render_mapped` also
keeps the :class:`~pemc_stan.stan.line_map.LineMap` from the rendered program's lines
back to the user's, found from the printed pieces, which carry their source lines).
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from pemc_stan.stan import ast
from pemc_stan.stan.analysis import check_reserved_prefix
from pemc_stan.stan.inputs import ProgramSource, StanProgram, read_program
from pemc_stan.stan.line_map import LineMap, SourcedText, locate_blocks
from pemc_stan.stan.printer import sourced_program, sourced_stmt
from pemc_stan.stan.reparameterize import NonCentred, noncentre
from pemc_stan.stan.symbols import SymbolTable

__all__ = ["ParameterDeclarations", "block_text", "functions_text", "load_template",
           "no_likelihood_message", "parameter_declarations", "prepare_program", "render",
           "render_mapped"]


def prepare_program(program: ProgramSource, name: str | None, method: str) -> StanProgram:
    """Read (parsing only what is not parsed yet) and check a program before transforming it.

    Parameters
    ----------
    program
        Stan text, a ``.stan`` path, a parsed program or a
        :class:`~pemc_stan.stan.inputs.StanProgram` (used as is: not parsed again).
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


def functions_text(tree: ast.Program, extra: tuple[ast.FunctionDef, ...]) -> SourcedText:
    """The body of a functions block: the user's functions, then ``extra`` (each line with
    its source line).

    Raises
    ------
    Nothing.
    """
    user = tree.functions.functions if tree.functions is not None else ()
    block = ast.FunctionsBlock(tuple(user) + tuple(extra))
    text = sourced_program(ast.Program(functions=block))
    lines = list(zip(text.split("\n"), text.sources, strict=True))
    return SourcedText.from_lines(lines[1:-1])  # drop "functions {" and "}"


def block_text(block: ast.ProgramBlock | None) -> SourcedText:
    """The statements of a block, printed one level deep ("" for an empty block), each
    line with its source line.

    Raises
    ------
    Nothing.
    """
    if block is None or not block.stmts:
        return SourcedText("", ())
    return SourcedText.join(sourced_stmt(s, 1) for s in block.stmts)


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

    def text(self) -> SourcedText:
        """The block's statements, printed one level deep, each non-centred declaration
        preceded by a comment that says so (each line with its source line)."""
        lines: list[str] = []
        for s in self.block.stmts:
            if isinstance(s, ast.VarDecl):
                for d in s.declarators:
                    note = self.note(d.name)
                    if note:
                        lines.append("  " + note)
            lines.append(sourced_stmt(s, 1))
        return SourcedText.join(lines)


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


def render_mapped(template_name: str, user_file: str = "", **context: Any
                  ) -> tuple[str, LineMap]:
    """:func:`render`, and the map from the rendered program's lines to the user's.

    The printed pieces in ``context`` (:class:`~pemc_stan.stan.line_map.SourcedText`
    values: the user's blocks and functions, the log-density functions) are found in
    the rendered text (:func:`~pemc_stan.stan.line_map.locate_blocks`); every other
    line is generated code.

    Parameters
    ----------
    template_name
        The template.
    user_file
        The user's file name for messages (``""`` for a program given as text).
    **context
        The template's variables.

    Returns
    -------
    (str, LineMap)

    Raises
    ------
    jinja2.UndefinedError
        If the template uses a variable ``context`` does not define.
    """
    text = render(template_name, **context)
    blocks = [v for v in context.values() if isinstance(v, SourcedText)]
    return text, LineMap(locate_blocks(text, blocks), user_file)
