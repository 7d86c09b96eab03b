"""From a parsed program to the Jinja templates: the steps both transformations share.

Data flows Stan text → AST (:mod:`pemc_stan.stan.parser`) → template context (here
and in each method's module) → Stan text (``stan_templates/*.stan.jinja``).
This module reads and checks the user's program (:func:`prepare_program`),
prints the pieces every template embeds unchanged (:func:`functions_text`,
:func:`block_text`) and renders a template (:func:`render`).
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any

import jinja2

from pemc_stan.inputs import ProgramSource, StanProgram, read_program
from pemc_stan.stan import ast
from pemc_stan.stan.analysis import check_reserved_prefix
from pemc_stan.stan.printer import print_program, print_stmt

__all__ = ["block_text", "functions_text", "load_template", "no_likelihood_message",
           "prepare_program", "render"]


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
    except Exception:  # noqa: BLE001 - analysis failures are reported elsewhere
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
