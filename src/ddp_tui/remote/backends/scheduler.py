"""The interface every scheduler backend offers: Slurm, and the embedded local one."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ddp_tui.errors import DdpTuiError
from ddp_tui.remote.backends.executor import CommandResult
from ddp_tui.remote.backends.job_request import JobRequest
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.backends.user_jobs import Since, StdioPaths, UserJob, UserJobsAnswer

if TYPE_CHECKING:
    from ddp_tui.diagnosis.waiting import WaitExplanation
    from ddp_tui.reports.accounting import JobAccounting

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
    #: Whether :meth:`job_usage` and :meth:`job_usages` can answer: the scheduler keeps an
    #: accounting of what each job used (Slurm's sacct; the local scheduler keeps none, so a
    #: refresh never asks it, and its runs get no ``usage.json``).
    keeps_accounting: bool = False
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

    def why_waiting(self, job_id: str) -> WaitExplanation:
        """Why a job waits, as far as this scheduler says: its state and its reason in a
        category, with what to do (the local scheduler's reasons are "Resources",
        "requeued" and "JobArrayTaskLimit"). Asked on demand only, never in a refresh."""
        from ddp_tui.diagnosis.waiting import Unavailable, WaitExplanation

        status = self.poll([job_id]).get(job_id)
        if status is None:
            unknown = Unavailable("job", f"the {self.name} scheduler does not know job {job_id}")
            return WaitExplanation(
                job_id, JobState.UNKNOWN.value, self.name, unavailable=(unknown,)
            )
        pending = status.state is JobState.PENDING
        return WaitExplanation.of_reason(
            job_id,
            status.state.value,
            status.reason,
            scheduler=self.name,
            partition=status.partition,
            estimated_start=self.estimated_start(job_id) if pending else "",
        )

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

    def batch_script(self, job_id: str) -> str:
        """The script the job was submitted with, as the scheduler keeps it. Raises
        :class:`SchedulerError` where it keeps none (any more)."""
        raise SchedulerError(f"the {self.name} scheduler keeps no batch script of job {job_id}")

    def job_request(self, job_id: str) -> JobRequest:
        """What the job asked for and was given, where it ran from and where its logs are,
        asked for that one job (on demand: a job brought in as a run). Raises
        :class:`SchedulerError` naming why where this scheduler does not know the job (any
        more)."""
        raise SchedulerError(f"the {self.name} scheduler cannot say what job {job_id} asked for")

    def job_usage(self, job_id: str) -> JobAccounting | None:
        """What the job used, as the scheduler's accounting recorded it: the last attempt's
        allocation and every step. None where this scheduler keeps no such record (the
        local scheduler: its job's state and elapsed time come from :meth:`poll`)."""
        return None

    def job_usages(self, job_ids: Sequence[str]) -> dict[str, JobAccounting]:
        """:meth:`job_usage` of many jobs at once (one sacct per 200 on Slurm, never one per
        job): each job the accounting has a record of, by id. Empty where this scheduler
        keeps none (:attr:`keeps_accounting`)."""
        return {}

    def user_jobs_commands(self, since: Since, *, version: str = "") -> list[list[str]]:
        """The commands that list every job of the user, queued, running, or ended since
        ``since``: one squeue and one sacct on Slurm (``version``, the header's, says which
        fields its sacct has), whatever the number of jobs. Backends that read local state
        need none and answer from :meth:`parse_user_jobs`."""
        return []

    def parse_user_jobs(self, since: Since, results: Sequence[CommandResult]) -> UserJobsAnswer:
        """Every job of the user from the results of :meth:`user_jobs_commands`, in the same
        order. Raises :class:`SchedulerError` when the queue cannot be read; a failed
        accounting only sets the answer's ``warning``."""
        return UserJobsAnswer()

    def job_stdio(self, job_id: str, listed: UserJob | None = None) -> StdioPaths:
        """A job's ``.out`` and ``.err`` as the scheduler names them now, asked for that one
        job (on demand: a log opened, never a listing); ``listed``: the job as a listing
        had it, for what the scheduler no longer knows."""
        return StdioPaths(None, None, f"the {self.name} scheduler names no files for job {job_id}")

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
