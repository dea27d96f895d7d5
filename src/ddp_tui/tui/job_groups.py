"""The Jobs table's lines: runs of one group (a sweep, an array) folded into one row.

Pure functions of the runs list (no widgets, no I/O): the Jobs screen calls
:func:`job_lines` once per refresh or filter change, never per frame, and hands the lines to
:class:`~ddp_tui.tui.jobs_table.JobsTable`.

A group here is what the user submitted as one: the members of one sweep (its job arrays and
the members submitted beside them), which share :attr:`RunView.sweep`. Runs submitted one by
one stay rows of their own even when their specs are equal: they share a comparison group
(:attr:`RunView.group`, for Compare), but folding them would hide the run just submitted
behind a closed row. A sweep of one run is shown as that run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ddp_tui.remote.backends.states import COUNT_ORDER, RETRY_STATES, JobState

if TYPE_CHECKING:
    # Types only: the jobs screen paints its first frame before the read model (and the spec
    # under it) is imported, by the connect worker.
    from ddp_tui.remote.backends.user_jobs import UserJob
    from ddp_tui.remote.model.views import RunView
    from ddp_tui.tui.foreign_rows import JobArray

#: Row keys of group rows start with this; run ids never do (they start with a timestamp).
GROUP_ROW_PREFIX = "group:"

#: A group row's name starts with whether its members are shown.
OPEN, CLOSED = "▾ ", "▸ "
#: A member row's name is indented under its group's.
INDENT = "  "

#: Each state's place in a group row's count: the states' own order.
_RANK = {state: index for index, state in enumerate(COUNT_ORDER)}


def state_rank(state: JobState) -> int:
    """A state's place in the count order (running first, completed last; others after)."""
    return _RANK.get(state, len(_RANK))


#: What a sweep member's name joins its parts with (``grid-lr0.1-b32``, ``sweep-g2``); not
#: the dot, which is inside values (``lr0.1``).
_SEPARATORS = "-_ "


class HasState(Protocol):
    """A run or a job: what a count per state needs of it."""

    @property
    def state(self) -> JobState: ...


def group_row_key(group: str) -> str:
    return GROUP_ROW_PREFIX + group


def retryable(run: RunView) -> bool:
    """Ended without completing (failed, cancelled, timed out, lost, ...): what a group's
    retry (``ClusterAPI.retry_group``) submits again."""
    return run.state in RETRY_STATES


@dataclass(frozen=True)
class RunGroup:
    """Two or more runs of one group, in the order the snapshot lists them (newest first)."""

    key: str
    name: str
    members: tuple[RunView, ...]

    @property
    def counts(self) -> tuple[tuple[JobState, int], ...]:
        return state_counts(self.members)

    @property
    def live(self) -> tuple[RunView, ...]:
        """The members a cancel reaches: queued or running."""
        return tuple(run for run in self.members if run.state.is_active)

    @property
    def retryable(self) -> tuple[RunView, ...]:
        return tuple(run for run in self.members if retryable(run))

    @property
    def summary(self) -> str:
        """``6 runs: 2 RUNNING 3 PENDING 1 COMPLETED``."""
        return f"{len(self.members)} runs: {counts_label(self.counts)}"


@dataclass(frozen=True)
class JobLine:
    """One row of the Jobs table: a run (``member`` when it is shown under its group's row),
    a group, or one of the user's other jobs or job arrays."""

    key: str  # the run id, a job's job_row_key(), or group_row_key(group.key)
    run: RunView | None = None
    group: RunGroup | None = None
    member: bool = False
    expanded: bool = False  # group rows: its members are shown below it
    #: A job of the user that is not ddp-tui's (``a`` lists them), or a job array of them
    #: folded into one row (:mod:`ddp_tui.tui.foreign_rows`).
    job: UserJob | None = None
    array: JobArray | None = None


def state_counts(items: Iterable[HasState]) -> tuple[tuple[JobState, int], ...]:
    """How many runs (or jobs) are in each state, running first and completed last."""
    counts: dict[JobState, int] = {}
    for item in items:
        counts[item.state] = counts.get(item.state, 0) + 1
    return tuple(sorted(counts.items(), key=lambda item: state_rank(item[0])))


def counts_label(counts: Sequence[tuple[JobState, int]]) -> str:
    """``2 RUNNING 3 PENDING 1 COMPLETED``."""
    return " ".join(f"{count} {state.value}" for state, count in counts)


def group_name(names: Sequence[str]) -> str:
    """What a group is called: its members' common name prefix, cut back to whole parts
    (``grid`` of ``grid-lr0.1-b32`` and ``grid-lr0.01-b32``), or, where they share none,
    the first name without its last ``-suffix``."""
    if not names:
        return ""
    prefix = names[0]
    for name in names[1:]:
        while not name.startswith(prefix):
            prefix = prefix[:-1]
    if any(name != prefix and name[len(prefix)] not in _SEPARATORS for name in names):
        # The names part in the middle of a part (lr0.1 and lr0.01): the whole parts only.
        cut = max(prefix.rfind(separator) for separator in _SEPARATORS)
        prefix = prefix[:cut] if cut > 0 else ""
    prefix = prefix.rstrip(_SEPARATORS)
    if prefix:
        return prefix
    first = names[0]
    for separator in _SEPARATORS:
        head, sep, _ = first.rpartition(separator)
        if sep and head.strip(_SEPARATORS):
            return head
    return first


def multi_run_groups(runs: Sequence[RunView]) -> dict[str, RunGroup]:
    """The sweeps of two or more runs, by sweep id, members in the order of ``runs``."""
    members: dict[str, list[RunView]] = {}
    for run in runs:
        if run.sweep:
            members.setdefault(run.sweep, []).append(run)
    return {
        key: RunGroup(key, group_name([r.name for r in group]), tuple(group))
        for key, group in members.items()
        if len(group) > 1
    }


def job_lines(
    runs: Sequence[RunView],
    *,
    expanded: Collection[str] = (),
    keep: Callable[[RunView], bool] | None = None,
    reveal: bool = False,
) -> list[JobLine]:
    """The table's rows for ``runs`` (newest first): each group of two or more runs as one
    row where its newest member stands, followed by its members when its key is in
    ``expanded``.

    ``keep`` is the filter (the search, hiding finished runs): a group's row shows while
    any of its members is kept, and only kept members show under it. The row summarises
    every member, kept or not, since cancel and retry on it act on the whole group.
    ``reveal`` (a search is on) expands every group with a kept member: a match inside a
    group is shown, not hidden behind its row.
    """
    groups = multi_run_groups(runs)
    kept = [run for run in runs if keep is None or keep(run)]
    shown: dict[str, list[RunView]] = {}
    for run in kept:
        if run.sweep in groups:
            shown.setdefault(run.sweep, []).append(run)
    lines: list[JobLine] = []
    for run in kept:
        group = groups.get(run.sweep or "")
        if group is None:
            lines.append(JobLine(run.run_id, run=run))
            continue
        members = shown.pop(group.key, None)
        if members is None:
            continue  # the group's row is already out, at its newest kept member
        is_open = reveal or group.key in expanded
        lines.append(JobLine(group_row_key(group.key), group=group, expanded=is_open))
        if is_open:
            lines.extend(JobLine(m.run_id, run=m, member=True) for m in members)
    return lines
