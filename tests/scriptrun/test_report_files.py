"""The files a script writes about itself: TensorBoard event files (our stdlib reader of the
TFRecord framing and the Event protobuf), timm's summary.csv, Lightning's CSVLogger, Hugging
Face's trainer_state.json, result JSONs and W&B's offline summary; and which files are read."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ddp_tui.scriptrun.reportfiles import (
    TFEVENTS,
    candidates,
    read_reports,
    tag_column,
    tensorboard_epochs,
    trainer_state_epochs,
)
from ddp_tui.scriptrun.tfevents import crc32c, scalars
from tests.helpers.tfevents_writer import event, frame, scalar_value, write_events


def test_crc32c_known_answer() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the Castagnoli check value


@pytest.mark.parametrize("form", ["simple", "tensor-float", "tensor-double"])
def test_event_file_scalars_in_every_form(tmp_path: Path, form: str) -> None:
    path = write_events(
        tmp_path / f"{TFEVENTS}.1700000000.host.1.0",
        [event(s, [scalar_value("train/loss", 1.0 / (s + 1), form)]) for s in range(3)],
    )
    assert scalars(path) == [
        (0, "train/loss", pytest.approx(1.0)),
        (1, "train/loss", pytest.approx(0.5)),
        (2, "train/loss", pytest.approx(1 / 3)),
    ]


def test_a_torn_or_corrupt_tail_keeps_what_came_before(tmp_path: Path) -> None:
    path = write_events(tmp_path / f"{TFEVENTS}.x", [event(0, [scalar_value("loss", 0.5)])])
    whole = path.read_bytes()
    path.write_bytes(whole + frame(event(1, [scalar_value("loss", 0.25)]))[:-7])  # torn
    assert scalars(path) == [(0, "loss", 0.5)]
    bad = bytearray(frame(event(1, [scalar_value("loss", 0.25)])))
    bad[9] ^= 0xFF  # the length's checksum no longer matches
    path.write_bytes(whole + bytes(bad))
    assert scalars(path) == [(0, "loss", 0.5)]
    path.write_bytes(b"no event file at all, but long enough")
    assert scalars(path) == []


@pytest.mark.parametrize(
    ("tag", "column"),
    [
        ("train/loss", "train_loss"),
        ("Loss/train", "train_loss"),
        ("val_acc", "val_acc"),
        ("Accuracy/val", "val_acc"),
        ("train_loss_step", None),
        ("val_loss_epoch", "val_loss"),
        ("hp_metric", None),
    ],
)
def test_tag_columns(tag: str, column: str | None) -> None:
    assert tag_column(tag) == column


def test_tensorboard_per_epoch_scalars(tmp_path: Path) -> None:
    """``writer.add_scalar("Loss/train", loss, epoch)``: the steps are the epochs."""
    path = write_events(
        tmp_path / f"{TFEVENTS}.x",
        [
            event(
                e, [scalar_value("Loss/train", 1.0 - e / 10), scalar_value("Accuracy/val", 50 + e)]
            )
            for e in range(3)
        ],
    )
    got = {r.epoch: r.values for r in tensorboard_epochs(path)}
    assert got == {
        e: pytest.approx({"train_loss": 1.0 - e / 10, "val_acc": (50 + e) / 100}) for e in range(3)
    }
    assert {r.source for r in tensorboard_epochs(path)} == {TFEVENTS}


def test_tensorboard_joined_to_epochs_by_an_epoch_scalar(tmp_path: Path) -> None:
    """Lightning logs ``epoch`` at every logged step; a per-step tag is no row of its own."""
    events = []
    for step in range(0, 40, 10):
        epoch = step // 20
        events.append(
            event(step, [scalar_value("epoch", epoch), scalar_value("train_loss_step", 9)])
        )
        if step % 20 == 10:  # the epoch's end
            events.append(event(step, [scalar_value("val_loss", 0.5 - epoch / 10)]))
    path = write_events(tmp_path / f"{TFEVENTS}.x", events)
    got = {r.epoch: r.values for r in tensorboard_epochs(path)}
    assert got == {0: pytest.approx({"val_loss": 0.5}), 1: pytest.approx({"val_loss": 0.4})}


def test_per_step_scalars_without_epochs_make_no_rows(tmp_path: Path) -> None:
    path = write_events(
        tmp_path / f"{TFEVENTS}.x", [event(s, [scalar_value("loss", 1.0)]) for s in (0, 50, 100)]
    )
    assert tensorboard_epochs(path) == []


def test_trainer_state_log_history(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.json"
    history = [
        {"loss": 0.9, "learning_rate": 4e-5, "epoch": 0.5, "step": 5},
        {"loss": 0.7, "learning_rate": 3e-5, "epoch": 1.0, "step": 10},
        {"eval_loss": 0.6, "eval_accuracy": 0.8, "eval_runtime": 1.2, "epoch": 1.0, "step": 10},
        {"loss": 0.5, "learning_rate": 1e-5, "epoch": 1.5, "step": 15},
        {"eval_loss": 0.55, "eval_accuracy": 0.85, "epoch": 2.0, "step": 20},
        {"train_runtime": 9.0, "train_loss": 0.7, "epoch": 2.0, "step": 20},
    ]
    path.write_text(json.dumps({"global_step": 20, "log_history": history}))
    got = {r.epoch: r.values for r in trainer_state_epochs(path)}
    assert got == {
        1: pytest.approx({"train_loss": 0.7, "lr": 3e-5, "val_loss": 0.6, "val_acc": 0.8}),
        2: pytest.approx({"train_loss": 0.5, "lr": 1e-5, "val_loss": 0.55, "val_acc": 0.85}),
    }


def write(path: Path, text: str, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


TIMM_SUMMARY = (
    "epoch,train_loss,eval_loss,eval_top1,eval_top5,lr\n"
    "0,1.3769,1.3199,39.0625,100.0,0.1\n"
    "1,1.2418,1.1413,57.8125,100.0,0.1\n"
)
LIGHTNING = (
    "epoch,step,train_loss_step,val_loss,val_acc,train_loss_epoch\n"
    "0,9,0.8,,,\n0,9,,0.6,0.7,\n0,9,,,,0.75\n"
)


def test_the_files_a_run_leaves_are_read(tmp_path: Path) -> None:
    start = time.time()
    write(tmp_path / "output/train/20260101-exp/summary.csv", TIMM_SUMMARY)
    write(tmp_path / "lightning_logs/version_0/metrics.csv", LIGHTNING)
    write(tmp_path / "output/train/20260101-exp/results.json",
          json.dumps({"eval": {"loss": 1.1, "top1": 57.8}, "epochs": 2}))  # fmt: skip
    write(tmp_path / "wandb/offline-run-20260101_000000-abc/files/wandb-summary.json",
          json.dumps({"train/loss": 0.3, "_step": 99, "_runtime": 4}))  # fmt: skip
    write(tmp_path / "data/train.csv", "x,y\n1,2\n")  # a data file: no epoch column
    found = read_reports(tmp_path, start)
    # Lightning's own step column is the steps piece's to read; here only the metrics.
    by_source = {
        (r.source, r.epoch): {k: v for k, v in r.values.items() if k != "step"}
        for r in found.epochs
    }
    assert by_source == {
        ("summary.csv", 0): pytest.approx(
            {"train_loss": 1.3769, "val_loss": 1.3199, "val_acc": 0.390625, "lr": 0.1}
        ),
        ("summary.csv", 1): pytest.approx(
            {"train_loss": 1.2418, "val_loss": 1.1413, "val_acc": 0.578125, "lr": 0.1}
        ),
        ("metrics.csv", 0): pytest.approx({"val_loss": 0.6, "val_acc": 0.7, "train_loss": 0.75}),
    }
    finals = {f.source: (f.epoch, f.values) for f in found.finals}
    assert finals == {
        "results.json": (None, pytest.approx({"val_loss": 1.1, "val_acc": 0.578})),
        "wandb-summary.json": (None, pytest.approx({"train_loss": 0.3})),
    }


def test_only_this_attempts_files_and_never_the_run_directory(tmp_path: Path) -> None:
    start = time.time()
    write(tmp_path / "old/summary.csv", TIMM_SUMMARY, mtime=start - 3600)  # an earlier run's
    run_dir = tmp_path / "runs/r1"
    write(run_dir / "metrics.csv", "epoch,train_loss\n1,0.5\n")  # ddp-tui's own
    write(tmp_path / ".git/x/summary.csv", TIMM_SUMMARY)
    deep = write(tmp_path / "a/b/c/d/e/f/summary.csv", TIMM_SUMMARY)  # deeper than looked
    new = write(tmp_path / "out/summary.csv", TIMM_SUMMARY)
    assert candidates(tmp_path, start, skip=run_dir) == [new]
    assert deep.exists()
