"""What the facade knows of each run's latest attempt: polled, ended, or lost.

It merges three sources: the scheduler's polls, the end records in each run's
``jobs.jsonl`` (written by any instance, any time; see :mod:`ddp_tui.remote.store.history`),
and the LOST verdicts of attempts no poll has known for a while. It writes each end it
learns once, so that no instance polls that attempt again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ddp_tui.remote.backends.executor import ExecutorError
from ddp_tui.remote.backends.scheduler import JobStatus, Scheduler, SchedulerError
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.view_building import latest_job_id
from ddp_tui.remote.store.history import (
    LOST_GRACE_SEC,
    MissingJobs,
    lost_status,
    status_of_end,
)
from ddp_tui.remote.store.journal import end_record
from ddp_tui.remote.store.runs import RunInfo, RunStore


class AttemptStates:
    """The latest status of every attempt this process has polled or read the end of."""

    def __init__(
        self, scheduler: Scheduler, store: RunStore, *, lost_grace_sec: float = LOST_GRACE_SEC
    ) -> None:
        self.scheduler = scheduler
        self.store = store
        self.polled: dict[str, JobStatus] = {}  # job id -> latest polled status
        # job id -> (its end record, the status it gives this reader); the record is kept
        # to notice when a real end supersedes a LOST verdict.
        self._ended: dict[str, tuple[Mapping[str, Any], JobStatus | None]] = {}
        self._recorded: set[str] = set()  # job ids whose end this process appended
        #: The end lines the last :meth:`record_ends` appended (job id -> line): the listing
        #: shows them only from the next refresh; notifications want them now.
        self.just_recorded: dict[str, Mapping[str, Any]] = {}
        self._missing = MissingJobs(lost_grace_sec)
        self._identity: str | None = None

    def update(self, statuses: Mapping[str, JobStatus]) -> None:
        """Take what a poll (or part of one) said."""
        self.polled.update(statuses)

    def observe_complete_poll(
        self, asked: Sequence[str], statuses: Mapping[str, JobStatus]
    ) -> None:
        """Take a complete answer: what it did not mention, the scheduler does not know,
        and an attempt unknown for long enough is LOST."""
        self.polled.update(statuses)
        for job_id in self._missing.observe(asked, statuses):
            self.polled[job_id] = lost_status(job_id)

    def end_of(self, info: RunInfo) -> JobStatus | None:
        """How the run's latest attempt ended, if that is known: recorded in jobs.jsonl
        (by anyone, any time), or just polled. None while it may still run."""
        job_id = latest_job_id(info)
        if job_id is None:
            return None
        rec = info.ends.get(job_id)
        if rec is not None:
            cached = self._ended.get(job_id)
            if cached is None or cached[0] is not rec:
                lost = rec.get("state") == JobState.LOST.value
                scope = self.identity() if lost else ""
                ended = status_of_end(rec, scope=scope) if scope is not None else None
                cached = self._ended[job_id] = (rec, ended)
            if cached[1] is not None:
                return cached[1]
        status = self.polled.get(job_id)
        return status if status is not None and status.state.is_terminal else None

    def status_of(self, info: RunInfo) -> JobStatus | None:
        """The latest attempt's status: its recorded end, else what the last poll said."""
        job_id = latest_job_id(info)
        return (self.end_of(info) or self.polled.get(job_id)) if job_id else None

    def identity(self) -> str | None:
        """The scheduler's identity (scopes LOST verdicts); asked once, when first needed."""
        if self._identity is None:
            try:
                self._identity = self.scheduler.identity()
            except (SchedulerError, ExecutorError):
                return None
        return self._identity

    def record_ends(
        self,
        infos: Sequence[RunInfo],
        extra: Callable[[RunInfo], Mapping[str, Any]] | None = None,
    ) -> str | None:
        """Append the end of every latest attempt that just ended to its jobs.jsonl, once.

        From then on no instance polls that attempt again. A LOST verdict is written only
        with the scheduler's identity, so that it binds no other cluster sharing the runs
        root; where that identity cannot be had, the verdict stays in this process.
        Returns an error to show, or None.
        """
        self.just_recorded = {}
        for info in infos:
            job_id = latest_job_id(info)
            if job_id is None or job_id in self._recorded:
                continue
            status = self.polled.get(job_id)
            if status is None or not status.state.is_terminal:
                continue
            lost = status.state is JobState.LOST
            rec = info.ends.get(job_id)
            if rec is not None and (lost or rec.get("state") != JobState.LOST.value):
                continue  # already recorded (a LOST one gives way to a real end)
            scope = self.identity() if lost else None
            if lost and scope is None:
                continue
            try:
                line = end_record(status, scope=scope)
                if extra is not None:
                    line.update(extra(info))
                self.store.append_job(info.ref, line)
            except (ExecutorError, OSError) as exc:
                return f"could not record the end of job {job_id} in {info.run_id}: {exc}"
            self._recorded.add(job_id)
            self.just_recorded[job_id] = line
        return None
