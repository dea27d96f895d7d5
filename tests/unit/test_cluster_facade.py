"""The facade's bookkeeping, fast: refresh, the end of an attempt, retry, lost submits, verify.

The scheduler here is :class:`FakeScheduler`, a FAKE: it produces on demand the states a
real scheduler cannot (a job vanishing from squeue and sacct, a submit whose answer is
lost, a job that ends between two polls), and it never runs anything. Everything else is
real: the facade, the local executor, and run directories under a temporary root. Each
test moves the fake's state explicitly between calls, so nothing races.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import ExecutorError, LocalExecutor
from ddp_tui.remote.backends.scheduler import JobStatus, PartitionInfo, Scheduler, SchedulerError
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.verification import RunFiles, verify_run
from ddp_tui.remote.model.views import RunView
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.spec import ExperimentSpec

IDENTITY = "fake:test-cluster"
METRICS_HEADER = "epoch,train_loss,val_acc,throughput_samples_per_sec\n"


class FakeScheduler(Scheduler):
    """FAKE scheduler: jobs are entries in a dict that the test moves from state to state.

    A real scheduler cannot, on demand, forget a job (squeue and sacct both), lose the
    answer to a submit before or after queueing it, or end a job exactly between two
    polls; this one does exactly what the test says and runs nothing.
    """

    name = "slurm"

    def __init__(self) -> None:
        self.jobs: dict[str, JobStatus] = {}  # what squeue/sacct know
        self.dirs: dict[str, str] = {}  # job id -> the directory it was submitted from
        self.next_id = 100
        #: "before" or "after": lose the next submit's answer before or after queueing.
        self.lose_next: str | None = None
        self.jobs_in_dir_fails = False
        self.sinfo_fails = False
        self.polls: list[list[str]] = []  # the ids asked about, poll by poll

    # -- what the test drives --
    def set(self, job_id: str, state: JobState, exit_code: int | None = None) -> None:
        self.jobs[job_id] = JobStatus(job_id, state, raw_state=state.value, exit_code=exit_code)

    def vanish(self, job_id: str) -> None:
        """Gone from squeue and from sacct (a purged accounting database)."""
        del self.jobs[job_id]

    # -- the Scheduler interface --
    def submit(self, script_path: str, run_dir: str) -> str:
        assert Path(script_path).is_file()
        lose, self.lose_next = self.lose_next, None
        if lose == "before":
            raise SchedulerError("sbatch: no answer") from ExecutorError("connection lost")
        job_id = str(self.next_id)
        self.next_id += 1
        self.dirs[job_id] = run_dir
        self.set(job_id, JobState.PENDING)
        if lose == "after":
            raise SchedulerError("sbatch: no answer") from ExecutorError("connection lost")
        return job_id

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        self.polls.append(list(job_ids))
        return {j: self.jobs[j] for j in job_ids if j in self.jobs}

    def cancel(self, job_id: str) -> None:
        self.set(job_id, JobState.CANCELLED)

    def requeue(self, job_id: str) -> None:
        self.set(job_id, JobState.PENDING)

    def version(self) -> str:
        return "fake 1.0"

    def partitions(self) -> list[PartitionInfo]:
        if self.sinfo_fails:
            raise SchedulerError("sinfo: Unable to contact slurm controller")
        return []  # no partition to check against: the spec's own checks apply

    def jobs_in_dir(self, run_dir: str) -> list[str]:
        if self.jobs_in_dir_fails:
            raise SchedulerError("squeue: unreachable")
        return [j for j, d in self.dirs.items() if d == run_dir]

    def accounting(self, job_id: str) -> str:
        return f"JobID State\n{job_id} {self.jobs[job_id].state.value}\n"

    def identity(self) -> str:
        return IDENTITY


def tiny(**changes: Any) -> ExperimentSpec:
    base = ExperimentSpec(
        name="facade",
        model="mlp",
        dataset="synthetic",
        device="cpu",
        backend="gloo",
        gpus_per_node=2,
        cpus_per_task=1,
        epochs=2,
        workers=0,
    )
    return base.replace(**changes)


@pytest.fixture
def sched() -> FakeScheduler:
    return FakeScheduler()


@pytest.fixture
def cluster(tmp_path: Path, sched: FakeScheduler) -> Iterator[Cluster]:
    code = tmp_path / "pkg" / "ddp_tui"
    (code / "trainer").mkdir(parents=True)
    (code / "__init__.py").write_text("")
    (code / "trainer" / "__init__.py").write_text("")
    ex = LocalExecutor()
    store = RunStore(ex, str(tmp_path / "runs"), code_source=code)
    # No grace: a job unknown to one complete poll is LOST at once.
    # The fake scheduler starts no job: its python is never run, so it is not checked.
    profile = Profile(check_python=False)
    c = Cluster(ex, sched, store, profile=profile, location="fake", lost_grace_sec=0.0)
    yield c
    c.close()


def submit(cluster: Cluster, **changes: Any) -> RunView:
    return cluster.submit(cluster.plan(tiny(**changes)))


def view_of(cluster: Cluster, run_id: str) -> RunView:
    return next(v for v in cluster.refresh().runs if v.run_id == run_id)


def records(view: RunView) -> list[dict[str, Any]]:
    text = (Path(view.run_dir) / "jobs.jsonl").read_text()
    parsed = [json.loads(line) for line in text.splitlines() if line.strip()]
    # A submit's intent and its voiding are the lock's bookkeeping, not attempts or ends.
    return [r for r in parsed if r.get("event") in (None, "end")]


def write_epochs(view: RunView, *epochs: int) -> None:
    path = Path(view.run_dir) / "metrics.csv"
    if not path.exists():
        path.write_text(METRICS_HEADER)
    with path.open("a") as fh:
        for e in epochs:
            fh.write(f"{e},{1.0 / e},{0.5 + e / 10},{1000 * e}\n")


def write_run_json(view: RunView, **doc: Any) -> None:
    run_json = {"hosts": ["n1"], "world_size": 2, "backend": "gloo", **doc}
    (Path(view.run_dir) / "run.json").write_text(json.dumps(run_json))


def test_refresh_merges_scheduler_states_with_the_run_files(
    cluster: Cluster, sched: FakeScheduler
) -> None:
    older = submit(cluster, name="older")
    newer = submit(cluster, name="newer")
    assert older.job_id and newer.job_id
    sched.set(older.job_id, JobState.RUNNING)
    write_epochs(older, 1)
    write_run_json(older, state="running")
    progress = {"epoch": 2, "step": 5, "steps_per_epoch": 10, "loss": 0.5, "samples_per_sec": 9.0}
    (Path(older.run_dir) / "progress.jsonl").write_text(json.dumps(progress) + "\n")

    snap = cluster.refresh()
    # Newest first: run ids start with their creation time (to the second).
    assert [v.run_id for v in snap.runs] == sorted((older.run_id, newer.run_id), reverse=True)
    assert snap.error is None and snap.scheduler_version == "fake 1.0"
    run, queued = (next(v for v in snap.runs if v.name == n) for n in ("older", "newer"))
    assert run.state is JobState.RUNNING and queued.state is JobState.PENDING
    assert (run.epochs_done, run.epochs_total, run.last_train_loss) == (1, 2, 1.0)
    assert run.last_val_metric == pytest.approx(0.6) and run.throughput == 1000.0
    assert run.progress is not None and (run.progress.epoch, run.progress.step) == (2, 5)
    assert (run.hosts, run.world_size, run.backend) == (("n1",), 2, "gloo")
    assert queued.epochs_done == 0 and queued.progress is None


def test_an_attempt_that_ends_between_two_polls_is_recorded_once_with_its_last_epoch(
    cluster: Cluster, sched: FakeScheduler
) -> None:
    view = submit(cluster)
    assert view.job_id
    sched.set(view.job_id, JobState.RUNNING)
    write_epochs(view, 1)
    assert view_of(cluster, view.run_id).epochs_done == 1
    # Between this poll and the next: the last epoch is written and the job ends.
    write_epochs(view, 2)
    sched.set(view.job_id, JobState.COMPLETED, exit_code=0)
    done = view_of(cluster, view.run_id)
    assert (done.state, done.epochs_done, done.exit_code) == (JobState.COMPLETED, 2, 0)
    ends = [r for r in records(view) if r.get("event") == "end"]
    assert [(e["job_id"], e["state"]) for e in ends] == [(view.job_id, "COMPLETED")]
    # Recorded: later refreshes (and other instances) never ask about it again.
    sched.polls.clear()
    assert view_of(cluster, view.run_id).state is JobState.COMPLETED
    assert all(view.job_id not in asked for asked in sched.polls)
    assert len([r for r in records(view) if r.get("event") == "end"]) == 1
    ex = cluster.executor
    other = Cluster(ex, sched, cluster.store, profile=Profile(), location="fake")
    assert view_of(other, view.run_id).state is JobState.COMPLETED
    assert all(view.job_id not in asked for asked in sched.polls)


def test_a_job_gone_from_squeue_and_sacct_ends_lost_with_the_schedulers_scope(
    cluster: Cluster, sched: FakeScheduler
) -> None:
    view = submit(cluster)
    assert view.job_id
    assert view_of(cluster, view.run_id).state is JobState.PENDING
    sched.vanish(view.job_id)
    lost = view_of(cluster, view.run_id)
    assert lost.state is JobState.LOST
    ends = [r for r in records(view) if r.get("event") == "end"]
    assert [(e["state"], e["scope"]) for e in ends] == [("LOST", IDENTITY)]


def test_retry_records_a_new_attempt_that_names_the_one_it_retries(
    cluster: Cluster, sched: FakeScheduler
) -> None:
    view = submit(cluster)
    first = view.job_id
    assert first
    sched.set(first, JobState.RUNNING)
    cluster.refresh()
    with pytest.raises(SchedulerError, match=f"job {first} is still RUNNING"):
        cluster.retry(view.run_id)
    sched.set(first, JobState.FAILED, exit_code=1)
    assert view_of(cluster, view.run_id).state is JobState.FAILED
    again = cluster.retry(view.run_id)
    assert again.job_id not in (None, first)
    assert [(a.attempt, a.retry_of) for a in again.attempts] == [(1, None), (2, first)]
    assert view_of(cluster, view.run_id).state is JobState.PENDING  # the new attempt's


def test_a_lost_answer_after_the_job_was_queued_records_that_job_once(
    cluster: Cluster, sched: FakeScheduler
) -> None:
    sched.lose_next = "after"
    view = submit(cluster, name="lost-answer")
    assert view.job_id == "100" and sched.dirs == {"100": view.run_dir}
    assert [r["job_id"] for r in records(view)] == ["100"]


def test_a_lost_answer_before_the_job_was_queued_says_so_and_retry_works(
    cluster: Cluster, sched: FakeScheduler
) -> None:
    sched.lose_next = "before"
    with pytest.raises(SchedulerError, match="did not reach the scheduler"):
        submit(cluster, name="lost-submit")
    (view,) = cluster.refresh().runs
    assert view.attempts == () and view.reason == "not submitted"
    assert records(view) == []
    retried = cluster.retry(view.run_id)
    assert retried.job_id == "100" and [r["job_id"] for r in records(view)] == ["100"]


def test_a_lost_answer_that_cannot_be_checked_records_nothing(
    cluster: Cluster, sched: FakeScheduler
) -> None:
    cluster.recover_submit_sec = 0.0  # give up at the first failed look
    sched.lose_next = "after"
    sched.jobs_in_dir_fails = True
    with pytest.raises(SchedulerError, match="could not be checked"):
        submit(cluster, name="unknown")
    (view,) = cluster.refresh().runs
    assert records(view) == [] and view.attempts == ()


def test_verify_a_completed_training_run(cluster: Cluster, sched: FakeScheduler) -> None:
    view = submit(cluster)
    assert view.job_id
    checks = {c.name: c.ok for c in cluster.verify(view.run_id)}
    assert checks["job completed"] is None  # still queued: not applicable yet
    write_epochs(view, 1, 2)
    write_run_json(view, state="completed")
    (Path(view.run_dir) / "checkpoints").mkdir()
    (Path(view.run_dir) / "checkpoints" / "latest.pt").write_bytes(b"\0" * 1024)
    sched.set(view.job_id, JobState.COMPLETED, exit_code=0)
    checks = {c.name: c.ok for c in cluster.verify(view.run_id)}
    assert checks == {
        "job completed": True,
        "nodes used match the request": True,
        "world size and backend match the spec": True,
        "every epoch is in metrics.csv": True,
        "a checkpoint exists": True,
        "accounting summary saved to sacct.txt": True,
    }
    assert (Path(view.run_dir) / "sacct.txt").read_text().startswith("JobID State\n")


def test_verify_says_where_the_trainer_and_the_job_disagree(
    cluster: Cluster, sched: FakeScheduler
) -> None:
    view = submit(cluster)
    assert view.job_id
    write_epochs(view, 1, 2)
    write_run_json(view, state="completed")
    sched.set(view.job_id, JobState.FAILED, exit_code=1)
    (completed, *_rest) = cluster.verify(view.run_id)
    assert completed.ok is False and "run.json says the trainer completed" in completed.detail
    assert view_of(cluster, view.run_id).state_label == "FAILED *"


def test_verify_a_preflight_run(cluster: Cluster, sched: FakeScheduler) -> None:
    view = cluster.submit(cluster.plan(tiny(), kind="preflight"))
    assert view.job_id and view.kind == "preflight"
    doc = {
        "ok": True,
        "world_size": 2,
        "hosts": ["n1", "n1"],
        "failed_ranks": [],
        "bandwidth": [{"bytes": 1024, "busbw_gbps": 1.0}],
    }
    (Path(view.run_dir) / "preflight.json").write_text(json.dumps(doc))
    sched.set(view.job_id, JobState.COMPLETED, exit_code=0)
    checks = {c.name: c for c in cluster.verify(view.run_id)}
    assert checks["every rank answered"].ok is True, checks
    assert checks["nodes used match the request"].ok is True
    assert checks["accounting summary saved to sacct.txt"].ok is True


def test_verify_run_is_a_pure_function_of_the_files() -> None:
    spec = tiny()
    running = JobStatus("7", JobState.RUNNING)
    checks = verify_run(spec, "train", "7", running, RunFiles(metrics=[{"epoch": 1.0}]))
    assert [c.ok for c in checks] == [None, None, None, None, False, None]
    unknown = verify_run(spec, "train", None, None, RunFiles())
    assert unknown[0].detail == "job - is UNKNOWN"


def test_a_plan_made_without_sinfo_says_what_it_did_not_check(
    cluster: Cluster, sched: FakeScheduler
) -> None:
    """sbatch keeps the last word, so the plan can still be submitted; but the user hears
    that the partition checks were skipped."""
    sched.sinfo_fails = True
    plan = cluster.plan(tiny())
    assert plan.ok
    assert len(plan.warnings) == 1
    assert "not checked against the cluster" in plan.warnings[0]
    assert "Unable to contact slurm controller" in plan.warnings[0]
    cluster.submit(plan)
    sched.sinfo_fails = False
    assert cluster.plan(tiny()).warnings == ()


def test_cancel_ends_the_recorded_job_while_the_scheduler_cannot_list_the_runs_jobs(
    cluster: Cluster, sched: FakeScheduler
) -> None:
    view = submit(cluster)
    assert view.job_id
    sched.set(view.job_id, JobState.RUNNING)
    sched.jobs_in_dir_fails = True  # sacct down: the run's unrecorded jobs cannot be listed
    assert cluster.cancel(view.run_id) == [view.job_id]
    assert sched.jobs[view.job_id].state is JobState.CANCELLED
