"""Every job of the user: ddp-tui's runs as a refresh has them, and beside them the jobs ddp-tui
did not submit (``sbatch`` by hand, other tools, last week's), cancel by job id, and a job's
``.out``/``.err`` read by byte offset.

The listing costs one squeue and one sacct whatever the number of jobs
(:meth:`~ddp_tui.remote.backends.scheduler.Scheduler.user_jobs_commands`), in one batch (one
SSH round trip), and the runs' refresh beside it asks nothing more: it takes its jobs' states
from those two answers. sacct is asked for the whole window (a week by default) at first and every
:data:`FULL_EVERY_SEC`; in between only for what changed since the last ask (ended jobs do not
change), so a listing at the app's refresh pace does not load slurmdbd with a week of jobs
every few seconds.

A job is ddp-tui's, and stays a run, when its id is an attempt of a run or it runs from a
directory under the runs root (a run directory, a job array's directory: a submit still
recording its job id); every other job is foreign.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from ddp_tui.remote.backends.executor import Batch, Executor, ExecutorError
from ddp_tui.remote.backends.job_ids import is_job_id, job_id_sort_key
from ddp_tui.remote.backends.scheduler import JobStatus, Scheduler, SchedulerError
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.backends.user_jobs import DEFAULT_SINCE, Since, UserJob
from ddp_tui.remote.model.views import Snapshot
from ddp_tui.remote.store.tail import LogChunk, chunk_request, log_chunk

#: How often sacct is asked for the whole window rather than for what changed since.
FULL_EVERY_SEC = 300.0
#: How far before the last ask an incremental sacct reaches back: the clocks of this machine
#: and the cluster differ, and accounting lags the controller.
MARGIN_SEC = 120
#: Bytes of a log a read returns by default (its tail, or what is new).
LOG_BYTES = 64 * 1024


class Refresh(Protocol):
    """The runs service's refresh (:meth:`RunsService.refresh`)."""

    def __call__(
        self, follow: str | None = None, *, answered: Mapping[str, JobStatus] | None = None
    ) -> Snapshot: ...


@dataclass(frozen=True)
class AllJobs:
    """A refresh's runs, and the user's other jobs beside them."""

    snapshot: Snapshot
    #: The jobs that are not ddp-tui's, newest first (an array's tasks by index).
    foreign: tuple[UserJob, ...]
    since: Since
    #: What went wrong listing the foreign jobs (the refresh's own error is the snapshot's).
    error: str | None = None
    #: The scheduler commands the foreign listing ran (on Slurm one squeue and one sacct).
    scheduler_calls: int = 0


@dataclass(frozen=True)
class JobLog:
    """Part of one job's ``.out`` or ``.err``: where it is, and whole lines of it."""

    job_id: str
    stream: str  # "out" or "err"
    #: None where no path is known: :attr:`source` says why.
    path: str | None
    #: Where the path comes from, in words ("squeue", "scontrol show job", ...).
    source: str
    chunk: LogChunk | None = None

    @property
    def lines(self) -> tuple[str, ...]:
        return self.chunk.lines if self.chunk is not None else ()

    @property
    def offset(self) -> int:
        """Where the next read of new lines starts."""
        return self.chunk.offset if self.chunk is not None else 0


class _Accounting:
    """The window's ended jobs between listings: a full sacct now and then, increments
    between."""

    def __init__(self) -> None:
        self.since: Since | None = None
        self.rows: dict[str, UserJob] = {}
        self.full_at = -1e18
        self.asked_at = -1e18

    def window(self, since: Since, now: float) -> tuple[Since, bool]:
        """What to ask sacct for now, and whether that is the whole window."""
        back = int(now - self.asked_at) + MARGIN_SEC
        full = (
            since != self.since
            or now - self.full_at > FULL_EVERY_SEC
            or (since.seconds is not None and back >= since.seconds)
        )
        return (since, True) if full else (Since(seconds=back, text=f"{back}s"), False)

    def take(self, since: Since, rows: Iterable[UserJob], *, full: bool, now: float) -> None:
        if full:
            self.rows = {}
            self.since = since
            self.full_at = now
        self.rows.update((j.job_id, j) for j in rows)
        self.asked_at = now


