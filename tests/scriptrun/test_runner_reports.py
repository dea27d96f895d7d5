"""The wrapper run for real on a stdlib stand-in for a timm-style script: its ``logging`` lines
on stderr and the files it writes become rows, and run.json says where each column came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scriptrun.test_runner import SCRIPTS, rows, run, run_json

METER = str(SCRIPTS / "meter_logging.py")


def test_logging_lines_on_stderr_become_rows(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = run(run_dir, METER, "--no-files")
    assert done.returncode == 0, done.stderr
    assert b"Train: 1 [   3/4 (100%)]" in done.stderr  # copied through unchanged
    got = rows(run_dir)
    assert [r["epoch"] for r in got] == ["1", "2"]  # timm counts from 0
    assert [float(r["train_loss"]) for r in got] == pytest.approx([1.0, 0.5])  # the averages
    assert [float(r["val_loss"]) for r in got] == pytest.approx([0.5, 0.25])
    assert [float(r["val_acc"]) for r in got] == pytest.approx([0.5, 0.6])
    assert [float(r["lr"]) for r in got] == pytest.approx([0.1, 0.1])
    sources = run_json(run_dir)["metric_sources"]
    assert sources == {c: "stderr" for c in ("epoch_time_sec", "lr", "train_loss", "val_acc",
                                             "val_loss")}  # fmt: skip


def test_the_scripts_own_summary_wins_and_says_so(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = run(run_dir, METER)
    assert done.returncode == 0, done.stderr
    got = rows(run_dir)
    assert [r["epoch"] for r in got] == ["1", "2"]
    # Full precision: the summary's 1.00001, not the line's 1.00.
    assert [float(r["train_loss"]) for r in got] == pytest.approx([1.00001, 0.50001], abs=1e-9)
    sources = run_json(run_dir)["metric_sources"]
    assert sources["train_loss"] == sources["val_acc"] == "summary.csv"
    assert sources["epoch_time_sec"] == "stderr"  # when the lines appeared


def test_a_named_preset_leaves_stderr_and_the_files_alone(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = run(run_dir, METER, options=("--metrics", "epoch-line"))
    assert done.returncode == 0, done.stderr
    assert rows(run_dir) == []
    assert "metric_sources" not in run_json(run_dir)


def test_a_resumed_runs_files_give_the_epochs_this_attempt_trained() -> None:
    """Joined by order to 2 observed epochs, a summary holding epochs 0-4 gives 3 and 4."""
    from ddp_tui.scriptrun.records import EpochRecord
    from ddp_tui.scriptrun.runner import _last_epochs

    summary = [EpochRecord(e, {"train_loss": 1.0}, source="summary.csv") for e in range(5)]
    events = [EpochRecord(e, {"val_loss": 1.0}, source="events.out.tfevents") for e in (1, 2)]
    kept = _last_epochs(summary + events, 2)
    assert [(r.source, r.epoch) for r in kept] == [
        ("summary.csv", 3),
        ("summary.csv", 4),
        ("events.out.tfevents", 1),
        ("events.out.tfevents", 2),
    ]
    assert _last_epochs(summary, 0) == []
