"""The runs service: snapshots of every run, the followed run's news, a run's checklist and
diagnosis, and cancelling it.

A refresh is the observation pass (:mod:`ddp_tui.remote.runs.observation`, reads only), then
the command's reactions (:mod:`ddp_tui.remote.runs.reactions`, the writes), then the rows.
It owns no state of its own beyond caches: the run directories are the truth, so the app on
a login node and the app on a laptop see the same experiments.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from ddp_tui.diagnosis import Diagnosis
from ddp_tui.remote.backends.executor import Batch, ExecutorError, ReadResult
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.live.containers import stop_run_containers
from ddp_tui.remote.model.events import NotifyEvent
from ddp_tui.remote.model.view_building import latest_job_id
from ddp_tui.remote.model.views import Check, RunDetail, RunView, Snapshot
from ddp_tui.remote.observe.followers import FollowPass, TelemetryCache
from ddp_tui.remote.observe.following import Following
from ddp_tui.remote.observe.observed import ObservedRuns
from ddp_tui.remote.runs.inspection import Inspector
from ddp_tui.remote.runs.observation import Observation, Observer
from ddp_tui.remote.runs.reactions import Seen, Stage
from ddp_tui.remote.runs.reactions.notify import Notifier
from ddp_tui.remote.store.run_jobs import cancel_run
from ddp_tui.remote.store.runs import RunInfo, spec_nodes
from ddp_tui.resources import ResourceSummary


class RunsService:
    """Every run as rows, and one run looked into. Not thread-safe: the app drives it from
    one worker at a time."""

    def __init__(
        self,
        observed: ObservedRuns,
        *,
        location: str,
        following: Following,
        telemetry: TelemetryCache,
        notifier: Notifier,
        stage: Stage,
        scheduler_version: Callable[[], str],
        listing_batch: int | None = None,
    ) -> None:
        self.executor = observed.executor
        self.scheduler = observed.scheduler
        self.store = observed.store
        self.location = location
        self.states = observed.states
        self.table = observed.table
        self.following = following
        self.telemetry = telemetry
        self.notifier = notifier
        self.stage = stage
        self.observer = Observer(observed)
        self.inspector = Inspector(observed, following)
        self._scheduler_version = scheduler_version
        #: New run directories read per refresh (None: all). The app sets it so that its
        #: first table does not wait for thousands of finished runs to be read.
        self.listing_batch = listing_batch
        self._infos: list[RunInfo] = []
        self._listed = False
        self._views: tuple[RunView, ...] = ()

    # -- every run --------------------------------------------------------------------

    def refresh(
        self, follow: str | None = None, *, answered: Mapping[str, JobStatus] | None = None
    ) -> Snapshot:
        """A snapshot of every run, and of the followed run's new output.

        ``answered``: the states of the user's jobs as the scheduler gave them a moment ago
        (the all-jobs listing); the runs' jobs it names are not asked again.

        Scheduler or connection outages never raise: the snapshot carries the error and the
        runs keep their last known states.
        """
        if not self._listed:
            # At start-up the runs are not known yet: list them first (no scheduler call),
            # so that the poll below covers every run and none shows an unknown state.
            first = self._refresh_once(None, poll=False, max_new=self.listing_batch)
            if first.error is not None:
                return first
            # Poll what was just read; reading more runs can wait for the next refresh.
            return self._refresh_once(
                follow, max_new=0 if self.listing_batch else None, answered=answered
            )
        return self._refresh_once(follow, max_new=self.listing_batch, answered=answered)

    def _refresh_once(
        self,
        follow: str | None,
        *,
        poll: bool = True,
        max_new: int | None = None,
        answered: Mapping[str, JobStatus] | None = None,
    ) -> Snapshot:
        fpass = self.following.begin(self.info(follow)) if follow else None
        seen = self.observer.observe(
            self._infos, fpass, poll=poll, max_new=max_new, answered=answered
        )
        if seen.failed:
            return self._snapshot(self._views, seen.error, 0)
        self._listed = True
        self._infos = seen.infos
        acted = Seen(seen.infos, polled=seen.polled)
        error, notify_error = self.stage.apply(
            acted, lambda: tuple(self.table.view(info) for info in reversed(acted.infos))
        )
        self._infos = list(acted.infos)  # as a reaction left them (a usage record written)
        self._views = acted.views
        error = error or seen.error or notify_error
        detail = None
        if fpass is not None:
            try:
                detail = self._follow_finish(fpass, seen.follow_reads)
            except ExecutorError as exc:
                error = error or str(exc)
        return self._snapshot(self._views, error, seen, detail, acted.events)

    def take_events(self, *, final: bool = False) -> list[NotifyEvent]:
        """The events this process claimed since the last call (the CLI delivers them);
        ``final``: claim the ends still waiting for their diagnosis first (before exit)."""
        if final:
            self.notifier.flush()
        return self.notifier.take()

    def views(self) -> tuple[RunView, ...]:
        """The rows of the last refresh, or of a listing now when there was none."""
        return self._views or tuple(self.table.view(i) for i in self.store.list_runs())

    def view(self, info: RunInfo) -> RunView:
        return self.table.view(info)

    def views_of(self, run_ids: Sequence[str]) -> list[RunView]:
        """The rows of ``run_ids`` from one listing (a sweep's members: not one each)."""
        infos = self.store.list_runs()
        if self._listed:
            self._infos = infos  # the next refresh polls a run just submitted here
        by_id = {info.run_id: info for info in infos}
        missing = [r for r in run_ids if r not in by_id]
        if missing:
            raise KeyError(missing[0])
        return [self.table.view(by_id[r]) for r in run_ids]

    def info(self, run_id: str) -> RunInfo:
        """The run as last listed, or as listed now."""
        for info in self._infos:
            if info.run_id == run_id:
                return info
        for info in self.store.list_runs():
            if info.run_id == run_id:
                return info
        raise KeyError(f"no run {run_id!r} under {self.store.root}")

    def _snapshot(
        self,
        views: tuple[RunView, ...],
        error: str | None,
        seen: Observation | int,
        detail: RunDetail | None = None,
        events: tuple[NotifyEvent, ...] = (),
    ) -> Snapshot:
        return Snapshot(
            detail=detail,
            taken_at=time.time(),
            runs=views,
            location=self.location,
            scheduler_version=self._scheduler_version(),
            connection=self.observer.connection,
            error=error,
            scheduler_calls=seen if isinstance(seen, int) else seen.scheduler_calls,
            unread=self.store.unread,
            events=events,
        )

    # -- one run ----------------------------------------------------------------------

    def follow(self, run_id: str) -> RunDetail:
        """New log lines, metrics and progress of one run since its last follow()."""
        fpass = self.following.begin(self.info(run_id))
        result = self.executor.run_batch(Batch(reads=fpass.requests()))
        return self._follow_finish(fpass, result.reads)

    def restart_follow(self, run_id: str) -> None:
        """The next follow of ``run_id`` starts over, as for a run never followed (for a
        screen that newly shows it: it has none of the lines sent before)."""
        self.following.restart(run_id)

    def _follow_finish(self, fpass: FollowPass, reads: Sequence[ReadResult]) -> RunDetail:
        run_id = fpass.detail.run_id
        view = next((v for v in self._views if v.run_id == run_id), None)
        return self.following.finish(fpass, reads, self.info(run_id), view)

    def diagnose(self, run_id: str) -> Diagnosis | None:
        """Why the run's latest attempt ended as it did (:meth:`Inspector.diagnose`)."""
        return self.inspector.diagnose(self.info(run_id))

    def verify(self, run_id: str) -> list[Check]:
        """The run's checklist (:meth:`Inspector.verify`)."""
        return self.inspector.verify(self.info(run_id))

    def estimated_start(self, run_id: str) -> str:
        """When the scheduler expects the pending job to start, in its words ("" when it
        does not say). Asked only on demand: Slurm runs a backfill simulation for it."""
        job_id = latest_job_id(self.info(run_id))
        return self.scheduler.estimated_start(job_id) if job_id else ""

    def resources(self, run_id: str) -> ResourceSummary:
        """The run's resource telemetry summarised, from its files as they are now (one
        batch of reads; an empty summary where it wrote none)."""
        info = self.info(run_id)
        return self.telemetry.readers(info.ref, spec_nodes(info.spec)).accumulator.summary()

    def cancel(self, run_id: str) -> list[str]:
        """Cancel every live job of the run (recorded in ``jobs.jsonl`` or not); returns
        their ids. The run directory stays as it is. A podman run's containers on Slurm are
        stopped first: scancel alone would leave them running (remote/live/containers.py)."""
        info = self.info(run_id)
        stop_run_containers(self.executor, self.scheduler, self.store, info)
        return cancel_run(self.scheduler, self.store, info.ref)
