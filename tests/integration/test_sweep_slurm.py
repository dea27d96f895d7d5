"""A sweep as one Slurm job array on the real multi-node test cluster, with the real trainer.

The grid of the issue (lr x batch per GPU, at most 2 at once) goes as one sbatch; one
member is cancelled and retried alone. Members are held running by a file
(tests/helpers/hold.py), never by being slow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.spec import sweep_from_options
from tests.helpers.hold import Hold
from tests.integration.story import tiny_spec, wait_for, wait_state

pytestmark = [pytest.mark.slurm, pytest.mark.torch]


@pytest.fixture
def cluster(slurm_facade: Cluster) -> Cluster:
    return slurm_facade


def slurm_spec(**changes: object) -> Any:
    return tiny_spec(partition="debug", **changes)


def test_a_grid_is_one_array_and_one_member_is_cancelled_and_retried_alone(
    cluster: Cluster, hold: Hold
) -> None:
    spec = hold.running(slurm_spec(name="grid", epochs=1))
    sweep = sweep_from_options(["lr=0.1,0.05,0.01", "batch_per_gpu=16,32"])
    plan = cluster.plan_sweep(spec, sweep, max_concurrent=2)
    assert plan.ok, plan.errors
    assert plan.summary() == "6 runs: one job array of 6, at most 2 at once"
    assert "#SBATCH --array=0-5%2" in plan.scripts()[0] and len(plan.scripts()) == 1
    views = cluster.submit_sweep(plan)
    ids = [v.job_id for v in views]
    master = str(ids[0]).partition("_")[0]
    # One sbatch: Slurm numbers each submission anew, so six tasks of one id are one submit.
    assert ids == [f"{master}_{i}" for i in range(6)]
    run = [v.run_id for v in views]
    wait_state(cluster, run[0], JobState.RUNNING, timeout=120)
    wait_state(cluster, run[1], JobState.RUNNING, timeout=120)
    throttled = wait_for(
        cluster,
        run[2],
        lambda v: v.state is JobState.PENDING and v.reason == "JobArrayTaskLimit",
        "PENDING behind the array's %2",
        120,
    )
    assert throttled.job_id == f"{master}_2"
    # Cancelling one member cancels its index only.
    assert cluster.cancel(run[1]) == [f"{master}_1"]
    wait_state(cluster, run[1], JobState.CANCELLED, timeout=120)
    wait_state(cluster, run[2], JobState.RUNNING, timeout=120)  # the freed slot
    states = {v.run_id: v.state for v in cluster.refresh().runs}
    assert states[run[0]] is JobState.RUNNING
    assert all(states[r] is JobState.PENDING for r in run[3:])
    # Retrying it runs that member again, as a job of its own.
    again = cluster.retry(run[1])
    assert again.job_id is not None and again.job_id.isdigit()
    hold.release()
    for r in run:
        done = wait_state(cluster, r, JobState.COMPLETED, JobState.FAILED, timeout=600)
        assert done.state is JobState.COMPLETED, cluster.follow(r).err_lines[-20:]
    attempts = {v.run_id: [a.job_id for a in v.attempts] for v in cluster.refresh().runs}
    assert attempts[run[1]] == [f"{master}_1", again.job_id]
    assert all(attempts[r] == [f"{master}_{i}"] for i, r in enumerate(run) if i != 1)
    # Each member logged in its own run directory, under its own task's name.
    out = Path(views[3].run_dir) / f"slurm-{master}_3.out"
    assert "[ddp-tui] training job" in out.read_text()
    checks = cluster.verify(run[3])
    assert all(c.ok for c in checks), [(c.name, c.detail) for c in checks if not c.ok]
