"""Fuzz the front end for a while: ``transform`` must raise only pemc-stan's errors, never hang.

The long run of the CI fuzz test (tests/stan/test_fuzz_front_end.py): the same
generators -- random bytes, and corpus programs and gallery models after
random mutations, delivered as text and as .stan files -- and the same
verdict (tests/front_end_fuzz.py), for every registered method, until the
time is up.  Hypothesis draws the inputs in seeded batches (generation only,
no shrinking), alternating between the generators.  By default stanc is
replaced by a stand-in that accepts every program, as in the test (its
module docstring says why); ``--stanc real`` runs the real one (about 0.1 s a
call, and it rejects nearly every input before pemc-stan's own parser).

Prints the inputs tried per generator, the outcomes, the distinct error types
with their counts, the slowest call, and every foreign exception or hang,
whose input is saved under ``--out`` (``NNN-<generator>-<method>.stan`` with
the report next to it as ``.txt``).  Exits 1 if there was any.

Usage: python benchmarks/fuzz_front_end.py [--minutes 10] [--seed 0] [--out DIR]
       [--time-limit 5] [--batch 200] [--stanc fake|real]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the shared fuzzing code lives with the tests

import front_end_fuzz  # noqa: E402
from front_end_fuzz import GENERATORS, METHODS, FuzzInput, Outcome  # noqa: E402
from hypothesis import given, seed, settings  # noqa: E402


@dataclass
class Tally:
    """What the run saw."""

    inputs: Counter[str] = field(default_factory=Counter)  # generator -> inputs
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (generator, kind)
    errors: Counter[str] = field(default_factory=Counter)  # error type -> calls
    slowest: tuple[float, str] = (0.0, "")
    bugs: list[str] = field(default_factory=list)  # where each offending input was saved

    def add(self, inp: FuzzInput, method: str, outcome: Outcome, out: Path) -> None:
        self.outcomes[inp.generator, outcome.kind] += 1
        if outcome.error:
            self.errors[outcome.error] += 1
        if outcome.seconds > self.slowest[0]:
            self.slowest = (outcome.seconds, f"{inp.generator}, {method}, {len(inp.source)} "
                                             f"bytes, from {inp.origin[:200]}")
        if outcome.is_bug:
            out.mkdir(parents=True, exist_ok=True)
            stem = out / f"{len(self.bugs) + 1:03d}-{inp.generator}-{method}"
            stem.with_suffix(".stan").write_bytes(inp.source)
            stem.with_suffix(".txt").write_text(
                front_end_fuzz.failure_report(inp, method, outcome), errors="backslashreplace")
            self.bugs.append(f"{outcome.kind}: {outcome.error} ({method}) -> {stem}.stan")


def _batch(tally: Tally, generator: str, batch_seed: int, size: int, deadline: float,
           time_limit: float, out: Path) -> None:
    """Run ``size`` inputs of ``generator`` (fewer when the deadline passes)."""

    @seed(batch_seed)
    @settings(settings.get_profile("front-end-fuzz-long"), max_examples=size)
    @given(GENERATORS[generator])
    def run(inp: FuzzInput) -> None:
        if time.monotonic() >= deadline:
            return
        tally.inputs[generator] += 1
        for method in METHODS:
            tally.add(inp, method, front_end_fuzz.attempt(inp, method, time_limit), out)

    run()


def report(tally: Tally, args: argparse.Namespace, elapsed: float) -> str:
    """The figures, as printed."""
    kinds = ("ok", "error", "foreign", "hang")
    lines = [f"front-end fuzz: {elapsed / 60:.1f} min, seed {args.seed}, stanc {args.stanc}, "
             f"time limit {args.time_limit:g} s per call, methods {', '.join(METHODS)}",
             f"inputs tried: {sum(tally.inputs.values())} "
             f"({', '.join(f'{g} {tally.inputs[g]}' for g in GENERATORS)}); transform calls: "
             f"{sum(tally.outcomes.values())}",
             f"{'calls by generator':<24}" + "".join(f"{k:>10}" for k in kinds)]
    for g in GENERATORS:
        lines.append(f"  {g:<22}" + "".join(f"{tally.outcomes[g, k]:>10}" for k in kinds))
    lines.append(f"successes (Stan code returned): "
                 f"{sum(tally.outcomes[g, 'ok'] for g in GENERATORS)}")
    lines.append(f"distinct error types: {len(tally.errors)}")
    for name, count in tally.errors.most_common():
        lines.append(f"  {name:<40}{count:>8}")
    lines.append(f"slowest call: {tally.slowest[0]:.3f} s ({tally.slowest[1]})")
    if tally.bugs:
        lines.append(f"foreign exceptions and hangs: {len(tally.bugs)}")
        lines.extend(f"  {b}" for b in tally.bugs)
    else:
        lines.append("foreign exceptions and hangs: none")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to fuzz")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first batch")
    parser.add_argument("--out", type=Path, default=Path("fuzz_front_end_failures"),
                        help="folder for the inputs that raised a foreign exception or hung")
    parser.add_argument("--time-limit", type=float, default=front_end_fuzz.TIME_LIMIT,
                        help="seconds one transform call may take")
    parser.add_argument("--batch", type=int, default=200,
                        help="inputs per Hypothesis run before switching generator")
    parser.add_argument("--stanc", choices=("fake", "real"), default="fake",
                        help="stanc that accepts everything (default), or the real one")
    args = parser.parse_args(argv)

    logging.getLogger("pemc_stan").setLevel(logging.ERROR)  # the methods' warnings, logged
    tally = Tally()
    started = time.monotonic()
    deadline = started + 60.0 * args.minutes
    stanc = front_end_fuzz.fake_stanc() if args.stanc == "fake" else contextlib.nullcontext()
    with stanc:
        batch = 0
        while time.monotonic() < deadline:
            for generator in GENERATORS:
                _batch(tally, generator, args.seed * 1_000_003 + batch, args.batch, deadline,
                       args.time_limit, args.out)
                batch += 1
    print(report(tally, args, time.monotonic() - started))
    return 1 if tally.bugs else 0


if __name__ == "__main__":
    sys.exit(main())
