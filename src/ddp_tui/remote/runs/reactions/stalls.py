"""Reaction 4: a stalled job cancelled, once, with a note that says why (the profile's
``cancel_stalled``; off by default: a slow epoch is not a hang)."""

from __future__ import annotations

from ddp_tui.remote.backends.executor import Executor, ExecutorError
from ddp_tui.remote.backends.scheduler import Scheduler, SchedulerError
from ddp_tui.remote.live.stacks import stacks_before_cancel
from ddp_tui.remote.observe.diagnosing import STALL_FILE, stall_note
from ddp_tui.remote.runs.reactions import Seen
from ddp_tui.remote.store.runs import RunRef


class CancelStalled:
    """Cancels each stalled job once per process; every rank's stack is taken first, while
    the processes that hold it still live."""

    def __init__(self, executor: Executor, scheduler: Scheduler, *, enabled: bool) -> None:
        self.executor = executor
        self.scheduler = scheduler
        self.enabled = enabled
        self._cancelled: set[str] = set()  # job ids cancelled here for a stall

    def __call__(self, seen: Seen) -> str | None:
        if not self.enabled:
            return None
        for v in seen.views:
            job_id = v.job_id
            if v.stall is None or job_id is None or job_id in self._cancelled:
                continue
            self._cancelled.add(job_id)
            ref = RunRef(v.run_id, v.run_dir)
            stuck = stacks_before_cancel(self.executor, self.scheduler, ref, job_id)
            try:
                note = stall_note(job_id, v.stall, stuck=stuck)
                self.executor.write_atomic(ref.file(STALL_FILE), note)
                self.scheduler.cancel(job_id)
            except (ExecutorError, SchedulerError) as exc:
                return f"could not cancel stalled job {job_id}: {exc}"
        return None
