"""Handing a run's script to the scheduler once per intent, and recording the attempt.

Every submit of a run, first or retry, runs under the run's lock
(:mod:`ddp_tui.remote.store.run_lock`) and in this order:

1. read ``jobs.jsonl`` afresh and adopt any job the scheduler has for the run directory
   that it lacks (:mod:`ddp_tui.remote.store.run_jobs`);
2. refuse when someone else submitted since the caller looked (``seen``), or when a job of
   the run is still alive, naming that job;
3. write an *intent* line: a runs root that cannot take it (read-only, full) refuses here,
   before anything is queued;
4. submit, then write the attempt line that answers the intent.

A process killed between 3 and 4 leaves an intent that the next refresh resolves by asking
the scheduler. If the answer to a submit is lost (the connection dropped, or sbatch timed
out), sbatch may or may not have queued the job. Never guess and never submit twice: ask
the scheduler which jobs were submitted from the run directory, and record the new one, or
report that nothing was queued.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ddp_tui.remote.backends.executor import ExecutorError
from ddp_tui.remote.backends.scheduler import Scheduler, SchedulerError
from ddp_tui.remote.store.history import attempt_record, intent_record, split_job_lines, void_record
from ddp_tui.remote.store.run_jobs import (
    adopt_unrecorded,
    close_void_intents,
    live_jobs,
    recorded_ids,
)
from ddp_tui.remote.store.run_lock import RunLock
from ddp_tui.remote.store.runs import SCRIPT_FILE, RunExists, RunRef, RunStore, RunStoreError
from ddp_tui.remote.store.snapshot import SnapshotError
from ddp_tui.remote.store.space import MARGIN_BYTES, require_room
from ddp_tui.remote.submit.plan import SubmitPlan, ValidationFailed
from ddp_tui.remote.submit.scripts import current_snapshot
from ddp_tui.spec import FieldError

#: How long a submit whose answer was lost waits for the scheduler to be reachable again.
RECOVER_SUBMIT_SEC = 60.0


class AttemptRefused(SchedulerError):
    """Another attempt of the run won, or is still alive; ``job_id`` names it."""

    def __init__(self, message: str, job_id: str) -> None:
        super().__init__(message)
        self.job_id = job_id


class NothingQueued(SchedulerError):
    """A submit whose answer was lost did not reach the scheduler (it said so)."""


def create_planned_run(store: RunStore, plan: SubmitPlan) -> RunRef:
    """Create the plan's run directory with exactly its script (and a user's project
    snapshot, taken again now); nothing is submitted. Refused
    (:class:`ValidationFailed`) when the plan has errors or its run directory exists
    already (the plan was submitted before)."""
    if not plan.ok:
        raise ValidationFailed(plan.errors)
    snapshot = plan.snapshot
    if snapshot is not None:
        try:
            snapshot = current_snapshot(plan.spec)
        except SnapshotError as exc:
            raise ValidationFailed([FieldError("project_dir", str(exc))]) from None
    try:
        return store.create_run(
            plan.spec.to_dict(),
            plan.spec.name,
            plan.script,
            plan.group,
            kind=plan.kind,
            run_id=plan.run_id,
            snapshot=snapshot,
        )
    except RunExists as exc:
        raise ValidationFailed(
            [FieldError("run_id", f"{exc}: this plan was submitted already; plan again")]
        ) from None


def submit_attempt(
    scheduler: Scheduler,
    store: RunStore,
    ref: RunRef,
    *,
    seen: int | None,
    fresh: bool = False,
    recover_sec: float = RECOVER_SUBMIT_SEC,
) -> str:
    """Submit the run's script once and record it in jobs.jsonl; returns the job id.

    ``seen`` is how many attempts the caller saw when it decided to submit (None: whatever
    is there now). ``fresh`` marks a run directory made a moment ago by this process, which
    no scheduler can know yet: it skips asking for the run's jobs."""
    with RunLock(store.executor, ref).held():
        records = store.read_jobs(ref)
        adopted = [] if fresh else _reconcile(scheduler, store, ref, records)
        known = recorded_ids(records)
        _refuse_if_taken(scheduler, ref, records, known, adopted, seen)
        if not fresh:  # a new run's room was checked with its files
            require_room(store.executor, ref.path, MARGIN_BYTES, what="another attempt")
        retry_of = known[-1] if known else None
        intent = intent_record(len(known) + 1, retry_of)
        record_line(
            store, ref, intent, f"cannot record a submit of {ref.run_id}; nothing was submitted"
        )
        try:
            job_id = scheduler.submit(ref.file(SCRIPT_FILE), ref.path)
        except SchedulerError as exc:
            if not isinstance(exc.__cause__, ExecutorError):
                raise  # sbatch answered: it refused the job
            try:
                job_id = recover_lost_submit(scheduler, ref, known, exc, recover_sec=recover_sec)
            except NothingQueued:  # the scheduler said so: the intent came to nothing
                store.append_job(ref, void_record(str(intent["token"])))
                raise
        record = attempt_record(job_id, scheduler.name, retry_of, len(known) + 1)
        record["intent"] = intent["token"]
        record_line(
            store,
            ref,
            record,
            f"job {job_id} was submitted for {ref.run_id} but could not be recorded; the next "
            "refresh adopts it once the run directory is writable again",
        )
        return job_id


