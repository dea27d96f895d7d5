"""Durable job history: how each attempt of a run ended, kept in the run's ``jobs.jsonl``.

``jobs.jsonl`` holds two kinds of line. A submission adds an *attempt* line (job id,
scheduler, time, ``retry_of``). Once the end of that attempt is known, the facade adds
one *end* line (``"event": "end"``) with the state, exit code, elapsed time, node list and
end time. A restarted app, another app instance and the CLI read the end line and never
ask the scheduler about that attempt again, so start-up costs nothing per finished run and
a purged accounting database cannot make a run poll forever.

An attempt that neither ``squeue`` nor ``sacct`` knows for :data:`LOST_GRACE_SEC` ends as
``LOST``. That verdict is only as good as the scheduler that gave it: a runs root shared by
two clusters holds jobs one of them has never seen. So a LOST line carries the identity of
the scheduler that gave it (``scope``) and binds only readers of the same scheduler; any
real end line, written later by anyone, supersedes it.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.states import JobState

END_EVENT = "end"
#: Written before a submit asks the scheduler; answered by the attempt line naming its
#: token, or closed by a void line (see ddp_tui.remote.store.run_jobs).
INTENT_EVENT = "intent"
VOID_EVENT = "intent_void"
#: The keys of a job array member's intent and attempt lines: the array's directory (which
#: its tasks run from) and the member's index in it (docs/job-arrays.md).
ARRAY_DIR_KEY = "array_dir"
ARRAY_INDEX_KEY = "array_index"
#: How long an attempt must stay unknown to both squeue and sacct before it is LOST.
#: sacct lags the end of a job by seconds; two minutes leaves room for a slow slurmdbd.
LOST_GRACE_SEC = 120.0


def attempt_record(job_id: str, scheduler: str, retry_of: str | None, n: int) -> dict[str, Any]:
    """The ``jobs.jsonl`` line of one submission attempt."""
    return {
        "job_id": job_id,
        "scheduler": scheduler,
        "submitted_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "retry_of": retry_of,
        "attempt": n,
    }


def intent_record(attempt: int, retry_of: str | None) -> dict[str, Any]:
    """The line written before a submit: what is about to be asked, and by whom."""
    return {
        "event": INTENT_EVENT,
        "token": secrets.token_hex(6),
        "attempt": attempt,
        "retry_of": retry_of,
        "by": f"{socket.gethostname()}:{os.getpid()}",
        "at": _now_iso(),
    }


def void_record(token: str) -> dict[str, Any]:
    """Closes an intent that no job came of (the submitter died before the scheduler)."""
    return {"event": VOID_EVENT, "token": token, "at": _now_iso()}


def pending_intents(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The intents of ``records`` (``jobs.jsonl``, in order) that no attempt line and no
    void line answers yet."""
    records = list(records)
    answered = {r.get("intent") for r in records if r.get("event") is None}
    answered |= {r.get("token") for r in records if r.get("event") == VOID_EVENT}
    return [r for r in records if r.get("event") == INTENT_EVENT and r.get("token") not in answered]


def has_unanswered_intent(records: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a submit's intent waits for its answer (a crash, or a submit in progress)."""
    return bool(pending_intents(records))


def split_job_lines(
    lines: Iterable[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], dict[str, Mapping[str, Any]]]:
    """``jobs.jsonl`` records as (attempts in order, end record by job id).

    The first real end of a job wins (two instances may both record it); a LOST verdict
    gives way to a real end recorded after it.
    """
    attempts: list[Mapping[str, Any]] = []
    ends: dict[str, Mapping[str, Any]] = {}
    for rec in lines:
        event = rec.get("event")
        if event is None:
            attempts.append(rec)
            continue
        if event != END_EVENT:
            continue  # a submit's intent or its voiding (ddp_tui.remote.store.run_jobs)
        job_id = str(rec.get("job_id") or "")
        if not job_id:
            continue
        old = ends.get(job_id)
        if old is None or (_is_lost(old) and not _is_lost(rec)):
            ends[job_id] = rec
    return attempts, ends


def _is_lost(rec: Mapping[str, Any]) -> bool:
    return rec.get("state") == JobState.LOST.value


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def end_record(status: JobStatus, *, scope: str | None = None) -> dict[str, Any]:
    """The ``jobs.jsonl`` line that records how ``status``'s job ended."""
    rec: dict[str, Any] = {
        "event": END_EVENT,
        "job_id": status.job_id,
        "state": status.state.value,
        "raw_state": status.raw_state,
        "exit_code": status.exit_code,
        "elapsed_sec": status.elapsed_sec,
        "node_list": status.node_list,
        "start": status.start,
        "end": status.end,
        "reason": status.reason,
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if scope is not None:
        rec["scope"] = scope
    return rec


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
