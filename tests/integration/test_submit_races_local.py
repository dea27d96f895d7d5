"""Nothing doubled, nothing orphaned: racing retries, a kill -9 during submit, torn and lost
``jobs.jsonl`` lines, and a run with two live jobs, on the real local scheduler.

Every job here waits behind a *blocker*: the local scheduler runs one job at a time
(``max_running=1``) and the blocker, a shell script that sleeps, holds that slot. So the
jobs under test stay PENDING by construction, however fast or slow the machine is, and no
trainer ever starts. The app is a real ``Cluster`` in a real child process, killed with a
real SIGKILL.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import RunRef, RunStore
from ddp_tui.remote.submit.submission import AttemptRefused

REPO = Path(__file__).resolve().parents[2]


def open_cluster(root: Path) -> Cluster:
    executor = LocalExecutor()
    scheduler = LocalScheduler(str(root / "state"), max_running=1)
    return Cluster(
        executor,
        scheduler,
        RunStore(executor, str(root / "runs")),
        profile=Profile(scheduler="local"),
        location="local scheduler",
    )


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """A runs root and a local scheduler whose only slot a sleeping blocker job holds."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "job.sbatch").write_text("#!/bin/bash\nexec sleep 600\n")
    sched = LocalScheduler(str(tmp_path / "state"), max_running=1)
    blocker_id = sched.submit(str(blocker / "job.sbatch"), str(blocker))
    deadline = time.monotonic() + 60
    while sched.poll([blocker_id])[blocker_id].state is not JobState.RUNNING:
        assert time.monotonic() < deadline, "the blocker never started"
        time.sleep(0.1)
    yield tmp_path
    for job in sched.list_jobs():
        if job.state.is_active:
            sched.cancel(job.job_id)


def attempt_ids(run_dir: str | Path) -> list[str]:
    """The job ids of ``jobs.jsonl``'s attempt lines (torn lines skipped, as readers do)."""
    out = []
    for line in Path(run_dir, "jobs.jsonl").read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("event") is None and rec.get("job_id"):
            out.append(str(rec["job_id"]))
    return out


def make_run(cluster: Cluster, name: str = "race") -> RunRef:
    return cluster.store.create_run(
        {"name": name}, name, "#!/bin/bash\nexec sleep 600\n", None, kind="train"
    )


def _race_retry(root: str, run_id: str, seen: int, barrier: Any, out: Any) -> None:
    cluster = open_cluster(Path(root))
    cluster.refresh()
    barrier.wait(timeout=60)
    try:
        view = cluster.retry(run_id, seen=seen)
        out.put(("won", view.job_id))
    except AttemptRefused as exc:
        out.put(("refused", f"{exc.job_id}|{exc}"))
    except Exception as exc:  # the test reports it, rather than waiting for a result
        out.put(("error", repr(exc)))


def test_racing_retries_make_exactly_one_attempt(root: Path) -> None:
    cluster = open_cluster(root)
    ref = make_run(cluster)
    cluster.refresh()
    first = cluster.retry(ref.run_id, seen=0).job_id
    cluster.cancel(ref.run_id)
    ctx = multiprocessing.get_context("spawn")
    racers = 3
    for _round in range(3):
        seen = len(attempt_ids(ref.path))
        barrier, out = ctx.Barrier(racers), ctx.Queue()
        procs = [
            ctx.Process(target=_race_retry, args=(str(root), ref.run_id, seen, barrier, out))
            for _ in range(racers)
        ]
        for p in procs:
            p.start()
        results = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        won = [job for what, job in results if what == "won"]
        refused = [why for what, why in results if what == "refused"]
        assert len(won) == 1, results
        assert len(refused) == racers - 1, results
        for why in refused:  # each loser names the winner's job
            assert why.split("|")[0] == won[0], why
        ids = attempt_ids(ref.path)
        assert len(ids) == seen + 1 and ids[-1] == won[0]
        scheduled = cluster.scheduler.jobs_in_dir(ref.path)
        assert scheduled == ids, "every job of the run is recorded, once"
        cluster.cancel(ref.run_id)
    assert first == attempt_ids(ref.path)[0]


_SUBMITTER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    from pathlib import Path
    from tests.integration.test_submit_races_local import open_cluster
    from tests.integration.story import tiny_spec
    cluster = open_cluster(Path({root!r}))
    plan = cluster.plan(tiny_spec(name="killed"))
    print("ready", flush=True)
    sys.stdin.readline()
    cluster.submit(plan)
    print("done", flush=True)
    """
)


def _submit_killed_after(root: Path, delay: float | None) -> float:
    """One submit in a child process, SIGKILLed ``delay`` seconds into it (None: let it
    finish); returns how long the submit ran."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _SUBMITTER.format(repo=str(REPO), root=str(root))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "ready"
    start = time.monotonic()
    proc.stdin.write("go\n")
    proc.stdin.flush()
    if delay is None:
        assert proc.stdout.readline().strip() == "done"
    else:
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return time.monotonic() - start


