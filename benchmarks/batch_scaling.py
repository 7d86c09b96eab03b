"""Wall time of one 16-fit batch on a local Dask cluster with 1 and with 2 worker processes.

The same 16 tasks (CT and PE with their defaults on the normal–normal, linear
regression and bimodal 1-D examples, seeded) run twice, into two fresh
folders, first with one worker and then with two; each worker has one thread,
so a fit's chains share one core.  Models are compiled before timing (the
content-hash cache), so both runs time sampling and post-processing only.
Also checked: the two runs' ``estimates.json`` files are byte-identical.

Usage::

    python benchmarks/batch_scaling.py [--max-workers 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "batch_scaling.jsonl"

TASKS = [
    {"name": "nn-ct", "model": "example:normal_normal", "method": "ct", "seeds": [1, 2, 3]},
    {"name": "nn-pe", "model": "example:normal_normal", "method": "pe", "seeds": [1, 2, 3]},
    {"name": "lr-ct", "model": "example:linear_regression", "method": "ct", "seeds": [1, 2, 3]},
    {"name": "lr-pe", "model": "example:linear_regression", "method": "pe", "seeds": [1, 2]},
    {"name": "bimodal-ct", "model": "example:bimodal_1d", "method": "ct", "seeds": [1, 2, 3]},
    {"name": "bimodal-pe", "model": "example:bimodal_1d", "method": "pe", "seeds": [1, 2]},
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-workers", type=int, default=2)
    args = parser.parse_args(argv)

    from pemc_stan import batch
    from pemc_stan.backend import runtime

    runtime.activate(show_progress=True)
    tasks = batch.tasks_from(TASKS)
    assert len(tasks) == 16, len(tasks)
    work = Path(tempfile.mkdtemp(prefix="pemc_batch_scaling_"))
    try:
        # compile every program once, outside the timings
        batch.run([dict(t, seeds=[1], iter_warmup=10, iter_sampling=10) for t in TASKS],
                  output_dir=work / "warm", workers=1)
        seconds: dict[int, float] = {}
        estimates: dict[int, dict[str, bytes]] = {}
        for workers in range(1, args.max_workers + 1):
            out = work / f"w{workers}"
            start = time.perf_counter()
            result = batch.run(tasks, output_dir=out, workers=workers)
            seconds[workers] = time.perf_counter() - start
            if result.failed:
                print(f"failed tasks with {workers} workers: {result.failed}")
            estimates[workers] = {p.parent.name: p.read_bytes()
                                  for p in out.glob("*/estimates.json")}
        identical = all(estimates[w] == estimates[1] for w in estimates)
        print(f"16-fit batch (CT and PE, defaults: 4 chains x 1000 draws), local cluster, "
              f"1 thread per worker; {sys.platform}, estimates identical across runs: "
              f"{identical}")
        print(f"{'workers':>7} {'wall s':>8} {'speed-up':>8}")
        for workers, s in seconds.items():
            print(f"{workers:>7} {s:>8.1f} {seconds[1] / s:>8.2f}")
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a") as f:
            f.write(json.dumps({"seconds": seconds, "identical": identical}) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
