"""What a run's or any job's last attempt used: :class:`UsageService`, behind
``Cluster.usage`` and ``ddp-tui usage``.

It gathers the report's inputs and leaves the figures to the domain
(:func:`ddp_tui.reports.efficiency.usage_report`): the scheduler's accounting of the job
(one ``sacct`` on Slurm, :meth:`~ddp_tui.remote.backends.scheduler.Scheduler.job_usage`),
and for one of ddp-tui's runs its telemetry summary and its spec's requests. Where the
scheduler keeps no accounting (the local scheduler, or a Slurm record purged), the run's
own record (its state and elapsed time), else the scheduler's poll, stands in for it, and
the figures it cannot give are "not measured".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ddp_tui.remote.backends.hostlist import expand_hostlist
from ddp_tui.remote.backends.scheduler import Scheduler
from ddp_tui.remote.backends.states import JobState

if TYPE_CHECKING:
    from ddp_tui.remote.model.views import RunView
    from ddp_tui.reports.accounting import JobAccounting
    from ddp_tui.reports.efficiency import UsageReport
    from ddp_tui.resources import ResourceSummary


class UsageService:
    """Usage reports of runs and jobs. Not thread-safe, like the services it reads."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        views: Callable[[], Sequence[RunView]],
        resources: Callable[[str], ResourceSummary],
    ) -> None:
        self.scheduler = scheduler
        #: The runs as last listed (a run is found by its id or any attempt's job id).
        self.views = views
        #: A run's telemetry summary, by run id.
        self.resources = resources

    def usage(self, run_or_job: str) -> UsageReport:
        """The report of a run's latest attempt (by run id), or of any job of the user (by
        job id; one of ddp-tui's runs when an attempt of a run has that id). Raises
        LookupError when there is no such run, or no job the scheduler knows."""
        from ddp_tui.reports.efficiency import spec_asked, usage_report

        view = self._run(run_or_job)
        job_id = view.job_id if view is not None else run_or_job
        if job_id is None:
            raise LookupError(f"run {run_or_job} has no job yet: nothing was used")
        acct = self.scheduler.job_usage(job_id) or self._stand_in(job_id, view)
        if acct is None:
            raise LookupError(
                f"no job {job_id} in the scheduler's accounting or queue "
                "(a job id of this cluster, or a run id)"
            )
        state = JobState(acct.state) if acct.state in JobState.__members__ else JobState.UNKNOWN
        ended = state.is_terminal
        if view is not None and not ended and view.state.is_terminal and job_id == view.job_id:
            # The run recorded the end before accounting caught up with it.
            ended = True
        return usage_report(
            acct,
            ended=ended,
            telemetry=self.resources(view.run_id) if view is not None else None,
            asked=spec_asked(view.spec) if view is not None else None,
            run_id=view.run_id if view is not None else None,
        )

    def _run(self, key: str) -> RunView | None:
        views = self.views()
        for v in views:
            if v.run_id == key:
                return v
        for v in views:
            if any(a.job_id == key for a in v.attempts):
                return v
        return None

    def _stand_in(self, job_id: str, view: RunView | None) -> JobAccounting | None:
        """What the run's record, else the scheduler's poll, says of a job that has no
        accounting here: its state, elapsed time and nodes."""
        from ddp_tui.reports.accounting import JobAccounting

        source = f"{self.scheduler.name} scheduler"
        if view is not None and job_id == view.job_id:
            return JobAccounting(
                job_id=job_id,
                state=view.state.value,
                source="the run's record" if self.scheduler.name == "slurm" else source,
                name=view.name,
                elapsed_sec=view.elapsed_sec,
                node_count=view.spec.nodes,
                nodes=view.hosts,
            )
        status = self.scheduler.poll([job_id]).get(job_id)
        if status is None:
            return None
        try:
            nodes = tuple(expand_hostlist(status.node_list)) if status.node_list else ()
        except ValueError:
            nodes = (status.node_list,)
        return JobAccounting(
            job_id=job_id,
            state=status.state.value,
            source=source,
            name=status.name,
            elapsed_sec=status.elapsed_sec,
            node_count=status.nodes or None,
            nodes=nodes,
        )
