"""The local scheduler's client side: :class:`LocalScheduler` and its queue.

Submit, poll, cancel and requeue work on the job files of a
:class:`~ddp_tui.remote.backends.local.store.JobStore`; starting a job launches its supervisor
(:mod:`ddp_tui.remote.backends.local.supervisor`), which also calls back into
:meth:`LocalScheduler.record_end` to record the outcome and move the queue on.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ddp_tui.remote.backends.executor import CommandResult
from ddp_tui.remote.backends.job_request import JobRequest
from ddp_tui.remote.backends.local.directives import (
    expand_log_pattern,
    parse_array,
    refuse_multi_node,
    requested_nodes,
    sbatch_options,
)
from ddp_tui.remote.backends.local.processes import (
    pid_alive,
    process_start,
    python_module_command,
    usable_cpus,
)
from ddp_tui.remote.backends.local.reaping import JobProcesses, end_job_processes, new_marker
from ddp_tui.remote.backends.local.store import (
    ACTION_CANCEL,
    ACTION_REQUEUE,
    DEFAULT_CANCEL_GRACE_SEC,
    DEFAULT_MAX_RUNNING,
    JobStore,
    LocalJob,
    StateDirUnusable,
    default_state_dir,
)
from ddp_tui.remote.backends.scheduler import JobStatus, PartitionInfo, Scheduler, SchedulerError
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.backends.user_jobs import Since, StdioPaths, UserJob, UserJobsAnswer

#: Started with ``python -m``; never imported here, so that running it as ``__main__``
#: does not load it twice.
SUPERVISOR_MODULE = "ddp_tui.remote.backends.local.supervisor"
_LAUNCH_TIMEOUT = 60.0
#: squeue's reason for an array task held back by the array's ``%K`` throttle.
_THROTTLED = "JobArrayTaskLimit"


def _iso(t: float | None) -> str:
    if t is None:
        return ""
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def _hms(sec: float) -> str:
    s = int(sec)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


class LocalScheduler(Scheduler):
    """One-node jobs on this machine, at most ``max_running`` at once."""

    name = "local"
    #: Its submit runs inside the caller: a killed caller submitted all of a job or nothing.
    submit_in_flight_sec = 0.0

    def __init__(
        self,
        state_dir: str | Path | None = None,
        *,
        max_running: int = DEFAULT_MAX_RUNNING,
        cancel_grace_sec: float = DEFAULT_CANCEL_GRACE_SEC,
        python: str | None = None,
        _save_settings: bool = True,
    ) -> None:
        if max_running < 1:
            raise ValueError("max_running must be at least 1")
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self.max_running = max_running
        self.cancel_grace_sec = cancel_grace_sec
        self.python = python or sys.executable
        self.store = JobStore(self.state_dir)
        self._gpus: int | None = None
        if _save_settings:
            # Supervisors read these when they advance the queue with the app closed.
            settings = {"max_running": max_running, "cancel_grace_sec": cancel_grace_sec}
            try:
                with self.store.locked():
                    if self.store.read_settings() != settings:
                        self.store.write_settings(settings)
            except OSError as e:  # a full or read-only state directory
                raise StateDirUnusable(self.state_dir, e) from None

    @classmethod
    def from_state_dir(cls, state_dir: str | Path) -> LocalScheduler:
        """An instance with the settings the app last saved there (used by supervisors)."""
        s = JobStore(Path(state_dir)).read_settings()
        return cls(
            state_dir,
            max_running=int(s.get("max_running", DEFAULT_MAX_RUNNING)),
            cancel_grace_sec=float(s.get("cancel_grace_sec", DEFAULT_CANCEL_GRACE_SEC)),
            _save_settings=False,
        )

    # -- Scheduler API ----------------------------------------------------------------

    def batch_script(self, job_id: str) -> str:
        """The script the job was submitted with (its job file names it)."""
        job = next((j for j in self.store.all_jobs() if j.job_id == job_id), None)
        if job is None:
            raise SchedulerError(f"the local scheduler does not know job {job_id}")
        try:
            return Path(job.script).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise SchedulerError(f"cannot read {job.script}: {exc.strerror}") from exc

    def submit(self, script_path: str, run_dir: str) -> str:
        try:
            text = Path(script_path).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise SchedulerError(f"cannot read {script_path}: {exc.strerror}") from exc
        if not os.path.isdir(run_dir):
            raise SchedulerError(f"run directory {run_dir} does not exist")
        refuse_multi_node(requested_nodes(text))
        opts = sbatch_options(text)
        run_abs = os.path.abspath(run_dir)
        name = opts.get("job-name") or os.path.basename(run_abs)
        array = parse_array(opts["array"]) if opts.get("array") else None
        out_pat = opts.get("output") or "slurm-%j.out"
        err_pat = opts.get("error") or (opts["output"] if opts.get("output") else "slurm-%j.err")
        with self.store.locked():
            master = self.store.next_id()
            # An array is one submit that queues a task per index, ``<master>_<index>``,
            # each with Slurm's SLURM_ARRAY_* variables (see supervisor.job_env).
            tasks = [(master, None)] if array is None else [(f"{master}_{i}", i) for i in array[0]]
            now = time.time()
            for job_id, index in tasks:
                where = None if index is None else (master, index)
                job = LocalJob(
                    job_id=job_id,
                    run_dir=run_abs,
                    script=os.path.abspath(script_path),
                    name=name,
                    out_path=os.path.join(
                        run_abs, expand_log_pattern(out_pat, job_id, name, array=where)
                    ),
                    err_path=os.path.join(
                        run_abs, expand_log_pattern(err_pat, job_id, name, array=where)
                    ),
                    submitted_at=now,
                    grace_sec=self.cancel_grace_sec,
                )
                if array is not None and index is not None:
                    job.array_master, job.array_index = master, index
                    job.array_count, job.array_limit = len(array[0]), array[1]
                self.store.save(job)
            self._advance()
        return master

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        with self.store.locked():
            self._advance()
            out: dict[str, JobStatus] = {}
            for jid in job_ids:
                job = self.store.load(jid)
                if job is not None:
                    out[jid] = self._status(job)
            return out

    def list_jobs(self) -> list[JobStatus]:
        """Every job this state directory knows, oldest first."""
        with self.store.locked():
            self._advance()
            return [self._status(j) for j in self.store.all_jobs()]

    def parse_user_jobs(self, since: Since, results: Sequence[CommandResult]) -> UserJobsAnswer:
        """Every job of this state directory: the queued and running ones, and those that
        ended since ``since`` (its job files; no command)."""
        start = since.timestamp()
        queued: list[UserJob] = []
        ended: list[UserJob] = []
        with self.store.locked():
            self._advance()
            jobs = self.store.all_jobs()
        for job in jobs:
            status = self._status(job)
            if not status.state.is_terminal:
                queued.append(self._user_job(job, status))
            elif (job.ended_at or job.submitted_at) >= start:
                ended.append(self._user_job(job, status))
        return UserJobsAnswer(tuple(queued), tuple(ended))

    @staticmethod
    def _user_job(job: LocalJob, status: JobStatus) -> UserJob:
        return UserJob(
            job_id=job.job_id,
            name=job.name,
            state=status.state,
            raw_state=status.raw_state,
            array_job_id=job.array_master or None,
            array_task_id=job.array_index,
            partition="local",
            nodes=1,
            node_list=status.node_list,
            elapsed_sec=int(status.elapsed_sec),
            reason=status.reason,
            exit_code=status.exit_code,
            work_dir=job.run_dir,
            submit_time=_iso(job.submitted_at),
            start_time=status.start,
            end_time=status.end,
            stdout=job.out_path,
            stderr=job.err_path,
            source="local",
        )

    def job_stdio(self, job_id: str, listed: UserJob | None = None) -> StdioPaths:
        with self.store.locked():
            job = self.store.load(job_id)
        if job is None:
            return StdioPaths(None, None, f"no local job {job_id} in {self.state_dir}")
        return StdioPaths(job.out_path, job.err_path, f"the local job file of {job_id}")

    def job_request(self, job_id: str) -> JobRequest:
        """The job file's record: one node of this machine, no resource options (the local
        scheduler honours none but the name and the logs)."""
        with self.store.locked():
            self._advance()
            job = self.store.load(job_id)
            status = self._status(job) if job is not None else None
        if job is None or status is None:
            raise SchedulerError(f"the local scheduler does not know job {job_id}")
        return JobRequest(
            job_id=job.job_id,
            name=job.name,
            state=status.state,
            batch=True,
            work_dir=job.run_dir,
            stdout=job.out_path,
            stderr=job.err_path,
            source=f"the local job file of {job_id}",
        )

    def jobs_in_dir(self, run_dir: str) -> list[str]:
        """Ids of every job (any state) submitted from ``run_dir``, oldest first.

        Finds a submission whose answer was lost (the app killed between the job file and
        ``jobs.jsonl``), and a second live job for one run. Paths compare normalised, as
        :meth:`submit` stores them absolute.
        """
        want = os.path.normpath(os.path.abspath(run_dir))
        with self.store.locked():
            return [j.job_id for j in self.store.all_jobs() if os.path.normpath(j.run_dir) == want]

    def cancel(self, job_id: str) -> None:
        with self.store.locked():
            tasks = [j for j in self.store.all_jobs() if j.array_master == job_id]
            for task in tasks:  # an array's master id cancels every task, as scancel does
                self._cancel(task)
            if not tasks:
                self._cancel(self._require(job_id))

    def _cancel(self, job: LocalJob) -> None:
        """Cancel one job (lock held)."""
        state = job.job_state
        if state.is_terminal:
            return
        if state is JobState.PENDING:
            job.state = JobState.CANCELLED.value
            job.ended_at = time.time()
            job.reason = "cancelled while pending"
            self.store.save(job)
            return
        self._stop(job, ACTION_CANCEL)

    def requeue(self, job_id: str) -> None:
        with self.store.locked():
            job = self._require(job_id)
            state = job.job_state
            if state is JobState.PENDING:
                return
            if state.is_terminal:
                self._back_to_pending(job, "requeued")
                self.store.save(job)
                self._advance()
                return
            self._stop(job, ACTION_REQUEUE)

    def version(self) -> str:
        return "local"

    def identity(self) -> str:
        # Job ids are counters in this state directory: they mean nothing elsewhere.
        return f"local:{socket.gethostname()}:{self.state_dir}"

    def partitions(self) -> list[PartitionInfo]:
        # Its one node is idle when a new job would start at once: a slot is free after
        # the jobs that run or wait already.
        queued = sum(1 for j in self.store.all_jobs() if not j.job_state.is_terminal)
        return [
            PartitionInfo(
                name="local",
                nodes=1,
                gpus_per_node=self._gpu_count(),
                cpus_per_node=usable_cpus(),
                max_time_min=None,
                max_nodes=1,
                is_default=True,
                states=("idle",),
                idle_nodes=1 if queued < self.max_running else 0,
            )
        ]

    def accounting(self, job_id: str) -> str:
        with self.store.locked():
            job = self.store.load(job_id)
        if job is None:
            return ""
        st = self._status(job)
        code = "" if job.exit_code is None else f"{job.exit_code}:{job.kill_signal or 0}"
        rows = [
            ("JobID", job.job_id),
            ("JobName", job.name),
            ("State", st.state.value),
            ("ExitCode", code),
            ("Submit", _iso(job.submitted_at)),
            ("Start", _iso(job.started_at)),
            ("End", _iso(job.ended_at)),
            ("Elapsed", _hms(st.elapsed_sec)),
            ("NNodes", "1"),
            ("NodeList", st.node_list),
            ("WorkDir", job.run_dir),
            ("Restarts", str(job.restart_count)),
        ]
        if job.reason:
            rows.append(("Reason", job.reason))
        width = max(len(k) for k, _ in rows)
        lines = ["ddp-tui local scheduler accounting"]
        lines += [f"{k.ljust(width)}  {v}" for k, v in rows]
        return "\n".join(lines) + "\n"

    # -- for the supervisor -------------------------------------------------------------

    def record_end(self, job: LocalJob, rc: int | None) -> None:
        """Record how the job ended (``rc`` as ``Popen.returncode``, None if it never
        started) and start the next. Lock held."""
        job.ended_at = time.time()
        if rc is not None:
            job.exit_code = rc if rc >= 0 else 128 - rc
            job.kill_signal = -rc if rc < 0 else None
        if job.action == ACTION_REQUEUE:
            self._back_to_pending(job, "requeued")
        elif job.action == ACTION_CANCEL:
            job.state = JobState.CANCELLED.value
        elif rc == 0:
            job.state = JobState.COMPLETED.value
        else:
            job.state = JobState.FAILED.value
            if not job.reason:
                job.reason = (
                    f"killed by signal {job.kill_signal}"
                    if job.kill_signal
                    else f"exit code {job.exit_code}"
                )
        self.store.save(job)
        self._advance()

    # -- queue --------------------------------------------------------------------------------

    def _require(self, job_id: str) -> LocalJob:
        job = self.store.load(job_id)
        if job is None:
            raise SchedulerError(f"no local job {job_id} (state directory {self.state_dir})")
        return job

    def _advance(self) -> None:
        """End what ended jobs left behind, notice lost jobs, then start pending jobs while
        slots are free. Lock held."""
        every = self.store.all_jobs()
        for job in every:
            if job.leftover:
                self._end_leftovers(job)
        jobs = [j for j in every if not j.job_state.is_terminal]
        busy = 0
        # Running tasks per array, for each array's own %K throttle.
        per_array: dict[str, int] = {}
        for job in jobs:
            if job.job_state is JobState.RUNNING:
                alive = pid_alive(job.supervisor_pid, job.supervisor_start)
                if alive or self._reconcile_lost(job):
                    busy += 1
                    if job.array_master:
                        per_array[job.array_master] = per_array.get(job.array_master, 0) + 1
        for job in jobs:
            if busy >= self.max_running:
                break
            if job.job_state is not JobState.PENDING:
                continue
            if job.array_limit and per_array.get(job.array_master, 0) >= job.array_limit:
                if job.reason != _THROTTLED:
                    job.reason = _THROTTLED  # Slurm's word for a throttled array task
                    self.store.save(job)
                continue
            if self._start(job):
                busy += 1
                if job.array_master:
                    per_array[job.array_master] = per_array.get(job.array_master, 0) + 1

    def _start(self, job: LocalJob) -> bool:
        """Launch the job's supervisor; False if that failed (the job is then FAILED)."""
        # Absolute: the supervisor runs in the state directory, where a relative path
        # would mean something else.
        args = [str(self.state_dir.absolute()), job.job_id]
        argv, env = python_module_command(self.python, SUPERVISOR_MODULE, args)
        try:
            proc = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_LAUNCH_TIMEOUT,
                cwd=self.state_dir,
                env=env,
                close_fds=True,
                check=False,
            )
            pid = int(proc.stdout.decode().strip())
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            job.state = JobState.FAILED.value
            job.ended_at = time.time()
            job.reason = f"could not start the job supervisor: {exc}"
            self.store.save(job)
            return False
        job.state = JobState.RUNNING.value
        job.reason = ""
        job.marker = new_marker(job.job_id)
        job.supervisor_pid = pid
        job.supervisor_start = process_start(pid)
        job.job_pid = job.job_start = None
        job.started_at = time.time()
        job.ended_at = None
        job.exit_code = job.kill_signal = None
        self.store.save(job)
        return True

    def _reconcile_lost(self, job: LocalJob) -> bool:
        """The supervisor is gone without a final word. Returns True if the job still runs."""
        if pid_alive(job.job_pid, job.job_start):
            lost = "supervisor lost; the exit code will be unknown"
            if job.reason != lost:
                job.reason = lost
                self.store.save(job)
            return True
        # Nobody is left to be graceful for the job: what it left behind is killed at once.
        self._kill_processes(job)
        job.ended_at = time.time()
        if job.action == ACTION_CANCEL:
            job.state = JobState.CANCELLED.value
        elif job.action == ACTION_REQUEUE:
            self._back_to_pending(job, "requeued")
        else:
            job.state = JobState.FAILED.value
            job.reason = (
                "the job's supervisor ended without recording an exit code"
                " (killed, or the machine restarted)"
            )
        self.store.save(job)
        return False

    def _stop(self, job: LocalJob, action: str) -> None:
        """Ask a running job's supervisor to stop it (TERM, then KILL after the grace)."""
        job.action = action
        job.grace_sec = self.cancel_grace_sec
        self.store.save(job)
        sup = job.supervisor_pid
        if sup is not None and pid_alive(sup, job.supervisor_start):
            with contextlib.suppress(ProcessLookupError):
                os.kill(sup, signal.SIGTERM)
            return
        # No supervisor to be graceful for us: stop whatever is left at once.
        self._kill_processes(job)
        self._reconcile_lost(job)

    @staticmethod
    def _processes(job: LocalJob) -> JobProcesses:
        return JobProcesses(marker=job.marker, pgid=job.job_pid, pgid_start=job.job_start)

    def _kill_processes(self, job: LocalJob) -> None:
        """KILL every process of a job whose supervisor is gone; a survivor is left to
        the next :meth:`_advance` (``leftover``). Lock held; the caller saves the job."""
        if not end_job_processes(self._processes(job), 0.0, kill_within=1.0):
            job.leftover = job.marker

    def _end_leftovers(self, job: LocalJob) -> None:
        """Try again to end the processes of an ended start of ``job``. Lock held."""
        if end_job_processes(JobProcesses(marker=job.leftover), 0.0, kill_within=1.0):
            job.leftover = ""
            self.store.save(job)

    @staticmethod
    def _back_to_pending(job: LocalJob, reason: str) -> None:
        job.state = JobState.PENDING.value
        job.reason = reason
        job.action = ""
        job.restart_count += 1
        job.supervisor_pid = job.supervisor_start = None
        job.job_pid = job.job_start = None
        job.started_at = job.ended_at = None

    def _status(self, job: LocalJob) -> JobStatus:
        state = job.job_state
        reason = job.reason
        if state is JobState.RUNNING and job.action == ACTION_CANCEL:
            state, reason = JobState.COMPLETING, "cancelling"
        elif state is JobState.RUNNING and job.action == ACTION_REQUEUE:
            state, reason = JobState.REQUEUED, "requeueing"
        elif state is JobState.PENDING and not reason:
            reason = "Resources"
        end = job.ended_at if job.ended_at is not None else time.time()
        elapsed = max(0.0, end - job.started_at) if job.started_at is not None else 0.0
        return JobStatus(
            job_id=job.job_id,
            state=state,
            raw_state=state.value,
            reason=reason,
            nodes=1,
            node_list=socket.gethostname() if job.started_at is not None else "",
            elapsed_sec=elapsed,
            exit_code=job.exit_code,
            start=_iso(job.started_at),
            end=_iso(job.ended_at),
            name=job.name,
        )

    def _gpu_count(self) -> int:
        if self._gpus is None:
            self._gpus = 0
            exe = shutil.which("nvidia-smi")
            if exe:
                try:
                    res = subprocess.run([exe, "-L"], capture_output=True, timeout=10, check=False)
                    if res.returncode == 0:
                        self._gpus = sum(
                            1 for ln in res.stdout.decode().splitlines() if ln.startswith("GPU ")
                        )
                except (OSError, subprocess.TimeoutExpired):
                    pass
        return self._gpus
