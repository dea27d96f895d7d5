"""The Jobs table's order: by any column, either way, a group's row kept above its members.

Pure functions of the table's lines (no widgets): the Jobs screen calls :func:`sort_lines`
once per refresh or sort change, never per frame. A column's sort value comes from the
objects a row shows, not from its text, so ``1:02:03`` sorts as a duration and ``0.12 CPU``
as hours. Rows with nothing to sort by (``-``) go last in either direction: sorting by loss
puts the runs that have a loss first, whichever way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from ddp_tui.remote.backends.job_ids import job_id_sort_key
from ddp_tui.reports.usage import resource_hours
from ddp_tui.tui.foreign_rows import JOB_VALUES, JobArray
from ddp_tui.tui.job_groups import state_rank

if TYPE_CHECKING:
    from ddp_tui.remote.model.views import RunView
    from ddp_tui.tui.job_groups import JobLine, RunGroup

SortValue = float | str | tuple[object, ...]


def _progress(run: RunView) -> float | None:
    if run.epochs_total:
        return run.epochs_done / run.epochs_total
    if run.steps_total and run.steps_done is not None:
        return run.steps_done / run.steps_total
    return None


def _hours(run: RunView) -> float | None:
    hours = resource_hours(run.spec, run.used_sec)[0]
    return hours if hours > 0 else None


#: Each sortable column's value for one run (None: nothing to sort by).
RUN_VALUES: Final[dict[str, Callable[[RunView], SortValue | None]]] = {
    "name": lambda r: r.name.lower(),
    "job": lambda r: job_id_sort_key(r.job_id) if r.job_id else None,
    "state": lambda r: float(state_rank(r.state)),
    "size": lambda r: float(r.spec.nodes * r.spec.gpus_per_node),
    "elapsed": lambda r: r.elapsed_sec or None,
    "epoch": _progress,
    "loss": lambda r: r.last_train_loss,
    "val": lambda r: r.last_val_metric,
    "thru": lambda r: r.throughput,
    "hours": _hours,
    # By CPU efficiency (the cell's first figure); rows with none go last.
    "eff": lambda r: r.efficiency.cpu if r.efficiency is not None else None,
    "reason": lambda r: r.reason_label.lower() or None,
}

#: How a group's row sorts by a column, from its members' values: the most urgent state,
#: the largest size and time, the summed hours; else its newest member's value.
_GROUP_AGGREGATE: Final[dict[str, Callable[[list[SortValue]], SortValue]]] = {
    "state": min,
    "size": max,
    "elapsed": max,
    "hours": lambda values: sum(v for v in values if isinstance(v, float)),
}


def group_value(group: RunGroup | JobArray, column: str) -> SortValue | None:
    """A group row's value in ``column`` (a sweep's, or a job array's that is not ours)."""
    if column == "name":
        return group.name.lower()
    if isinstance(group, JobArray):
        found = (JOB_VALUES[column](task) for task in group.tasks)
    else:
        found = (RUN_VALUES[column](m) for m in group.members)
    values = [v for v in found if v is not None]
    if not values:
        return None
    aggregate = _GROUP_AGGREGATE.get(column)
    return aggregate(values) if aggregate is not None else values[0]


def line_value(line: JobLine, column: str) -> SortValue | None:
    """The value a top-level line sorts by in ``column``."""
    if line.group is not None:
        return group_value(line.group, column)
    if line.array is not None:
        return group_value(line.array, column)
    if line.run is not None:
        return RUN_VALUES[column](line.run)
    if line.job is not None:
        return JOB_VALUES[column](line.job)
    return None


def sort_lines(
    lines: Sequence[JobLine],
    column: str | None,
    *,
    descending: bool = False,
    value: Callable[[JobLine, str], SortValue | None] = line_value,
) -> list[JobLine]:
    """``lines`` ordered by ``column`` (None: as given, newest first), a group's members
    staying under its row in their own order. The sort is stable: equal values keep the
    order given."""
    if column is None:
        return list(lines)
    if column not in RUN_VALUES:
        raise ValueError(f"cannot sort by {column!r}; the columns are {', '.join(RUN_VALUES)}")
    blocks: list[list[JobLine]] = []
    for line in lines:
        if line.member and blocks:
            blocks[-1].append(line)
        else:
            blocks.append([line])
    keyed = [(value(block[0], column), block) for block in blocks]
    present = [(v, b) for v, b in keyed if v is not None]
    absent = [b for v, b in keyed if v is None]
    present.sort(key=lambda item: _comparable(item[0]), reverse=descending)
    return [line for block in [*(b for _, b in present), *absent] for line in block]


def _comparable(value: SortValue) -> tuple[int, SortValue]:
    # A column never mixes kinds, but a stray value must not raise: numbers, then text,
    # then job ids.
    kind = 0 if isinstance(value, float | int) else 1 if isinstance(value, str) else 2
    return (kind, value)
