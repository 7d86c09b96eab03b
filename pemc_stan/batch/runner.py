"""Run a batch of fits on a Dask cluster; write each into its own folder; resume; summarise.

Each task runs on a worker exactly as ``pemc-stan sample`` runs on one
machine (same seed, same files), in a temporary folder of the worker; its
files come back to the client, which moves them into ``OUTPUT/<task name>/``
through :class:`~pemc_stan.output.folder.RunFolder` (so a folder is either a
complete run or untouched) with a record ``task.json`` of the task's content
key.  A rerun skips every task whose folder holds a complete run with the same
key; a task whose inputs changed is run again and replaces its folder.
``OUTPUT/summary.csv`` gathers, per task, the status, the verdict and its
reasons, log Z with its standard error, the weighted means with their MCSE,
and the cost (seconds on the worker).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import socket
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pemc_stan.batch.tasks import ResolvedTask, Task, tasks_from
from pemc_stan.output.folder import MANIFEST_NAME, RunFolder, write_text_atomically

logger = logging.getLogger(__name__)

__all__ = ["run", "execute", "local_client", "TaskOutcome", "BatchResult", "Progress",
           "SUMMARY_NAME", "TASK_RECORD"]

SUMMARY_NAME = "summary.csv"
TASK_RECORD = "task.json"


@dataclass(frozen=True)
class TaskOutcome:
    """What became of one task.

    Attributes
    ----------
    name
        The task's name (its folder's name).
    status
        ``"done"`` (run now), ``"skipped"`` (complete from an earlier run with
        the same inputs), ``"failed"`` or ``"not run"`` (the batch was
        interrupted first).
    folder
        Its output folder.
    error
        Why it failed (one line), else None.
    estimates
        The content of its ``estimates.json`` (empty unless done or skipped).
    record
        The content of its ``task.json`` (key, seconds, worker).
    """

    name: str
    status: str
    folder: Path
    error: str | None = None
    estimates: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """One row of the summary table."""
        est = self.estimates
        verdict = est.get("verdict") or {}
        log_z = est.get("log_z") or {}
        sampler = est.get("sampler") or {}
        row: dict[str, Any] = {
            "task": self.name, "status": self.status, "method": est.get("method"),
            "model": est.get("model"), "seed": sampler.get("seed"),
            "verdict": verdict.get("status"),
            "reasons": "; ".join(str(r.get("name", r)) if isinstance(r, Mapping) else str(r)
                                 for r in verdict.get("reasons", [])),
            "log_z": log_z.get("log_z"), "log_z_se": log_z.get("std_error"),
            "log_z_method": log_z.get("method"),
            "seconds": self.record.get("seconds"), "worker": self.record.get("worker"),
            "error": self.error,
        }
        for name, values in (est.get("expectations") or {}).items():
            row[f"mean[{name}]"] = values.get("mean")
            row[f"mcse[{name}]"] = values.get("mcse")
        return row


@dataclass(frozen=True)
class BatchResult:
    """The outcomes of a batch, in task order, and the summary file.

    Attributes
    ----------
    outcomes
        One :class:`TaskOutcome` per task.
    summary_path
        ``OUTPUT/summary.csv``.
    """

    outcomes: tuple[TaskOutcome, ...]
    summary_path: Path

    def names(self, status: str) -> list[str]:
        """The names of the tasks with a status (``"done"``, ``"skipped"``, ...)."""
        return [o.name for o in self.outcomes if o.status == status]

    @property
    def ran(self) -> list[str]:
        """Tasks run by this call."""
        return self.names("done")

    @property
    def failed(self) -> list[str]:
        """Tasks that failed."""
        return self.names("failed")

    @property
    def suspect(self) -> list[str]:
        """Tasks whose fit's verdict is suspect."""
        return [o.name for o in self.outcomes
                if (o.estimates.get("verdict") or {}).get("status") == "suspect"]

    @property
    def table(self) -> pd.DataFrame:
        """The summary table (as written to :attr:`summary_path`)."""
        return _table(self.outcomes)


@dataclass(frozen=True)
class Progress:
    """Counts passed to a progress callback after every change."""

    total: int
    done: int
    skipped: int
    failed: int
    running: int

    def __str__(self) -> str:
        finished = self.done + self.skipped
        return (f"batch: {finished}/{self.total} finished ({self.skipped} skipped), "
                f"{self.running} running, {self.failed} failed")


