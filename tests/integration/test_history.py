"""Durable job history on the real local scheduler, without torch: the end of each attempt
is recorded once in jobs.jsonl, a restart never polls it again, an attempt the scheduler
does not know ends LOST, and a trainer/launcher disagreement is said plainly.

The jobs are plain shell scripts submitted through the facade (``retry`` submits a run
that has no attempt yet), so these tests take seconds and need no trainer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.cli import main as cli_main
from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import RunView
from ddp_tui.remote.store.runs import RunRef, RunStore
from ddp_tui.spec import ExperimentSpec

SPEC = ExperimentSpec(name="hist", epochs=2)


class CountingScheduler(LocalScheduler):
    """The real local scheduler, recording which ids each poll asked about (a spy, not a
    fake: every answer is the real one)."""

    def __init__(self, state_dir: str) -> None:
        super().__init__(state_dir)
        self.polled: list[list[str]] = []

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        self.polled.append(list(job_ids))
        return super().poll(job_ids)


def open_cluster(
    tmp_path: Path, *, grace: float = 120.0, state: str = "state"
) -> tuple[Cluster, CountingScheduler]:
    executor = LocalExecutor()
    scheduler = CountingScheduler(str(tmp_path / state))
    store = RunStore(executor, str(tmp_path / "runs"))
    cluster = Cluster(
        executor,
        scheduler,
        store,
        profile=Profile(scheduler="local"),
        location="local scheduler",
        lost_grace_sec=grace,
    )
    return cluster, scheduler


def make_run(cluster: Cluster, script: str, *, kind: str = "train") -> RunRef:
    return cluster.store.create_run(
        SPEC.to_dict(), SPEC.name, "#!/bin/bash\n" + script + "\n", None, kind=kind
    )


def records(ref: RunRef) -> list[dict[str, Any]]:
    lines = Path(ref.path, "jobs.jsonl").read_text().splitlines()
    parsed = [json.loads(line) for line in lines if line.strip()]
    # A submit's intent and its voiding are the lock's bookkeeping, not attempts or ends.
    return [r for r in parsed if r.get("event") in (None, "end")]


def ends(ref: RunRef) -> list[dict[str, Any]]:
    return [r for r in records(ref) if r.get("event") == "end"]


def view_of(cluster: Cluster, run_id: str) -> RunView:
    return next(v for v in cluster.refresh().runs if v.run_id == run_id)


def until_ended(cluster: Cluster, run_id: str, timeout: float = 60.0) -> RunView:
    """Refresh until the run's job has ended; the deadline only bounds a hang."""
    deadline = time.monotonic() + timeout
    while True:
        v = view_of(cluster, run_id)
        if v.state.is_terminal:
            return v
        assert time.monotonic() < deadline, f"job never ended; last state {v.state}"
        time.sleep(0.2)


def test_end_recorded_once_and_never_polled_after_restart(tmp_path: Path) -> None:
    cluster, _ = open_cluster(tmp_path)
    ref = make_run(cluster, "echo hello; exit 0")
    job_id = cluster.retry(ref.run_id).job_id
    assert job_id is not None
    done = until_ended(cluster, ref.run_id)
    assert done.state is JobState.COMPLETED and done.exit_code == 0
    for _ in range(3):
        cluster.refresh()
    (end,) = ends(ref)
    assert end["job_id"] == job_id and end["state"] == "COMPLETED" and end["exit_code"] == 0
    assert end["end"] and end["node_list"] and end["elapsed_sec"] >= 0

    # A restart, after the scheduler forgot everything (its state directory is gone, as
    # purged accounting would be): the recorded end still stands, and nothing is polled.
    restarted, sched = open_cluster(tmp_path, state="fresh-state")
    for _ in range(3):
        v = view_of(restarted, ref.run_id)
    assert v.state is JobState.COMPLETED and v.exit_code == 0
    assert all(job_id not in ids for ids in sched.polled), sched.polled
    assert len(ends(ref)) == 1
    checks = {c.name: c for c in restarted.verify(ref.run_id)}
    assert checks["job completed"].ok is True
    assert all(job_id not in ids for ids in sched.polled)


