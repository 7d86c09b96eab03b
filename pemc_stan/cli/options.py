"""Command-line flags derived from the registered methods' options dataclasses.

Every field of a method's options class (declared with
:func:`pemc_stan.methods.options.option`) becomes a flag: ``n_pseudo`` is
``--n-pseudo``, with the field's help text, parser, metavar and choices, and
its default shown from the dataclass.  A flag shared by several methods
(``--temper``) is added once.  Flags default to None ("not given"), so the
options' own defaults apply.
"""

from __future__ import annotations

import argparse
from typing import Any

from pemc_stan.methods import registry
from pemc_stan.methods.options import cli_fields

__all__ = ["flag_of", "add_method_options", "add_sampler_options", "method_options",
           "method_spellings"]


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


def add_method_options(p: argparse.ArgumentParser, required: bool = False,
                       default: str | None = None) -> None:
    """``--method`` and one flag per option field of every registered method.

    Raises
    ------
    Nothing.
    """
    names = ", ".join(f"{m.label} ({m.short})" for m in registry.methods())
    p.add_argument("--method", choices=method_spellings(), default=None if required else default,
                   required=required, metavar="METHOD",
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
            meta = f.metadata
            parse = meta.get("parse") or (type(f.default) if f.default is not None else str)
            default_text = "" if f.default is None else f" (default {_show(f.default)})"
            kwargs: dict[str, Any] = {"default": None, "dest": f.name,
                                      "help": str(meta.get("help", "")) + default_text}
            choices = meta.get("choices")
            if shared:  # each method's own help, default and choices (it validates its value)
                same = [next(g for g in cli_fields(o.options) if g.name == f.name)
                        for o in owners[f.name]]
                kwargs["help"] = "; ".join(
                    f"{o.short}: {g.metadata.get('help', '')}"
                    + ("" if g.default is None else f" (default {_show(g.default)})")
                    for o, g in zip(owners[f.name], same, strict=True))
                if all(g.metadata.get("choices") for g in same):
                    choices = tuple(dict.fromkeys(c for g in same for c in g.metadata["choices"]))
            if choices:
                kwargs["choices"] = choices
            else:
                kwargs["type"] = parse
                kwargs["metavar"] = meta.get("metavar") or f.name.upper()
            groups[title].add_argument(flag_of(f.name), **kwargs)


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
    """``--chains``, ``--iter-warmup``, ``--iter-sampling``, ``--seed`` (as cmdstanpy).

    Raises
    ------
    Nothing.
    """
    g = p.add_argument_group("sampler (as cmdstanpy)")
    g.add_argument("--chains", type=int, default=4, help="number of chains (default 4)")
    g.add_argument("--iter-warmup", type=int, default=1000, metavar="N",
                   help="warm-up iterations per chain (default 1000)")
    g.add_argument("--iter-sampling", type=int, default=1000, metavar="N",
                   help="sampling iterations per chain (default 1000)")
    g.add_argument("--seed", type=int, default=None, help="random seed")