class UserJobsService:
    """The user's every job on one cluster. Not thread-safe, like the facade."""

    def __init__(
        self,
        executor: Executor,
        scheduler: Scheduler,
        *,
        runs_root: str,
        refresh: Refresh,
        version: Callable[[], str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.executor = executor
        self.scheduler = scheduler
        self.runs_root = runs_root.rstrip("/")
        self._refresh = refresh
        self._version = version
        self._clock = clock
        self._accounting = _Accounting()
        #: The last listing's foreign jobs by id (a log opened from the list finds its paths).
        self._last: dict[str, UserJob] = {}

    # -- the listing ----------------------------------------------------------------------

    def user_jobs(self, since: Since | None = None, *, follow: str | None = None) -> AllJobs:
        """Every job of the user: queued, running, and ended since ``since`` (a week), and a
        refresh of the runs (``follow``: the open run, as :meth:`RunsService.refresh`).

        The listing's one squeue and one sacct go first, and the refresh takes its runs'
        states from them instead of asking again: the whole costs one squeue and one sacct
        (one more poll only for a run's job they do not name yet).
        """
        since = since or DEFAULT_SINCE
        now = self._clock()
        window, full = self._accounting.window(since, now)
        try:
            commands = self.scheduler.user_jobs_commands(window, version=self._version())
            # One round trip for both; a scheduler that reads local state needs none.
            results = (
                self.executor.run_batch(Batch(commands=list(commands))).commands if commands else []
            )
            answer = self.scheduler.parse_user_jobs(window, results)
        except (SchedulerError, ExecutorError) as exc:
            snapshot = self._refresh(follow)
            ours = _attempt_ids(snapshot)
            rows = self._foreign(self._last.values(), ours)  # the last known, kept
            return AllJobs(snapshot, rows, since, str(exc), 0)
        if answer.warning is None:
            self._accounting.take(since, answer.accounted, full=full, now=now)
        # The queue is current; accounting lags it (a job it still calls RUNNING may be gone).
        by_id = {**self._accounting.rows, **{j.job_id: j for j in answer.queued}}
        # Without the accounting (or with a scheduler read in place), the refresh asks itself.
        answered = (
            {k: job_status(j) for k, j in by_id.items()}
            if commands and not answer.warning
            else None
        )
        snapshot = self._refresh(follow, answered=answered)
        rows = self._foreign(by_id.values(), _attempt_ids(snapshot))
        self._last = {j.job_id: j for j in rows}
        return AllJobs(snapshot, rows, since, answer.warning, len(commands))

    def _foreign(self, jobs: Iterable[UserJob], ours: set[str]) -> tuple[UserJob, ...]:
        rows = [j for j in jobs if j.job_id not in ours and not self._under_root(j.work_dir)]
        # Newest first by job number; an array's tasks in index order.
        rows.sort(key=lambda j: job_id_sort_key(j.job_id)[2])
        rows.sort(key=lambda j: job_id_sort_key(j.job_id)[1], reverse=True)
        return tuple(rows)

    def _under_root(self, work_dir: str) -> bool:
        if not work_dir or not self.runs_root:  # a runs root of "/" would hold every job
            return False
        return (work_dir.rstrip("/") + "/").startswith(self.runs_root + "/")

    # -- one job --------------------------------------------------------------------------

    def cancel_job(self, job_id: str) -> None:
        """Cancel one job of the user, or one array task (``1234_5``), by its id: any job
        the scheduler lets the user cancel, ddp-tui's or not."""
        self.scheduler.cancel(_require_job_id(job_id))

    def job_script(self, job_id: str) -> str:
        """The job's batch script, as its scheduler keeps it (asked on demand)."""
        return self.scheduler.batch_script(_require_job_id(job_id))

    def job_state(self, job_id: str) -> JobState:
        """The job's state now (one squeue and one sacct for that job): UNKNOWN where the
        scheduler does not know it (any more)."""
        status = self.scheduler.poll([_require_job_id(job_id)]).get(job_id)
        return status.state if status is not None else JobState.UNKNOWN

    def job_log(
        self,
        job_id: str,
        *,
        err: bool = False,
        offset: int | None = None,
        max_bytes: int = LOG_BYTES,
    ) -> JobLog:
        """The job's ``.out`` (``err``: ``.err``): its last ``max_bytes`` as whole lines
        (``offset`` None), or the whole lines after ``offset`` (at most ``max_bytes``; the
        returned :attr:`JobLog.offset` is where the next read starts).

        The path is the one the last listing worked out, else the scheduler's for that one
        job (``scontrol show job``, while the controller still knows it), else, for a
        Slurm batch job, the name slurmstepd gives when sbatch had no ``-o``.
        """
        _require_job_id(job_id)
        stream = "err" if err else "out"
        path, source = self._log_path(job_id, err)
        if path is None:
            return JobLog(job_id, stream, None, source)
        chunk = self._read(path, offset, max_bytes)
        if chunk.restarted:  # cut or replaced below the offset: its tail again
            chunk = self._read(path, None, max_bytes)
        return JobLog(job_id, stream, path, source, chunk)

    def _read(self, path: str, offset: int | None, max_bytes: int) -> LogChunk:
        result = self.executor.run_batch(Batch(reads=[chunk_request(path, offset, max_bytes)]))
        return log_chunk(result.reads[0])

    def _log_path(self, job_id: str, err: bool) -> tuple[str | None, str]:
        job = self._last.get(job_id)
        if job is not None and (listed := job.stderr if err else job.stdout) is not None:
            return listed, f"the listing's {job.source}"
        paths = self.scheduler.job_stdio(job_id, job)
        return (paths.err if err else paths.out), paths.source


def _attempt_ids(snapshot: Snapshot) -> set[str]:
    return {a.job_id for v in snapshot.runs for a in v.attempts}


def job_status(job: UserJob) -> JobStatus:
    """A listed job as the runs' poll has it."""
    return JobStatus(
        job_id=job.job_id,
        state=job.state,
        raw_state=job.raw_state,
        reason=job.reason,
        nodes=job.nodes,
        node_list=job.node_list,
        elapsed_sec=float(job.elapsed_sec),
        exit_code=job.exit_code,
        start=job.start_time,
        end=job.end_time,
        name=job.name,
        partition=job.partition,
    )


def _require_job_id(job_id: str) -> str:
    if not is_job_id(job_id):
        raise SchedulerError(
            f"not a job id: {job_id!r} (give one job, 1234, or one array task, 1234_5)"
        )
    return job_id