def test_unknown_job_ends_lost_is_not_polled_again_and_can_be_retried(tmp_path: Path) -> None:
    cluster, sched = open_cluster(tmp_path, grace=0.0)
    ref = make_run(cluster, "exit 0")
    # An attempt whose job id this scheduler never issued (another machine's, or purged).
    cluster.store.append_job(ref, {"job_id": "local-9999", "scheduler": "local", "attempt": 1})
    view_of(cluster, ref.run_id)  # the first refresh lists the runs; the next one polls
    lost = view_of(cluster, ref.run_id)
    assert lost.state is JobState.LOST
    assert "no record of job local-9999" in lost.reason
    (end,) = ends(ref)
    assert end["state"] == "LOST" and end["scope"] == sched.identity()

    polls_before = len(sched.polled)
    for _ in range(3):
        assert view_of(cluster, ref.run_id).state is JobState.LOST
    assert all("local-9999" not in ids for ids in sched.polled[polls_before:])

    # A restarted app of the same scheduler trusts the verdict and does not poll.
    again, sched2 = open_cluster(tmp_path, grace=0.0)
    for _ in range(2):
        assert view_of(again, ref.run_id).state is JobState.LOST
    assert all("local-9999" not in ids for ids in sched2.polled)

    retried = again.retry(ref.run_id)
    assert retried.attempts[-1].retry_of == "local-9999"
    assert until_ended(again, ref.run_id).state is JobState.COMPLETED


def test_lost_verdict_of_another_scheduler_does_not_bind(tmp_path: Path) -> None:
    cluster, _ = open_cluster(tmp_path)
    ref = make_run(cluster, "exit 0")
    job_id = cluster.retry(ref.run_id).job_id
    assert job_id is not None
    # Another cluster sharing this runs root could not see the job and called it LOST.
    cluster.store.append_job(
        ref, {"event": "end", "job_id": job_id, "state": "LOST", "scope": "slurm:other"}
    )
    restarted, sched2 = open_cluster(tmp_path)
    done = until_ended(restarted, ref.run_id)
    assert done.state is JobState.COMPLETED  # polled, not taken from the other's verdict
    assert any(job_id in ids for ids in sched2.polled)
    assert [e["state"] for e in ends(ref)] == ["LOST", "COMPLETED"]
    # The real end now supersedes the LOST line for every reader.
    third, sched3 = open_cluster(tmp_path)
    assert view_of(third, ref.run_id).state is JobState.COMPLETED
    assert view_of(third, ref.run_id).state is JobState.COMPLETED
    assert all(job_id not in ids for ids in sched3.polled)


def test_trained_but_launcher_failed_is_said_plainly(tmp_path: Path) -> None:
    cluster, _ = open_cluster(tmp_path)
    # The trainer wrote its completed record, then something after it exited 1 (as
    # torchrun does when a rank dies in interpreter teardown).
    ref = make_run(
        cluster,
        """echo '{"state": "completed", "world_size": 1, "hosts": ["h"]}' > run.json
exit 1""",
    )
    cluster.retry(ref.run_id)
    v = until_ended(cluster, ref.run_id)
    assert v.state is JobState.FAILED  # never silently turned into success
    assert v.exit_code == 1
    assert "run.json says the trainer completed" in v.note and "FAILED" in v.note
    check = next(c for c in cluster.verify(ref.run_id) if c.name == "job completed")
    assert check.ok is False and "run.json says the trainer completed" in check.detail