def _table(outcomes: Iterable[TaskOutcome]) -> pd.DataFrame:
    return pd.DataFrame([o.row() for o in outcomes])


# ---------------------------------------------------------------------- worker side
def _pack(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


def _worker_threads() -> int:
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return 1


def execute(task: ResolvedTask) -> dict[str, Any]:
    """Run one task in a temporary folder; return its files (runs on a worker).

    The fit's chains use as many threads as the worker has (``parallel_chains``,
    unless the task sets it), so a worker is one unit of CPU.  cmdstanpy's
    INFO messages are silenced in the worker process.

    Returns
    -------
    dict
        ``{"archive": zip bytes, "seconds", "worker"}``, or ``{"error": one
        line, "seconds", "worker"}`` when the task failed: returned, not
        raised, so that a failing task is not retried on other workers (a
        *lost* worker's task is rerun by Dask).

    Raises
    ------
    KeyboardInterrupt
        Only when the worker itself is interrupted.
    """
    from pemc_stan._version import __version__
    from pemc_stan.output.writers import save_fit
    from pemc_stan.run.pipeline import sample
    from pemc_stan.stan.inputs import read_program

    start = time.perf_counter()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    # cmdstanpy's per-chain INFO lines from every worker would bury the batch's progress
    import cmdstanpy.utils

    cmdstanpy_logger = cmdstanpy.utils.get_logger()  # configures itself on first use
    cmdstanpy_logger.setLevel(max(cmdstanpy_logger.getEffectiveLevel(), logging.WARNING))
    extra = dict(task.extra)
    extra.setdefault("parallel_chains", _worker_threads())
    try:
        with tempfile.TemporaryDirectory(prefix="pemc_task_") as tmp:
            stage = Path(tmp) / "run"
            program = read_program(task.program_text, task.model_name)
            fit = sample(program, data=task.data, method=task.method,
                         chains=task.sampler["chains"], iter_warmup=task.sampler["iter_warmup"],
                         iter_sampling=task.sampler["iter_sampling"],
                         seed=task.sampler["seed"], output_dir=str(stage / "cmdstan"),
                         **task.options, **extra)
            save_fit(fit, stage, name=task.model_name, model_label=task.model_label,
                     data_label=task.data_label, sampler=task.sampler)
            seconds = time.perf_counter() - start
            record = {"name": task.name, "key": task.key, "seconds": round(seconds, 3),
                      "worker": worker, "pemc_stan": __version__}
            (stage / TASK_RECORD).write_text(json.dumps(record, indent=1) + "\n")
            return {"archive": _pack(stage), "seconds": seconds, "worker": worker}
    except Exception as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        logger.warning("task %s failed on %s: %s", task.name, worker, message)
        return {"error": message, "seconds": time.perf_counter() - start, "worker": worker}


# ---------------------------------------------------------------------- client side
def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _complete(folder: Path, key: str) -> bool:
    """Whether ``folder`` holds a complete run of the task with content key ``key``."""
    files = _read_json(folder / MANIFEST_NAME).get("files", [])
    if TASK_RECORD not in files or "estimates.json" not in files:
        return False
    return _read_json(folder / TASK_RECORD).get("key") == key and all(
        (folder / f).exists() for f in files)


def _is_batch_folder(folder: Path) -> bool:
    """Whether ``folder``'s earlier results (if any) are a batch task's (replaceable)."""
    return TASK_RECORD in _read_json(folder / MANIFEST_NAME).get("files", [])


def _finished(name: str, folder: Path, status: str) -> TaskOutcome:
    return TaskOutcome(name, status, folder, estimates=_read_json(folder / "estimates.json"),
                       record=_read_json(folder / TASK_RECORD))


def _store(task: ResolvedTask, folder: Path, archive: bytes) -> None:
    """Unpack a task's files into its folder through a :class:`RunFolder`.

    Raises
    ------
    OutputPathError, OutputFolderBusyError
        When the folder cannot be used (e.g. it holds files that are not a
        batch task's results).
    """
    with RunFolder(folder, overwrite=_is_batch_folder(folder)) as run_folder:
        with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
            for member in zipped.namelist():
                target = (run_folder.staging / member).resolve()
                if run_folder.staging.resolve() not in target.parents:
                    raise ValueError(f"task {task.name} returned a file outside its folder: "
                                     f"{member}")
            zipped.extractall(run_folder.staging)
        run_folder.commit()


@contextlib.contextmanager
def local_client(workers: int | None = None) -> Iterator[Any]:
    """A ``distributed.Client`` of a local cluster: ``workers`` processes (default: one per
    core), one thread each; closed on exit.

    Raises
    ------
    ImportError
        Without Dask installed.
    """
    from distributed import Client, LocalCluster

    n = workers or os.cpu_count() or 1
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        yield client


def _running(client: Any, keys: set[str]) -> int:
    """Tasks of ours on workers, at most one per worker thread (Dask also queues a few
    more on each worker ahead of time)."""
    try:
        processing = client.processing()
        threads = sum(client.nthreads().values())
    except Exception:
        return 0
    return min(threads, sum(1 for tasks in processing.values() for k in tasks if k in keys))


def run(tasks: Iterable[Task | Mapping[str, Any]], client: Any = None, *,
        output_dir: str | os.PathLike[str] = "batch_output", workers: int | None = None,
        progress: Callable[[Progress], None] | None = None) -> BatchResult:
    """Run a batch of fits; resume where an earlier run of the batch stopped.

    Parameters
    ----------
    tasks
        :class:`Task` objects or dicts of their fields (see
        :func:`pemc_stan.batch.load_tasks` for files).
    client
        A ``distributed.Client``; None starts a local cluster with ``workers``
        processes (default one per core) for the call.
    output_dir
        Where each task's folder and ``summary.csv`` go.
    workers
        Workers of the local cluster (ignored with ``client``).
    progress
        Called with a :class:`Progress` after every change (the CLI prints it).

    Returns
    -------
    BatchResult

    Raises
    ------
    OptionsError, StanProgramError, DataError, OSError
        For an invalid task (program, data, options), before anything is submitted.
    KeyboardInterrupt
        When interrupted: tasks not finished are cancelled, finished ones kept,
        and ``summary.csv`` lists every task's status so far.
    """
    task_list = tasks_from(tasks)
    programs: dict[str, Any] = {}
    resolved = [t.resolve(programs) for t in task_list]  # every error before any work
    root = Path(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    outcomes: dict[str, TaskOutcome] = {}
    pending: list[ResolvedTask] = []
    for t in resolved:
        folder = root / t.name
        if _complete(folder, t.key):
            outcomes[t.name] = _finished(t.name, folder, "skipped")
        else:
            pending.append(t)
    logger.info("batch of %d tasks: %d complete from an earlier run, %d to run", len(resolved),
                len(outcomes), len(pending))

    last: list[Progress] = []

    def report(running: int) -> None:
        counts = [o.status for o in outcomes.values()]
        state = Progress(len(resolved), counts.count("done"), counts.count("skipped"),
                         counts.count("failed"), running)
        if last and last[-1] == state:
            return
        last[:] = [state]
        logger.debug("%s", state)
        if progress is not None:
            progress(state)

    report(0)
    try:
        if pending:
            if client is None:
                with local_client(workers) as own:
                    _submit_all(own, pending, root, outcomes, report)
            else:
                _submit_all(client, pending, root, outcomes, report)
    finally:
        ordered = tuple(outcomes.get(t.name) or TaskOutcome(t.name, "not run", root / t.name)
                        for t in resolved)
        summary = root / SUMMARY_NAME
        write_text_atomically(summary, _table(ordered).to_csv(index=False))
    return BatchResult(ordered, summary)


def _submit_all(client: Any, pending: list[ResolvedTask], root: Path,
                outcomes: dict[str, TaskOutcome], report: Callable[[int], None]) -> None:
    from distributed import as_completed

    futures = {client.submit(execute, t, key=f"pemc-task-{t.name}-{t.key[:16]}", pure=False,
                             retries=0): t for t in pending}
    keys = {f.key for f in futures}
    report(_running(client, keys))
    try:
        for future in as_completed(futures):
            task = futures[future]
            folder = root / task.name
            try:
                result = future.result()
            except Exception as exc:
                result = {"error": " ".join(f"{type(exc).__name__}: {exc}".split())}
            if "error" in result:
                outcomes[task.name] = TaskOutcome(task.name, "failed", folder,
                                                  error=result["error"])
            else:
                try:
                    _store(task, folder, result["archive"])
                    outcomes[task.name] = _finished(task.name, folder, "done")
                except Exception as exc:
                    outcomes[task.name] = TaskOutcome(
                        task.name, "failed", folder, error=" ".join(str(exc).split()))
            future.release()
            report(_running(client, keys))
    except BaseException:
        client.cancel(list(futures))
        raise
