"""The Jobs table's rows for the user's other jobs: those ddp-tui did not submit (``a`` lists
them). Each job is a row of its own, its name marked; the tasks of one job array fold into one
row that opens, as a sweep's runs do. Pure functions of the listing (no widgets, no I/O).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ddp_tui.remote.backends.job_ids import job_id_sort_key
from ddp_tui.remote.backends.states import JobState
from ddp_tui.reports.efficiency_cells import efficiency_text
from ddp_tui.reports.usage import device_hours
from ddp_tui.tui.formatting import duration
from ddp_tui.tui.job_groups import (
    CLOSED,
    INDENT,
    OPEN,
    JobLine,
    counts_label,
    group_row_key,
    state_counts,
    state_rank,
)

if TYPE_CHECKING:
    from ddp_tui.remote.backends.user_jobs import UserJob

#: A row's key for a job: ``job:1234``, ``job:1234_5``; a run id never starts so.
JOB_ROW_PREFIX: Final = "job:"
#: What a folded job array's group key starts with (its row key is ``group:jobarray:1234``).
ARRAY_GROUP_PREFIX: Final = "jobarray:"
#: The name of a job that is not ddp-tui's starts with this: the table says whose it is.
FOREIGN_MARK: Final = "◇ "


def job_row_key(job_id: str) -> str:
    return JOB_ROW_PREFIX + job_id


def array_group(master: str) -> str:
    """The group key of job array ``master``'s folded row (what ``expanded`` holds)."""
    return ARRAY_GROUP_PREFIX + master


@dataclass(frozen=True)
class JobArray:
    """Two or more tasks of one job array that is not ddp-tui's, in the listing's order."""

    master: str
    name: str
    tasks: tuple[UserJob, ...]

    @property
    def key(self) -> str:
        return array_group(self.master)

    @property
    def counts(self) -> tuple[tuple[JobState, int], ...]:
        return state_counts(self.tasks)

    @property
    def live(self) -> tuple[UserJob, ...]:
        return tuple(t for t in self.tasks if t.state.is_active)


def job_size(job: UserJob) -> str:
    """``NxG`` like a run's (nodes by GPUs per node), ``N`` where it holds no GPU known."""
    if not job.nodes:
        return "-"
    if job.gpus:
        return f"{job.nodes}x{job.gpus // job.nodes}"
    return str(job.nodes)


def job_gpu_hours(job: UserJob) -> float | None:
    """GPU-hours held so far (GPUs times elapsed); None for a job with no GPU known."""
    if not job.gpus or not job.elapsed_sec:
        return None
    return device_hours(job.gpus, job.elapsed_sec)


def job_reason(job: UserJob) -> str:
    """Why it waits, in words; or why it ended, as the scheduler says."""
    if job.state is JobState.PENDING:
        # Here, not at the top: the diagnosis package is not needed for the first frame.
        from ddp_tui.diagnosis.pending import pending_reason

        return pending_reason(job.reason) if job.reason else ""
    return "" if job.reason in ("", "None") else job.reason


def job_values(job: UserJob, *, member: bool = False) -> tuple[str, ...]:
    """A job's row, in the Jobs table's columns (those a job has no value for say ``-``)."""
    hours = job_gpu_hours(job)
    name = (INDENT if member else FOREIGN_MARK) + job.name
    return (
        name,
        job.job_id,
        job.state.value,
        job_size(job),
        duration(job.elapsed_sec) if job.elapsed_sec else "-",
        "-",
        "-",
        "-",
        "-",
        f"{hours:.3g}" if hours else "-",
        efficiency_text(job.cpu_efficiency, job.mem_efficiency),
        job_reason(job),
    )


def array_values(array: JobArray, *, expanded: bool) -> tuple[str, ...]:
    """A folded array's row: its name, id, task count and counts per state."""
    hours = sum(h for h in (job_gpu_hours(t) for t in array.tasks) if h)
    sizes = {job_size(t) for t in array.tasks}
    return (
        (OPEN if expanded else CLOSED) + FOREIGN_MARK + array.name,
        array.master,
        f"{len(array.tasks)} tasks",
        sizes.pop() if len(sizes) == 1 else "mixed",
        "-",
        "-",
        "-",
        "-",
        "-",
        f"{hours:.3g}" if hours else "-",
        "-",
        counts_label(array.counts),
    )


def job_status(job: UserJob) -> str:
    """The status line for a job's row: whose it is, where, and its reason in full."""
    parts = [f"job {job.job_id} (not ddp-tui's)", job.state.value]
    if job.partition:
        parts.append(f"partition {job.partition}")
    if job.time_limit_sec:
        parts.append(f"limit {duration(job.time_limit_sec)}")
    if reason := job_reason(job):
        parts.append(reason)
    return ", ".join(parts)


def job_matches(job: UserJob, needle: str) -> bool:
    """The filter's match, as for a run: name, id, state, partition and reason."""
    if not needle:
        return True
    haystack = " ".join(
        [job.name, job.job_id, job.state.value, job.partition, job.reason, job_reason(job)]
    ).lower()
    return all(word in haystack for word in needle.lower().split())


def foreign_lines(
    jobs: Sequence[UserJob],
    *,
    expanded: Collection[str] = (),
    keep: Callable[[UserJob], bool] | None = None,
    reveal: bool = False,
) -> list[JobLine]:
    """The table's rows for ``jobs`` (newest first): an array of two or more tasks as one
    row where its first kept task stands, its tasks below it when open; as
    :func:`~ddp_tui.tui.job_groups.job_lines` does for a sweep's runs."""
    by_master: dict[str, list[UserJob]] = {}
    for job in jobs:
        if job.array_job_id:
            by_master.setdefault(job.array_job_id, []).append(job)
    arrays = {
        master: JobArray(master, tasks[0].name, tuple(tasks))
        for master, tasks in by_master.items()
        if len(tasks) > 1
    }
    kept = [job for job in jobs if keep is None or keep(job)]
    lines: list[JobLine] = []
    done: set[str] = set()
    for job in kept:
        array = arrays.get(job.array_job_id or "")
        if array is None:
            lines.append(JobLine(job_row_key(job.job_id), job=job))
            continue
        if array.master in done:
            continue
        done.add(array.master)
        is_open = reveal or array.key in expanded
        lines.append(JobLine(group_row_key(array.key), array=array, expanded=is_open))
        if is_open:
            lines.extend(
                JobLine(job_row_key(t.job_id), job=t, member=True)
                for t in array.tasks
                if keep is None or keep(t)
            )
    return lines


#: Each sortable column's value for one job (None: nothing to sort by), as
#: :data:`ddp_tui.tui.job_sorting.RUN_VALUES` has for a run.
JOB_VALUES: Final[dict[str, Callable[[UserJob], float | str | tuple[object, ...] | None]]] = {
    "name": lambda j: j.name.lower(),
    "job": lambda j: job_id_sort_key(j.job_id),
    "state": lambda j: float(state_rank(j.state)),
    "size": lambda j: float(j.gpus or j.nodes) or None,
    "elapsed": lambda j: float(j.elapsed_sec) or None,
    "epoch": lambda j: None,
    "loss": lambda j: None,
    "val": lambda j: None,
    "thru": lambda j: None,
    "hours": job_gpu_hours,
    "eff": lambda j: j.cpu_efficiency,
    "reason": lambda j: job_reason(j).lower() or None,
}
