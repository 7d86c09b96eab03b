"""Mutation check: does the test suite fail when an answer is made wrong on purpose?

Each mutation edits one line of the package's source (in place, in this checkout; an
editable install is needed so that the tests import the edited source), runs the tests
that should catch it, restores the file, and reports how many tests failed.  A mutation
that no test catches is printed as ``NOT CAUGHT`` and makes the script exit 1.

Mutations: (a) CT's log Z plus log 2; (b) CT's stratified log Z of one mode only (the
other mode's weight dropped); (c) PE's self-normalised weights replaced by uniform
weights; (d) the bridge estimate plus 0.3; (e) ``fit.check()`` always ok; (f) the
normalising constant of an upper truncation dropped from the full log density; (g) each
verdict threshold doubled, one at a time; (h) the mode split's groups weighed equally
instead of by their bridge-sampled masses.

Each test set is first run on the unmutated source: a set that fails there cannot show
a catch, and the script says so and exits 1.  Run it alone: the files are edited in
place (and restored on any exception or Ctrl-C, not on SIGKILL), so another process
importing this checkout meanwhile would see a mutation.

Usage::

    pip install -e '.[test]'      # the tests must import this checkout's source
    python benchmarks/mutation_check.py [--only a b g:RHAT_MAX] [--list]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "pemc_stan"
CT_FIT = PKG / "methods" / "continuous_tempering" / "fit.py"
PE_FIT = PKG / "methods" / "pseudo_extended" / "fit.py"
DIAG = PKG / "output" / "diagnostics.py"


@dataclass(frozen=True)
class Mutation:
    key: str
    what: str
    path: Path
    old: str
    new: str
    tests: tuple[str, ...]


VERDICT_TESTS = ("tests/sampling/test_verdict_reasons.py",)
THRESHOLDS = [  # (constant, file, its definition)
    ("DIVERGENT_SHARE_MAX", DIAG, "DIVERGENT_SHARE_MAX = 0.01"),
    ("RHAT_MAX", DIAG, "RHAT_MAX = 1.05"),
    ("ESS_MIN", DIAG, "ESS_MIN = 100.0"),
    ("CHAIN_Z_MAX", DIAG, "CHAIN_Z_MAX = 5.0"),
    ("BASE_Z_MAX", CT_FIT, "BASE_Z_MAX = 4.5"),
    ("BETA_END_SHARE_MIN", CT_FIT, "BETA_END_SHARE_MIN = 0.01"),
    ("ROUND_TRIPS_MIN", CT_FIT, "ROUND_TRIPS_MIN = 1"),
    ("DENSITY_FAILURES_MAX", PE_FIT, "DENSITY_FAILURES_MAX = 0.01"),
    ("BETA_PILE_SHARE_MAX", PE_FIT, "BETA_PILE_SHARE_MAX = 0.9"),
]

MUTATIONS = [
    Mutation("a", "CT's log Z plus log 2", CT_FIT,
             "        return T.log_z_estimate(self.delta(), self.log_zeta, strata=self.strata(),\n"
             "                                bias=self.bias)",
             "        e = T.log_z_estimate(self.delta(), self.log_zeta, strata=self.strata(),\n"
             "                             bias=self.bias)\n"
             "        return EvidenceEstimate(e.log_z + 0.6931471805599453, e.std_error,\n"
             "                                e.method, e.diagnostics)",
             ("tests/methods/continuous_tempering/test_fit.py",)),
    Mutation("b", "CT's log Z of one mode only", PKG / "methods" / "continuous_tempering"
             / "tempering.py",
             "        log_d = float(logsumexp(np.asarray(strata.log_mass, dtype=float)[used] "
             "+ ratio[used]))",
             "        log_d = float((np.asarray(strata.log_mass, dtype=float)[used] "
             "+ ratio[used])[0])",
             ("tests/methods/continuous_tempering/test_tempering.py",
              "tests/methods/continuous_tempering/test_sampling.py::"
              "test_bimodal_mode_masses_where_nuts_is_stuck")),
    Mutation("c", "PE's weights replaced by uniform weights", PE_FIT,
             "        return np.where(np.isnan(lw), -np.inf, lw)",
             "        return np.zeros_like(lw)",
             ("tests/methods/pseudo_extended/test_fit.py",
              "tests/methods/pseudo_extended/test_estimators.py")),
    Mutation("d", "the bridge estimate plus 0.3", PKG / "estimators" / "log_z.py",
             "    return EvidenceEstimate(float(log_z), float(np.sqrt(re2)), method, diagnostics)",
             "    return EvidenceEstimate(float(log_z) + 0.3, float(np.sqrt(re2)), method, "
             "diagnostics)",
             ("tests/estimators/test_log_z.py",)),
    Mutation("e", "fit.check() always ok", PKG / "sampling" / "fit.py",
             "        return Verdict(tuple(reasons), tuple(names))",
             "        return Verdict((), tuple(names))",
             VERDICT_TESTS),
    Mutation("f", "an upper truncation's constant dropped", PKG / "stan" / "logdensity.py",
             '            norm = scaled(cdf("lcdf", upper))',
             '            norm = ast.IntLit("0")',
             ("tests/modes/test_density_constants.py",)),
    Mutation("h", "the mode split's groups weighed equally", PKG / "modes" / "split_fit.py",
             "        return mixture_weights([e.log_z for e in self.mode_log_z])",
             "        return np.full(len(self.mode_log_z), 1.0 / len(self.mode_log_z))",
             ("tests/modes/test_split_fit.py",)),
    *(Mutation(f"g:{name}", f"{name} doubled", path, line,
               line.replace(" = ", " = 2 * ", 1), VERDICT_TESTS)
      for name, path, line in THRESHOLDS),
]


def _pytest(tests: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-x", *tests], cwd=ROOT, capture_output=True, text=True, check=False)


def run(m: Mutation) -> tuple[int, float, str]:
    """Apply ``m``, run its tests, restore; return (failed tests, seconds, the first
    failure's line)."""
    text = m.path.read_text()
    if text.count(m.old) != 1:
        raise SystemExit(f"mutation {m.key}: the line to edit is not found once in {m.path}")
    started = time.perf_counter()
    try:
        m.path.write_text(text.replace(m.old, m.new))
        proc = _pytest(m.tests)
    finally:
        m.path.write_text(text)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    failed = len(lines) or (1 if proc.returncode != 0 else 0)  # a collection error fails too
    first = lines[0] if lines else proc.stdout.strip().splitlines()[-1] if proc.stdout else ""
    return failed, time.perf_counter() - started, first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", help="mutation keys (a ... f, g:CONSTANT, h)")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.key in args.only
              or (m.key.startswith("g:") and "g" in args.only)]
    if args.list:
        for m in chosen:
            print(f"{m.key:<24} {m.what}  [{', '.join(m.tests)}]")
        return 0
    for tests in dict.fromkeys(m.tests for m in chosen):
        baseline = _pytest(tests)
        if baseline.returncode != 0:
            print(f"the unmutated source fails {', '.join(tests)}: "
                  f"{baseline.stdout.strip().splitlines()[-1:]}")
            return 1
    print("every test set passes on the unmutated source")
    missed = 0
    print(f"{'mutation':<24} {'caught':<10} {'seconds':>8}  what / the first failure")
    for m in chosen:
        failed, seconds, first = run(m)
        missed += failed == 0
        verdict = "yes" if failed else "NOT CAUGHT"
        print(f"{m.key:<24} {verdict:<10} {seconds:>8.1f}  {m.what}\n{'':<44}{first[:150]}",
              flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
