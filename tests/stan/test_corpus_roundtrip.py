"""Acceptance test of the front end on the Stan corpus.

For every ``tests/stan_corpus/*.stan`` program ``p``: ``parse(p)`` succeeds
(after stanc accepted ``p``), ``print_program`` of the tree is accepted by
stanc and has the same canonical form as ``p`` (``stanc --print-canonical``
with comments stripped, since comments are not part of the tree), and parsing
the printed program gives back the same tree.

stanc leaves an empty line where it strips a comment, so blank lines are
ignored in the comparison.  ``canonical`` type-checks, so it also proves that
stanc accepts both programs; ``parse`` therefore skips its own stanc check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pemc_stan.stan import ast
from pemc_stan.stan.parser import parse
from pemc_stan.stan.printer import print_program
from pemc_stan.stan.stanc import canonical

CORPUS = Path(__file__).resolve().parents[1] / "stan_corpus"
PROGRAMS = sorted(CORPUS.glob("*.stan"))


def _without_blank_lines(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.strip())


def test_corpus_present() -> None:
    assert PROGRAMS, f"no Stan programs in {CORPUS}"


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_corpus_roundtrip(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    expected = _without_blank_lines(canonical(text, path.name, strip_comments=True))
    program = parse(text, path.name, check=False)
    assert isinstance(program, ast.Program)
    printed = print_program(program)
    assert parse(printed, path.name, check=False) == program
    actual = _without_blank_lines(canonical(printed, path.name, strip_comments=True))
    assert actual == expected, f"canonical forms differ; printed program:\n{printed}"
