"""Batches and distributed chains on local Dask clusters of worker processes.

Every promise is checked by comparing with the same work done another way:
1 worker against 2, a cluster's chains against one process, a batch that lost
a worker against one that did not, and a resumed batch by the runs it made.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed")  # the extra; CI installs it with the test extra

import pemc_stan
from pemc_stan import batch
from pemc_stan.stan.examples import example

pytestmark = pytest.mark.compiled

ITER = {"iter_warmup": 300, "iter_sampling": 300}
SMALL = [  # six small fits of two models and both methods
    {"name": "nn-ct", "model": "example:normal_normal", "method": "ct", "seeds": [1, 2, 3], **ITER},
    {"name": "nn-pe", "model": "example:normal_normal", "method": "pe", "seeds": [1, 2], **ITER},
    {"name": "bimodal-ct", "model": "example:bimodal_1d", "method": "ct", "seed": 4, **ITER},
]
COST_COLUMNS = ["seconds", "worker"]


@pytest.fixture(scope="module")
def runtime_ready(cmdstan_installation: Any) -> None:
    """The runtime (and the models) ready before worker processes start using them."""


@pytest.fixture(scope="module")
def two_workers(runtime_ready: None) -> Iterator[Any]:
    with batch.local_client(2) as client:
        yield client


def _estimates(folder: Path) -> dict[str, bytes]:
    """Each task's estimates.json, but for its wall seconds (the machine's, not the run's)."""
    out = {}
    for p in sorted(folder.glob("*/estimates.json")):
        estimates = json.loads(p.read_bytes())
        for key in ("seconds", "stage_seconds"):
            (estimates.get("cost") or {}).pop(key, None)
        out[p.parent.name] = json.dumps(estimates, indent=2).encode()
    return out


def _summary(result: batch.BatchResult) -> pd.DataFrame:
    return pd.read_csv(result.summary_path).drop(columns=COST_COLUMNS)


def test_a_batch_gives_identical_estimates_with_one_and_two_workers(
        tmp_path: Path, two_workers: Any) -> None:
    with batch.local_client(1) as one:
        alone = batch.run(SMALL, one, output_dir=tmp_path / "one")
    shared = batch.run(SMALL, two_workers, output_dir=tmp_path / "two")
    assert alone.ran == shared.ran and len(alone.ran) == 6 and not alone.failed
    assert len({o.record["worker"] for o in shared.outcomes}) == 2  # both workers worked
    one_estimates, two_estimates = _estimates(tmp_path / "one"), _estimates(tmp_path / "two")
    assert len(one_estimates) == 6 and one_estimates == two_estimates
    pd.testing.assert_frame_equal(_summary(alone), _summary(shared))
    table = shared.table.set_index("task")
    assert table.loc["nn-ct-seed1", "log_z"] == pytest.approx(-31.632, abs=0.05)
    for name in ("nn-ct-seed1", "nn-pe-seed1"):  # the estimates are the fits' own
        assert np.isfinite(table.loc[name, "mean[mu]"])


def test_one_fits_chains_on_two_workers_are_the_chains_of_one_process(
        two_workers: Any) -> None:
    stan, data = example("example:bimodal_1d")
    # PE towards a base also starts every chain at its own draws from the base
    # (the methods' own runs: a run that split the modes runs here, not on the workers)
    never = {"split_modes": "never"}
    for method, kw in (("ct", never), ("pe", never), ("pe", {"temper": "base", **never})):
        here = pemc_stan.sample(stan, data=data, method=method, seed=11, chains=4, **kw,
                                **ITER)
        spread = pemc_stan.sample(stan, data=data, method=method, seed=11, chains=4,
                                  client=two_workers, **kw, **ITER)
        assert spread.fit.chains == 4
        np.testing.assert_array_equal(here._draws, spread._draws)
        np.testing.assert_array_equal(here.particle_log_weights(), spread.particle_log_weights())
        assert here.expectation("x") == spread.expectation("x")
        assert here.check().status == spread.check().status
        if method == "ct":
            assert here.log_z() == spread.log_z()
            assert len(here.history) == len(spread.history)


class _KillWhenBusy(threading.Thread):
    """Kills (SIGKILL) the first worker process seen computing a batch task."""

    def __init__(self, client: Any) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.pids: dict[str, int] = client.run(os.getpid)
        self.killed: int | None = None

    def run(self) -> None:
        deadline = time.monotonic() + 300
        while self.killed is None and time.monotonic() < deadline:
            for address, keys in self.client.processing().items():
                if any(str(k).startswith("pemc-task-") for k in keys) and address in self.pids:
                    time.sleep(0.5)  # inside the task: compiling or sampling
                    self.killed = self.pids[address]
                    os.kill(self.killed, signal.SIGKILL)
                    return
            time.sleep(0.05)


