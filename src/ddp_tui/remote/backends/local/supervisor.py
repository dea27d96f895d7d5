"""The process that supervises one local job.

``python -m ddp_tui.remote.backends.local.supervisor STATE_DIR JOB_ID`` prints the pid of a
detached supervisor (forked, ``setsid``) and exits at once. The supervisor runs
``bash job.sbatch`` in a new session of its own with a Slurm-like environment,
waits for it, records the exit code and starts the next pending job, so the queue
moves on with the app closed. SIGTERM asks it to stop the job: TERM to every process
of the job, KILL after the grace period recorded in the job file. When ``bash`` exits,
for any reason, every process of the job still running is ended (TERM, then KILL)
before the end is recorded: the supervisor is their subreaper, so even processes that
left the job's session are found (:mod:`~ddp_tui.remote.backends.local.reaping`). It imports no
torch.
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

from ddp_tui.remote.backends.local.client import LocalScheduler
from ddp_tui.remote.backends.local.directives import exported_environment, sbatch_options
from ddp_tui.remote.backends.local.processes import (
    process_start,
    restore_python_path,
    usable_cpus,
)
from ddp_tui.remote.backends.local.reaping import (
    JOB_MARKER_ENV,
    JobProcesses,
    become_subreaper,
    end_job_processes,
    stop_job_processes,
)
from ddp_tui.remote.backends.local.store import (
    DEFAULT_CANCEL_GRACE_SEC,
    LocalJob,
    read_grace,
    supervisor_log_path,
)
from ddp_tui.remote.backends.states import JobState

#: The longest a job's leftovers get between TERM and KILL after its script exited.
_END_GRACE_CAP = 5.0
_USAGE = "usage: python -m ddp_tui.remote.backends.local.supervisor STATE_DIR JOB_ID"


class _Stopper:
    """A supervisor's reaction to SIGTERM: TERM the job's processes, KILL them after the
    grace.

    The work happens in signal handlers (they run in the main thread while it waits
    in ``waitpid``), so a waiting supervisor costs no wake-ups at all.
    """

    def __init__(self) -> None:
        self.requested = False
        self.killed = False
        self.procs: JobProcesses | None = None
        self.job_file: Path | None = None
        self.default_grace = DEFAULT_CANCEL_GRACE_SEC

    def arm(self, procs: JobProcesses, job_file: Path, default_grace: float) -> None:
        self.procs, self.job_file, self.default_grace = procs, job_file, default_grace
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
        if self.procs is not None:
            self.killed = True
            stop_job_processes(self.procs, signal.SIGKILL)

    def _term(self) -> None:
        if self.procs is not None:
            stop_job_processes(self.procs, signal.SIGTERM)
            signal.setitimer(signal.ITIMER_REAL, max(self.grace(), 0.01))


_STOP = _Stopper()


def job_env(job: LocalJob) -> dict[str, str]:
    """The job's environment: this process's (only a login's few with ``#SBATCH
    --export=NONE``, as Slurm gives), with Slurm's variables for a one-node job."""
    try:
        script = Path(job.script).read_text(encoding="utf-8", errors="replace")
    except OSError:
        script = ""  # bash reports the missing script
    exported = exported_environment(sbatch_options(script), os.environ)
    # Variables of an enclosing Slurm allocation would mislead the job.
    env = {k: v for k, v in exported.items() if not k.startswith("SLURM_")}
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
    env.update(cpu_env(job.script))
    if job.array_master:
        # What sbatch gives an array task; the array script picks its member by the index.
        env.update(
            SLURM_ARRAY_JOB_ID=job.array_master,
            SLURM_ARRAY_TASK_ID=str(job.array_index),
            SLURM_ARRAY_TASK_COUNT=str(job.array_count),
        )
    if job.marker:
        env[JOB_MARKER_ENV] = job.marker
    else:  # a job file from before markers: at least no other job's marker
        env.pop(JOB_MARKER_ENV, None)
    return env


def cpu_env(script_path: str) -> dict[str, str]:
    """Slurm's CPU variables for a job of ``script_path``: its ``--cpus-per-task`` times
    ``--ntasks-per-node``, no more than this machine's usable CPUs, in ``SLURM_CPUS_ON_NODE``
    (the job script sizes its threads from it); without ``--cpus-per-task`` the job may use
    them all, as the one job of a node would.

    And OpenMP threads that sleep while they wait (``OMP_WAIT_POLICY=PASSIVE``, unless set):
    nothing holds a local job to cores of its own, and a thread that spins at a barrier while
    the other threads of its region wait for a core others hold stalls them all. On this
    project's busy 2-core machine a ResNet-18 step on two spinning threads took 0.53-0.58 s,
    on one 0.11-0.14 s, on two passive ones 0.09-0.11 s."""
    try:
        opts = sbatch_options(Path(script_path).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        opts = {}  # bash reports the missing script
    cpus = usable_cpus()
    env = {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY") or "PASSIVE"}
    per_task, tasks = opts.get("cpus-per-task", ""), opts.get("ntasks-per-node", "1")
    if not per_task.isdigit() or int(per_task) < 1:
        return {**env, "SLURM_CPUS_ON_NODE": str(cpus)}
    asked = int(per_task) * (int(tasks) if tasks.isdigit() and int(tasks) > 0 else 1)
    return {**env, "SLURM_CPUS_PER_TASK": per_task, "SLURM_CPUS_ON_NODE": str(min(asked, cpus))}


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

    procs = JobProcesses(
        marker=job.marker, pgid=proc.pid, pgid_start=job.job_start, root=os.getpid()
    )
    _STOP.arm(procs, store.job_path(job_id), scheduler.cancel_grace_sec)
    rc = _wait_for(proc)
    signal.setitimer(signal.ITIMER_REAL, 0)
    # Like Slurm at the end of a job: nothing of it may linger, and the end is recorded
    # only once nothing does.
    grace = 0.0 if _STOP.killed else min(_STOP.grace(), _END_GRACE_CAP)
    clean = end_job_processes(procs, grace, reap=True)
    with store.locked():
        job = store.load(job_id)
        if job is not None and job.supervisor_pid == os.getpid():
            if not clean:
                job.leftover = job.marker
            scheduler.record_end(job, rc)


def _wait_for(proc: subprocess.Popen[bytes]) -> int:
    """Block until ``proc`` exits and return its ``returncode``, reaping on the way every
    orphan of the job that a subreaper inherits (they would stay zombies otherwise)."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:  # someone else reaped it: its status is lost
            proc.returncode = 255
            return proc.returncode
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode


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
    # Orphans of the job become ours, so none escapes its end (see reaping.py).
    become_subreaper()
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
