"""The timm-style trainer (``logging`` to stderr, its own summary.csv) on the real Slurm test
cluster, one process on each of two nodes: rows with a loss, an accuracy and throughput, and
run.json names each column's source."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from tests.integration.story import run_json, tiny_script_spec, wait_state

pytestmark = [pytest.mark.slurm, pytest.mark.torch]


def test_a_logging_trainer_on_two_nodes_gets_its_loss_accuracy_and_sources(
    slurm_facade: Cluster,
) -> None:
    cluster = slurm_facade
    spec = tiny_script_spec(
        "timm_style_ddp.py", name="timm-2node", metrics="auto", partition="debug", nodes=2,
        gpus_per_node=1, launcher="torchrun",
    )  # fmt: skip
    view = cluster.submit(cluster.plan(spec))
    done = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=240)
    assert done.state is JobState.COMPLETED, cluster.follow(view.run_id).err_lines[-30:]
    rows = cluster.follow(view.run_id).metrics
    assert [r["epoch"] for r in rows] == [1.0, 2.0]
    for row in rows:
        assert row["train_loss"] and row["val_loss"] and row["val_acc"], row
        assert row["throughput_samples_per_sec"] and row["throughput_samples_per_sec"] > 0
    summary = Path(view.run_dir) / "project/output/train/summary.csv"
    last = summary.read_text().splitlines()[-1].split(",")
    assert rows[-1]["train_loss"] == pytest.approx(float(last[1]), rel=1e-6)
    sources = run_json(view.run_dir)["metric_sources"]
    assert sources["train_loss"] == sources["val_acc"] == "summary.csv"
    assert sources["throughput_samples_per_sec"] == "observed"
    checks = cluster.verify(view.run_id)
    assert all(c.ok for c in checks), [(c.name, c.detail) for c in checks if not c.ok]
