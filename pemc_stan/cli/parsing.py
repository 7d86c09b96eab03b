"""The command line's argument parser: usage errors a cmdstanpy user can act on.

Every argparse error prints the subcommand's own usage line, the error and a remedy
(``pemc-stan: remedy: ...``), and exits with :attr:`~pemc_stan.cli.errors.ExitCode.USAGE`.
cmdstanpy's spellings of the flags (``--iter_sampling``) are accepted as the flags
they spell (``--iter-sampling``), and an unknown flag is answered with the nearest one.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import NoReturn

from pemc_stan.cli.errors import ExitCode

__all__ = ["CommandParser", "parse", "cmdstanpy_spellings"]


class CommandParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose errors end with a remedy line."""

    def error(self, message: str) -> NoReturn:
        """Print the error and its remedy (no usage block: the remedy says where the flags
        are listed); exit with the usage code.

        Raises
        ------
        SystemExit
            Always, with :attr:`ExitCode.USAGE`.
        """
        print(f"pemc-stan: error: {message}", file=sys.stderr)
        print(f"pemc-stan: remedy: {self.remedy(message)}", file=sys.stderr)
        raise SystemExit(int(ExitCode.USAGE))

    def remedy(self, message: str) -> str:
        """What to do about ``message``: the nearest flag to an unknown one, and where the
        flags are listed."""
        listed = f"`{self.prog} --help` lists its options"
        if "invalid choice" in message:
            return f"give one of the values listed; {listed}"
        known = set(option_strings(self))
        words = [w.strip(":'\"()") for w in message.replace(",", " ").split()]
        unknown = [w for w in words if w.startswith("-") and w.split("=", 1)[0] not in known]
        near = [m for w in unknown for m in nearest_flags(self, w)]
        return f"did you mean {' or '.join(near)}? {listed}" if near else listed


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string of ``parser`` (``--iter-sampling``, ``-o``, ...)."""
    return [s for a in parser._actions for s in a.option_strings]


def all_option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string of ``parser`` and of its subcommands."""
    found = option_strings(parser)
    for sub in _subcommands(parser).values():
        found += option_strings(sub)
    return found


def nearest_flags(parser: argparse.ArgumentParser, word: str) -> list[str]:
    """The option of ``parser`` closest to ``word`` (its ``=value`` ignored), if any."""
    flag = word.split("=", 1)[0]
    return difflib.get_close_matches(flag.replace("_", "-"), option_strings(parser), n=1,
                                     cutoff=0.6)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


#: CmdStan's own argument names -> this command line's flags (``num_samples=2000``,
#: ``--num-samples 2000`` and ``adapt delta=0.95`` are read as CmdStan users write them).
CMDSTAN_NAMES = {"num-samples": "--iter-sampling", "num-warmup": "--iter-warmup",
                 "delta": "--adapt-delta", "max-depth": "--max-treedepth",
                 "num-chains": "--chains"}


def cmdstanpy_spellings(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``argv`` with cmdstanpy's underscore spellings of known flags (``--iter_sampling``,
    ``--adapt_delta=0.9``) written as this command line's (``--iter-sampling``), and
    CmdStan's names (:data:`CMDSTAN_NAMES`, as flags or as CmdStan's ``name=value``
    words; a bare ``adapt`` before ``delta=`` is CmdStan's grouping and is dropped).

    Raises
    ------
    Nothing.
    """
    known = set(option_strings(parser))
    for sub in _subcommands(parser).values():
        known.update(option_strings(sub))
    out: list[str] = []
    for i, word in enumerate(argv):
        if word == "--":
            return out + list(argv[i:])
        flag, eq, value = word.partition("=")
        dashed = flag.replace("_", "-")
        name = dashed.lstrip("-")
        if word == "adapt" and i + 1 < len(argv) and argv[i + 1].startswith("delta="):
            continue
        if name in CMDSTAN_NAMES and (flag.startswith("--") or (eq and not flag.startswith("-"))):
            out.append(CMDSTAN_NAMES[name] + eq + value)
        else:
            out.append(dashed + eq + value if flag.startswith("--") and dashed in known
                       else word)
    return out


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv`` (default ``sys.argv[1:]``); an unrecognised flag is a usage error of
    the subcommand it was given to.

    Raises
    ------
    SystemExit
        For ``--help`` and ``--version`` (code 0) and usage errors (:attr:`ExitCode.USAGE`).
    CliError
        For values checked as they are parsed (``--method``).
    """
    words = cmdstanpy_spellings(parser, sys.argv[1:] if argv is None else argv)
    args, extras = parser.parse_known_args(words)
    if extras:
        owner = _subcommands(parser).get(getattr(args, "command", None) or "", parser)
        owner.error(f"unrecognized arguments: {' '.join(extras)}")
    return args
