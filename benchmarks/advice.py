"""Following the advice: every multimodal validation case run as a user of the command line
would, doing what a suspect run says is left until it says nothing is.

Each (case, method, seed) is ``pemc-stan sample model.stan --data data.json --method M
--seed S`` with the defaults.  Exit code 8 prints ``remedy left: --budget N``: the run is
made again with those flags, verbatim, and so on; exit code 0 (ok) or 11 (``no remedy
left: ...``, the final statement) ends the ladder.  A ladder that has not ended after
:data:`MAX_RUNS` runs is a failure of the advice, as is any other exit code.

Prints one row per ladder (the exit codes in turn, the budgets, the last verdict's
reasons, the wall time of all its runs) and a summary line; ``--results`` keeps one JSON
record per ladder.

Usage::

    python benchmarks/advice.py --seeds 1 2
    python benchmarks/advice.py --cases boltzmann_20 --methods pe --seeds 1
    python benchmarks/advice.py --report              # the table from the results file
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validation import VALIDATION, cases  # the same cases, same folders

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "advice.jsonl"
#: Runs a ladder may take before the advice counts as not converging (the default budget,
#: then the two larger ones the command line advises, and one to spare).
MAX_RUNS = 4
#: The command line's last word on a suspect run that a larger budget can still change.
REMEDY = re.compile(r"^remedy left: (--budget \S+)", re.MULTILINE)
#: Exit codes that end a ladder: ok, and suspect with no remedy left.
ENDS = {0: "ok", 11: "final"}


def ladder(folder: Path, method: str, seed: int, work: Path) -> dict[str, Any]:
    """Run one case, following ``remedy left`` verbatim until the verdict or the final
    statement: the exit codes, flags, reasons and wall seconds of each run."""
    data = folder / "data.json"
    base = [sys.executable, "-m", "pemc_stan", "sample", str(folder / "model.stan"),
            "--method", method, "--seed", str(seed), "--no-plots",
            "--output-dir", str(work), "--overwrite"]
    if data.is_file():
        base[5:5] = ["--data", str(data)]
    flags: list[str] = []
    runs: list[dict[str, Any]] = []
    while len(runs) < MAX_RUNS:
        start = time.monotonic()
        proc = subprocess.run([*base, *flags], capture_output=True, text=True)
        seconds = time.monotonic() - start
        reasons = _reasons(work)
        runs.append({"flags": " ".join(flags), "code": proc.returncode,
                     "seconds": round(seconds, 1), "reasons": reasons,
                     "last_line": (proc.stdout.strip().splitlines() or [""])[-1][:300]})
        if proc.returncode in ENDS:
            break
        advice = REMEDY.search(proc.stdout)
        if proc.returncode != 8 or advice is None:
            runs[-1]["stderr"] = proc.stderr.strip()[-600:]
            break
        flags = advice.group(1).split()
    last = runs[-1]["code"]
    return {"ended": ENDS.get(last, "not ended" if last == 8 else f"exit {last}"),
            "runs": runs, "seconds": round(sum(r["seconds"] for r in runs), 1)}


def _reasons(work: Path) -> list[str]:
    """The reasons of the verdict a run wrote (none when it wrote no estimates)."""
    try:
        record = json.loads((work / "estimates.json").read_text())
    except (OSError, ValueError):
        return []
    verdict = record.get("verdict") or {}
    return [str(r.get("name", r)) if isinstance(r, dict) else str(r)
            for r in verdict.get("reasons", [])]


def row(r: dict[str, Any]) -> str:
    """One ladder in one line."""
    codes = " -> ".join(str(run["code"]) for run in r["runs"])
    budgets = ", ".join(run["flags"] or "defaults" for run in r["runs"])
    why = ",".join(r["runs"][-1]["reasons"]) or "-"
    return (f"{r['case']:22s} {r['method']:3s} s{r['seed']}  {r['ended']:9s} "
            f"{codes:16s} {r['seconds']:7.1f}s  {why:28s} {budgets}")


def summary(records: list[dict[str, Any]]) -> str:
    """How the ladders ended, counted."""
    ended: dict[str, int] = {}
    for r in records:
        ended[r["ended"]] = ended.get(r["ended"], 0) + 1
    followed = sum(1 for r in records if len(r["runs"]) > 1)
    return (f"{len(records)} ladders: " + ", ".join(f"{k} {v}" for k, v in sorted(ended.items()))
            + f"; {followed} followed the advice at least once; longest "
            f"{max((len(r['runs']) for r in records), default=0)} runs")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="*", default=None, help="case names (default: every "
                   "multimodal case)")
    p.add_argument("--methods", nargs="*", default=["ct", "pe"], choices=["ct", "pe"])
    p.add_argument("--seeds", nargs="*", type=int, default=[1, 2])
    p.add_argument("--validation", type=Path, default=VALIDATION)
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--report", action="store_true", help="print the table and stop")
    args = p.parse_args(argv)
    if args.report:
        records = [json.loads(line) for line in args.results.read_text().splitlines()]
        print("\n".join(row(r) for r in records))
        print(summary(records))
        return 0
    chosen = {name: case for name, case in cases(args.validation).items()
              if case["kind"] == "multimodal" and (not args.cases or name in args.cases)}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for name, case in chosen.items():
                for method in args.methods:
                    record = {"case": name, "method": method, "seed": seed,
                              **ladder(case["folder"], method, seed, Path(tmp) / "run")}
                    records.append(record)
                    with args.results.open("a") as f:
                        f.write(json.dumps(record) + "\n")
                    print(row(record), flush=True)
    print(summary(records))
    return 0 if all(r["ended"] in ENDS.values() for r in records) else 1


if __name__ == "__main__":
    raise SystemExit(main())
