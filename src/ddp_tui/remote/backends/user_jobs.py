"""Every job of the user, as the scheduler lists it: :class:`UserJob` (one job or array task),
:class:`Since` (how far back ended jobs are listed) and :class:`UserJobsAnswer` (one listing).

Pure values. The Slurm backend makes them of one squeue and one sacct
(:mod:`ddp_tui.remote.backends.slurm.user_jobs`), the local scheduler of its job files; the
listing that tells ddp-tui's runs from the rest is :mod:`ddp_tui.remote.runs.user_jobs`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ddp_tui.remote.backends.states import JobState


@dataclass(frozen=True)
class UserJob:
    """One job of the user (or one task of a job array), whoever submitted it."""

    #: ``1234``, or an array task's ``1234_5``.
    job_id: str
    name: str
    state: JobState
    #: The state as the scheduler printed it (``CANCELLED by 0``).
    raw_state: str = ""
    #: The array's id and the task's index; None for a plain job.
    array_job_id: str | None = None
    array_task_id: int | None = None
    partition: str = ""
    nodes: int = 0
    node_list: str = ""
    #: GPUs of the whole job (every node), from the allocated TRES, else the requested; None
    #: where the scheduler does not say.
    gpus: int | None = None
    elapsed_sec: int = 0
    #: None: no limit, or none known.
    time_limit_sec: int | None = None
    #: Slurm's own code while it waits (``Priority``, ``Dependency``, ``JobHeldUser``...);
    #: why it failed, for some ended jobs.
    reason: str = ""
    exit_code: int | None = None
    work_dir: str = ""
    #: ISO 8601 as the scheduler prints them; "" where not known (yet).
    submit_time: str = ""
    start_time: str = ""
    end_time: str = ""
    #: Its ``.out`` and ``.err``, patterns worked out; None where not known (an ended job on a
    #: Slurm whose accounting keeps no paths, ``%N`` before it starts, an interactive job).
    stdout: str | None = None
    stderr: str | None = None
    user: str = ""
    #: Which answer this row comes from: ``squeue``, ``sacct`` or ``local``.
    source: str = ""
    #: What an ended job used of what it held, as fractions (0.45: 45 %): its CPUs busy on
    #: average, and its largest node's peak memory of the memory per node, from the
    #: accounting of its steps (:func:`ddp_tui.reports.efficiency.efficiency_figures`). None:
    #: not measured (a job still running, a scheduler that keeps no accounting, a step never
    #: sampled), never 0.
    cpu_efficiency: float | None = None
    mem_efficiency: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON values (the state by its name)."""
        return {
            "job_id": self.job_id,
            "array_job_id": self.array_job_id,
            "array_task_id": self.array_task_id,
            "name": self.name,
            "state": self.state.value,
            "raw_state": self.raw_state,
            "partition": self.partition,
            "nodes": self.nodes,
            "node_list": self.node_list,
            "gpus": self.gpus,
            "elapsed_sec": self.elapsed_sec,
            "time_limit_sec": self.time_limit_sec,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "work_dir": self.work_dir,
            "submit_time": self.submit_time,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "user": self.user,
            "source": self.source,
            "cpu_efficiency": self.cpu_efficiency,
            "mem_efficiency": self.mem_efficiency,
        }


@dataclass(frozen=True)
class StdioPaths:
    """Where a job's ``.out`` and ``.err`` are (None: not known), and who says so."""

    out: str | None
    err: str | None
    #: Where the paths come from, in words ("scontrol show job", ...); why none is known.
    source: str


@dataclass(frozen=True)
class UserJobsAnswer:
    """One listing: the queue's jobs (current), the accounting's (ended ones, and lagging
    copies of live ones: the queue wins), and what went wrong with the accounting."""

    queued: tuple[UserJob, ...] = ()
    accounted: tuple[UserJob, ...] = ()
    #: sacct failed while squeue answered: the ended jobs are missing (its message).
    warning: str | None = None


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_RELATIVE = re.compile(r"(\d+)\s*([smhdw])")
SINCE_FORMS = "a time back from now (30m, 12h, 7d, 2w) or a date (2026-11-20, 2026-11-20T08:00)"


@dataclass(frozen=True)
class Since:
    """How far back ended jobs are listed: ``seconds`` before now, or from ``at`` (a date or
    date and time, the cluster's local time, as sacct reads it)."""

    seconds: int | None = None
    at: str | None = None
    #: As the user gave it, for messages.
    text: str = field(default="", compare=False)

    def sacct_starttime(self) -> str:
        """sacct's ``--starttime``: ``now-<N>seconds`` (the cluster's clock, not this
        machine's) or the date."""
        if self.at is not None:
            return self.at
        return f"now-{self.seconds or 0}seconds"

    def timestamp(self, now: float | None = None) -> float:
        """The moment as a Unix time, on this machine's clock (the local scheduler's jobs)."""
        if self.at is not None:
            return datetime.fromisoformat(self.at).timestamp()
        return (time.time() if now is None else now) - (self.seconds or 0)

    def __str__(self) -> str:
        return self.text or (self.at if self.at is not None else f"{self.seconds}s")


#: The default window: a week.
DEFAULT_SINCE = Since(seconds=7 * 86400, text="7d")


def parse_since(text: str) -> Since:
    """``7d``, ``12h``, ``30m``, ``2w``, ``90s``, ``2026-11-20`` or ``2026-11-20T08:00[:00]``;
    raises ValueError naming the forms allowed."""
    t = text.strip()
    m = _RELATIVE.fullmatch(t)
    if m is not None:
        return Since(seconds=int(m.group(1)) * _UNITS[m.group(2)], text=t)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2})?)?", t):
        try:
            datetime.fromisoformat(t)
        except ValueError:
            pass
        else:
            return Since(at=t, text=t)
    raise ValueError(f"{text!r} is not a time: give {SINCE_FORMS}")
