"""Why a run's job, or any job of the user, waits (``ddp-tui why``, a pending job's detail):
:class:`WaitingService`.

On demand only, never in a refresh: on Slurm the explanation asks ``squeue --start``, which
runs a backfill simulation on the controller, and a few more queries for the one job
(:mod:`ddp_tui.remote.backends.slurm.wait_explainer`). The scheduler says what it can; the
run's side is only which job to ask about.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ddp_tui.diagnosis.waiting import Unavailable, WaitExplanation
from ddp_tui.remote.backends.job_ids import is_job_id
from ddp_tui.remote.backends.scheduler import Scheduler
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.view_building import latest_job_id
from ddp_tui.remote.store.runs import RunInfo


class WaitingService:
    """Explains the wait of a run's latest job, or of a job by its id."""

    def __init__(self, scheduler: Scheduler, info: Callable[[str], RunInfo]) -> None:
        self.scheduler = scheduler
        self.info = info

    def why_waiting(self, run_or_job: str) -> WaitExplanation:
        """Why ``run_or_job`` (a run id, or a job id that is no run of ddp-tui's) waits.

        Raises :class:`LookupError` for a key that is neither.
        """
        try:
            info = self.info(run_or_job)
        except KeyError:
            if not is_job_id(run_or_job):
                raise LookupError(
                    f"no run or job {run_or_job!r} (give a run id or a job id such as 1234 "
                    "or 1234_5)"
                ) from None
            return self.scheduler.why_waiting(run_or_job)
        job_id = latest_job_id(info)
        if job_id is None:
            never = Unavailable("job", "the run has no job: it was never submitted")
            return WaitExplanation(
                "",
                JobState.UNKNOWN.value,
                self.scheduler.name,
                run_id=info.run_id,
                unavailable=(never,),
            )
        return replace(self.scheduler.why_waiting(job_id), run_id=info.run_id)
