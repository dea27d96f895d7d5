"""The process that supervises one local job.

``python -m ddp_tui.remote.local.supervisor STATE_DIR JOB_ID`` prints the pid of a
detached supervisor (forked, ``setsid``) and exits at once. The supervisor runs
``bash job.sbatch`` in a new process group of its own with a Slurm-like environment,
waits for it, records the exit code and starts the next pending job, so the queue
moves on with the app closed. SIGTERM asks it to stop the job: TERM to the job's
group, KILL after the grace period recorded in the job file. It imports no torch.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ddp_tui.remote.local.client import LocalScheduler
from ddp_tui.remote.local.processes import (
    group_alive,
    process_start,
    restore_python_path,
    signal_group,
)
from ddp_tui.remote.local.store import (
    DEFAULT_CANCEL_GRACE_SEC,
    LocalJob,
    read_grace,
    supervisor_log_path,
)
from ddp_tui.remote.states import JobState

_WAIT_TICK = 0.1
_USAGE = "usage: python -m ddp_tui.remote.local.supervisor STATE_DIR JOB_ID"


class _Stopper:
    """A supervisor's reaction to SIGTERM: TERM the job's group, KILL it after the grace.

    The work happens in signal handlers (they run in the main thread while it waits
    in ``waitpid``), so a waiting supervisor costs no wake-ups at all.
    """

    def __init__(self) -> None:
        self.requested = False
        self.pgid: int | None = None
        self.job_file: Path | None = None
        self.default_grace = DEFAULT_CANCEL_GRACE_SEC

    def arm(self, pgid: int, job_file: Path, default_grace: float) -> None:
        self.pgid, self.job_file, self.default_grace = pgid, job_file, default_grace
        if self.requested:  # asked to stop before the job had started
            self._term()

    def grace(self) -> float:
        # No lock here: a handler may run while the main thread holds it.
        if self.job_file is None:
            return self.default_grace
        return read_grace(self.job_file, self.default_grace)

    def on_stop(self, signum: int, frame: object) -> None:
        if not self.requested:
            self.requested = True
            self._term()

    def on_alarm(self, signum: int, frame: object) -> None:
        if self.pgid is not None:
            signal_group(self.pgid, signal.SIGKILL)

    def _term(self) -> None:
        if self.pgid is not None:
            signal_group(self.pgid, signal.SIGTERM)
            signal.setitimer(signal.ITIMER_REAL, max(self.grace(), 0.01))


_STOP = _Stopper()


def job_env(job: LocalJob) -> dict[str, str]:
    """The job's environment: this process's, with Slurm's variables for a one-node job."""
    # Variables of an enclosing Slurm allocation would mislead the job.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    host = socket.gethostname()
    env.update(
        SLURM_JOB_ID=job.job_id,
        SLURM_JOBID=job.job_id,
        SLURM_JOB_NAME=job.name,
        SLURM_JOB_NUM_NODES="1",
        SLURM_NNODES="1",
        SLURM_JOB_NODELIST=host,
        SLURM_NODELIST=host,
        SLURM_SUBMIT_DIR=job.run_dir,
        SLURM_RESTART_COUNT=str(job.restart_count),
        DDP_TUI_SCHEDULER="local",
    )
    return env


def _spawn(job: LocalJob) -> subprocess.Popen[bytes]:
    for p in (job.out_path, job.err_path):
        os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
    # Append: a requeued job writes on into the same files, as Slurm does.
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(job.out_path, "ab"))
        err = out if job.err_path == job.out_path else stack.enter_context(open(job.err_path, "ab"))
        return subprocess.Popen(
            ["bash", job.script],
            cwd=job.run_dir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=job_env(job),
            start_new_session=True,
            close_fds=True,
        )


def supervise(scheduler: LocalScheduler, job_id: str) -> None:
    """Run job ``job_id`` to its end and record the outcome (in the detached process)."""
    store = scheduler.store
    with store.locked():
        job = store.load(job_id)
        if job is None or job.job_state is not JobState.RUNNING:
            return
        if job.supervisor_pid != os.getpid():
            return  # a stale launch: another supervisor owns this job
        if job.action:
            scheduler.record_end(job, None)
            return
        try:
            proc = _spawn(job)
        except OSError as exc:
            job.reason = f"could not start bash: {exc}"
            scheduler.record_end(job, 127)
            return
        job.job_pid = proc.pid
        job.job_start = process_start(proc.pid)
        job.started_at = time.time()
        store.save(job)

    # Block in waitpid; the signal handlers stop the job meanwhile.
    _STOP.arm(proc.pid, store.job_path(job_id), scheduler.cancel_grace_sec)
    rc = proc.wait()
    signal.setitimer(signal.ITIMER_REAL, 0)
    pgid = proc.pid
    # Like Slurm at the end of a job: nothing of it may linger.
    if group_alive(pgid):
        signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + min(_STOP.grace(), 5.0)
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(_WAIT_TICK)
        signal_group(pgid, signal.SIGKILL)
    with store.locked():
        job = store.load(job_id)
        if job is not None and job.supervisor_pid == os.getpid():
            scheduler.record_end(job, rc)


def main(argv: Sequence[str]) -> NoReturn:
    """Start the supervisor of one job: ``STATE_DIR JOB_ID``.

    Prints the pid of the detached supervisor and exits at once; the detached
    process runs the job and exits when it has recorded the outcome.
    """
    if len(argv) != 2:
        sys.exit(_USAGE)
    state_dir, job_id = argv
    # The launcher put ddp_tui on PYTHONPATH for us, not for the job.
    restore_python_path()
    # Installed before the fork, so a cancel that comes very early is not lost.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _STOP.on_stop)
    signal.signal(signal.SIGALRM, _STOP.on_alarm)
    pid = os.fork()
    if pid:
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()
        os._exit(0)
    os.setsid()
    log = os.open(
        supervisor_log_path(state_dir, job_id), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
    )
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    try:
        supervise(LocalScheduler.from_state_dir(state_dir), job_id)
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
