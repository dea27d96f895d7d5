"""Following one run: its log, metrics and progress readers, and a follow pass's result.

The facade (:class:`~ddp_tui.remote.cluster.Cluster`) decides when to follow (each refresh
with ``follow=``, and :meth:`Cluster.follow` between refreshes); this holds what a follow
reads and turns the answers into the :class:`~ddp_tui.remote.model.views.RunDetail` the open
run's screen renders: new log lines, the newest metrics rows and a bounded plot sample of
all of them, progress, the ranks' heartbeats and a stall's silent ranks, and the accounting
saved once the attempt has ended.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ddp_tui.diagnosis.stall import Stall, stall_of
from ddp_tui.remote.backends.executor import Batch, ExecutorError, ReadResult
from ddp_tui.remote.backends.scheduler import SchedulerError
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.view_building import latest_job_id, progress_of
from ddp_tui.remote.model.views import DETAIL_METRICS_ROWS, RunDetail, RunView
from ddp_tui.remote.observe.diagnosing import heartbeat_reads, heartbeats_of
from ddp_tui.remote.observe.followers import Follower, FollowPass, catch_up
from ddp_tui.remote.observe.observed import ObservedRuns
from ddp_tui.remote.store.runs import SACCT_FILE, RunInfo, RunRef, spec_nodes

#: Extra reads of 4 MiB one follow may make of a long ``metrics.csv`` (32 MiB, some 400,000
#: rows: about a second's parse on the I/O thread; a longer file goes on at the next follow).
METRICS_CATCH_UP_ROUNDS = 8


class Following:
    """The followed runs' readers (kept across follows, restarted per attempt)."""

    def __init__(self, observed: ObservedRuns) -> None:
        self.executor = observed.executor
        self.scheduler = observed.scheduler
        self.store = observed.store
        self.states = observed.states
        self.table = observed.table
        self._followers: dict[str, Follower] = {}

    def restart(self, run_id: str) -> None:
        """Forget what was read of ``run_id``: its next follow reads its logs' tails, every
        metrics row and the whole telemetry again (a screen newly showing the run has none
        of what an earlier screen was sent)."""
        self._followers.pop(run_id, None)

    def begin(self, info: RunInfo) -> FollowPass:
        """A follow pass of the run's latest attempt: what it reads next."""
        run_id = info.run_id
        job_id = latest_job_id(info)
        f = self._followers.get(run_id)
        fresh = f is None or f.job_id != job_id
        if f is None or fresh:
            # A preflight job samples nothing; a training run's nodes each write a file.
            nodes = spec_nodes(info.spec) if info.kind == "train" else 0
            f = self._followers[run_id] = Follower(info.ref, job_id, nodes=nodes)
        detail = RunDetail(run_id, out_reset=fresh, err_reset=fresh)
        fpass = FollowPass(info.ref, f, detail, (f.out.generation, f.err.generation))
        status = self.states.status_of(info)
        if status is not None and status.state is JobState.RUNNING and info.kind == "train":
            spec = self.table.spec_of(info)
            if spec.entry != "script":  # a user's script writes no heartbeats
                fpass.heartbeat_reads = heartbeat_reads(info.ref, spec.world_size)
        return fpass

    def finish(
        self,
        fpass: FollowPass,
        reads: Sequence[ReadResult],
        info: RunInfo,
        view: RunView | None,
    ) -> RunDetail:
        """The pass's :class:`RunDetail` from the answers to its reads; ``view`` is the
        run's row of this refresh (its stall, if any)."""
        f, detail = fpass.follower, fpass.detail
        fpass.feed(reads)
        # A reader that restarted (first look at a big log, truncation) asks for one more
        # read at once, so opening a run shows its tail without waiting a whole tick.
        for _ in range(2):
            if not fpass.pending:
                break
            fpass.feed(self.executor.run_batch(Batch(reads=fpass.requests())).reads)
        if fpass.metrics_behind:
            # A long metrics.csv is read to its end now, not 4 MiB per follow (5 s apart once
            # the run has ended): the table and the plots are whole at the first look.
            catch_up(self.executor, [f.metrics], rounds=METRICS_CATCH_UP_ROUNDS)
        detail.out_reset = detail.out_reset or f.out.generation != fpass.gens[0]
        detail.err_reset = detail.err_reset or f.err.generation != fpass.gens[1]
        # The newest rows and a bounded sample of all: what the screen shows costs the same
        # at 100,000 rows as at 10 (the rows themselves stay here, read once).
        rows = f.metrics.rows
        detail.metrics = rows[-DETAIL_METRICS_ROWS:]
        detail.metrics_total = len(rows)
        detail.metrics_plot = f.metrics.sample.series() if f.metrics.sample else {}
        detail.progress = progress_of(f.progress.latest)
        detail.heartbeats = heartbeats_of(fpass.heartbeats)
        if info.kind == "train":
            state = view.state.value if view is not None else JobState.UNKNOWN.value
            sec = self.table.spec_of(info).telemetry_sec
            detail.resources = f.telemetry.view(telemetry_sec=sec, state=state)
        if view is not None and view.stall is not None:
            detail.stall = self._named_stall(view, view.stall, detail)
        job_id = f.job_id
        final = self.states.end_of(info)
        if final is not None and final.job_id == job_id and job_id:
            if f.accounting is None:
                f.accounting = self.save_accounting(fpass.ref, job_id)
            detail.accounting = f.accounting
        return detail

    def _named_stall(self, view: RunView, stall: Stall, detail: RunDetail) -> Stall | None:
        """The table's verdict, with the ranks named from the heartbeats just read (a
        user's script writes none: its stall rests on its logs and progress alone)."""
        if view.spec.entry == "script":
            return stall
        return stall_of(
            now=time.time(),
            activity=[stall.last_activity],
            after_sec=self.table.stall_after_sec,
            heartbeats=detail.heartbeats,
            world_size=view.spec.world_size,
        )

    def save_accounting(self, ref: RunRef, job_id: str) -> str:
        """The ended job's accounting text, saved as ``sacct.txt`` (a note when it cannot
        be had)."""
        try:
            text = self.scheduler.accounting(job_id)
        except (SchedulerError, ExecutorError) as exc:
            return f"(accounting unavailable: {exc})"
        if text:
            self.store.write_text(ref, SACCT_FILE, text)
        return text
