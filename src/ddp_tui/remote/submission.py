"""Handing a run's script to the scheduler once, and recording the attempt.

If the answer to a submit is lost (the connection dropped, or sbatch timed out), sbatch
may or may not have queued the job. Never guess and never submit twice: ask the
scheduler which jobs were submitted from the run directory, and record the new one, or
report that nothing was queued.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ddp_tui.remote.executor import ExecutorError
from ddp_tui.remote.runs import SCRIPT_FILE, RunRef, RunStore
from ddp_tui.remote.scheduler import Scheduler, SchedulerError
from ddp_tui.remote.view_building import attempt_record

#: How long a submit whose answer was lost waits for the scheduler to be reachable again.
RECOVER_SUBMIT_SEC = 60.0


def submit_attempt(
    scheduler: Scheduler,
    store: RunStore,
    ref: RunRef,
    *,
    retry_of: str | None,
    attempt: int,
    recorded: Sequence[str],
    recover_sec: float = RECOVER_SUBMIT_SEC,
) -> str:
    """Submit the run's script once and record it in jobs.jsonl; returns the job id.

    ``recorded`` are the job ids of the run's earlier attempts (not the lost one)."""
    try:
        job_id = scheduler.submit(ref.file(SCRIPT_FILE), ref.path)
    except SchedulerError as exc:
        if not isinstance(exc.__cause__, ExecutorError):
            raise  # sbatch answered: it refused the job
        job_id = recover_lost_submit(scheduler, ref, recorded, exc, recover_sec=recover_sec)
    store.append_job(ref, attempt_record(job_id, scheduler.name, retry_of, attempt))
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
    deadline = time.monotonic() + recover_sec
    delay = 1.0
    while True:
        try:
            found = [j for j in scheduler.jobs_in_dir(ref.path) if j not in recorded]
            break
        except (SchedulerError, ExecutorError) as exc:
            if time.monotonic() + delay > deadline:
                raise SchedulerError(
                    f"the connection was lost while submitting {ref.run_id} and could not "
                    f"be checked since ({exc}); nothing was recorded. Check `squeue` "
                    "before retrying the run."
                ) from cause
            time.sleep(delay)
            delay = min(delay * 2, 8.0)
    if not found:
        raise SchedulerError(
            f"the submission of {ref.run_id} did not reach the scheduler ({cause}); "
            "nothing was queued, and the run directory is kept: retry it (r)."
        ) from cause
    return found[0]
