"""A submit whose answer is lost is never lost or doubled (real Slurm test cluster).

The executor here is a fault-injecting FAKE around the real LocalExecutor: a real network
cannot drop a connection exactly between sbatch queueing a job and its answer arriving, on
demand. Everything else (sbatch, squeue, sacct, the run directory) is real.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import CommandResult, ExecutorError, LocalExecutor
from ddp_tui.remote.backends.scheduler import SchedulerError
from ddp_tui.remote.backends.slurm import SlurmScheduler
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import RunStore
from tests.integration.story import tiny_spec, wait_state

REPO = Path(__file__).resolve().parents[2]

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


_DIES_AFTER_SBATCH = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {repo!r})
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.remote.backends.executor import LocalExecutor
    from ddp_tui.remote.store.runs import RunStore
    from ddp_tui.remote.backends.slurm import SlurmScheduler
    from tests.integration.story import tiny_spec

    class DiesAfterSbatch(SlurmScheduler):
        # FAKE timing: a real SIGKILL, right after sbatch queued the job.
        def submit(self, script_path, run_dir):
            super().submit(script_path, run_dir)
            os.kill(os.getpid(), signal.SIGKILL)

    ex = LocalExecutor()
    cluster = Cluster(ex, DiesAfterSbatch(ex), RunStore(ex, {root!r}),
                      profile=Profile(partition="debug"), location="Slurm on this host")
    cluster.submit(cluster.plan(tiny_spec(name="killed-after-sbatch", partition="debug",
                                          epochs=1)))
    """
)


def test_a_job_queued_by_an_app_killed_after_sbatch_is_adopted(
    rig: tuple[Cluster, DroppingExecutor], slurm_cluster: Any
) -> None:
    cluster, _ex = rig
    code = _DIES_AFTER_SBATCH.format(repo=str(REPO), root=cluster.store.root)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL
    (run,) = [p for p in Path(cluster.store.root).iterdir() if not p.name.startswith(".")]
    assert _jobs(str(run)) == []  # the app died before it could record the job
    (queued,) = SlurmScheduler(LocalExecutor()).jobs_in_dir(str(run))
    cluster.refresh()
    cluster.refresh()  # the first lists the run; the second adopts its job
    jobs = _jobs(str(run))
    assert [j["job_id"] for j in jobs] == [queued] and jobs[0]["adopted"] is True
    done = wait_state(cluster, run.name, JobState.COMPLETED, JobState.FAILED, timeout=240)
    assert done.job_id == queued and done.state is JobState.COMPLETED
    # A finished job has left squeue; sacct lags the controller, and for a short job its
    # WorkDir lags its state, so wait for the whole record before asking which jobs ran
    # from the run directory.
    slurm_cluster.wait_sacct(queued, {"COMPLETED"})
    assert SlurmScheduler(LocalExecutor()).jobs_in_dir(str(run)) == [queued]
