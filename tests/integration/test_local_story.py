"""The whole story on the embedded local scheduler, through the facade, with the real trainer.

submit -> RUNNING -> epochs arrive -> COMPLETED -> verify green; cancel mid-run ->
CANCELLED with the run directory intact; retry -> new attempt resumes from the checkpoint.
Jobs that must be running when the test acts are held there by a file (tests/helpers/hold.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.submit.plan import ValidationFailed
from tests.helpers.hold import Hold
from tests.integration.story import epochs_in_metrics, tiny_spec, wait_for, wait_state

pytestmark = pytest.mark.torch


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))
    c = Cluster.open(profile, local_state_dir=str(tmp_path / "state"))
    assert c.location == "local scheduler"
    return c


def test_submit_follow_complete_and_verify(cluster: Cluster) -> None:
    view = cluster.submit(cluster.plan(tiny_spec(name="local-ok", gpus_per_node=2, epochs=2)))
    assert view.job_id is not None
    run_dir = Path(view.run_dir)
    for name in ("spec.json", "job.sbatch", "jobs.jsonl", "code/ddp_tui/trainer/__init__.py"):
        assert (run_dir / name).exists(), name

    done = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED)
    assert done.state is JobState.COMPLETED, cluster.follow(view.run_id).err_lines[-20:]
    assert done.epochs_done == 2
    assert done.last_train_loss is not None
    assert done.world_size == 2 and done.backend == "gloo"

    detail = cluster.follow(view.run_id)
    assert any("rank 0/2" in line for line in detail.out_lines + detail.err_lines)
    assert [r["epoch"] for r in detail.metrics] == [1.0, 2.0]

    checks = {c.name: c for c in cluster.verify(view.run_id)}
    assert all(c.ok for c in checks.values()), checks
    assert (run_dir / "sacct.txt").exists()


def test_cancel_keeps_run_dir_and_retry_resumes(cluster: Cluster, hold: Hold) -> None:
    # The first attempt waits after epoch 1 until the cancel; the retry is not held.
    spec = hold.after_epochs(tiny_spec(name="local-retry", epochs=4, batch_per_gpu=16), 1)
    view = cluster.submit(cluster.plan(spec))
    wait_for(cluster, view.run_id, lambda v: v.epochs_done >= 1, "the first epoch", 240)
    cluster.cancel(view.run_id)
    cancelled = wait_state(cluster, view.run_id, JobState.CANCELLED, timeout=60)
    assert cancelled.state is JobState.CANCELLED
    run_dir = Path(view.run_dir)
    assert (run_dir / "checkpoints" / "latest.pt").exists()
    done_before = epochs_in_metrics(cluster, view.run_id)
    assert done_before and done_before == list(range(1, len(done_before) + 1))

    retried = cluster.retry(view.run_id)
    assert len(retried.attempts) == 2
    assert retried.job_id != view.job_id
    assert retried.attempts[-1].retry_of == view.job_id
    final = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=300)
    assert final.state is JobState.COMPLETED
    assert epochs_in_metrics(cluster, view.run_id) == [1, 2, 3, 4]
    out = (run_dir / f"slurm-{retried.job_id}.out").read_text()
    err = (run_dir / f"slurm-{retried.job_id}.err").read_text()
    assert "resum" in (out + err).lower()


def test_retry_of_a_running_job_is_refused(cluster: Cluster, hold: Hold) -> None:
    plan = cluster.plan(hold.running(tiny_spec(name="local-busy")))
    view = cluster.submit(plan)  # RUNNING until cancelled
    wait_state(cluster, view.run_id, JobState.RUNNING, timeout=60)
    with pytest.raises(Exception, match="still RUNNING"):
        cluster.retry(view.run_id)
    cluster.cancel(view.run_id)
    wait_state(cluster, view.run_id, JobState.CANCELLED, timeout=60)


def test_multi_node_is_refused_with_a_field_error_and_nothing_is_written(
    cluster: Cluster,
) -> None:
    with pytest.raises(ValidationFailed) as exc:
        cluster.submit(cluster.plan(tiny_spec(name="too-big", nodes=2)))
    assert any(e.field == "nodes" for e in exc.value.errors)
    root = cluster.store.root
    assert not os.path.exists(root) or os.listdir(root) == []


def test_bad_spec_reports_every_field(cluster: Cluster) -> None:
    with pytest.raises(ValidationFailed) as exc:
        cluster.submit(cluster.plan(tiny_spec(epochs=0, batch_per_gpu=0, backend="mpi")))
    fields = {e.field for e in exc.value.errors}
    assert {"epochs", "batch_per_gpu", "backend"} <= fields
