"""Durable job history on the real Slurm test cluster: a restarted app sends no sacct id
for a run whose end is recorded, and a job id Slurm has never heard of ends LOST.

The jobs are one-line batch scripts (no trainer), so these take seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import Batch, BatchResult, LocalExecutor
from ddp_tui.remote.backends.slurm import SlurmScheduler
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import RunView
from ddp_tui.remote.store.runs import RunRef, RunStore
from ddp_tui.spec import ExperimentSpec

pytestmark = pytest.mark.slurm


class RecordingExecutor(LocalExecutor):
    """The real local executor, keeping every command it ran (a spy: answers are real)."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
        self.commands += [list(c) for c in batch.commands]
        return super().run_batch(batch, timeout=timeout)

    def sacct_ids(self) -> list[str]:
        """Every job id any sacct call of a batch asked about."""
        return [
            job_id
            for argv in self.commands
            if "sacct" in argv
            for arg in argv
            if arg.startswith("--jobs=")
            for job_id in arg.removeprefix("--jobs=").split(",")
        ]


def open_cluster(root: Path, grace: float = 120.0) -> tuple[Cluster, RecordingExecutor]:
    ex = RecordingExecutor()
    cluster = Cluster(
        ex,
        SlurmScheduler(ex),
        RunStore(ex, str(root)),
        profile=Profile(scheduler="slurm", partition="debug"),
        location="Slurm on this host",
        lost_grace_sec=grace,
    )
    return cluster, ex


@pytest.fixture
def runs(slurm_cluster: Any, tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "runs"


def make_run(cluster: Cluster, body: str) -> RunRef:
    spec = ExperimentSpec(name="hist-slurm", partition="debug")
    script = f"#!/bin/bash\n#SBATCH --partition=debug\n#SBATCH --time=00:05:00\n{body}\n"
    return cluster.store.create_run(spec.to_dict(), spec.name, script, None)


def view_of(cluster: Cluster, run_id: str) -> RunView:
    return next(v for v in cluster.refresh().runs if v.run_id == run_id)


def until(cluster: Cluster, run_id: str, pred: Any, timeout: float = 120.0) -> RunView:
    """Refresh until ``pred``; the deadline only bounds a hang (sacct lags the end)."""
    deadline = time.monotonic() + timeout
    while True:
        v = view_of(cluster, run_id)
        if pred(v):
            return v
        assert time.monotonic() < deadline, f"last state {v.state}"
        time.sleep(0.3)


def test_restarted_app_sends_no_sacct_id_for_a_recorded_end(runs: Path) -> None:
    cluster, _ = open_cluster(runs)
    ref = make_run(cluster, "echo done")
    job_id = cluster.retry(ref.run_id).job_id
    assert job_id is not None
    done = until(cluster, ref.run_id, lambda v: v.state.is_terminal)
    assert done.state is JobState.COMPLETED and done.exit_code == 0
    cluster.refresh()
    lines = [json.loads(x) for x in Path(ref.path, "jobs.jsonl").read_text().splitlines()]
    ends = [r for r in lines if r.get("event") == "end"]
    assert len(ends) == 1 and ends[0]["job_id"] == job_id and ends[0]["node_list"]

    restarted, ex = open_cluster(runs)
    for _ in range(3):
        v = view_of(restarted, ref.run_id)
    assert v.state is JobState.COMPLETED
    assert any("squeue" in c for c in ex.commands)  # it did poll: the queue, not history
    assert job_id not in ex.sacct_ids(), ex.commands


def test_a_job_slurm_never_knew_ends_lost_scoped_to_this_cluster(runs: Path) -> None:
    cluster, ex = open_cluster(runs, grace=0.0)
    ref = make_run(cluster, "echo never submitted")
    cluster.store.append_job(ref, {"job_id": "987654", "scheduler": "slurm", "attempt": 1})
    view_of(cluster, ref.run_id)  # lists
    lost = view_of(cluster, ref.run_id)  # polls: neither squeue nor sacct knows it
    assert lost.state is JobState.LOST and "987654" in lost.reason
    assert "987654" in ex.sacct_ids()
    lines = [json.loads(x) for x in Path(ref.path, "jobs.jsonl").read_text().splitlines()]
    (end,) = [r for r in lines if r.get("event") == "end"]
    assert end["state"] == "LOST" and end["scope"].startswith("slurm:")

    restarted, ex2 = open_cluster(runs)
    assert view_of(restarted, ref.run_id).state is JobState.LOST
    assert view_of(restarted, ref.run_id).state is JobState.LOST
    assert "987654" not in ex2.sacct_ids()
    retried = restarted.retry(ref.run_id)  # a LOST run can still be retried
    assert retried.attempts[-1].retry_of == "987654"
    assert until(restarted, ref.run_id, lambda v: v.state.is_terminal).state is (JobState.COMPLETED)
