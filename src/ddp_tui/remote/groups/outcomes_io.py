"""A group's outcome table and a diff of two runs, read for the facade.

The runs' files are read by :mod:`ddp_tui.remote.groups.comparison` (the same caches as the
scaling table's); each run's elapsed time and state come from the facade's read model
(:class:`~ddp_tui.remote.model.views.RunView`), so that a running job's hours grow as it runs.
The tables themselves are the pure :mod:`ddp_tui.reports.outcomes`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ddp_tui.remote.groups.comparison import load_group, load_run
from ddp_tui.remote.model.views import RunView
from ddp_tui.remote.observe.followers import MetricsCache, TelemetryCache
from ddp_tui.remote.store.runs import RunInfo, RunStore
from ddp_tui.reports.outcomes import Member, Outcomes, RunDiff, outcome_table, run_diff
from ddp_tui.reports.results import RunData


def view_member(run: RunData, view: RunView) -> Member:
    """``run`` with its view's run time (every attempt's: docs/compare.md), state
    (DAMAGED for a damaged run directory, as ``ls`` says it) and recorded usage."""
    eff = view.efficiency
    return Member(
        run,
        elapsed_sec=view.used_sec,
        state=view.state_label.removesuffix(" *"),
        cpu_used=eff.cpu if eff is not None else None,
        mem_used=eff.mem if eff is not None else None,
    )


def group_of(key: str, groups: Mapping[str, Sequence[RunView]]) -> str:
    """The group ``key`` names: a group key, or the exact id of a run in a group (a key
    that is neither is returned as it is, and has no runs)."""
    if key in groups:
        return key
    for group, views in groups.items():
        if any(v.run_id == key for v in views):
            return group
    return key


def load_outcomes(
    store: RunStore,
    key: str,
    groups: Mapping[str, Sequence[RunView]],
    *,
    telemetry: TelemetryCache | None = None,
    metrics: MetricsCache | None = None,
) -> Outcomes:
    """The outcome table of the group ``key`` names (:func:`group_of`); ``groups``: the
    facade's runs by group. Raises LookupError for a group with no runs."""
    group = group_of(key, groups)
    runs = load_group(store, group, telemetry, metrics)
    if not runs:
        raise LookupError(f"no runs in group {group!r}")
    views = {v.run_id: v for v in groups.get(group, ())}
    members = [view_member(r, views[r.run_id]) if r.run_id in views else Member(r) for r in runs]
    return outcome_table(group, members)


def load_diff(
    store: RunStore,
    runs: Sequence[tuple[RunInfo, RunView]],
    *,
    telemetry: TelemetryCache | None = None,
) -> RunDiff:
    """Two runs side by side (each given as its listing and its view). Raises ValueError
    when both are the same run."""
    (info_a, view_a), (info_b, view_b) = runs
    if info_a.run_id == info_b.run_id:
        raise ValueError(f"diff needs two different runs, got {info_a.run_id!r} twice")
    a = view_member(load_run(store, info_a, telemetry), view_a)
    b = view_member(load_run(store, info_b, telemetry), view_b)
    return run_diff(a, b)
