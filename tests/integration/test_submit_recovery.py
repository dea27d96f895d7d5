"""A submit whose answer is lost is never lost or doubled (real Slurm test cluster).

The executor here is a fault-injecting FAKE around the real LocalExecutor: a real network
cannot drop a connection exactly between sbatch queueing a job and its answer arriving, on
demand. Everything else (sbatch, squeue, sacct, the run directory) is real.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.executor import CommandResult, ExecutorError, LocalExecutor
from ddp_tui.remote.runs import RunStore
from ddp_tui.remote.scheduler import SchedulerError
from ddp_tui.remote.slurm import SlurmScheduler
from ddp_tui.remote.states import JobState
from tests.integration.story import tiny_spec, wait_state

pytestmark = [pytest.mark.slurm]


class DroppingExecutor(LocalExecutor):
    """FAKE: loses the connection around the next sbatch, before or after it ran."""

    def __init__(self) -> None:
        self.drop: str | None = None  # "before" | "after" | None

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        if "sbatch" in argv and self.drop:
            when, self.drop = self.drop, None
            if when == "after":
                super().run(argv, timeout=timeout, env=env, cwd=cwd, stdin=stdin)
            raise ExecutorError("connection lost (fault injected)")
        return super().run(argv, timeout=timeout, env=env, cwd=cwd, stdin=stdin)


@pytest.fixture
def rig(slurm_cluster: Any, tmp_path: Path) -> Iterator[tuple[Cluster, DroppingExecutor]]:
    ex = DroppingExecutor()
    cluster = Cluster(
        ex,
        SlurmScheduler(ex),
        RunStore(ex, str(tmp_path / "runs")),
        profile=Profile(partition="debug"),
        location="Slurm on this host",
    )
    yield cluster, ex
    for v in cluster.refresh().runs:
        if v.state.is_active:
            cluster.cancel(v.run_id)


def _jobs(run_dir: str) -> list[dict[str, Any]]:
    lines = (Path(run_dir) / "jobs.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines if x.strip()]
    return [r for r in records if r.get("event") is None]  # attempt lines, not intents


def test_answer_lost_after_sbatch_ran_records_the_job_once(
    rig: tuple[Cluster, DroppingExecutor],
) -> None:
    cluster, ex = rig
    ex.drop = "after"
    view = cluster.submit(cluster.plan(tiny_spec(name="lost-answer", partition="debug", epochs=1)))
    jobs = _jobs(view.run_dir)
    assert len(jobs) == 1 and jobs[0]["job_id"] == view.job_id
    assert SlurmScheduler(LocalExecutor()).jobs_in_dir(view.run_dir) == [view.job_id]
    done = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=240)
    assert done.state is JobState.COMPLETED


def test_lost_before_sbatch_says_nothing_was_queued_and_retry_works(
    rig: tuple[Cluster, DroppingExecutor],
) -> None:
    cluster, ex = rig
    ex.drop = "before"
    with pytest.raises(SchedulerError, match="did not reach the scheduler"):
        cluster.submit(cluster.plan(tiny_spec(name="lost-submit", partition="debug", epochs=1)))
    (view,) = [v for v in cluster.refresh().runs if v.name == "lost-submit"]
    assert view.attempts == () and view.reason == "not submitted"
    assert _jobs(view.run_dir) == []
    retried = cluster.retry(view.run_id)
    assert len(_jobs(view.run_dir)) == 1 and retried.job_id
    done = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=240)
    assert done.state is JobState.COMPLETED
