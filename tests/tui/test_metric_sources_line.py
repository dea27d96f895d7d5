"""Run detail says where a script's metrics columns came from (run.json's metric_sources)."""

from __future__ import annotations

from dataclasses import replace

from ddp_tui.spec import ExperimentSpec
from ddp_tui.tui.run_summary import summary_text
from tests.tui.fakes import sample_runs


def test_run_detail_names_each_columns_source() -> None:
    run = replace(sample_runs()[0], spec=ExperimentSpec(entry="script", script="train.py"))
    sources = {
        "epoch_time_sec": "observed",
        "train_loss": "summary.csv",
        "val_acc": "summary.csv",
        "lr": "stderr",
    }
    text = summary_text(run, {"metric_sources": sources}, "r").plain
    assert (
        "\n metrics from: observed (epoch_time_sec)  summary.csv (train_loss, val_acc)"
        "  stderr (lr)\n" in text
    )
    assert "metrics from" not in summary_text(run, {"world_size": 2}, "r").plain
