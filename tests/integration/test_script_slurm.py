"""A user's own training script on the real multi-node Slurm test cluster.

A 2-node run of a tutorial-style script (torchrun on each node) lists, parses and verifies;
a checkpointing script requeued by ``scontrol requeue`` comes back, resumes, and ends with
every epoch exactly once. The requeued job is held after its first epoch by the script's own
``--hold-file`` (its first attempt only), never by being slow: timeouts only bound a hang.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.spec import sweep_from_options
from tests.helpers.hold import Hold
from tests.integration.story import (
    epochs_in_metrics,
    run_json,
    tiny_script_spec,
    wait_for,
    wait_state,
)

pytestmark = [pytest.mark.slurm, pytest.mark.torch]


@pytest.fixture
def cluster(slurm_facade: Cluster) -> Cluster:
    return slurm_facade


def two_node_spec(script: str, **changes: object) -> Any:
    """One process on each of two nodes, torchrun on each."""
    return tiny_script_spec(
        script, partition="debug", nodes=2, gpus_per_node=1, launcher="torchrun", **changes
    )


def test_a_two_node_script_run_lists_parses_and_verifies(cluster: Cluster) -> None:
    view = cluster.submit(cluster.plan(two_node_spec("tutorial_ddp.py", name="own-2node")))
    done = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=240)
    assert done.state is JobState.COMPLETED, cluster.follow(view.run_id).err_lines[-30:]
    assert done.epoch_label == "2/2" and done.last_train_loss is not None
    assert epochs_in_metrics(cluster, view.run_id) == [1, 2]
    info = run_json(view.run_dir)
    assert info["entry"] == "script" and info["world_size"] == 2
    assert sorted(info["hosts"]) == ["n1", "n2"]
    checks = cluster.verify(view.run_id)
    assert all(c.ok for c in checks), [(c.name, c.detail) for c in checks if not c.ok]


def test_a_one_and_two_node_sweep_of_a_script_compares_by_epoch_time(cluster: Cluster) -> None:
    spec = two_node_spec("tutorial_ddp.py", name="own-nodes")
    runs = cluster.submit_sweep(
        cluster.plan_sweep(spec, sweep_from_options(["1,2"], size_field="nodes"))
    )
    for r in runs:
        done = wait_state(cluster, r.run_id, JobState.COMPLETED, JobState.FAILED, timeout=240)
        assert done.state is JobState.COMPLETED, cluster.follow(r.run_id).err_lines[-30:]
    group = runs[0].group or ""
    table = cluster.compare(group)
    assert list(table["nodes"]) == [1, 2] and list(table["world_size"]) == [1, 2]
    # The tutorial script prints no sample counts: speedup is the baseline's epoch time over
    # each run's, and the exported comparison says so.
    assert table.attrs["speedup_from"] == "epoch_time"
    assert table["speedup"].notna().all() and table["speedup"].iloc[0] == 1.0
    written = cluster.export_comparison(group)
    markdown = next(Path(p).read_text() for p in written if p.endswith(".md"))
    assert "epoch time" in markdown


def test_requeue_of_a_checkpointing_script_resumes_and_runs_every_epoch_once(
    cluster: Cluster, slurm_cluster: Any, hold: Hold
) -> None:
    # The first attempt waits after epoch 1 until the requeue's SIGTERM; the next is not held.
    spec = two_node_spec(
        "checkpoint_ddp.py",
        name="own-requeue",
        epochs=4,
        metrics="key-value",
        script_args=f"--epochs 4 --hold-file {hold.file} --hold-after 1",
    )
    view = cluster.submit(cluster.plan(spec))
    wait_for(cluster, view.run_id, lambda v: v.epochs_done >= 1, "the first epoch", 240)
    assert view.job_id is not None
    cluster.scheduler.requeue(view.job_id)
    # The script saves on the SIGTERM that requeue sends, then Slurm starts the job again.
    slurm_cluster.wait_job(view.job_id, ["PENDING", "REQUEUED", "RUNNING"], timeout=60)
    done = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=300)
    assert done.state is JobState.COMPLETED, cluster.follow(view.run_id).err_lines[-30:]
    assert epochs_in_metrics(cluster, view.run_id) == [1, 2, 3, 4]
    assert done.epoch_label == "4/4"

    run_dir = Path(view.run_dir)
    info = run_json(run_dir)
    assert info["state"] == "completed" and info["attempts"] == 2, info
    assert info["epochs_completed"] == 4
    # Each attempt's two ranks each left a line (a requeue keeps the job id).
    assert len((run_dir / "ranks.jsonl").read_text().splitlines()) == 4
    out = (run_dir / f"slurm-{view.job_id}.out").read_text()
    err = (run_dir / f"slurm-{view.job_id}.err").read_text()
    # The first attempt stopped at the hold on the signal, saved there; the second resumed.
    assert "checkpoint_ddp: stop signal: saved epoch 2 step 0; exiting with 3" in err
    assert "resuming from" in out and "at epoch 2 step 0" in out
    assert (run_dir / "checkpoints" / "ckpt.pt").exists()
    checks = cluster.verify(view.run_id)
    assert all(c.ok for c in checks), [(c.name, c.detail) for c in checks if not c.ok]