def test_cli_reads_the_recorded_ends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI is another reader: its own local scheduler never ran these jobs, so what it
    shows comes from the end records alone."""
    cluster, _ = open_cluster(tmp_path)
    failed = make_run(cluster, 'echo \'{"state": "completed"}\' > run.json; exit 1')
    report = {
        "ok": True,
        "world_size": 1,
        "hosts": ["h"],
        "bandwidth": [{"bytes": 1048576, "busbw_gbps": 2.5}],
    }
    pf = make_run(cluster, f"echo '{json.dumps(report)}' > preflight.json", kind="preflight")
    for ref in (failed, pf):
        cluster.retry(ref.run_id)
        until_ended(cluster, ref.run_id)
    assert cli_main(["--runs-root", str(tmp_path / "runs"), "ls"]) == 0
    out = capsys.readouterr().out
    row = {line.split("\t")[0]: line.split("\t") for line in out.splitlines()}
    assert row[failed.run_id][2] == "FAILED *"
    assert f"* {failed.run_id}: run.json says the trainer completed" in out
    assert row[pf.run_id][2] == "COMPLETED"
    assert row[pf.run_id][4] == "passed" and row[pf.run_id][6] == "bw 2.5GB/s"
    assert cli_main(["--runs-root", str(tmp_path / "runs"), "ls", "--json"]) == 0
    docs = {d["run_id"]: d for d in json.loads(capsys.readouterr().out)}
    assert docs[pf.run_id]["kind"] == "preflight" and docs[pf.run_id]["preflight"]["ok"] is True
    assert "launcher" in docs[failed.run_id]["note"]


def test_agreeing_records_carry_no_note(tmp_path: Path) -> None:
    cluster, _ = open_cluster(tmp_path)
    ref = make_run(cluster, 'echo \'{"state": "failed"}\' > run.json; exit 1')
    cluster.retry(ref.run_id)
    v = until_ended(cluster, ref.run_id)
    assert v.state is JobState.FAILED and v.note == ""


@pytest.mark.parametrize("ok", [True, False])
def test_preflight_run_shows_its_result_and_verifies_its_own_checks(
    tmp_path: Path, ok: bool
) -> None:
    cluster, _ = open_cluster(tmp_path)
    report = {
        "ok": ok,
        "world_size": 1,
        "backend": "gloo",
        "hosts": ["h1"],
        "bandwidth": [],
        "note": "single process: no collectives to test",
        "failed_ranks": [],
        "error": None if ok else "all_reduce: wrong sum",
    }
    ref = make_run(
        cluster,
        f"echo '{json.dumps(report)}' > preflight.json; exit {0 if ok else 1}",
        kind="preflight",
    )
    cluster.retry(ref.run_id)
    v = until_ended(cluster, ref.run_id)
    for _ in range(2):  # the table reads the files once more after the end
        v = view_of(cluster, ref.run_id)
    assert v.kind == "preflight" and v.preflight is not None
    assert v.preflight.ok is ok
    assert v.preflight.label == ("passed" if ok else "FAILED")
    checks = {c.name: c for c in cluster.verify(ref.run_id)}
    assert "every epoch is in metrics.csv" not in checks
    assert "a checkpoint exists" not in checks
    assert set(checks) == {
        "job completed",
        "every rank answered",
        "bandwidth rows are present",
        "nodes used match the request",
        "accounting summary saved to sacct.txt",
    }
    assert all(c.ok for c in checks.values()) is ok, checks


class EndsDuringPoll(CountingScheduler):
    """The real local scheduler; while armed, a poll first lets the held job finish (the
    case where a job ends between a refresh's file reads and its poll, made to happen on
    cue: no real machine can be timed into it)."""

    def __init__(self, state_dir: str, hold: Path) -> None:
        super().__init__(state_dir)
        self.hold = hold
        self.armed = False

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        if self.armed and job_ids:
            self.armed = False
            self.hold.unlink()
            deadline = time.monotonic() + 60  # bounds a hang only
            while not all(s.state.is_terminal for s in super().poll(job_ids).values()):
                assert time.monotonic() < deadline, "the released job never ended"
                time.sleep(0.05)
        return super().poll(job_ids)


def test_the_refresh_that_sees_the_end_shows_the_last_rows(tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    scheduler = EndsDuringPoll(str(tmp_path / "state"), hold)
    cluster = Cluster(
        LocalExecutor(),
        scheduler,
        RunStore(LocalExecutor(), str(tmp_path / "runs")),
        profile=Profile(scheduler="local"),
        location="local scheduler",
    )
    header = "epoch,train_loss"
    ref = make_run(
        cluster,
        f"""printf '{header}\\n1,0.5\\n' > metrics.csv
while [ -e {hold} ]; do sleep 0.05; done
printf '2,0.25\\n' >> metrics.csv""",
    )
    cluster.retry(ref.run_id)
    until_one = time.monotonic() + 60
    while view_of(cluster, ref.run_id).epochs_done < 1:
        assert time.monotonic() < until_one, "the first row never showed"
        time.sleep(0.1)
    scheduler.armed = True  # this refresh reads 1 row, then its poll sees the job end
    v = view_of(cluster, ref.run_id)
    assert v.state is JobState.COMPLETED
    assert v.epochs_done == 2 and v.last_train_loss == 0.25
