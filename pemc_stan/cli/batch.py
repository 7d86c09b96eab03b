"""``pemc-stan batch``: many fits from a TOML/JSON file on a Dask cluster (local by default)."""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

from pemc_stan.cli.errors import ExitCode
from pemc_stan.cli.files import existing_file
from pemc_stan.errors import CliError

__all__ = ["add_parser", "run", "EPILOG"]

EPILOG = """\
batch file (TOML; JSON with a "tasks" list and "defaults" works the same):
  [defaults]                    # any task field, for every task
  method = "ct"
  [[task]]
  name = "normal"               # names the task's folder OUTPUT/normal/
  model = "normal.stan"         # relative to the batch file, or example:NAME
  data = "normal.json"
  seeds = {start = 1, count = 100}   # or seeds = [1, 2]: one task per seed
  options = {bootstrap_rounds = 2}   # the method's options
  sampler = {adapt_delta = 0.9}      # further cmdstanpy sample arguments
  # also: seed, chains, iter_warmup, iter_sampling

output (--output-dir, default ./<batch file stem>_output):
  <task>/          what `pemc-stan sample` writes, plus task.json (content key, seconds)
  summary.csv      per task: status, verdict and reasons, log Z and its standard
                   error, weighted means with MCSE, seconds, worker

A rerun skips the tasks whose folder holds a complete run of the same inputs.

exit codes: 0 every task ok, 8 some fit's verdict is suspect, 10 some task failed,
others as `pemc-stan sample`
"""


def add_parser(sub: Any) -> None:
    """Add the ``batch`` subcommand."""
    p = sub.add_parser(
        "batch", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="run many fits from a TOML/JSON file on a Dask cluster (local by default)",
        description=textwrap.fill(
            "Run every task of SPEC (model x data x method x options x seed), one fit "
            "each, on a Dask cluster: the scheduler at --scheduler, or a local cluster "
            "with --workers processes (default one per core). Needs the extra "
            "pemc-stan[distributed].", 79),
        epilog=EPILOG)
    p.add_argument("spec", metavar="SPEC", help="the batch file (.toml or .json)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="address of a running Dask scheduler (tcp://host:8786); default: a "
                        "local cluster")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="worker processes of the local cluster (default: one per core)")
    p.add_argument("--output-dir", metavar="DIR",
                   help="where each task's folder and summary.csv go "
                        "(default ./<SPEC stem>_output)")
    p.set_defaults(handler=run)


def _connect(address: str) -> Any:
    from distributed import Client

    try:
        return Client(address, timeout="20s")
    except (OSError, TimeoutError) as exc:
        raise CliError(f"no Dask scheduler answered at {address} ({exc})",
                       "check the address (tcp://host:8786) and that the scheduler runs, or "
                       "leave --scheduler out for a local cluster", ExitCode.USAGE) from None


def run(args: argparse.Namespace) -> ExitCode:
    """Load the tasks, run them, print the summary.

    Raises
    ------
    CliError
        For a missing file, Dask not installed, or no scheduler at the address.
    OptionsError, StanProgramError, DataError
        For an invalid task (before anything runs).
    """
    spec = existing_file(args.spec, "batch file")
    if args.workers is not None and args.workers < 1:
        raise CliError(f"--workers {args.workers} is invalid", "pass a number of worker "
                       "processes >= 1", ExitCode.USAGE)
    try:
        from pemc_stan import batch
    except ImportError as exc:
        raise CliError(str(exc), "pip install 'pemc-stan[distributed]'",
                       ExitCode.ERROR) from None
    if not args.debug:
        logging.getLogger("distributed").setLevel(logging.ERROR)
    tasks = batch.load_tasks(spec)
    out = Path(args.output_dir) if args.output_dir else Path.cwd() / f"{spec.stem}_output"
    quiet = bool(getattr(args, "quiet", False))

    def show(progress: Any) -> None:
        if not quiet:
            print(progress, file=sys.stderr, flush=True)

    client = _connect(args.scheduler) if args.scheduler else None
    try:
        result = batch.run(tasks, client, output_dir=out, workers=args.workers, progress=show)
    finally:
        if client is not None:
            client.close()
    columns = [c for c in ("task", "status", "verdict", "log_z", "log_z_se", "seconds", "error")
               if c in result.table.columns]
    import pandas as pd

    with pd.option_context("display.width", 140, "display.max_colwidth", 60,
                           "display.float_format", "{:.4g}".format):
        print(result.table[columns].to_string(index=False))
    print(f"wrote {len(tasks)} task folders and {result.summary_path.name} in {out}")
    if result.failed:
        return ExitCode.BATCH_FAILED
    return ExitCode.SUSPECT if result.suspect else ExitCode.OK
