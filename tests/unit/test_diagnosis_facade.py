"""The facade's side of diagnosis and stalls: what it reads, what it records, what it shows.

The scheduler is the FAKE of :mod:`tests.unit.test_cluster_facade` (it moves a job to
FAILED or keeps it RUNNING exactly when the test says, and runs nothing); the test writes
the logs the job would have written, and sets their times explicitly, so a "quiet for 20
minutes" job is quiet by construction, not by waiting. The executor, run directories and
rules are real. The real jobs (a python without torch, a time limit, a stall...) are in
tests/integration/test_diagnosis_*.py.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ddp_tui.config import Profile
from ddp_tui.diagnosis import TAIL_BYTES
from ddp_tui.remote.backends.executor import Batch, BatchResult, FileRead, LocalExecutor
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import RunView
from ddp_tui.remote.store.runs import RunStore
from tests.unit.test_cluster_facade import FakeScheduler, records, submit, view_of

MISSING_TORCH = (
    "Traceback (most recent call last):\n"
    '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
    "ModuleNotFoundError: No module named 'torch'\n"
)


class ReadCounting(LocalExecutor):
    """The local executor, counting the bytes of .out/.err it hands back."""

    def __init__(self) -> None:
        self.log_bytes = 0

    def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
        result = super().run_batch(batch, timeout=timeout)
        self.log_bytes += sum(
            len(r.data) for r in result.reads if r.request.path.endswith((".out", ".err"))
        )
        return result


def make_cluster(tmp_path: Path, sched: FakeScheduler, profile: Profile | None = None) -> Cluster:
    code = tmp_path / "pkg" / "ddp_tui"
    (code / "trainer").mkdir(parents=True, exist_ok=True)
    (code / "__init__.py").write_text("")
    (code / "trainer" / "__init__.py").write_text("")
    ex = ReadCounting()
    store = RunStore(ex, str(tmp_path / "runs"), code_source=code)
    # The fake runs nothing, so the job's Python is never asked for torch.
    profile = replace(profile or Profile(), check_python=False)
    return Cluster(ex, sched, store, profile=profile, location="fake")


@pytest.fixture
def sched() -> FakeScheduler:
    return FakeScheduler()


@pytest.fixture
def cluster(tmp_path: Path, sched: FakeScheduler) -> Iterator[Cluster]:
    c = make_cluster(tmp_path, sched)
    yield c
    c.close()


def log(view: RunView, suffix: str) -> Path:
    return Path(view.run_dir) / f"slurm-{view.job_id}.{suffix}"


def age(path: Path, seconds: float) -> None:
    """Make ``path`` look last written ``seconds`` ago."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_executor_reads_a_tail_with_a_negative_offset(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(bytes(range(100)))
    ex = LocalExecutor()
    tail, whole, none = ex.run_batch(
        Batch(
            reads=[FileRead(str(path), -10), FileRead(str(path), -1000), FileRead(str(path), 0, 0)]
        )
    ).reads
    assert tail.data == bytes(range(90, 100)) and tail.stat is not None
    assert whole.data == bytes(range(100))
    assert none.data == b"" and none.stat is not None and none.stat.size == 100


def test_an_ended_attempt_is_diagnosed_once_and_the_diagnosis_is_recorded(
    tmp_path: Path, cluster: Cluster, sched: FakeScheduler
) -> None:
    view = submit(cluster)
    assert view.job_id
    sched.set(view.job_id, JobState.RUNNING)
    assert view_of(cluster, view.run_id).diagnosis is None  # running: nothing to say
    log(view, "err").write_text(MISSING_TORCH)
    sched.set(view.job_id, JobState.FAILED, exit_code=1)
    done = view_of(cluster, view.run_id)
    assert done.diagnosis is not None and done.diagnosis.code == "missing-module"
    assert "torch" in done.diagnosis.cause and done.diagnosis.needs_fix
    assert any(e.line == 3 and "No module named" in e.text for e in done.diagnosis.evidence)
    assert done.reason_label == done.diagnosis.short
    (end,) = [r for r in records(view) if r.get("event") == "end"]
    assert end["diagnosis"]["code"] == "missing-module"
    # Another instance reads the recorded diagnosis, not the logs (gone now).
    log(view, "err").unlink()
    other = make_cluster(tmp_path, sched)
    again = view_of(other, view.run_id)
    assert again.diagnosis == done.diagnosis
    assert isinstance(other.executor, ReadCounting) and other.executor.log_bytes == 0


