"""From a parsed program to the Jinja templates: the steps both transformations share.

Data flows Stan text → AST (:mod:`pemc_stan.stan.parser`) → template context (here
and in each method's module) → Stan text (``stan_templates/*.stan.jinja``).
This module reads and checks the user's program (:func:`prepare_program`),
prints the pieces every template embeds unchanged (:func:`functions_text`,
:func:`block_text`) and renders a template (:func:`render`).
"""

from __future__ import annotations

import importlib.resources
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from pemc_stan.stan import ast
from pemc_stan.stan.analysis import check_reserved_prefix
from pemc_stan.errors import StanProgramError
from pemc_stan.stan.parser import parse
from pemc_stan.stan.printer import print_program, print_stmt

__all__ = ["PreparedProgram", "block_text", "functions_text", "load_template",
           "prepare_program", "read_program", "render"]


def read_program(program: str | os.PathLike[str]) -> tuple[str, str]:
    """(text, name) of program text or a ``.stan`` path.

    Raises
    ------
    OSError
        If a path cannot be read.
    """
    if isinstance(program, os.PathLike) or (
            isinstance(program, str) and "\n" not in program and program.endswith(".stan")):
        path = Path(program)
        return path.read_text(), path.stem
    return str(program), "model"


@dataclass(frozen=True)
class PreparedProgram:
    """A user's program, parsed and checked for a transformation.

    Attributes
    ----------
    tree
        The parsed program.
    text
        Its text.
    model_name
        The model's name (file stem or the name given).
    parameters
        ``(declared type, name)`` of every parameter, in declaration order.
    """

    tree: ast.Program
    text: str
    model_name: str
    parameters: tuple[tuple[ast.Type, str], ...]


def prepare_program(program: str | os.PathLike[str] | ast.Program, name: str | None,
                    method: str) -> PreparedProgram:
    """Parse (if needed) and check a program before transforming it.

    Parameters
    ----------
    program
        Stan text, a ``.stan`` path or a parsed program.
    name
        The model's name (default: the file stem, or ``"model"``).
    method
        The transformation's name, for messages ("pseudo-extended", ...).

    Returns
    -------
    PreparedProgram

    Raises
    ------
    pemc_stan.stan.analysis.ReservedPrefixError
        If the program uses an identifier starting with ``pemc_``.
    StanProgramError
        If the program cannot be parsed or declares no parameters.
    """
    if isinstance(program, ast.Program):
        tree, text, model_name = program, print_program(program), name or "model"
    else:
        text, stem = read_program(program)
        model_name = name or stem
        tree = parse(text, filename=model_name)
    check_reserved_prefix(tree, model_name)
    params: list[tuple[ast.Type, str]] = []
    if tree.parameters is not None:
        for s in tree.parameters.stmts:
            if isinstance(s, ast.VarDecl):
                params.extend((s.type, d.name) for d in s.declarators)
    if not params:
        raise StanProgramError(
            f"{model_name} declares no parameters: there is nothing to sample, so the "
            f"{method} transformation does not apply", model_name)
    return PreparedProgram(tree, text, model_name, tuple(params))


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
