"""A local scheduler's state directory and run directories for one test (shared by the local
scheduler's test files); every job, and every process it left, is stopped afterwards."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from ddp_tui.remote.backends.local import LocalScheduler, pid_alive
from ddp_tui.remote.backends.local.reaping import JobProcesses, end_job_processes
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.states import JobState

HEADER = """#!/bin/bash
#SBATCH --job-name=test
#SBATCH --nodes=1
#SBATCH --output=slurm-%j.out
#SBATCH --error=slurm-%j.err
"""
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.05; done\n"


def wait_for(check: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Env:
    """A state directory and run directories for one test; every job is stopped afterwards."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.state = tmp_path / "state"
        self.schedulers: list[LocalScheduler] = []
        self._runs = 0

    def scheduler(self, max_running: int = 1, cancel_grace_sec: float = 10.0) -> LocalScheduler:
        sched = LocalScheduler(
            self.state, max_running=max_running, cancel_grace_sec=cancel_grace_sec
        )
        self.schedulers.append(sched)
        return sched

    def run_dir(self, body: str, header: str = HEADER) -> tuple[str, str]:
        self._runs += 1
        run = self.tmp / f"run{self._runs}"
        run.mkdir()
        script = run / "job.sbatch"
        script.write_text(header + body)
        return str(script), str(run)

    def status(self, sched: LocalScheduler, job_id: str) -> JobStatus:
        return sched.poll([job_id])[job_id]

    def wait_state(
        self, sched: LocalScheduler, job_id: str, state: JobState, timeout: float = 30.0
    ) -> JobStatus:
        wait_for(lambda: self.status(sched, job_id).state is state, timeout, f"{job_id} {state}")
        return self.status(sched, job_id)

    def job_file(self, job_id: str) -> dict[str, object]:
        doc: dict[str, object] = json.loads((self.state / "jobs" / f"{job_id}.json").read_text())
        return doc

    def stop_all(self) -> None:
        sched = LocalScheduler(self.state, cancel_grace_sec=0.5)
        for st in sched.list_jobs():
            if not st.state.is_terminal:
                sched.cancel(st.job_id)
        try:
            wait_for(
                lambda: all(s.state.is_terminal for s in sched.list_jobs()), 30, "jobs stopped"
            )
        finally:
            # Never leave a process behind, even when the scheduler under test is broken.
            for path in (self.state / "jobs").glob("*.json"):
                doc = json.loads(path.read_text())
                for key, kill in (("job_pid", os.killpg), ("supervisor_pid", os.kill)):
                    pid = doc.get(key)
                    start = doc.get(key.replace("_pid", "_start"))
                    if isinstance(pid, int) and pid_alive(pid, start):
                        with contextlib.suppress(OSError):
                            kill(pid, signal.SIGKILL)
                # What escaped the job's group (sessions of their own, orphans).
                for key in ("marker", "leftover"):
                    token = doc.get(key)
                    if isinstance(token, str) and token:
                        end_job_processes(JobProcesses(marker=token), 0.0)
