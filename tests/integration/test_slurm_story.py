"""The cluster layer's story on the real multi-node Slurm test cluster, with the real trainer.

2-node gloo run -> verify green; a 1-/2-node sweep -> comparison; cancel; retry resumes;
preemption by `scontrol requeue`; controller down -> reported, then recovered.

A job that must still be running at some point is held there by a file (tests/helpers/hold.py),
never by being "long enough": the timeouts below only bound a hang.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.spec import sweep_from_options
from tests.helpers.hold import Hold
from tests.integration.story import epochs_in_metrics, tiny_spec, wait_for, wait_state

pytestmark = [pytest.mark.slurm, pytest.mark.torch]


@pytest.fixture
def cluster(slurm_facade: Cluster) -> Cluster:
    return slurm_facade


def slurm_spec(**changes: object) -> Any:
    return tiny_spec(partition="debug", **changes)


def test_two_node_run_completes_and_verifies(cluster: Cluster) -> None:
    view = cluster.submit(cluster.plan(slurm_spec(name="two-node", nodes=2, epochs=2)))
    done = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=240)
    assert done.state is JobState.COMPLETED, cluster.follow(view.run_id).err_lines[-30:]
    run_json = json.loads((Path(view.run_dir) / "run.json").read_text())
    assert sorted(run_json["hosts"]) == ["n1", "n2"]
    assert run_json["world_size"] == 2 and run_json["backend"] == "gloo"
    assert epochs_in_metrics(cluster, view.run_id) == [1, 2]
    checks = cluster.verify(view.run_id)
    assert all(c.ok for c in checks), [(c.name, c.detail) for c in checks if not c.ok]
    sacct = (Path(view.run_dir) / "sacct.txt").read_text()
    assert view.job_id is not None and view.job_id in sacct and "COMPLETED" in sacct


def test_sweep_over_nodes_gives_speedup_and_efficiency(cluster: Cluster) -> None:
    runs = cluster.submit_sweep(
        cluster.plan_sweep(
            slurm_spec(name="sweep", epochs=2), sweep_from_options(["1,2"], size_field="nodes")
        )
    )
    assert len({r.group for r in runs}) == 1 and runs[0].group
    for r in runs:
        v = wait_state(cluster, r.run_id, JobState.COMPLETED, JobState.FAILED, timeout=300)
        assert v.state is JobState.COMPLETED
    table = cluster.compare(runs[0].group or "")
    assert list(table["world_size"]) == [1, 2]
    assert table["speedup"].iloc[0] == pytest.approx(1.0)
    assert table["ideal_speedup"].tolist() == [1.0, 2.0]
    eff = table["efficiency"].iloc[1]
    assert eff == pytest.approx(table["speedup"].iloc[1] / 2.0)
    paths = cluster.export_comparison(runs[0].group or "")
    assert any(p.endswith(".md") for p in paths) and all(Path(p).exists() for p in paths)


def test_cancel_then_retry_resumes_from_checkpoint(cluster: Cluster, hold: Hold) -> None:
    # The first attempt waits after epoch 1 until the cancel; the retry is not held.
    spec = hold.after_epochs(slurm_spec(name="cancel-retry", nodes=2, epochs=4), 1)
    view = cluster.submit(cluster.plan(spec))
    wait_for(cluster, view.run_id, lambda v: v.epochs_done >= 1, "the first epoch", 240)
    cluster.cancel(view.run_id)
    assert wait_state(cluster, view.run_id, JobState.CANCELLED, timeout=90)
    run_dir = Path(view.run_dir)
    assert (run_dir / "spec.json").exists() and (run_dir / "checkpoints" / "latest.pt").exists()
    before = epochs_in_metrics(cluster, view.run_id)
    assert before == list(range(1, len(before) + 1))

    retried = cluster.retry(view.run_id)
    assert retried.job_id not in (None, view.job_id)
    done = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=300)
    assert done.state is JobState.COMPLETED
    assert epochs_in_metrics(cluster, view.run_id) == [1, 2, 3, 4]
    log = (run_dir / f"slurm-{retried.job_id}.out").read_text()
    log += (run_dir / f"slurm-{retried.job_id}.err").read_text()
    assert "resum" in log.lower()


def test_requeue_preempts_and_the_job_finishes_every_epoch_once(
    cluster: Cluster, slurm_cluster: Any, hold: Hold
) -> None:
    # The first attempt waits after epoch 1 until the requeue's signal; the next is not held.
    spec = hold.after_epochs(slurm_spec(name="preempt", nodes=2, epochs=4), 1)
    view = cluster.submit(cluster.plan(spec))
    wait_for(cluster, view.run_id, lambda v: v.epochs_done >= 1, "the first epoch", 240)
    assert view.job_id is not None
    cluster.scheduler.requeue(view.job_id)
    # The trainer saves on the SIGTERM that requeue sends, then Slurm starts the job again.
    slurm_cluster.wait_job(view.job_id, ["PENDING", "REQUEUED", "RUNNING"], timeout=60)
    # Not released early with StartTime=now: that races the old credential's revocation
    # ("Job credential revoked"); the test cluster restarts it by itself in about 12 s.
    done = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=300)
    assert done.state is JobState.COMPLETED
    assert epochs_in_metrics(cluster, view.run_id) == [1, 2, 3, 4]
    out = (Path(view.run_dir) / f"slurm-{view.job_id}.out").read_text()
    err = (Path(view.run_dir) / f"slurm-{view.job_id}.err").read_text()
    assert "resum" in (out + err).lower()


def test_controller_down_is_reported_and_recovers(
    cluster: Cluster, slurm_cluster: Any, hold: Hold
) -> None:
    # RUNNING until the cancel below, however fast this machine trains.
    view = cluster.submit(cluster.plan(hold.running(slurm_spec(name="outage"))))
    wait_state(cluster, view.run_id, JobState.RUNNING, timeout=120)
    slurm_cluster.stop_controller()
    try:
        snap = cluster.refresh()  # must not raise
        assert snap.connection == "controller unreachable"
        assert snap.error and "slurm" in snap.error.lower()
        listed = {v.run_id: v for v in snap.runs}
        assert listed[view.run_id].state is JobState.RUNNING  # the last known state stays
    finally:
        slurm_cluster.start_controller()
    snap = wait_for_connection(cluster)
    assert snap.error is None
    cluster.cancel(view.run_id)
    assert wait_state(cluster, view.run_id, JobState.CANCELLED, timeout=90)


def wait_for_connection(cluster: Cluster, timeout: float = 60.0) -> Any:
    import time

    deadline = time.monotonic() + timeout
    snap = cluster.refresh()
    while snap.connection != "ok" and time.monotonic() < deadline:
        time.sleep(1.0)
        snap = cluster.refresh()
    assert snap.connection == "ok", snap.error
    return snap
