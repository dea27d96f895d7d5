"""Reaction 3: each run whose latest attempt ended gets its ``usage.json`` once: what that
attempt used of what it held (CPU and memory efficiency, peak memory per node, time used),
so that Jobs, Compare and ``ls`` show it without asking the scheduler per row, per refresh.

The scheduler's accounting is asked once for every such run together
(:meth:`~ddp_tui.remote.backends.scheduler.Scheduler.job_usages`: one sacct on Slurm, at most
:data:`PER_REFRESH` runs a refresh), and never again for a run whose record holds its latest
attempt: the listing reads the record with the run (:meth:`RunStore.write_usage`,
:meth:`RunStore.await_usage`). Accounting lags the controller: a job whose record is not
final yet (not ended, or its steps not in) is asked again at the next refresh, until
:data:`WAIT_SEC` after its end was recorded; then a record that says ``unavailable`` is
written, so that it is not asked again. A scheduler that keeps no accounting (the local one)
is never asked, and its runs get no record; nor is any in a pass that polls nothing (the
listing at start-up, whose table must not wait for a scheduler).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any, Final

from ddp_tui.remote.backends.executor import ExecutorError
from ddp_tui.remote.backends.scheduler import JobStatus, Scheduler, SchedulerError
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.observe.attempt_states import AttemptStates
from ddp_tui.remote.observe.run_table import RunTable
from ddp_tui.remote.runs.reactions import Seen
from ddp_tui.remote.store.runs import USAGE_FILE, RunInfo, RunStore
from ddp_tui.reports.accounting import JobAccounting
from ddp_tui.reports.efficiency import spec_asked, usage_report

#: How long after an attempt's end (as its end line records it) its accounting is waited for.
WAIT_SEC: Final = 600.0
#: The most runs whose accounting one refresh asks for (one sacct's worth on Slurm, which asks
#: 200 ids a call): a runs root with years of runs ended before this record existed fills in
#: over a few refreshes.
PER_REFRESH: Final = 200
#: The ``source`` of a record written when the accounting never had the job in time.
UNAVAILABLE: Final = "unavailable"


class RecordUsage:
    """Writes the ``usage.json`` of each run whose latest attempt ended and has none yet."""

    def __init__(
        self,
        scheduler: Scheduler,
        store: RunStore,
        states: AttemptStates,
        table: RunTable,
        *,
        clock: Callable[[], float] = time.time,
        wait_sec: float = WAIT_SEC,
    ) -> None:
        self.scheduler = scheduler
        self.store = store
        self.states = states
        self.table = table
        self.clock = clock
        self.wait_sec = wait_sec

    def __call__(self, seen: Seen) -> str | None:
        if not self.scheduler.keeps_accounting or not seen.polled:
            return None  # the first listing at start-up asks no scheduler: the next pass does
        due: list[tuple[int, RunInfo, JobStatus]] = []
        for i in reversed(range(len(seen.infos))):  # the newest runs first
            ended = self._due(seen.infos[i])
            if ended is not None and len(due) < PER_REFRESH:
                due.append((i, seen.infos[i], ended))
        if not due:
            return None
        try:
            found = self.scheduler.job_usages([end.job_id for _, _, end in due])
        except (SchedulerError, ExecutorError) as exc:
            return f"could not read what {len(due)} ended job(s) used: {exc}"
        infos = list(seen.infos)
        now = self.clock()
        try:
            for i, info, end in due:
                record = self._record(info, end, found.get(end.job_id), now)
                if record is None:
                    self.store.await_usage(info.ref, end.job_id)  # another process may write it
                    continue
                listed = self.store.write_usage(info.ref, record)
                if listed is not None:
                    infos[i] = listed
        except (ExecutorError, OSError) as exc:
            return f"could not record what job {end.job_id} of {info.run_id} used: {exc}"
        finally:
            seen.infos = infos
        return None

    def _due(self, info: RunInfo) -> JobStatus | None:
        """The latest attempt's end, where the run has no usage record of it yet (and a
        damaged usage.json is left as it is found)."""
        end = self.states.end_of(info)
        if end is None or any(d.file == USAGE_FILE for d in info.damage):
            return None
        usage = info.usage
        if usage is not None and str(usage.get("job_id")) == end.job_id:
            return None
        return end

    def _record(
        self, info: RunInfo, end: JobStatus, acct: JobAccounting | None, now: float
    ) -> dict[str, Any] | None:
        """The record to write: the accounting's figures once it is final, an unavailable
        one once it is too late; None: ask again at the next refresh."""
        if acct is not None and _final(acct):
            report = usage_report(
                acct, ended=True, asked=spec_asked(self.table.spec_of(info)), run_id=info.run_id
            )
            return {
                "job_id": end.job_id,
                "state": acct.state,
                "cpu_efficiency": report.cpu_efficiency.value,
                "mem_efficiency": report.mem_efficiency.value,
                "max_rss_mib_per_node": report.max_rss_mib_per_node.value,
                "time_used_fraction": report.time_used_fraction.value,
                "source": acct.source,
                "recorded_at": _iso(now),
            }
        ended_at = self._ended_at(info, end)
        if ended_at is None or now - ended_at < self.wait_sec:
            return None
        return {
            "job_id": end.job_id,
            "state": end.state.value,
            "cpu_efficiency": None,
            "mem_efficiency": None,
            "max_rss_mib_per_node": None,
            "time_used_fraction": None,
            "source": UNAVAILABLE,
            "note": (
                f"the {self.scheduler.name} accounting held no final record of job "
                f"{end.job_id} {self.wait_sec / 60:g} min after its end"
            ),
            "recorded_at": _iso(now),
        }

    def _ended_at(self, info: RunInfo, end: JobStatus) -> float | None:
        """When the attempt's end was recorded, by this process's clock (its end line's
        ``recorded_at``); None where no end line says (it is waited for)."""
        line: Mapping[str, Any] | None = info.ends.get(end.job_id)
        line = line or self.states.just_recorded.get(end.job_id)
        at = line.get("recorded_at") if line is not None else None
        try:
            return datetime.fromisoformat(at).timestamp() if isinstance(at, str) else None
        except ValueError:
            return None


def _final(acct: JobAccounting) -> bool:
    """Accounting's record is final: the job ended there too, and its steps are in (a job
    that never ran has none, and never will)."""
    try:
        ended = JobState(acct.state).is_terminal
    except ValueError:
        return False
    return ended and (bool(acct.steps) or not acct.elapsed_sec)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")
