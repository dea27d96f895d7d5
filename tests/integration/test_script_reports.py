"""A timm-style trainer (tests/helpers/user_scripts/timm_style_ddp.py: ``logging`` to stderr,
its own summary.csv) under ddp-tui with the defaults, 2 processes on the local scheduler: rows
with a loss, an accuracy and throughput, and run.json says where each column came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.cluster import Cluster
from tests.integration.story import run_json, tiny_script_spec
from tests.integration.test_script_story import assert_green, finish, logs

pytestmark = pytest.mark.torch


def test_a_logging_trainer_with_a_summary_csv_gets_its_loss_accuracy_and_sources(
    tmp_path: Path,
) -> None:
    cluster = Cluster.open(Profile(scheduler="local", runs_root=str(tmp_path / "runs")))
    spec = tiny_script_spec("timm_style_ddp.py", name="timm-style", metrics="auto")
    view = cluster.submit(cluster.plan(spec))
    done = finish(cluster, view)
    run_dir = Path(view.run_dir)
    _out, err = logs(run_dir, view.job_id)
    assert "Train: 1 [   3/4 (100%)]  Loss:" in err  # logging's lines reach the .err unchanged
    summary = (run_dir / "project/output/train/summary.csv").read_text().splitlines()

    rows = cluster.follow(view.run_id).metrics
    assert [r["epoch"] for r in rows] == [1.0, 2.0]
    for row, line in zip(rows, summary[1:], strict=True):
        _epoch, train_loss, eval_loss, eval_top1, *_ = (float(x) for x in line.split(","))
        assert row["train_loss"] == pytest.approx(train_loss, rel=1e-6)
        assert row["val_loss"] == pytest.approx(eval_loss, rel=1e-6)
        assert row["val_acc"] == pytest.approx(eval_top1 / 100, rel=1e-6)
        assert row["throughput_samples_per_sec"] and row["throughput_samples_per_sec"] > 0
    assert done.last_train_loss == pytest.approx(rows[-1]["train_loss"])

    info = run_json(run_dir)
    assert info["metric_sources"] == {
        "compute_time_sec": "observed",
        "data_load_time_sec": "observed",
        "epoch_time_sec": "observed",
        "lr": "summary.csv",
        "throughput_samples_per_sec": "observed",
        "train_loss": "summary.csv",
        "val_acc": "summary.csv",
        "val_loss": "summary.csv",
    }
    assert_green(cluster, view.run_id)


def test_an_imagenet_style_printing_trainer_gets_its_running_averages(tmp_path: Path) -> None:
    """pytorch/examples' ``Epoch: [0][1/4] ... Loss 1.4e+00 (1.39e+00)`` and `` * Acc@1``."""
    cluster = Cluster.open(Profile(scheduler="local", runs_root=str(tmp_path / "runs")))
    spec = tiny_script_spec("imagenet_style_ddp.py", name="imagenet-style", metrics="auto")
    view = cluster.submit(cluster.plan(spec))
    finish(cluster, view)
    out, _err = logs(Path(view.run_dir), view.job_id)
    # The running averages at each epoch's last training line and its evaluation's summary.
    train = [line for line in out.splitlines() if line.startswith("Epoch: [")]
    last_train = [float(line.split("Loss ")[1].split("(")[1].split(")")[0]) for line in train[1::2]]
    summaries = [line for line in out.splitlines() if line.startswith(" * ")]
    top1 = [float(line.split("Acc@1 ")[1].split()[0]) for line in summaries]

    rows = cluster.follow(view.run_id).metrics
    assert [r["epoch"] for r in rows] == [1.0, 2.0]
    assert [r["train_loss"] for r in rows] == pytest.approx(last_train)
    assert [r["val_acc"] for r in rows] == pytest.approx([t / 100 for t in top1])
    assert all(r["val_loss"] and r["throughput_samples_per_sec"] for r in rows), rows
    sources = run_json(view.run_dir)["metric_sources"]
    assert sources["train_loss"] == sources["val_acc"] == "stdout"
    assert sources["throughput_samples_per_sec"] == "observed"
    assert_green(cluster, view.run_id)
