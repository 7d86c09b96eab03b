"""Command-line flags derived from the registered methods' options dataclasses.

Every field of a method's options class (declared with
:func:`pemc_stan.core.options.option`) becomes a flag: ``n_pseudo`` is
``--n-pseudo``, with the field's help text, parser, metavar and choices, and
its default shown from the dataclass.  A flag shared by several methods
(``--temper``) is added once.  Flags default to None ("not given"), so the
options' own defaults apply.  The sampler's flags (``--chains``,
``--max-treedepth``, ``--inits``, ...) are derived the same way from the fields
of :class:`~pemc_stan.run.pipeline.SamplerArgs`.

``--method`` is checked as it is parsed: an unknown method is reported as one
line of cause and one of remedy (:class:`UnknownMethod`), not after argparse's
usage text.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from pemc_stan.cli.errors import ExitCode
from pemc_stan.core.options import cli_fields
from pemc_stan.errors import CliError
from pemc_stan.methods import registry
from pemc_stan.run.pipeline import SamplerArgs

__all__ = ["flag_of", "add_method_options", "add_sampler_options", "method_options",
           "method_spellings", "sampler_options", "seed_line", "UnknownMethod"]


def flag_of(name: str) -> str:
    """``n_pseudo`` -> ``--n-pseudo``."""
    return "--" + name.replace("_", "-")


def method_spellings() -> tuple[str, ...]:
    """Every accepted ``--method`` value."""
    return tuple(s for m in registry.methods() for s in m.spellings())


def _owners() -> dict[str, list[registry.Method]]:
    owners: dict[str, list[registry.Method]] = {}
    for m in registry.methods():
        for f in cli_fields(m.options):
            owners.setdefault(f.name, []).append(m)
    return owners


class UnknownMethod(CliError):
    """``--method`` names no registered method (raised while the arguments are parsed)."""


class _MethodAction(argparse.Action):
    """Stores ``--method``'s value once it is known to name a method.

    Raises
    ------
    UnknownMethod
        For any other value (a usage error, reported in two lines by ``main``).
    """

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        if not isinstance(values, str) or values.strip().lower() not in method_spellings():
            known = ", ".join(f"{m.short} ({m.label})" for m in registry.methods())
            raise UnknownMethod(f"--method {values} is not a method",
                                f"use --method with one of: {known}", ExitCode.USAGE)
        setattr(namespace, self.dest, values)


def add_method_options(p: argparse.ArgumentParser, required: bool = False,
                       default: str | None = None, *, method_flag: bool = True) -> None:
    """``--method`` and one flag per option field of every registered method.

    Parameters
    ----------
    p
        The subcommand's parser.
    required, default
        Of ``--method``.
    method_flag
        False: the options' flags only (the command settles the method itself).

    Raises
    ------
    Nothing.
    """
    if method_flag:
        names = ", ".join(f"{m.label} ({m.short})" for m in registry.methods())
        p.add_argument("--method", action=_MethodAction,
                       default=None if required else default, required=required,
                       metavar="METHOD",
                       help=f"one of: {names}" + (f"; default {default}" if default else ""))
    owners = _owners()
    groups: dict[str, Any] = {}
    added: set[str] = set()
    for m in registry.methods():
        for f in cli_fields(m.options):
            if f.name in added:
                continue
            added.add(f.name)
            shared = len(owners[f.name]) > 1
            title = "options of several methods" if shared else f"{m.label} options"
            if title not in groups:
                groups[title] = p.add_argument_group(title)
            kwargs = _flag_kwargs(f)
            if shared:  # each method's own help, default and choices (it validates its value)
                same = [next(g for g in cli_fields(o.options) if g.name == f.name)
                        for o in owners[f.name]]
                kwargs["help"] = "; ".join(
                    f"{o.short}: {g.metadata.get('help', '')}"
                    + ("" if g.default is None else f" (default {_show(g.default)})")
                    for o, g in zip(owners[f.name], same, strict=True))
                if all(g.metadata.get("choices") for g in same):
                    kwargs = {k: v for k, v in kwargs.items() if k not in ("type", "metavar")}
                    kwargs["choices"] = tuple(dict.fromkeys(
                        c for g in same for c in g.metadata["choices"]))
            groups[title].add_argument(flag_of(f.name), **kwargs)


def _flag_kwargs(f: dataclasses.Field[Any]) -> dict[str, Any]:
    """``add_argument`` keywords of an options field: its help with its default shown,
    its parser and metavar or its choices; the flag's own default is None ("not given").
    """
    meta = f.metadata
    parse = meta.get("parse") or (type(f.default) if f.default is not None else str)
    default_text = "" if f.default is None else f" (default {_show(f.default)})"
    kwargs: dict[str, Any] = {"default": None, "dest": f.name,
                              "help": str(meta.get("help", "")) + default_text}
    if meta.get("choices"):
        kwargs["choices"] = meta["choices"]
    else:
        kwargs["type"] = parse
        kwargs["metavar"] = meta.get("metavar") or f.name.upper()
    return kwargs


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def method_options(args: argparse.Namespace) -> dict[str, Any]:
    """The method options given on the command line (flags of any registered method:
    :meth:`~pemc_stan.methods.registry.Method.build_options` refuses another method's).

    Raises
    ------
    Nothing.
    """
    return {name: getattr(args, name) for name in _owners()
            if getattr(args, name, None) is not None}


def add_sampler_options(p: argparse.ArgumentParser) -> None:
    """One flag per field of :class:`~pemc_stan.run.pipeline.SamplerArgs` that has one, with
    cmdstanpy's names: ``--chains``, ``--iter-warmup``, ``--iter-sampling``, ``--seed``,
    ``--adapt-delta``, ``--max-treedepth``, ``--metric``, ``--thin``,
    ``--parallel-chains``, ``--inits``, ``--refresh``.

    Raises
    ------
    Nothing.
    """
    g = p.add_argument_group("sampler (as cmdstanpy's CmdStanModel.sample)")
    for f in cli_fields(SamplerArgs):
        g.add_argument(flag_of(f.name), **_flag_kwargs(f))


def sampler_options(args: argparse.Namespace) -> dict[str, Any]:
    """The sampler's flags given on the command line, as :class:`~pemc_stan.run.pipeline.
    SamplerArgs` keywords (the others keep its defaults).

    Raises
    ------
    Nothing.
    """
    return {f.name: getattr(args, f.name) for f in cli_fields(SamplerArgs)
            if getattr(args, f.name, None) is not None}


def seed_line(seed: int | None, given: bool) -> str:
    """How a command reports the seed it used (a drawn one with how to repeat the run).

    Raises
    ------
    Nothing.
    """
    return f"seed: {seed}" + ("" if given else f" (drawn; pass --seed {seed} to repeat)")
