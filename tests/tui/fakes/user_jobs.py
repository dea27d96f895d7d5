"""``FakeUserJobs``: every job of the user in fixed states (:class:`ddp_tui.remote.api.UserJobsAPI`,
checked by mypy below), for the app's snapshot tests of the jobs that ddp-tui did not submit:
a held job, a 2-node job running, one ended last week... states a real Slurm gives only in
time, never to the same pixel. The story tests use the real ``Cluster`` on the real Slurm test
cluster (tests/integration/test_user_jobs_slurm.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from ddp_tui.remote.api import UserJobsAPI
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.backends.user_jobs import DEFAULT_SINCE, Since, UserJob
from ddp_tui.remote.model.views import Snapshot
from ddp_tui.remote.runs.user_jobs import LOG_BYTES, AllJobs, JobLog
from ddp_tui.remote.store.tail import LogChunk
from tests.tui.fakes.services import FakeState


def sample_user_jobs() -> list[UserJob]:
    """Four jobs sent with plain sbatch, newest first: held, waiting on priority, a 2-node job
    running, and one that ended."""
    work = "/home/user/project"
    return [
        UserJob(
            "1204",
            "prep-data",
            JobState.PENDING,
            "PENDING",
            partition="debug",
            nodes=1,
            gpus=0,
            time_limit_sec=3600,
            reason="JobHeldUser",
            work_dir=work,
            submit_time="2023-11-14T22:10:00",
            stdout=f"{work}/prep-data-1204.out",
            stderr=f"{work}/prep-data-1204.out",
            user="user",
            source="squeue",
        ),
        UserJob(
            "1203_1",
            "eval",
            JobState.PENDING,
            "PENDING",
            array_job_id="1203",
            array_task_id=1,
            partition="debug",
            nodes=1,
            gpus=1,
            time_limit_sec=1800,
            reason="Priority",
            work_dir=work,
            submit_time="2023-11-14T22:05:00",
            user="user",
            source="squeue",
        ),
        UserJob(
            "1202",
            "big-train",
            JobState.RUNNING,
            "RUNNING",
            partition="debug",
            nodes=2,
            node_list="n[1-2]",
            gpus=4,
            elapsed_sec=754,
            time_limit_sec=7200,
            work_dir=work,
            submit_time="2023-11-14T22:00:00",
            start_time="2023-11-14T22:00:02",
            stdout=f"{work}/slurm-1202.out",
            stderr=f"{work}/slurm-1202.out",
            user="user",
            source="squeue",
        ),
        UserJob(
            "1150",
            "notebook",
            JobState.COMPLETED,
            "COMPLETED",
            partition="debug",
            nodes=1,
            node_list="n1",
            gpus=1,
            elapsed_sec=5400,
            time_limit_sec=14400,
            exit_code=0,
            work_dir=work,
            submit_time="2023-11-08T09:00:00",
            start_time="2023-11-08T09:00:01",
            end_time="2023-11-08T10:30:01",
            user="user",
            source="sacct",
            cpu_efficiency=0.31,
            mem_efficiency=0.12,
        ),
    ]


class FakeUserJobs:
    """The runs of the shared state (``refresh``: the fake runs service's) beside fixed foreign
    rows; ``cancel_job`` marks a row CANCELLED; ``job_log`` answers from ``logs`` (job id ->
    lines of its ``.out``), or says no path is known."""

    def __init__(
        self,
        state: FakeState,
        refresh: Callable[[str | None], Snapshot],
        foreign: Sequence[UserJob] | None = None,
        *,
        logs: Mapping[str, Sequence[str]] | None = None,
        error: str | None = None,
    ) -> None:
        self.state = state
        self.refresh = refresh
        self.foreign = list(sample_user_jobs() if foreign is None else foreign)
        self.logs = dict(logs or {})
        self.error = error

    def user_jobs(self, since: Since | None = None, *, follow: str | None = None) -> AllJobs:
        self.state.calls.append(("user_jobs", since))
        snapshot = self.refresh(follow)
        return AllJobs(snapshot, tuple(self.foreign), since or DEFAULT_SINCE, self.error, 2)

    def cancel_job(self, job_id: str) -> None:
        self.state.calls.append(("cancel_job", job_id))
        self.foreign = [
            replace(j, state=JobState.CANCELLED, raw_state="CANCELLED by 1000")
            if j.job_id == job_id
            else j
            for j in self.foreign
        ]

    def job_state(self, job_id: str) -> JobState:
        return next((j.state for j in self.foreign if j.job_id == job_id), JobState.UNKNOWN)

    def job_script(self, job_id: str) -> str:
        """FAKE: a plain sbatch script named for the job."""
        self.state.calls.append(("job_script", job_id))
        name = next((j.name for j in self.foreign if j.job_id == job_id), "job")
        return f"#!/bin/bash\n#SBATCH --job-name={name}\nsrun python {name}.py\n"

    def job_log(
        self,
        job_id: str,
        *,
        err: bool = False,
        offset: int | None = None,
        max_bytes: int = LOG_BYTES,
    ) -> JobLog:
        self.state.calls.append(("job_log", (job_id, err, offset)))
        stream = "err" if err else "out"
        lines = self.logs.get(job_id)
        if lines is None:
            return JobLog(job_id, stream, None, f"no path known for job {job_id}")
        path = f"/home/user/project/slurm-{job_id}.{stream}"
        text = "".join(f"{line}\n" for line in lines).encode()
        start = 0 if offset is None else min(offset, len(text))
        new = text[start:].decode().splitlines()
        chunk = LogChunk(path, tuple(new), offset=len(text), size=len(text))
        return JobLog(job_id, stream, path, "fake", chunk)


def _conforms(fake: FakeUserJobs) -> UserJobsAPI:
    return fake  # mypy checks here that FakeUserJobs offers every call of the protocol
