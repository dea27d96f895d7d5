"""The groups service: runs of one experiment side by side (scaling table, outcomes, a diff
of two runs), the advisor's reading of them, and cancelling or retrying a group at once.

pandas is imported only when a table is asked for: the app starts without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ddp_tui.remote.backends.scheduler import Scheduler
from ddp_tui.remote.backends.scheduler_facts import SchedulerFacts
from ddp_tui.remote.groups.group_control import GroupRetry, cancel_group, retry_group
from ddp_tui.remote.model.views import RunView
from ddp_tui.remote.observe.followers import MetricsCache, TelemetryCache
from ddp_tui.remote.store.runs import RunInfo, RunStore

if TYPE_CHECKING:
    import pandas as pd

    from ddp_tui.advisor import Advice
    from ddp_tui.reports.outcomes import Outcomes, RunDiff


class GroupsService:
    """Comparison groups of one runs root. ``views`` gives the rows as last refreshed,
    ``refreshed`` the rows of a refresh now, ``info`` and ``view`` one run's listing and row,
    ``retry`` the submit service's retry."""

    def __init__(
        self,
        scheduler: Scheduler,
        store: RunStore,
        facts: SchedulerFacts,
        *,
        telemetry: TelemetryCache,
        threshold: float,
        views: Callable[[], tuple[RunView, ...]],
        refreshed: Callable[[], tuple[RunView, ...]],
        info: Callable[[str], RunInfo],
        view: Callable[[RunInfo], RunView],
        retry: Callable[[str], RunView],
    ) -> None:
        self.scheduler = scheduler
        self.store = store
        self.facts = facts
        #: Runs' telemetry kept read for Compare and `resources` (new bytes only, each call).
        self.telemetry = telemetry
        #: The compared group's metrics rows, kept read (new rows only, each compare).
        self.metrics = MetricsCache(store.executor)
        self.threshold = threshold
        self._views = views
        self._refreshed = refreshed
        self._info = info
        self._view = view
        self._retry = retry

    def groups(self) -> dict[str, list[RunView]]:
        """Runs by comparison group (only groups with a name), newest group first."""
        out: dict[str, list[RunView]] = {}
        for v in self._views():
            if v.group:
                out.setdefault(v.group, []).append(v)
        return out

    def compare(self, group: str) -> pd.DataFrame:
        """The scaling table of a group: speedup and efficiency against the smallest size."""
        from ddp_tui.remote.groups.comparison import load_group  # pandas, only when comparing
        from ddp_tui.reports.results import scaling_table

        return scaling_table(load_group(self.store, group, self.telemetry, self.metrics))

    def outcomes(self, group: str) -> Outcomes:
        """The group's outcome table: the fields that differ between its runs, then each
        run's metric, epochs, wall time, GPU-hours and throughput, the best run marked.
        ``group``: a group key, or the id of a run in it."""
        from ddp_tui.remote.groups.outcomes_io import load_outcomes  # pandas, only here

        return load_outcomes(
            self.store, group, self.groups(), telemetry=self.telemetry, metrics=self.metrics
        )

    def diff(self, run_a: str, run_b: str) -> RunDiff:
        """Two runs side by side: the fields that differ, their outcomes and their metrics
        per epoch. ``run_a``, ``run_b``: run ids (the CLI resolves prefixes and job ids)."""
        from ddp_tui.remote.groups.outcomes_io import load_diff  # pandas, only here

        infos = [self._info(run_id) for run_id in (run_a, run_b)]
        return load_diff(self.store, [(i, self._view(i)) for i in infos], telemetry=self.telemetry)

    def export_comparison(self, group: str) -> list[str]:
        """Write the group's comparison (Markdown and CSV) and its scaling advice (in the
        Markdown, and ``advice.csv``) next to the runs; their paths."""
        from ddp_tui.remote.groups.advising import export_group

        return export_group(
            self.store,
            group,
            partitions=self.facts.known_partitions(),
            telemetry=self.telemetry,
            metrics=self.metrics,
            threshold=self.threshold,
        )

    def advise(
        self, group: str, *, threshold: float | None = None, deadline_sec: float | None = None
    ) -> Advice:
        """The group's scaling advice (:mod:`ddp_tui.remote.groups.advising`); ``threshold``:
        the efficiency to keep to, else the profile's ``advisor_threshold``."""
        from ddp_tui.remote.groups.advising import advise_group  # pandas, only when advising

        return advise_group(
            self.store,
            group,
            partitions=self.facts.known_partitions(),
            telemetry=self.telemetry,
            metrics=self.metrics,
            threshold=self.threshold if threshold is None else threshold,
            deadline_sec=deadline_sec,
        )

    def cancel_group(self, group: str) -> list[str]:
        """Cancel every live job of the group's runs (``group``: a group key, or a sweep's
        id for that sweep's members only): a job array with one call
        (:mod:`ddp_tui.remote.groups.group_control`); returns the ids cancelled."""
        infos = [i for i in self.store.list_runs() if group in (i.group, i.sweep)]
        return cancel_group(self.scheduler, infos)

    def retry_group(self, group: str) -> GroupRetry:
        """Retry each run of the group (a group key, or a sweep's id) that ended without
        finishing (failed, cancelled, timed out, ...), each as its own new attempt; the
        others are left as they are."""
        views = [v for v in self._refreshed() if group in (v.group, v.sweep)]
        return retry_group([(v.run_id, v.state) for v in views], self._retry)
