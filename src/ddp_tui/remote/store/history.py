"""Durable job history: how each attempt of a run ended, kept in the run's ``jobs.jsonl``.

A submission adds an *attempt* line (job id, scheduler, time, ``retry_of``). Once the end
of that attempt is known, the facade adds one *end* line (``"event": "end"``) with the
state, exit code, elapsed time, node list and end time. A restarted app, another app
instance and the CLI read the end line and never ask the scheduler about that attempt
again, so start-up costs nothing per finished run and a purged accounting database cannot
make a run poll forever. The lines, and how they are read together, are
:mod:`ddp_tui.remote.store.journal`'s; this module is what an end line means.

An attempt that neither ``squeue`` nor ``sacct`` knows for :data:`LOST_GRACE_SEC` ends as
``LOST``. That verdict is only as good as the scheduler that gave it: a runs root shared by
two clusters holds jobs one of them has never seen. So a LOST line carries the identity of
the scheduler that gave it (``scope``) and binds only readers of the same scheduler; any
real end line, written later by anyone, supersedes it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.states import JobState

# The lines themselves are the journal's (ddp_tui.remote.store.journal); these names stay
# importable from here for the modules that read ends.
from ddp_tui.remote.store.journal import attempt_record, end_record, split_job_lines

__all__ = [
    "LOST_GRACE_SEC",
    "MissingJobs",
    "attempt_record",
    "end_record",
    "lost_status",
    "split_job_lines",
    "status_of_end",
]

#: How long an attempt must stay unknown to both squeue and sacct before it is LOST.
#: sacct lags the end of a job by seconds; two minutes leaves room for a slow slurmdbd.
LOST_GRACE_SEC = 120.0


def status_of_end(rec: Mapping[str, Any], *, scope: str) -> JobStatus | None:
    """The final status an end record gives, or None where it does not bind this reader
    (a LOST verdict of another scheduler) or is not a final state."""
    try:
        state = JobState(str(rec.get("state")))
    except ValueError:
        return None
    if not state.is_terminal or (state is JobState.LOST and rec.get("scope") != scope):
        return None
    exit_code = rec.get("exit_code")
    elapsed = rec.get("elapsed_sec")
    return JobStatus(
        job_id=str(rec.get("job_id", "")),
        state=state,
        raw_state=str(rec.get("raw_state") or state.value),
        reason=str(rec.get("reason") or ""),
        node_list=str(rec.get("node_list") or ""),
        elapsed_sec=float(elapsed) if isinstance(elapsed, int | float) else 0.0,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        start=str(rec.get("start") or ""),
        end=str(rec.get("end") or ""),
    )


def lost_status(job_id: str) -> JobStatus:
    return JobStatus(
        job_id=job_id,
        state=JobState.LOST,
        raw_state=JobState.LOST.value,
        reason=f"the scheduler has no record of job {job_id}",
    )


class MissingJobs:
    """Tracks polled job ids that the scheduler did not know, to call them LOST.

    Only a poll that fully answered counts (squeue *and* sacct): an outage or a failed
    sacct says nothing about a job. The clock starts when a job is first seen missing in
    this process, so a restart never turns a briefly-unknown job LOST at once.
    """

    def __init__(self, grace_sec: float = LOST_GRACE_SEC) -> None:
        self.grace_sec = grace_sec
        self._since: dict[str, float] = {}

    def observe(
        self, polled: Sequence[str], answered: Mapping[str, JobStatus], now: float | None = None
    ) -> list[str]:
        """Record one complete poll; returns the ids that are now LOST."""
        now = time.monotonic() if now is None else now
        lost: list[str] = []
        for job_id in polled:
            if job_id in answered:
                self._since.pop(job_id, None)
                continue
            since = self._since.setdefault(job_id, now)
            if now - since >= self.grace_sec:
                lost.append(job_id)
                del self._since[job_id]
        return lost
