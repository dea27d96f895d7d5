"""Every job the scheduler has for a run directory, whether ``jobs.jsonl`` recorded it or not.

A submit writes an *intent* line to ``jobs.jsonl`` before it asks the scheduler, and the
attempt line (which names the intent's token) after. A process killed in between leaves an
intent without an attempt: the job may or may not exist. Nobody guesses: the scheduler is
asked which jobs ran from the run directory (``jobs_in_dir``), and a job it has that
``jobs.jsonl`` lacks is *adopted* (recorded with ``"adopted": true``), never submitted again.
An intent that the scheduler has no job for is closed with a *void* line. Both are done
only under the run's lock (:mod:`ddp_tui.remote.store.run_lock`), which every submit holds
from its intent to its attempt line (:mod:`ddp_tui.remote.submit.transaction`): a refresh
that finds the lock held leaves the run alone, so it never voids an intent that is about to
be answered, nor adopts a job whose attempt line is about to be written.

The same question answers "is anything of this run still alive?" for retry and cancel, so
that a half-written or deleted ``jobs.jsonl`` can neither start a second live job for one
run nor leave one running after a cancel.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ddp_tui.remote.backends.executor import ExecutorError
from ddp_tui.remote.backends.job_ids import array_index
from ddp_tui.remote.backends.scheduler import (
    AccountingUnavailable,
    JobStatus,
    Scheduler,
    SchedulerError,
)
from ddp_tui.remote.store.journal import (
    ARRAY_DIR_KEY,
    ARRAY_INDEX_KEY,
    attempt_record,
    fold,
    void_record,
)
from ddp_tui.remote.store.run_lock import RunLock
from ddp_tui.remote.store.runs import RunInfo, RunRef, RunStore, RunStoreError

RECONCILE_EVERY_SEC = 10.0


def jobs_of_run(
    scheduler: Scheduler, ref: RunRef, records: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Every job the scheduler has for the run: those submitted from its directory, and,
    for a member of a job array (its lines name the array's directory and its index), the
    array's task of that index. The tasks of an array all run from the array's directory
    (``--chdir`` is one per sbatch), so only the index tells them apart."""
    found = list(scheduler.jobs_in_dir(ref.path))
    arrays: dict[str, set[int]] = {}
    for r in records:
        where, index = r.get(ARRAY_DIR_KEY), r.get(ARRAY_INDEX_KEY)
        if isinstance(where, str) and isinstance(index, int):
            arrays.setdefault(where, set()).add(index)
    for where, indices in arrays.items():
        for job_id in scheduler.jobs_in_dir(where):
            if array_index(job_id) in indices and job_id not in found:
                found.append(job_id)
    return found


def adopt_unrecorded(
    scheduler: Scheduler, store: RunStore, ref: RunRef, records: list[dict[str, Any]]
) -> list[str]:
    """Record every job the scheduler has for ``ref`` that ``records`` (the run's
    ``jobs.jsonl``, read under the lock) lacks, oldest first, each answering the oldest
    pending intent; ``records`` gains each line written. Returns their ids. The caller holds
    the run's lock (:mod:`ddp_tui.remote.store.run_lock`)."""
    lines = fold(records)
    known = lines.job_ids
    found = [j for j in jobs_of_run(scheduler, ref, records) if j not in known]
    pending = lines.pending
    journal = store.journal(ref)
    n = len(known)
    for job_id in found:
        intent = pending.pop(0) if pending else None
        n += 1
        retry_of = intent.get("retry_of") if intent else (known[-1] if known else None)
        rec = attempt_record(job_id, scheduler.name, str(retry_of) if retry_of else None, n)
        rec["adopted"] = True
        if intent is not None:
            rec["intent"] = intent.get("token")
        journal.append(rec)
        records.append(rec)
        known.append(job_id)
    return found


def close_void_intents(
    scheduler: Scheduler,
    store: RunStore,
    ref: RunRef,
    records: list[dict[str, Any]],
    *,
    now: float | None = None,
) -> list[str]:
    """Void what ``records`` still has pending after an adoption: no job came of those
    intents; ``records`` gains each void line. Not those younger than the scheduler's
    ``submit_in_flight_sec`` (a killed app does not kill the sbatch it started); their
    ``by`` is returned."""
    now = time.time() if now is None else now
    young: list[str] = []
    journal = store.journal(ref)
    for intent in fold(records).pending:
        if now - _epoch(intent.get("at")) < scheduler.submit_in_flight_sec:
            young.append(str(intent.get("by") or "another process"))
        else:
            void = void_record(str(intent.get("token")))
            journal.append(void)
            records.append(void)
    return young


