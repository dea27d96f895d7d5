"""A local job's processes end with the job: after a cancel, a killed launcher, a killed
supervisor, and with the end already recorded. Real process trees, found in /proc."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_tui.remote.backends.local import pid_alive, process_start
from ddp_tui.remote.backends.local.reaping import JOB_MARKER_ENV
from ddp_tui.remote.backends.states import JobState

from .local_env import WAIT_FOR_GO, Env, wait_for

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")

#: Like torchrun: every rank in a session of its own, one of them deaf to TERM.
LAUNCHER = """\
import os, subprocess, sys
RANK = (
    "import signal, sys, time\\n"
    "if sys.argv[1] == '1': signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
    "time.sleep(1000)"
)
ranks = [
    subprocess.Popen([sys.executable, "-c", RANK, str(i)], start_new_session=True)
    for i in range(2)
]
for i, r in enumerate(ranks):
    open(f"pids/rank{i}", "w").write(str(r.pid))
open("pids/launcher", "w").write(str(os.getpid()))
for r in ranks:
    r.wait()
"""

#: The job's tree: a plain child, one in a new session, an orphan in a new session (a
#: double fork), and the launcher's ranks. ``pids/`` names them all.
TREE = """\
mkdir -p pids
sleep 1000 & echo $! > pids/plain
setsid sleep 1000 & echo $! > pids/session
( setsid sleep 1000 & echo $! > pids/orphan )
echo $$ > pids/bash
"""
NAMES = ("plain", "session", "orphan", "rank0", "rank1", "launcher")


def _launcher_line(run: str) -> str:
    Path(run, "launcher.py").write_text(LAUNCHER)
    return f"{shlex.quote(sys.executable)} launcher.py\n"


def tree_in_foreground(env: Env) -> tuple[str, str]:
    """A job whose script waits for its launcher and exits with its status."""
    script, run = env.run_dir(TREE)
    with open(script, "a") as fh:
        fh.write(_launcher_line(run) + 'status=$?; echo "launcher ended $status"; exit $status\n')
    return script, run


def tree_in_background(env: Env) -> tuple[str, str]:
    """A job whose script starts the tree, waits for ``go`` and exits 0, leaving it."""
    script, run = env.run_dir(TREE)
    with open(script, "a") as fh:
        fh.write(_launcher_line(run).rstrip("\n") + " &\n" + WAIT_FOR_GO + "exit 0\n")
    return script, run


Procs = dict[str, tuple[int, int | None]]


def started_tree(run: str) -> Procs:
    """Every process of the tree, by name, with its start time (so a reused pid is not it)."""
    pids = Path(run, "pids")
    names = (*NAMES, "bash")

    def written() -> bool:
        return all((pids / n).exists() and (pids / n).read_text().strip() for n in names)

    wait_for(written, 30, "the job's tree")
    procs: Procs = {}
    for name in names:
        pid = int((pids / name).read_text())
        procs[name] = (pid, process_start(pid))
        assert pid_alive(pid, procs[name][1]), f"{name} is not running"
    return procs


def survivors(procs: Procs) -> list[str]:
    return [name for name, (pid, start) in procs.items() if pid_alive(pid, start)]


def assert_none_survive(procs: Procs, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while survivors(procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert survivors(procs) == []


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    if e.state.exists():
        e.stop_all()
    # Whatever a broken scheduler left: never a process behind a test.
    for pid_file in tmp_path.glob("run*/pids/*"):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def kill_supervisor(env: Env, job_id: str) -> None:
    doc = env.job_file(job_id)
    pid, start = doc["supervisor_pid"], doc["supervisor_start"]
    assert isinstance(pid, int) and isinstance(start, int)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not pid_alive(pid, start), 30, "the supervisor to die")


def test_cancel_ends_every_process_of_the_job_even_those_in_sessions_of_their_own(
    env: Env,
) -> None:
    sched = env.scheduler(cancel_grace_sec=0.5)
    script, run = tree_in_foreground(env)
    job_id = sched.submit(script, run)
    procs = started_tree(run)
    sched.cancel(job_id)
    env.wait_state(sched, job_id, JobState.CANCELLED)
    # The end is recorded only once nothing of the job runs.
    assert survivors(procs) == []


def test_a_killed_launcher_fails_the_job_and_its_ranks_end_with_it(env: Env) -> None:
    sched = env.scheduler(cancel_grace_sec=0.5)
    script, run = tree_in_foreground(env)
    job_id = sched.submit(script, run)
    procs = started_tree(run)
    os.kill(procs["launcher"][0], signal.SIGKILL)  # torchrun killed mid-epoch
    st = env.wait_state(sched, job_id, JobState.FAILED)
    assert st.exit_code == 128 + signal.SIGKILL
    assert survivors(procs) == []


def test_cancel_after_the_supervisor_was_killed_leaves_no_process(env: Env) -> None:
    sched = env.scheduler(cancel_grace_sec=0.5)
    script, run = tree_in_foreground(env)
    job_id = sched.submit(script, run)
    procs = started_tree(run)
    kill_supervisor(env, job_id)
    assert env.status(sched, job_id).state is JobState.RUNNING  # the job itself still runs
    sched.cancel(job_id)
    assert env.status(sched, job_id).state is JobState.CANCELLED
    assert_none_survive(procs)


def test_the_next_poll_ends_what_a_job_left_when_its_supervisor_was_dead(env: Env) -> None:
    sched = env.scheduler(cancel_grace_sec=0.5)
    script, run = tree_in_background(env)
    job_id = sched.submit(script, run)
    procs = started_tree(run)
    kill_supervisor(env, job_id)
    Path(run, "go").touch()  # the script exits 0 with its tree still running
    bash = procs.pop("bash")
    wait_for(lambda: not pid_alive(*bash), 30, "the job script to exit")
    assert survivors(procs) == list(NAMES)
    st = env.wait_state(sched, job_id, JobState.FAILED)
    assert "without recording an exit code" in st.reason
    assert_none_survive(procs)


def _sleeper(marker: str | None) -> subprocess.Popen[bytes]:
    environ = dict(os.environ)
    environ.pop(JOB_MARKER_ENV, None)
    if marker is not None:
        environ[JOB_MARKER_ENV] = marker
    return subprocess.Popen(["sleep", "1000"], env=environ, start_new_session=True)


def test_leftovers_of_an_ended_job_are_ended_by_whoever_polls_next(env: Env) -> None:
    sched = env.scheduler()
    script, run = env.run_dir("true\n")
    job_id = sched.submit(script, run)
    env.wait_state(sched, job_id, JobState.COMPLETED)
    # A fake: a process no KILL could end (one stuck in the kernel) cannot be made on
    # demand, so the job file says one was left, and a real process carries its marker.
    path = env.state / "jobs" / f"{job_id}.json"
    doc = json.loads(path.read_text())
    doc["leftover"] = "fake-token-1"
    path.write_text(json.dumps(doc))
    left, other = _sleeper("fake-token-1"), _sleeper("another-job")
    try:
        sched.poll([job_id])
        assert left.wait(timeout=20) == -signal.SIGKILL
        assert other.poll() is None  # another job's process is not touched
        assert env.job_file(job_id)["leftover"] == ""
    finally:
        for p in (left, other):
            p.kill()
            p.wait()


def test_a_reused_process_group_id_is_never_signalled(env: Env) -> None:
    sched = env.scheduler()
    script, run = env.run_dir("true\n")
    job_id = sched.submit(script, run)
    env.wait_state(sched, job_id, JobState.COMPLETED)
    # The supervisor records the end and then exits: wait for its exit, so that the record
    # faked below really has a dead supervisor (a busy machine can keep it alive a moment).
    ended = json.loads((env.state / "jobs" / f"{job_id}.json").read_text())
    sup = (ended["supervisor_pid"], ended["supervisor_start"])
    wait_for(lambda: not pid_alive(*sup), 30, "the supervisor to exit")
    # The job is recorded as running with a dead supervisor, under a group id that now
    # leads another session (this test's sleeper): its start time differs, so the
    # reconcile must not take it for the job.
    stranger = _sleeper(None)
    try:
        path = env.state / "jobs" / f"{job_id}.json"
        doc = json.loads(path.read_text())
        start = process_start(stranger.pid)
        assert start is not None
        doc.update(
            state="RUNNING",
            ended_at=None,
            job_pid=stranger.pid,
            job_start=start - 1,
            marker="fake-token-2",
        )
        path.write_text(json.dumps(doc))
        assert env.status(sched, job_id).state is JobState.FAILED
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
