"""Many fits, and one fit's chains, on a Dask cluster (``pip install 'pemc-stan[distributed]'``).

* :func:`run` — a batch of :class:`Task` (model × data × method × options ×
  seed), each written to its own output folder (the files ``pemc-stan
  sample`` writes), a rerun skipping finished tasks, a summary CSV;
  ``pemc-stan batch SPEC`` on the command line.
* ``pemc_stan.sample(..., client=client)`` — one fit's chains as separate
  tasks, with the draws of the same fit run in one process.

Without a ``client`` (or ``--scheduler``), a local cluster with one worker
process per core is started and closed.  Dask ``distributed`` is the engine:
any of its clusters works (``dask-jobqueue`` for SLURM/PBS,
``dask-kubernetes``), and a worker lost mid-task has its task rerun on
another worker with the same result.
"""

from __future__ import annotations

try:
    import distributed as _distributed  # noqa: F401 - checked here, used by the runner
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "pemc_stan.batch needs Dask's distributed scheduler, which is not installed; "
        "install the extra: pip install 'pemc-stan[distributed]'") from _exc

from pemc_stan.backend.chains import DaskChainRunner
from pemc_stan.batch.runner import BatchResult, TaskOutcome, local_client, run
from pemc_stan.batch.tasks import ResolvedTask, Task, load_tasks, tasks_from

__all__ = ["Task", "ResolvedTask", "TaskOutcome", "BatchResult", "run", "load_tasks",
           "tasks_from", "local_client", "DaskChainRunner"]
