"""Submitting a sweep: its job arrays in one sbatch each, its other members one by one.

An array keeps the contract of a single submit (:mod:`ddp_tui.remote.submit.submission`) for each
of its members:

1. every member's run directory is created, complete, before anything is queued; if one
   cannot be, those made already are removed again (no job knows them yet) and nothing is
   submitted;
2. the array's script is written to its own directory under ``<runs root>/.arrays/``;
3. each member's ``jobs.jsonl`` gets an *intent* line naming the array's directory and the
   member's index in it;
4. one sbatch; then each member's attempt line records its task, ``<array job id>_<index>``.

A process killed between 3 and 4 leaves intents that the next refresh resolves: the
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
from ddp_tui.remote.store.history import (
    ARRAY_DIR_KEY,
    ARRAY_INDEX_KEY,
    attempt_record,
    intent_record,
    void_record,
)
from ddp_tui.remote.store.runs import RunRef, RunStore, RunStoreError
from ddp_tui.remote.submit.plan import SubmitPlan, require_ok
from ddp_tui.remote.submit.submission import (
    RECOVER_SUBMIT_SEC,
    NothingQueued,
    create_planned_run,
    jobs_from_dir,
    record_line,
)
from ddp_tui.remote.submit.sweep_plan import ARRAY_SCRIPT, ArrayPlan, SweepPlan


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
    intents = []
    for index, ref in enumerate(refs):
        intent = intent_record(1, None)
        intent[ARRAY_DIR_KEY] = array.array_dir
        intent[ARRAY_INDEX_KEY] = index
        record_line(store, ref, intent, f"cannot record a submit of {ref.run_id}")
        intents.append(intent)
    try:
        master = scheduler.submit(script_path, array.array_dir)
    except SchedulerError as exc:
        if isinstance(exc.__cause__, ExecutorError):
            try:
                master = recover_array_submit(scheduler, array, exc, recover_sec=recover_sec)
            except NothingQueued:
                _void(store, refs, intents)
                raise
        else:  # the scheduler answered: it refused the array, so nothing was queued
            _void(store, refs, intents)
            raise
    failures = []
    for index, (ref, intent) in enumerate(zip(refs, intents, strict=True)):
        record = attempt_record(task_id(master, index), scheduler.name, None, 1)
        record["intent"] = intent["token"]
        record[ARRAY_DIR_KEY] = array.array_dir
        record[ARRAY_INDEX_KEY] = index
        try:
            record_line(store, ref, record, "")
        except RunStoreError:
            failures.append(ref.run_id)  # the next refresh adopts it from the scheduler
    if failures:
        raise RunStoreError(
            f"job array {master} was submitted, but {len(failures)} of its runs could not "
            f"record their task ({', '.join(failures[:3])}); the next refresh adopts them "
            "once their directories are writable again"
        )
    return refs


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


def _void(store: RunStore, refs: Sequence[RunRef], intents: Sequence[dict[str, Any]]) -> None:
    """Close the members' intents: the scheduler queued nothing for the array."""
    for ref, intent in zip(refs, intents, strict=True):
        # One not written is voided by the refresh, once the scheduler says it has no job.
        with contextlib.suppress(OSError, ExecutorError):
            store.append_job(ref, void_record(str(intent["token"])))
