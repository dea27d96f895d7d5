"""The per-rank heartbeat writer (ddp_tui.jobfiles.Heartbeater) and its reader."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ddp_tui.diagnosis.stall import Heartbeat
from ddp_tui.jobfiles import HEARTBEAT_DIR, Heartbeater, heartbeat_path, write_json_atomic

HOUR = 3600.0


def read(path: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads(path.read_text())
    return data


def test_a_beat_writes_the_rank_file_with_every_field(tmp_path: Path) -> None:
    before = time.time()
    assert Heartbeater(tmp_path, 1, "n2").beat(2, 40, "train") is True
    after = time.time()
    path = tmp_path / HEARTBEAT_DIR / "rank-1.json"
    assert heartbeat_path(tmp_path, 1) == path
    doc = read(path)
    assert set(doc) == {"rank", "host", "pid", "t", "epoch", "step", "phase"}
    assert (doc["rank"], doc["host"], doc["pid"]) == (1, "n2", os.getpid())
    assert (doc["epoch"], doc["step"], doc["phase"]) == (2, 40, "train")
    assert isinstance(doc["t"], float) and before <= doc["t"] <= after
    # What the writer writes, the reader reads.
    assert Heartbeat.from_dict(doc) == Heartbeat(1, "n2", os.getpid(), doc["t"], 2, 40, "train")


def test_beats_in_the_same_phase_are_throttled(tmp_path: Path) -> None:
    heart = Heartbeater(tmp_path, 0, "n1", every_sec=HOUR)
    assert heart.beat(1, 1, "train")
    assert heart.beat(1, 2, "train") is False
    assert read(heart.path)["step"] == 1


def test_a_new_phase_or_force_writes_at_once(tmp_path: Path) -> None:
    heart = Heartbeater(tmp_path, 0, "n1", every_sec=HOUR)
    assert heart.beat(1, 5, "train")
    assert heart.beat(1, 5, "eval")
    assert read(heart.path)["phase"] == "eval"
    assert heart.beat(1, 5, "eval") is False
    assert heart.beat(1, 5, "eval", force=True)
    assert heart.beat(2, 30, "done", force=True)
    assert (read(heart.path)["epoch"], read(heart.path)["phase"]) == (2, "done")


def test_without_throttling_every_beat_writes(tmp_path: Path) -> None:
    heart = Heartbeater(tmp_path, 0, "n1", every_sec=0)
    assert all(heart.beat(1, step, "train") for step in range(1, 6))
    assert read(heart.path)["step"] == 5


def test_ranks_write_their_own_files_and_leave_no_temporaries(tmp_path: Path) -> None:
    for rank in range(3):
        Heartbeater(tmp_path, rank, f"n{rank}").beat(1, rank, "train")
    names = sorted(p.name for p in (tmp_path / HEARTBEAT_DIR).iterdir())
    assert names == ["rank-0.json", "rank-1.json", "rank-2.json"]


def test_a_beat_that_cannot_be_written_returns_false_and_training_goes_on(
    tmp_path: Path,
) -> None:
    # A regular file where the heartbeats directory should be: every write fails.
    (tmp_path / HEARTBEAT_DIR).write_text("in the way")
    heart = Heartbeater(tmp_path, 0, "n1", every_sec=HOUR)
    assert heart.beat(1, 1, "train") is False
    (tmp_path / HEARTBEAT_DIR).unlink()
    # A failed try is throttled like a write (a full disk is not retried every step) ...
    assert heart.beat(1, 2, "train") is False
    assert not heart.path.exists()
    # ... and the next phase, or a forced beat, tries again.
    assert heart.beat(1, 2, "eval") is True
    assert read(heart.path)["phase"] == "eval"


def test_a_failed_replace_leaves_no_temporary_file(tmp_path: Path) -> None:
    heart = Heartbeater(tmp_path, 0, "n1")
    heart.path.mkdir(parents=True)  # a directory where the rank file goes: the rename fails
    assert heart.beat(1, 1, "train") is False
    assert [p.name for p in heart.path.parent.iterdir()] == ["rank-0.json"]


def test_write_json_atomic_removes_its_temporary_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    target.mkdir()
    with pytest.raises(OSError):
        write_json_atomic(target, {"state": "running"})
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
