"""A run's ``jobs.jsonl``: the one writer of its lines, their reader, and their reducer.

``jobs.jsonl`` is the run's journal of its jobs (docs/architecture.md, "The run directory"),
one JSON object per line, appended, never rewritten:

- an *intent* (``"event": "intent"``), written before a submit asks the scheduler;
- an *attempt* (no ``event``): the job a submit queued, naming the intent it answers, and
  ``"adopted": true`` where a refresh found it on the scheduler after its submitter died;
- a *void* (``"event": "intent_void"``): the scheduler had no job for that intent;
- an *end* (``"event": "end"``): how an attempt ended, once known
  (:mod:`ddp_tui.remote.store.history`).

Every line is made by a constructor here and written by :meth:`Journal.append`;
:func:`fold` is the one reading of what the lines say together (which attempts, which
ends, which intents still wait for an answer). The submit protocol that writes intents and
attempts is :mod:`ddp_tui.remote.submit.transaction`; the refresh that adopts and voids is
:mod:`ddp_tui.remote.store.run_jobs`.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ddp_tui.jobfiles import json_objects
from ddp_tui.remote.backends.executor import Batch, Executor, FileRead
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.store.run_damage import Damage, clean_job_line

JOBS_FILE = "jobs.jsonl"
END_EVENT = "end"
#: Written before a submit asks the scheduler; answered by the attempt line naming its
#: token, or closed by a void line (see ddp_tui.remote.store.run_jobs).
INTENT_EVENT = "intent"
VOID_EVENT = "intent_void"
#: The keys of a job array member's intent and attempt lines: the array's directory (which
#: its tasks run from) and the member's index in it (docs/job-arrays.md).
ARRAY_DIR_KEY = "array_dir"
ARRAY_INDEX_KEY = "array_index"


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# -- the lines ----------------------------------------------------------------------------


def attempt_record(job_id: str, scheduler: str, retry_of: str | None, n: int) -> dict[str, Any]:
    """The ``jobs.jsonl`` line of one submission attempt."""
    return {
        "job_id": job_id,
        "scheduler": scheduler,
        "submitted_at": _now_iso(),
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
        "recorded_at": _now_iso(),
    }
    if scope is not None:
        rec["scope"] = scope
    return rec


# -- the reducer --------------------------------------------------------------------------


@dataclass(frozen=True)
class JobLines:
    """What a run's ``jobs.jsonl`` says, its lines taken in order (:func:`fold`)."""

    #: The attempt lines, oldest first.
    attempts: list[Mapping[str, Any]]
    #: The end line that binds each job: the first real end; a LOST verdict gives way to a
    #: real end recorded after it (two instances may both record one).
    ends: dict[str, Mapping[str, Any]]
    #: The intents that no attempt line and no void line answers yet, oldest first.
    pending: list[Mapping[str, Any]]

    @property
    def job_ids(self) -> list[str]:
        """The job ids of the attempt lines, oldest first."""
        return [str(a.get("job_id")) for a in self.attempts if a.get("job_id")]


def fold(records: Iterable[Mapping[str, Any]]) -> JobLines:
    """Reduce ``jobs.jsonl``'s records, in file order, to what they say together."""
    attempts: list[Mapping[str, Any]] = []
    ends: dict[str, Mapping[str, Any]] = {}
    intents: list[Mapping[str, Any]] = []
    answered: set[object] = set()
    for rec in records:
        event = rec.get("event")
        if event is None:
            attempts.append(rec)
            answered.add(rec.get("intent"))
        elif event == INTENT_EVENT:
            intents.append(rec)
        elif event == VOID_EVENT:
            answered.add(rec.get("token"))
        elif event == END_EVENT:
            job_id = str(rec.get("job_id") or "")
            old = ends.get(job_id)
            if job_id and (old is None or (_is_lost(old) and not _is_lost(rec))):
                ends[job_id] = rec
    pending = [r for r in intents if r.get("token") not in answered]
    return JobLines(attempts, ends, pending)


def _is_lost(rec: Mapping[str, Any]) -> bool:
    return rec.get("state") == JobState.LOST.value


def split_job_lines(
    lines: Iterable[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], dict[str, Mapping[str, Any]]]:
    """``jobs.jsonl`` records as (attempts in order, end record by job id): :func:`fold`'s
    ``attempts`` and ``ends``."""
    folded = fold(lines)
    return folded.attempts, folded.ends


def pending_intents(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The intents of ``records`` (``jobs.jsonl``, in order) that no attempt line and no
    void line answers yet."""
    return fold(records).pending


def has_unanswered_intent(records: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a submit's intent waits for its answer (a crash, or a submit in progress)."""
    return bool(pending_intents(records))


def recorded_ids(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """The job ids of the attempt lines of ``records``."""
    return fold(records).job_ids


# -- reading and writing -----------------------------------------------------------------


def parse_lines(lines: Sequence[str], first: int, problems: list[Damage]) -> list[dict[str, Any]]:
    """The usable records of ``jobs.jsonl`` lines (line ``first + 1`` onwards); each line
    with wrong fields adds its problem to ``problems``. Broken lines are skipped in silence:
    a writer killed mid-line leaves one, and that is no damage."""
    out: list[dict[str, Any]] = []
    for i, line in enumerate(lines, start=first + 1):
        for rec in json_objects([line]):
            clean, wrong = clean_job_line(rec)
            problems.extend(Damage(JOBS_FILE, f"line {i}: {w}") for w in wrong)
            if clean is not None:
                out.append(clean)
    return out


class Journal:
    """The ``jobs.jsonl`` of the run directory ``run_dir``."""

    def __init__(self, executor: Executor, run_dir: str) -> None:
        self.executor = executor
        self.path = f"{run_dir.rstrip('/')}/{JOBS_FILE}"

    def read(self) -> list[dict[str, Any]]:
        """Every usable record, in order; malformed lines, and records that mean nothing
        without their wrong fields, are skipped. A file that cannot be read (a directory,
        permission denied) reads as empty, never raised (one batch read)."""
        res = self.executor.run_batch(Batch(reads=[FileRead(self.path)])).reads[0]
        return parse_lines(res.data.decode("utf-8", "replace").split("\n"), 0, [])

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one line. One line in one append: a reader sees the whole record or nothing
        of it. A last line left torn (a writer killed mid-line, a full disk) is ended first,
        so the record never lands glued to it: readers skip the torn line and keep this one.
        Raises what the executor raises (``OSError``, ``ExecutorError``)."""
        line = json.dumps(dict(record), separators=(",", ":")) + "\n"
        st = self.executor.stat(self.path)
        torn = (
            st is not None
            and st.size > 0
            and not st.is_dir
            and self.executor.read_range(self.path, st.size - 1, 1) != b"\n"
        )
        if torn:
            line = "\n" + line
        self.executor.append(self.path, line.encode())
