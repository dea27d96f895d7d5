"""Submitting a sweep: its job arrays in one sbatch each, its other members one by one.

An array is one submit for all its members, by the same protocol as a single run's
(:mod:`ddp_tui.remote.submit.transaction`), every member's run lock held throughout:

1. every member's run directory is created, complete, before anything is queued; if one
   cannot be, those made already are removed again (no job knows them yet) and nothing is
   submitted;
2. the array's script is written to its own directory under ``<runs root>/.arrays/``;
3. every member's lock is taken, in the order of their paths;
4. each member's ``jobs.jsonl`` gets an *intent* line naming the array's directory and the
   member's index in it;
5. one sbatch; then each member's attempt line records its task, ``<array job id>_<index>``;
   the locks are given back.

A refresh meanwhile (``ddp-tui ls``, another app) finds the members locked and leaves them
alone. A process killed between 4 and 5 leaves intents that the next refresh resolves: the
scheduler is asked for the jobs of the array's directory, and each member adopts the task
of its index (:func:`ddp_tui.remote.store.run_jobs.jobs_of_run`). A lost sbatch answer is
recovered the same way, never by submitting again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from ddp_tui.remote.backends.executor import ExecutorError
from ddp_tui.remote.backends.job_ids import array_master, task_id
from ddp_tui.remote.backends.scheduler import Scheduler, SchedulerError
from ddp_tui.remote.store.journal import ARRAY_DIR_KEY, ARRAY_INDEX_KEY, attempt_record
from ddp_tui.remote.store.runs import RunRef, RunStore, RunStoreError
from ddp_tui.remote.submit.plan import SubmitPlan, require_ok
from ddp_tui.remote.submit.submission import create_planned_run
from ddp_tui.remote.submit.sweep_plan import ARRAY_SCRIPT, ArrayPlan, SweepPlan
from ddp_tui.remote.submit.transaction import (
    RECOVER_SUBMIT_SEC,
    Member,
    NothingQueued,
    SubmitTransaction,
    jobs_from_dir,
)


def submit_sweep(
    scheduler: Scheduler,
    store: RunStore,
    plan: SweepPlan,
    submit_one: Callable[[int], str],
    *,
    recover_sec: float = RECOVER_SUBMIT_SEC,
) -> list[str]:
    """Submit every member of ``plan`` (all or none are planned ok); returns the members'
    run ids in member order. ``submit_one(i)`` submits member ``i`` alone (the facade's
    single submit) and returns its run id."""
    require_ok(plan.plans)
    run_ids: dict[int, str] = {}
    for array in plan.arrays:
        refs = submit_array(scheduler, store, plan, array, recover_sec=recover_sec)
        run_ids.update(zip(array.members, (r.run_id for r in refs), strict=True))
    for i in plan.singles:
        run_ids[i] = submit_one(i)
    return [run_ids[i] for i in range(len(plan.plans))]


def submit_array(
    scheduler: Scheduler,
    store: RunStore,
    plan: SweepPlan,
    array: ArrayPlan,
    *,
    recover_sec: float = RECOVER_SUBMIT_SEC,
) -> list[RunRef]:
    """Create the array's member runs and its script, then queue it with one submit."""
    refs = _create_members(store, [plan.plans[i] for i in array.members])
    try:
        script_path = _write_array(store, array)
    except BaseException:
        _remove(store, refs)
        raise
    ArraySubmit(scheduler, store, refs, array, script_path, recover_sec=recover_sec).run()
    return refs


class ArraySubmit(SubmitTransaction):
    """One sbatch of a job array for all its members: task ``i`` runs member ``i``."""

    #: The scheduler refused the array: nothing was queued for any member.
    void_refused = True

    def __init__(
        self,
        scheduler: Scheduler,
        store: RunStore,
        refs: Sequence[RunRef],
        array: ArrayPlan,
        script_path: str,
        *,
        recover_sec: float = RECOVER_SUBMIT_SEC,
    ) -> None:
        super().__init__(scheduler, store, refs, fresh=True, recover_sec=recover_sec)
        self.array = array
        self.script_path = script_path

    def submission(self) -> tuple[str, str]:
        return self.script_path, self.array.array_dir

    def member_fields(self, index: int) -> dict[str, Any]:
        return {ARRAY_DIR_KEY: self.array.array_dir, ARRAY_INDEX_KEY: index}

    def recover(self, cause: SchedulerError) -> str:
        return recover_array_submit(self.scheduler, self.array, cause, recover_sec=self.recover_sec)

    def job_of(self, answer: str, index: int) -> str:
        return task_id(answer, index)

    def attempt_line(self, job_id: str, retry_of: str | None, n: int, index: int) -> dict[str, Any]:
        return {
            **attempt_record(job_id, self.scheduler.name, retry_of, n),
            **self.member_fields(index),
        }

    def unrecorded(self, answer: str, failed: Sequence[tuple[Member, str]]) -> RunStoreError:
        names = ", ".join(m.ref.run_id for m, _ in failed[:3])
        return RunStoreError(
            f"job array {answer} was submitted, but {len(failed)} of its runs could not "
            f"record their task ({names}); the next refresh adopts them once their "
            "directories are writable again"
        )


def recover_array_submit(
    scheduler: Scheduler,
    array: ArrayPlan,
    cause: SchedulerError,
    *,
    recover_sec: float = RECOVER_SUBMIT_SEC,
) -> str:
    """The array job id a submit whose answer was lost queued from the array's directory
    (:class:`NothingQueued` when the scheduler has none)."""
    found = jobs_from_dir(scheduler, array.array_dir, (), cause, recover_sec=recover_sec)
    if not found:
        raise NothingQueued(
            f"the submission of job array {array.array_dir} did not reach the scheduler "
            f"({cause}); nothing was queued, and its runs are kept: retry them (r)."
        ) from cause
    return array_master(found[0])


def _create_members(store: RunStore, plans: Sequence[SubmitPlan]) -> list[RunRef]:
    """Every member's run directory, or none of them."""
    refs: list[RunRef] = []
    try:
        for p in plans:
            refs.append(create_planned_run(store, p))
    except BaseException:
        _remove(store, refs)
        raise
    return refs


def _write_array(store: RunStore, array: ArrayPlan) -> str:
    """Write the array's script into its directory; returns the script's path."""
    path = f"{array.array_dir}/{ARRAY_SCRIPT}"
    try:
        store.executor.makedirs(array.array_dir)
        store.executor.write_atomic(path, array.script.encode(), mode=0o755)
    except (OSError, ExecutorError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise RunStoreError(
            f"cannot write the job array's script {path}: {why}; nothing was submitted"
        ) from exc
    return path


def _remove(store: RunStore, refs: Sequence[RunRef]) -> None:
    """Remove member directories that no job was submitted for (an array that failed to
    be made): a half-made sweep is not left behind."""
    for ref in refs:
        # One that stays is listed as never submitted, and can be retried: nothing is lost.
        with contextlib.suppress(OSError, ExecutorError):
            store.executor.remove_tree(ref.path)