def test_kill_9_during_submit_never_orphans_or_doubles_a_job(root: Path) -> None:
    kills = int(os.environ.get("DDP_TUI_KILL_LOOP", "50"))
    submit_sec = _submit_killed_after(root, None)  # how long one whole submit takes here
    rng = random.Random(21)
    for _ in range(kills):
        # Uniform over the whole submit, and a little past it.
        _submit_killed_after(root, rng.uniform(0.0, submit_sec * 1.2))
    cluster = open_cluster(root)
    cluster.refresh()
    cluster.refresh()  # the first lists; the second reconciles what the first listed
    runs = [p for p in (root / "runs").iterdir() if not p.name.startswith(".")]
    sched = cluster.scheduler
    orphans, doubled, adopted = 0, 0, 0
    for run in runs:
        recorded = attempt_ids(run)
        scheduled = sched.jobs_in_dir(str(run))
        orphans += len([j for j in scheduled if j not in recorded])
        live = [j for j, s in sched.poll(scheduled).items() if s.state.is_active]
        doubled += max(0, len(live) - 1)
        adopted += sum(
            1 for line in (run / "jobs.jsonl").read_text().splitlines() if '"adopted":true' in line
        )
    every_job = [j for j in sched.list_jobs() if j.job_id != "1"]  # "1": the blocker
    in_runs = sum(len(sched.jobs_in_dir(str(r))) for r in runs)
    print(
        f"\nkill -9 loop: {kills} kills, {len(runs)} run directories, {len(every_job)} jobs, "
        f"{adopted} adopted, {orphans} orphan jobs, {doubled} doubled jobs"
    )
    assert orphans == 0 and doubled == 0
    assert in_runs == len(every_job), "every job the scheduler has belongs to a run listed"
    for view in cluster.refresh().runs:
        if view.state is JobState.UNKNOWN:  # killed before it asked: nothing was queued
            assert view.reason == "not submitted" and not sched.jobs_in_dir(view.run_dir)


def test_a_lost_or_torn_jobs_jsonl_never_starts_a_second_live_job(root: Path) -> None:
    cluster = open_cluster(root)
    ref = make_run(cluster)
    cluster.refresh()
    first = cluster.retry(ref.run_id, seen=0).job_id
    jobs = Path(ref.path, "jobs.jsonl")
    # Half-written: the attempt line torn in the middle.
    text = jobs.read_text()
    jobs.write_text(text[: text.index('"scheduler"')])
    with pytest.raises(AttemptRefused, match=f"job {first} is still PENDING") as err:
        open_cluster(root).retry(ref.run_id)
    assert err.value.job_id == first
    # The job was adopted on a fresh line, not glued to the torn one.
    assert attempt_ids(ref.path) == [first]
    assert jobs.read_text().count("\n") == len(jobs.read_text().splitlines())
    # Deleted altogether.
    jobs.unlink()
    with pytest.raises(AttemptRefused, match=f"job {first}"):
        open_cluster(root).retry(ref.run_id)
    assert cluster.scheduler.jobs_in_dir(ref.path) == [first]


def test_an_end_record_never_lands_glued_to_a_torn_line(root: Path) -> None:
    cluster = open_cluster(root)
    ref = make_run(cluster)
    jobs = Path(ref.path, "jobs.jsonl")
    jobs.write_text('{"job_id":"77","scheduler":"loc')  # a writer killed mid-line
    cluster.store.append_job(ref, {"event": "end", "job_id": "77", "state": "CANCELLED"})
    lines = jobs.read_text().splitlines()
    assert lines[0] == '{"job_id":"77","scheduler":"loc'
    assert json.loads(lines[1])["state"] == "CANCELLED"


def test_cancel_ends_every_live_job_of_a_run(root: Path) -> None:
    cluster = open_cluster(root)
    ref = make_run(cluster)
    cluster.refresh()
    recorded = cluster.retry(ref.run_id, seen=0).job_id
    # A second job of the run that jobs.jsonl never recorded (another tool submitted it).
    stray = cluster.scheduler.submit(ref.file("job.sbatch"), ref.path)
    cancelled = cluster.cancel(ref.run_id)
    assert sorted(cancelled) == sorted([recorded, stray])
    states = cluster.scheduler.poll([recorded, stray])
    assert {s.state for s in states.values()} == {JobState.CANCELLED}


_KILLED_AFTER_QUEUE = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {repo!r})
    from pathlib import Path
    from ddp_tui.remote.backends.local import LocalScheduler
    from tests.integration.test_submit_races_local import open_cluster
    from tests.integration.story import tiny_spec

    class DiesAfterQueueing(LocalScheduler):
        # FAKE timing: a real SIGKILL, sent at the one instant a random kill rarely hits.
        def submit(self, script_path, run_dir):
            super().submit(script_path, run_dir)
            os.kill(os.getpid(), signal.SIGKILL)

    cluster = open_cluster(Path({root!r}))
    cluster.scheduler.__class__ = DiesAfterQueueing
    cluster.submit(cluster.plan(tiny_spec(name="adopted")))
    """
)


def test_a_job_queued_by_a_killed_submit_is_adopted_not_submitted_again(root: Path) -> None:
    code = _KILLED_AFTER_QUEUE.format(repo=str(REPO), root=str(root))
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    (run,) = [p for p in (root / "runs").iterdir() if not p.name.startswith(".")]
    assert attempt_ids(run) == []  # the app died before it could record the job
    cluster = open_cluster(root)
    (queued,) = cluster.scheduler.jobs_in_dir(str(run))
    cluster.refresh()
    views = {v.run_id: v for v in cluster.refresh().runs}
    assert attempt_ids(run) == [queued]
    assert views[run.name].state is JobState.PENDING and views[run.name].job_id == queued
    with pytest.raises(AttemptRefused, match=f"job {queued} is still PENDING"):
        cluster.retry(run.name)
    assert cluster.scheduler.jobs_in_dir(str(run)) == [queued]  # never submitted again
