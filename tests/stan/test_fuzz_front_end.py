"""Fuzz test of the front end: ``transform`` raises only pemc-stan's errors and never hangs.

Hypothesis feeds ``pemc_stan.transform`` (a) random bytes and (b) corpus
programs and gallery models after random mutations (byte flips, deleted,
copied and nested spans, splices of two programs, inserted Stan tokens,
replaced words, deleted, copied and swapped lines, truncation, random
Unicode, NUL bytes, invalid UTF-8), each as program text
and as a ``.stan`` file, for every registered method.  Every call must return
Stan code or raise a :class:`~pemc_stan.errors.PemcStanError`; anything else
(``RecursionError``, ``UnicodeEncodeError``, ``KeyError``, a Lark exception,
...) fails the test, and so does a call that takes longer than
``front_end_fuzz.TIME_LIMIT`` seconds (a ``SIGALRM`` timer stops it).  The
failure message shows the method, the input's bytes, how it was made and the
traceback.

stanc: ``transform`` always runs stanc first -- ``read_program`` parses text
and paths with ``parse(check=True)``, which calls ``check_with_stanc`` before
pemc-stan's own parser, so no pure-Python part of the front end runs before
it.  Real stanc would reject nearly every fuzzed input (about 0.1 s a call)
and keep it from the parser, the analysis, the transformations and the
printer, which are what this test is for.  So stanc is replaced by a stand-in
that accepts every program (``front_end_fuzz.fake_stanc``: ``stanc_path``
points to a script that exits 0); ``run_stanc`` still writes the program to a
file and starts the process.  The parser then reports what it rejects as an
``UnsupportedConstructError`` ("stanc accepts this program but ..."), and the
later stages see programs stanc would reject, as they do when a parsed
program or a ``StanProgram`` is passed to ``transform``.

The inputs, the runner and the verdict live in ``tests/front_end_fuzz.py``,
shared with ``benchmarks/fuzz_front_end.py``, which runs the same generators
for as long as asked and prints the figures.  Here the settings profile
``front-end-fuzz-ci`` (derandomized: the same inputs on every run) bounds the
file to well under two minutes on two cores.
"""

from __future__ import annotations

from collections.abc import Iterator

import front_end_fuzz
import pytest
from front_end_fuzz import METHODS, FuzzInput, attempt, failure_report
from hypothesis import given, settings

CI = settings.get_profile("front-end-fuzz-ci")


@pytest.fixture(scope="module", autouse=True)
def stanc_accepts_everything() -> Iterator[None]:
    with front_end_fuzz.fake_stanc():
        yield


def _check(inp: FuzzInput, method: str) -> None:
    outcome = attempt(inp, method)
    assert not outcome.is_bug, failure_report(inp, method, outcome)


@pytest.mark.parametrize("method", METHODS)
@settings(CI, max_examples=1000)
@given(inp=front_end_fuzz.random_inputs())
def test_random_bytes(method: str, inp: FuzzInput) -> None:
    _check(inp, method)


@pytest.mark.parametrize("method", METHODS)
@settings(CI, max_examples=2000)
@given(inp=front_end_fuzz.mutated_inputs())
def test_mutated_corpus_programs(method: str, inp: FuzzInput) -> None:
    _check(inp, method)


def test_the_checks_catch_what_they_should(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdict itself: a foreign exception and a hang are bugs, pemc-stan errors are not."""
    from pemc_stan.errors import StanSyntaxError

    assert front_end_fuzz.classify(StanSyntaxError("x")) == "error"
    assert front_end_fuzz.classify(KeyError("x")) == "foreign"
    assert front_end_fuzz.classify(front_end_fuzz.InputTimeout()) == "hang"
    inp = FuzzInput("manual", b"parameters { real x; } model { x ~ normal(0, 1); }", "text",
                    "a valid program")
    assert attempt(inp, METHODS[0]).kind == "ok"

    def broken(*args: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr("pemc_stan.run.pipeline.read_program", broken)
    outcome = attempt(inp, METHODS[0])
    assert (outcome.kind, outcome.error) == ("foreign", "builtins.KeyError")
    assert "KeyError: 'boom'" in failure_report(inp, METHODS[0], outcome)

    def forever(*args: object) -> None:
        while True:
            pass

    monkeypatch.setattr("pemc_stan.run.pipeline.read_program", forever)
    outcome = attempt(inp, METHODS[0], time_limit=0.2)
    assert outcome.kind == "hang" and 0.2 <= outcome.seconds < 2