def _epoch(iso: object) -> float:
    try:
        return datetime.fromisoformat(str(iso)).timestamp()
    except ValueError:
        return 0.0  # unreadable: old enough


class IntentReconciler:
    """Resolves unanswered intents on refresh, at most every :data:`RECONCILE_EVERY_SEC`
    per run: a crash is rare, and asking the scheduler for a run's jobs costs a squeue and
    an sacct."""

    def __init__(self, scheduler: Scheduler, store: RunStore) -> None:
        self.scheduler = scheduler
        self.store = store
        self._tried: dict[str, float] = {}

    def reconcile(self, ref: RunRef) -> bool:
        """Adopt the jobs of ``ref``'s dead submitter, void its empty intents; True when
        something was recorded. Skipped, never waited for, while a live submitter holds the
        run's lock (a single submit, or a job array holding every member's): its own attempt
        lines will answer, and a refresh must not stall behind a submit."""
        now = time.monotonic()
        if now - self._tried.get(ref.run_id, -RECONCILE_EVERY_SEC) < RECONCILE_EVERY_SEC:
            return False
        self._tried[ref.run_id] = now
        lock = RunLock(self.store.executor, ref, wait_sec=0)
        if not lock.try_acquire():
            return False  # its submitter is alive: its own attempt line will answer
        try:
            records = self.store.journal(ref).read()
            if not fold(records).pending:
                return False
            before = len(records)
            adopt_unrecorded(self.scheduler, self.store, ref, records)
            close_void_intents(self.scheduler, self.store, ref, records)
            return len(records) != before
        finally:
            lock.release()

    def reconcile_listed(self, infos: Iterable[RunInfo]) -> str | None:
        """:meth:`reconcile` every listed run with an unanswered intent; the first error
        says why one could not be resolved now (it is tried again at a later refresh)."""
        for info in infos:
            if info.unanswered_intent:
                try:
                    self.reconcile(info.ref)
                except (SchedulerError, ExecutorError, RunStoreError, OSError) as exc:
                    return f"{info.run_id}: an interrupted submit is not resolved yet ({exc})"
        return None


def statuses(scheduler: Scheduler, job_ids: Sequence[str]) -> dict[str, JobStatus]:
    """What the scheduler says of ``job_ids``; with accounting down, what squeue said (it
    lists every job that is still alive, which is all a liveness check needs)."""
    if not job_ids:
        return {}
    try:
        return scheduler.poll(job_ids)
    except AccountingUnavailable as exc:
        return exc.partial


def live_jobs(scheduler: Scheduler, job_ids: Sequence[str]) -> list[JobStatus]:
    """The statuses of the jobs among ``job_ids`` that are pending or running, in order."""
    answered = statuses(scheduler, job_ids)
    return [s for j in job_ids if (s := answered.get(j)) is not None and s.state.is_active]


def all_job_ids(scheduler: Scheduler, store: RunStore, ref: RunRef) -> list[str]:
    """Recorded and unrecorded jobs of the run, without asking twice for one. Where the
    scheduler cannot list them (sacct down), the recorded ones: a cancel still ends those."""
    records = store.journal(ref).read()
    ids = fold(records).job_ids
    with contextlib.suppress(NotImplementedError, SchedulerError, ExecutorError):
        ids += [j for j in jobs_of_run(scheduler, ref, records) if j not in ids]
    return ids


def cancel_run(scheduler: Scheduler, store: RunStore, ref: RunRef) -> list[str]:
    """Cancel every live job of the run, recorded or not; returns their ids (the latest
    attempt when none is alive: the scheduler then says how it ended)."""
    ids = all_job_ids(scheduler, store, ref)
    if not ids:
        raise SchedulerError(f"{ref.run_id} was never submitted")
    targets = [s.job_id for s in live_jobs(scheduler, ids)] or ids[-1:]
    for job_id in targets:
        scheduler.cancel(job_id)
    return targets