def record_line(store: RunStore, ref: RunRef, record: Mapping[str, Any], failure: str) -> None:
    """Append ``record`` to the run's jobs.jsonl, or raise ``failure`` with where and why."""
    try:
        store.append_job(ref, record)
    except (OSError, ExecutorError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise RunStoreError(f"{failure} ({ref.file('jobs.jsonl')}: {why})") from exc


def _reconcile(
    scheduler: Scheduler, store: RunStore, ref: RunRef, records: list[dict[str, Any]]
) -> list[str]:
    """Adopt the run's unrecorded jobs and void its empty intents (the lock is held;
    ``records`` gains the lines written); returns the adopted ids. Refused while an
    unfinished submit may still queue a job."""
    adopted = adopt_unrecorded(scheduler, store, ref, records)
    in_flight = close_void_intents(scheduler, store, ref, records)
    if in_flight:
        raise SchedulerError(
            f"a submit of {ref.run_id} by {in_flight[-1]} did not finish and may still "
            "reach the scheduler; nothing was submitted: try again in a minute or two"
        )
    return adopted


def _refuse_if_taken(
    scheduler: Scheduler,
    ref: RunRef,
    records: Sequence[Mapping[str, Any]],
    known: Sequence[str],
    adopted: Sequence[str],
    seen: int | None,
) -> None:
    """:class:`AttemptRefused` while a job of the run lives, or when the run has attempts
    that the caller did not see when it decided."""
    _, ends = split_job_lines(records)
    alive = live_jobs(scheduler, [j for j in known if j not in ends])
    if alive:
        live = alive[-1]
        raise AttemptRefused(
            f"job {live.job_id} is still {live.state.value}; cancel it (c) before "
            f"retrying {ref.run_id}; nothing was submitted",
            live.job_id,
        )
    if seen is not None and len(known) > seen:
        newest = known[-1]
        why = (
            f"job {newest}, queued by a submit that did not finish, was found and recorded"
            if newest in adopted
            else f"it was submitted by someone else meanwhile: job {newest} is its newest attempt"
        )
        raise AttemptRefused(
            f"{ref.run_id}: {why}; nothing more was submitted (look, then retry again)", newest
        )


def recover_lost_submit(
    scheduler: Scheduler,
    ref: RunRef,
    recorded: Sequence[str],
    cause: SchedulerError,
    *,
    recover_sec: float = RECOVER_SUBMIT_SEC,
) -> str:
    """The job a submit whose answer was lost queued from ``ref``'s directory.

    Raises :class:`SchedulerError` when nothing was queued, or when the scheduler could
    not be asked for ``recover_sec`` seconds (then nothing is known, and nothing is
    recorded)."""
    found = jobs_from_dir(scheduler, ref.path, recorded, cause, recover_sec=recover_sec)
    if not found:
        raise NothingQueued(
            f"the submission of {ref.run_id} did not reach the scheduler ({cause}); "
            "nothing was queued, and the run directory is kept: retry it (r)."
        ) from cause
    return found[0]


def jobs_from_dir(
    scheduler: Scheduler,
    work_dir: str,
    recorded: Sequence[str],
    cause: SchedulerError,
    *,
    recover_sec: float = RECOVER_SUBMIT_SEC,
) -> list[str]:
    """The jobs submitted from ``work_dir`` that ``recorded`` lacks, asking the scheduler
    until it answers or ``recover_sec`` has passed (then :class:`SchedulerError`: nothing is
    known, and nothing may be recorded)."""
    deadline = time.monotonic() + recover_sec
    delay = 1.0
    while True:
        try:
            return [j for j in scheduler.jobs_in_dir(work_dir) if j not in recorded]
        except (SchedulerError, ExecutorError) as exc:
            if time.monotonic() + delay > deadline:
                raise SchedulerError(
                    f"the connection was lost while submitting from {work_dir} and could "
                    f"not be checked since ({exc}); nothing was recorded. Check `squeue` "
                    "before retrying."
                ) from cause
            time.sleep(delay)
            delay = min(delay * 2, 8.0)