def test_a_batch_that_loses_a_worker_mid_task_completes_with_the_same_results(
        tmp_path: Path, runtime_ready: None) -> None:
    tasks = [{"name": "bimodal", "model": "example:bimodal_1d", "method": "ct",
              "seeds": [1, 2, 3, 4]}]
    with batch.local_client(2) as client:
        killer = _KillWhenBusy(client)
        killer.start()
        lost = batch.run(tasks, client, output_dir=tmp_path / "lost")
        killer.join()
        assert killer.killed is not None
        with pytest.raises(ProcessLookupError):
            os.kill(killer.killed, 0)
        whole = batch.run(tasks, client, output_dir=tmp_path / "whole")
    assert not lost.failed and len(lost.ran) == 4 and len(whole.ran) == 4
    assert all(o.record["worker"].split(":")[-1] != str(killer.killed) for o in lost.outcomes)
    assert _estimates(tmp_path / "lost") == _estimates(tmp_path / "whole")


def test_an_interrupted_batch_rerun_runs_only_the_unfinished_tasks(
        tmp_path: Path, two_workers: Any) -> None:
    out = tmp_path / "out"

    def stop_after_two(progress: batch.runner.Progress) -> None:
        if progress.done >= 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        batch.run(SMALL, two_workers, output_dir=out, progress=stop_after_two)
    first = pd.read_csv(out / "summary.csv")
    finished = sorted(first.loc[first["status"] == "done", "task"])
    assert len(finished) == 2 and set(first["status"]) <= {"done", "not run"}
    stamps = {n: (out / n / "task.json").stat().st_mtime_ns for n in finished}

    again = batch.run(SMALL, two_workers, output_dir=out)
    assert sorted(again.names("skipped")) == finished
    assert len(again.ran) == 6 - 2 and not set(again.ran) & set(finished)
    assert {n: (out / n / "task.json").stat().st_mtime_ns for n in finished} == stamps
    third = batch.run(SMALL, two_workers, output_dir=out)
    assert third.ran == [] and len(third.names("skipped")) == 6

    changed = [dict(SMALL[0], seeds=[1]), *SMALL[1:]]  # nn-ct-seed1 unchanged: skipped
    changed[1] = dict(SMALL[1], iter_sampling=400)     # the PE tasks' inputs changed: rerun
    fourth = batch.run(changed, two_workers, output_dir=out)
    assert sorted(fourth.ran) == ["nn-pe-seed1", "nn-pe-seed2"]


def test_the_batch_command_runs_a_file_and_resumes(tmp_path: Path, runtime_ready: None,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from pemc_stan.cli import ExitCode, main

    spec = tmp_path / "fits.toml"
    spec.write_text("[defaults]\nmethod = 'ct'\niter_warmup = 300\niter_sampling = 300\n"
                    "[[task]]\nname = 'nn'\nmodel = 'example:normal_normal'\nseeds = [1, 2]\n")
    out = tmp_path / "out"
    assert main(["batch", str(spec), "--workers", "1", "--output-dir", str(out)]) == ExitCode.OK
    printed = capsys.readouterr()
    assert "nn-seed1" in printed.out and "done" in printed.out
    assert "batch: 2/2 finished" in printed.err
    table = pd.read_csv(out / "summary.csv")
    assert list(table["status"]) == ["done", "done"] and list(table["verdict"]) == ["ok", "ok"]
    assert main(["batch", str(spec), "--workers", "1", "--output-dir", str(out)]) == ExitCode.OK
    assert list(pd.read_csv(out / "summary.csv")["status"]) == ["skipped", "skipped"]
    assert main(["batch", str(spec), "--scheduler", "tcp://127.0.0.1:9",
                 "--output-dir", str(out)]) == ExitCode.USAGE
    assert "no Dask scheduler answered at tcp://127.0.0.1:9" in capsys.readouterr().err


def test_a_failing_task_is_reported_and_the_others_finish(tmp_path: Path,
                                                          two_workers: Any) -> None:
    rejecting = ("parameters { real x; }\n"
                 "model { x ~ normal(0, 1); reject(\"this model rejects every x\"); }\n")
    tasks = [{"name": "good", "model": "example:bimodal_1d", "method": "pe", "seed": 1, **ITER},
             {"name": "bad", "model": rejecting, "method": "pe", "seed": 1, **ITER}]
    result = batch.run(tasks, two_workers, output_dir=tmp_path)
    assert result.ran == ["good"] and result.failed == ["bad"]
    error = result.table.set_index("task").loc["bad", "error"]
    assert "this model rejects every x" in error
    assert not (tmp_path / "bad").exists() or not (tmp_path / "bad" / "estimates.json").exists()
    assert list(pd.read_csv(result.summary_path)["status"]) == ["done", "failed"]
