"""Handing a run's script to the scheduler once per intent, and recording the attempt.

A first submit and every retry of a run are a :class:`SingleSubmit`: the run's own
``job.sbatch``, submitted from its own directory, by the one submit protocol of
:mod:`ddp_tui.remote.submit.transaction` (lock, reconcile, refuse, room, intent, submit,
answer). If the answer to a submit is lost (the connection dropped, or sbatch timed out),
sbatch may or may not have queued the job. Never guess and never submit twice: ask the
scheduler which jobs were submitted from the run directory, and record the new one, or
report that nothing was queued.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ddp_tui.remote.backends.scheduler import Scheduler, SchedulerError
from ddp_tui.remote.store.journal import attempt_record
from ddp_tui.remote.store.runs import SCRIPT_FILE, RunExists, RunRef, RunStore, RunStoreError
from ddp_tui.remote.store.snapshot import SnapshotError
from ddp_tui.remote.submit.plan import SubmitPlan, ValidationFailed
from ddp_tui.remote.submit.scripts import current_snapshot
from ddp_tui.remote.submit.transaction import (
    RECOVER_SUBMIT_SEC,
    AttemptRefused,
    Member,
    NothingQueued,
    SubmitTransaction,
    jobs_from_dir,
)
from ddp_tui.spec import FieldError

__all__ = [
    "RECOVER_SUBMIT_SEC",
    "AttemptRefused",
    "NothingQueued",
    "SingleSubmit",
    "create_planned_run",
    "recover_lost_submit",
    "submit_attempt",
]


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
            sweep=plan.sweep,
        )
    except RunExists as exc:
        raise ValidationFailed(
            [FieldError("run_id", f"{exc}: this plan was submitted already; plan again")]
        ) from None


class SingleSubmit(SubmitTransaction):
    """One run's own script, from its own directory: a first submit or a retry."""

    def __init__(
        self,
        scheduler: Scheduler,
        store: RunStore,
        ref: RunRef,
        *,
        fresh: bool = False,
        recover_sec: float = RECOVER_SUBMIT_SEC,
    ) -> None:
        super().__init__(scheduler, store, [ref], fresh=fresh, recover_sec=recover_sec)
        self.ref = ref

    def submission(self) -> tuple[str, str]:
        return self.ref.file(SCRIPT_FILE), self.ref.path

    def recover(self, cause: SchedulerError) -> str:
        known = self.members[0].known
        return recover_lost_submit(
            self.scheduler, self.ref, known, cause, recover_sec=self.recover_sec
        )

    def job_of(self, answer: str, index: int) -> str:
        return answer

    def attempt_line(self, job_id: str, retry_of: str | None, n: int, index: int) -> dict[str, Any]:
        return attempt_record(job_id, self.scheduler.name, retry_of, n)

    def unrecorded(self, answer: str, failed: Sequence[tuple[Member, str]]) -> RunStoreError:
        ((m, why),) = failed
        return RunStoreError(
            f"job {answer} was submitted for {self.ref.run_id} but could not be recorded; the "
            "next refresh adopts it once the run directory is writable again "
            f"({m.journal.path}: {why})"
        )


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
    submit = SingleSubmit(scheduler, store, ref, fresh=fresh, recover_sec=recover_sec)
    (job_id,) = submit.run(seen=seen)
    return job_id


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
