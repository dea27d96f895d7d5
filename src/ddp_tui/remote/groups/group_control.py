"""Cancel and retry a whole group (a sweep) at once.

Cancelling a group asks the scheduler once for the state of every member's recorded jobs,
then cancels what is alive: a job array with one ``scancel <array job id>`` (every task of
an array is a member of the same group), and every other live job by its own id. One
member is cancelled or retried by its run, as any run (:mod:`ddp_tui.remote.store.run_jobs`,
:mod:`ddp_tui.remote.submit.submission`): for an array member that is its task alone,
``<array job id>_<index>``, and a retry submits that member's own script as a job of
its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ddp_tui.remote.backends.job_ids import array_master
from ddp_tui.remote.backends.scheduler import Scheduler, SchedulerError
from ddp_tui.remote.backends.states import RETRY_STATES, JobState
from ddp_tui.remote.store.journal import recorded_ids
from ddp_tui.remote.store.run_jobs import statuses
from ddp_tui.remote.store.runs import RunInfo


@dataclass(frozen=True)
class GroupRetry:
    """What a group retry did: the runs submitted again, and those it left, with why."""

    retried: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]  # (run id, why)


def cancel_group(scheduler: Scheduler, members: Sequence[RunInfo]) -> list[str]:
    """Cancel every live recorded job of ``members`` (as just listed: their ``jobs.jsonl``
    read already); returns the ids given to the scheduler (an array's id once for all of
    its live tasks)."""
    if not members:
        raise SchedulerError("the group has no runs")
    ids = [j for info in members for j in recorded_ids(info.jobs)]
    live = [j for j, s in statuses(scheduler, ids).items() if s.state.is_active]
    targets: list[str] = []
    for job_id in ids:
        if job_id not in live:
            continue
        target = array_master(job_id)  # an array's id for its task, the job's own else
        if target not in targets:
            targets.append(target)
    for target in targets:
        scheduler.cancel(target)
    return targets


def retry_group(
    members: Sequence[tuple[str, JobState]], retry: Callable[[str], object]
) -> GroupRetry:
    """Retry each member (run id, state as listed) that ended without finishing its work
    (:data:`RETRY_STATES`); a member that is alive or completed is left as it is. A retry
    refused for one member (another attempt won meanwhile) does not stop the others."""
    retried: list[str] = []
    skipped: list[tuple[str, str]] = []
    for run_id, state in members:
        if state not in RETRY_STATES:
            skipped.append((run_id, state.value))
            continue
        try:
            retry(run_id)
        except SchedulerError as exc:
            skipped.append((run_id, str(exc)))
        else:
            retried.append(run_id)
    return GroupRetry(tuple(retried), tuple(skipped))
