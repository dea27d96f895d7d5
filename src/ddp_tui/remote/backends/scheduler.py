"""The interface every scheduler backend offers: Slurm, and the embedded local one."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ddp_tui.errors import DdpTuiError
from ddp_tui.remote.backends.executor import CommandResult
from ddp_tui.remote.backends.states import JobState

if TYPE_CHECKING:
    # A cluster fact the spec is checked against, so the domain defines it; the interface
    # below returns it, so it stays importable from here (:func:`__getattr__`).
    from ddp_tui.spec.partitions import PartitionInfo as PartitionInfo


def __getattr__(name: str) -> object:
    """``PartitionInfo``, imported when first asked for: a module that only reads job states
    (the app's first screen) does not pay for the spec package."""
    if name == "PartitionInfo":
        from ddp_tui.spec.partitions import PartitionInfo

        return PartitionInfo
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class SchedulerError(DdpTuiError):
    """A scheduler command failed; ``message`` is the tool's own words."""

    title = "Scheduler"

    def __init__(self, message: str, *, argv: Sequence[str] = (), returncode: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.argv = tuple(argv)
        self.returncode = returncode


class SchedulerUnavailable(SchedulerError):
    """The controller cannot be reached (e.g. "Unable to contact slurm controller")."""


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    state: JobState
    raw_state: str = ""
    reason: str = ""
    nodes: int = 0
    node_list: str = ""
    elapsed_sec: float = 0.0
    exit_code: int | None = None
    start: str = ""
    end: str = ""
    name: str = ""
    partition: str = ""


class AccountingUnavailable(SchedulerError):
    """sacct failed while squeue worked; ``partial`` holds what squeue said."""

    def __init__(
        self,
        message: str,
        partial: dict[str, JobStatus],
        *,
        argv: Sequence[str] = (),
        returncode: int = 1,
    ) -> None:
        super().__init__(message, argv=argv, returncode=returncode)
        self.partial = partial


class Scheduler(ABC):
    """Submit, poll, cancel and requeue jobs. One poll costs one squeue, and one sacct per
    200 ids (the facade asks only about attempts whose end is not recorded)."""

    #: "slurm" or "local"
    name: str
    #: How long a submit whose caller was killed may still reach the scheduler: sbatch is
    #: a process of its own that outlives a killed app, and gives up within a minute.
    submit_in_flight_sec: float = 120.0

    @abstractmethod
    def submit(self, script_path: str, run_dir: str) -> str:
        """Submit ``script_path`` from the run directory; returns the job id."""

    @abstractmethod
    def poll(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        """States of ``job_ids`` (missing ids: unknown). At most one squeue and one sacct."""

    @abstractmethod
    def cancel(self, job_id: str) -> None:
        """Cancel a queued or running job."""

    @abstractmethod
    def requeue(self, job_id: str) -> None:
        """Put a running job back in the queue (preemption)."""

    @abstractmethod
    def version(self) -> str:
        """A short version string for the header."""

    @abstractmethod
    def partitions(self) -> list[PartitionInfo]:
        """The partitions the user can submit to."""

    def estimated_start(self, job_id: str) -> str:
        """When the scheduler expects a pending job to start, in words ("" if unknown)."""
        return ""

    def jobs_in_dir(self, run_dir: str) -> list[str]:
        """Ids of jobs submitted from ``run_dir``, oldest first (to recover a lost answer)."""
        return []

    def poll_commands(self, job_ids: Sequence[str]) -> list[list[str]]:
        """The commands a poll needs, so a caller can batch them with file reads.

        Backends that read local state need none and answer from :meth:`parse_poll`.
        """
        return []

    def parse_poll(
        self, job_ids: Sequence[str], results: Sequence[CommandResult]
    ) -> dict[str, JobStatus]:
        """States from the results of :meth:`poll_commands`, in the same order."""
        return self.poll(job_ids)

    def accounting(self, job_id: str) -> str:
        """The accounting summary text saved as ``sacct.txt``; empty if none."""
        return ""

    def node_argv(
        self, job_id: str, host: str, argv: Sequence[str], *, pty: bool = False
    ) -> list[str]:
        """The command that runs ``argv`` beside running job ``job_id``'s processes on its
        node ``host``: a stack dump, a shell. Run it through this scheduler's executor (or,
        for a shell, as the executor's interactive command). The local scheduler's jobs run
        where its commands run, so the command is ``argv`` itself."""
        return list(argv)

    def identity(self) -> str:
        """Which scheduler this is, as a key that another machine sharing the runs root
        would not give (e.g. ``slurm:<ClusterName>``): it scopes a LOST verdict.
        Raises :class:`SchedulerError` when it cannot be told."""
        return self.name