def test_an_end_recorded_without_a_diagnosis_is_diagnosed_from_the_logs_in_memory(
    tmp_path: Path, cluster: Cluster, sched: FakeScheduler
) -> None:
    view = submit(cluster)
    assert view.job_id
    end = {"event": "end", "job_id": view.job_id, "state": "FAILED", "exit_code": 1}
    with (Path(view.run_dir) / "jobs.jsonl").open("a") as fh:
        fh.write(json.dumps(end) + "\n")  # as a version before diagnoses wrote it
    log(view, "err").write_text(MISSING_TORCH)
    before = records(view)
    fresh = make_cluster(tmp_path, sched)
    diagnosed = view_of(fresh, view.run_id)
    assert diagnosed.diagnosis is not None and diagnosed.diagnosis.code == "missing-module"
    assert records(view) == before  # the history is not rewritten


def test_a_big_log_is_read_only_by_its_tail(
    tmp_path: Path, cluster: Cluster, sched: FakeScheduler
) -> None:
    view = submit(cluster)
    assert view.job_id
    bar = b"epoch 1:  37%|####      | 370/1000 [00:10<00:17, 36.5it/s]\r"
    log(view, "out").write_bytes(bar * 100_000)  # 6 MB of tqdm
    log(view, "err").write_bytes(b"W warning\n" * 50_000 + MISSING_TORCH.encode())
    sched.set(view.job_id, JobState.FAILED, exit_code=1)
    fresh = make_cluster(tmp_path, sched)
    diagnosed = view_of(fresh, view.run_id)
    assert diagnosed.diagnosis is not None and diagnosed.diagnosis.code == "missing-module"
    # The line number is unknown in a tail, and the evidence says so.
    assert all(e.line is None for e in diagnosed.diagnosis.evidence if e.file.endswith(".err"))
    assert isinstance(fresh.executor, ReadCounting)
    assert fresh.executor.log_bytes <= 2 * TAIL_BYTES


def test_a_quiet_running_job_is_stalled_and_one_that_writes_is_not(
    cluster: Cluster, sched: FakeScheduler
) -> None:
    view = submit(cluster)
    assert view.job_id
    sched.set(view.job_id, JobState.RUNNING)
    for suffix in ("out", "err"):
        log(view, suffix).write_text("epoch 1\n")
        age(log(view, suffix), 20 * 60)
    cluster.refresh()  # learns RUNNING: the stats of a running job join the next batch
    stalled = view_of(cluster, view.run_id)
    assert stalled.stall is not None and stalled.stall.quiet_sec >= 20 * 60 - 5
    assert stalled.reason_label.startswith("stalled")
    snap = cluster.refresh()
    assert snap.stalled == 1
    # The followed run names its silent ranks from their heartbeats: rank 1 never beat.
    beats = Path(view.run_dir) / "heartbeats"
    beats.mkdir()
    hb = {
        "rank": 0,
        "host": "n1",
        "pid": 1,
        "t": time.time() - 1200,
        "epoch": 1,
        "step": 7,
        "phase": "train",
    }
    (beats / "rank-0.json").write_text(json.dumps(hb))
    age(beats / "rank-0.json", 20 * 60)
    age(beats, 20 * 60)
    detail = cluster.refresh(follow=view.run_id).detail
    assert detail is not None and detail.stall is not None
    # Never heard from first, then the one furthest behind.
    assert [(r.rank, r.quiet_sec is None) for r in detail.stall.silent_ranks] == [
        (1, True),
        (0, False),
    ]
    assert "rank 1" in detail.stall.summary
    # New output: no longer stalled.
    with log(view, "out").open("a") as fh:
        fh.write("epoch 2\n")
    assert view_of(cluster, view.run_id).stall is None


def test_stall_rule_off_reads_no_stats(tmp_path: Path, sched: FakeScheduler) -> None:
    quiet = make_cluster(tmp_path, sched, replace(Profile(), stall_after_min=0.0))
    view = submit(quiet)
    assert view.job_id
    sched.set(view.job_id, JobState.RUNNING)
    log(view, "out").write_text("x\n")
    age(log(view, "out"), 3600)
    quiet.refresh()
    assert view_of(quiet, view.run_id).stall is None


def test_cancel_stalled_cancels_once_and_the_diagnosis_says_why(
    tmp_path: Path, sched: FakeScheduler
) -> None:
    c = make_cluster(tmp_path, sched, replace(Profile(), cancel_stalled=True))
    view = submit(c)
    assert view.job_id
    sched.set(view.job_id, JobState.RUNNING)
    log(view, "out").write_text("epoch 1\n")
    age(log(view, "out"), 3600)
    c.refresh()
    c.refresh()
    assert sched.jobs[view.job_id].state is JobState.CANCELLED  # the fake's cancel
    note = json.loads((Path(view.run_dir) / "stall.json").read_text())
    assert note["job_id"] == view.job_id and note["quiet_sec"] >= 3000
    done = view_of(c, view.run_id)
    assert done.diagnosis is not None and done.diagnosis.code == "stalled"
    assert done.diagnosis.needs_fix
