"""The one facade the UI and the CLI use: submit, follow, compare, cancel, retry, verify.

It owns no state of its own beyond caches: the run directories are the truth, so the
app on a login node and the app on a laptop see the same experiments.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

from ddp_tui.preflight_report import PreflightSummary, summarize
from ddp_tui.remote.executor import (
    Batch,
    Executor,
    ExecutorError,
    FileRead,
    LocalExecutor,
    ReadResult,
)
from ddp_tui.remote.history import (
    LOST_GRACE_SEC,
    MissingJobs,
    end_record,
    lost_status,
    status_of_end,
)
from ddp_tui.remote.local import LocalScheduler
from ddp_tui.remote.runs import (
    METRICS_FILE,
    PREFLIGHT_FILE,
    PROGRESS_FILE,
    RUN_JSON,
    SCRIPT_FILE,
    RunInfo,
    RunRef,
    RunStore,
    RunStoreError,
)
from ddp_tui.remote.scheduler import (
    AccountingUnavailable,
    JobStatus,
    PartitionInfo,
    Scheduler,
    SchedulerError,
    SchedulerUnavailable,
)
from ddp_tui.remote.states import JobState
from ddp_tui.remote.tail import (
    LogReader,
    MetricsReader,
    ProgressReader,
)
from ddp_tui.remote.verification import (
    Check,
    accounting_check,
    completed_check,
    outcome_note,
    preflight_checks,
    training_checks,
)
from ddp_tui.sbatch_templates import render_preflight, render_training
from ddp_tui.spec import ExperimentSpec, FieldError, SpecError, validate, validate_for_cluster

if TYPE_CHECKING:
    import pandas as pd

    from ddp_tui.config import Profile

SACCT_FILE = "sacct.txt"
#: How long a submit whose answer was lost waits for the scheduler to be reachable again.
RECOVER_SUBMIT_SEC = 60.0


class ValidationFailed(Exception):
    """The spec has errors; ``errors`` name each field and what is allowed."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in self.errors))


@dataclass(frozen=True)
class Attempt:
    job_id: str
    scheduler: str
    submitted_at: str
    retry_of: str | None
    attempt: int


@dataclass(frozen=True)
class Progress:
    epoch: int
    step: int
    steps_per_epoch: int
    loss: float | None
    samples_per_sec: float | None


@dataclass(frozen=True)
class RunView:
    """One run as the jobs table and the detail summary show it."""

    run_id: str
    name: str
    run_dir: str
    group: str | None
    created_at: str
    spec: ExperimentSpec
    attempts: tuple[Attempt, ...]
    state: JobState
    reason: str = ""
    elapsed_sec: float = 0.0
    epochs_done: int = 0
    epochs_total: int = 0
    last_train_loss: float | None = None
    last_val_metric: float | None = None
    val_metric_name: str = "val_acc"
    throughput: float | None = None
    progress: Progress | None = None
    hosts: tuple[str, ...] = ()
    world_size: int | None = None
    backend: str | None = None
    rendezvous: str | None = None
    exit_code: int | None = None
    #: Where the trainer's own record and the job's state disagree, said plainly: e.g.
    #: run.json says completed while the job ended FAILED (the launcher's exit).
    note: str = ""
    kind: str = "train"  # or "preflight"
    preflight: PreflightSummary | None = None  # preflight runs only

    @property
    def job_id(self) -> str | None:
        return self.attempts[-1].job_id if self.attempts else None

    @property
    def state_label(self) -> str:
        """The state, marked "*" where :attr:`note` has something to say about it."""
        return self.state.value + (" *" if self.note else "")

    @property
    def epoch_label(self) -> str:
        """Epochs done of the total, or a preflight's result (it has no epochs)."""
        if self.preflight is not None:
            return self.preflight.label
        return f"{self.epochs_done}/{self.epochs_total}" if self.epochs_total else "-"


@dataclass(frozen=True)
class Snapshot:
    """Everything the screens render, from one refresh."""

    taken_at: float
    runs: tuple[RunView, ...]  # newest first
    location: str  # "local scheduler", "Slurm on this host", "user@host"
    scheduler_version: str
    connection: str  # "ok", "reconnecting", "controller unreachable", ...
    error: str | None = None
    scheduler_calls: int = 0
    detail: RunDetail | None = None  # the followed run's news, when refresh(follow=...)
    unread: int = 0  # older runs not read yet: refresh again soon to see them


@dataclass
class RunDetail:
    """New data for the open run since the last call (incremental)."""

    run_id: str
    out_lines: list[str] = field(default_factory=list)
    err_lines: list[str] = field(default_factory=list)
    out_reset: bool = False  # the log was truncated/rotated: clear the pane first
    err_reset: bool = False
    metrics: list[dict[str, float | None]] = field(default_factory=list)  # all rows so far
    progress: Progress | None = None
    run_json: dict[str, Any] | None = None
    accounting: str | None = None


class Cluster:
    """Facade over an Executor, a Scheduler and a RunStore.

    Not thread-safe: the app drives it from one worker at a time.
    """

    def __init__(
        self,
        executor: Executor,
        scheduler: Scheduler,
        store: RunStore,
        *,
        profile: Profile,
        location: str,
        lost_grace_sec: float = LOST_GRACE_SEC,
        listing_batch: int | None = None,
    ) -> None:
        self.executor = executor
        self.scheduler = scheduler
        self.store = store
        self.profile = profile
        self.location = location
        self._version: str | None = None
        self._partitions: list[PartitionInfo] | None = None
        self._status: dict[str, JobStatus] = {}  # job id -> latest polled status
        # job id -> (its end record, the status it gives this reader); the record is kept
        # to notice when a real end supersedes a LOST verdict.
        self._ended: dict[str, tuple[Mapping[str, Any], JobStatus | None]] = {}
        self._recorded: set[str] = set()  # job ids whose end this process appended
        self._missing = MissingJobs(lost_grace_sec)
        self._identity: str | None = None
        #: New run directories read per refresh (None: all). The app sets it so that its
        #: first table does not wait for thousands of finished runs to be read.
        self.listing_batch = listing_batch
        self._table: dict[str, _TableReaders] = {}
        self._followers: dict[str, _Follower] = {}
        self._connection = "ok"
        self._specs: dict[str, ExperimentSpec] = {}
        self._view_cache: dict[str, tuple[tuple[object, ...], RunView]] = {}
        self._infos: list[RunInfo] = []
        self._listed = False
        self._views: tuple[RunView, ...] = ()

    # -- construction -------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        profile: Profile | None = None,
        *,
        host: str | None = None,
        runs_root: str | None = None,
        local_state_dir: str | None = None,
        prompter: Any = None,
        state_callback: Callable[[str], None] | None = None,
        listing_batch: int | None = None,
    ) -> Cluster:
        """Connect as the profile says: SSH with a host, Slurm when sbatch is on PATH, else
        the embedded local scheduler."""
        from ddp_tui.config import get_profile

        profile = profile or get_profile(None)
        host = host or profile.host
        executor: Executor
        if host:
            from ddp_tui.remote.ssh import SSHExecutor

            ssh = SSHExecutor(host, prompter=prompter, state_callback=state_callback)
            try:
                # Now, so that a wrong alias, port or key says so (the Slurm probe below
                # would swallow it and report "no Slurm" instead).
                ssh.connect()
            except BaseException:
                ssh.close()
                raise
            executor = ssh
        else:
            executor = LocalExecutor()
        kind = profile.scheduler
        if kind == "auto":
            kind = "slurm" if _has_slurm(executor) else "local"
        scheduler: Scheduler
        if kind == "slurm":
            from ddp_tui.remote.slurm import SlurmScheduler

            scheduler = SlurmScheduler(executor)
            location = executor.description if host else "Slurm on this host"
        else:
            if host:
                executor.close()
                raise SchedulerError(
                    f"{host} has no Slurm (sbatch is not on its PATH); "
                    "the local scheduler runs on this machine only"
                )
            scheduler = LocalScheduler(local_state_dir, max_running=profile.local_max_concurrent)
            location = "local scheduler"
        root = runs_root or profile.runs_root
        store = RunStore(executor, executor.expand_home(root))
        return cls(
            executor,
            scheduler,
            store,
            profile=profile,
            location=location,
            listing_batch=listing_batch,
        )

    # -- compose ------------------------------------------------------------------------

    def default_spec(self) -> ExperimentSpec:
        """The profile's defaults; locally the job runs with this interpreter."""
        from ddp_tui.config import default_spec

        spec = default_spec(self.profile, scheduler=self.scheduler.name)
        if self.scheduler.name == "local" and spec.python == "python3":
            # The app's own interpreter has the trainer's torch when installed by `make run`.
            spec = spec.replace(python=sys.executable)
        return spec

    def partitions(self) -> list[PartitionInfo]:
        """sinfo's partitions, cached for the session (they rarely change)."""
        if self._partitions is None:
            self._partitions = self.scheduler.partitions()
        return self._partitions

    def scheduler_version(self) -> str:
        if self._version is None:
            try:
                self._version = self.scheduler.version()
            except (SchedulerError, ExecutorError):
                return "?"
        return self._version

    def validate(self, spec: ExperimentSpec) -> list[FieldError]:
        """Every error of the spec itself, then those against the cluster's partitions."""
        errors = validate(spec)
        if self.scheduler.name == "local" and spec.needs_slurm:
            errors.append(
                FieldError(
                    "nodes" if spec.nodes > 1 else "launcher",
                    "the local scheduler runs one-node torchrun jobs only; "
                    "use nodes = 1 and launcher = torchrun, or a Slurm profile",
                )
            )
        try:
            parts = self.partitions()
        except (SchedulerError, ExecutorError):
            return errors  # the cluster-aware pass needs sinfo; self-checks still apply
        if self.scheduler.name == "slurm":
            errors += validate_for_cluster(spec, parts)
        return errors

    def render_script(self, spec: ExperimentSpec, run_dir: str | None = None) -> str:
        """The exact job script (a dry run); ``run_dir`` defaults to a placeholder path."""
        return render_training(spec, run_dir or f"{self.store.root}/RUN_ID")

    # -- submit -------------------------------------------------------------------------

    def submit(self, spec: ExperimentSpec, *, group: str | None = None) -> RunView:
        """Validate, create the run directory atomically, submit, record the attempt."""
        return self._submit(spec, render_training, group or spec.group_key())

    def preflight(self, spec: ExperimentSpec) -> RunView:
        """A collective-test job of the same shape as ``spec``."""
        return self._submit(
            spec.replace(name=f"{spec.name}-preflight"), render_preflight, None, kind="preflight"
        )

    def submit_sweep(
        self, spec: ExperimentSpec, sizes: Sequence[int], *, dimension: str = "gpus"
    ) -> list[RunView]:
        """The same experiment at several sizes (``gpus`` per node or ``nodes``), one group."""
        if dimension not in ("gpus", "nodes"):
            raise ValidationFailed([FieldError("sweep", "dimension must be 'gpus' or 'nodes'")])
        if not sizes:
            raise ValidationFailed([FieldError("sweep", "give at least one size, e.g. 1,2,4,8")])
        field_name = "gpus_per_node" if dimension == "gpus" else "nodes"
        specs = [
            spec.replace(**{field_name: n, "name": f"{spec.name}-{dimension[0]}{n}"})
            for n in sorted(set(sizes))
        ]
        errors = [
            FieldError(f"sweep[{n}] {e.field}", e.message)
            for n, s in zip(sorted(set(sizes)), specs, strict=True)
            for e in self.validate(s)
        ]
        if errors:
            raise ValidationFailed(errors)  # nothing submitted unless every size is valid
        group = spec.group_key()
        return [self._submit(s, render_training, group, validated=True) for s in specs]

    def _submit(
        self,
        spec: ExperimentSpec,
        render: Callable[[ExperimentSpec, str], str],
        group: str | None,
        *,
        validated: bool = False,
        kind: str = "train",
    ) -> RunView:
        if not validated:
            errors = self.validate(spec)
            if errors:
                raise ValidationFailed(errors)
        ref = self.store.create_run(
            spec.to_dict(), spec.name, lambda d: render(spec, d), group, kind=kind
        )
        self._submit_attempt(ref, retry_of=None, attempt=1, recorded=())
        return self._view_of(ref.run_id)

    def _submit_attempt(
        self, ref: RunRef, *, retry_of: str | None, attempt: int, recorded: Sequence[str]
    ) -> str:
        """Submit the run's script once and record it in jobs.jsonl.

        If the answer is lost (the connection dropped, or sbatch timed out), sbatch may
        or may not have queued the job. Never guess and never submit twice: ask Slurm
        which jobs were submitted from this run directory, and record the new one, or
        report that nothing was queued.
        """
        try:
            job_id = self.scheduler.submit(ref.file(SCRIPT_FILE), ref.path)
        except SchedulerError as exc:
            if not isinstance(exc.__cause__, ExecutorError):
                raise  # sbatch answered: it refused the job
            job_id = self._recover_lost_submit(ref, recorded, exc)
        self.store.append_job(ref, _attempt_record(job_id, self.scheduler.name, retry_of, attempt))
        return job_id

    def _recover_lost_submit(
        self, ref: RunRef, recorded: Sequence[str], cause: SchedulerError
    ) -> str:
        deadline = time.monotonic() + RECOVER_SUBMIT_SEC
        delay = 1.0
        while True:
            try:
                found = [j for j in self.scheduler.jobs_in_dir(ref.path) if j not in recorded]
                break
            except (SchedulerError, ExecutorError) as exc:
                if time.monotonic() + delay > deadline:
                    raise SchedulerError(
                        f"the connection was lost while submitting {ref.run_id} and could not "
                        f"be checked since ({exc}); nothing was recorded. Check `squeue` "
                        "before retrying the run."
                    ) from cause
                time.sleep(delay)
                delay = min(delay * 2, 8.0)
        if not found:
            raise SchedulerError(
                f"the submission of {ref.run_id} did not reach the scheduler ({cause}); "
                "nothing was queued, and the run directory is kept: retry it (r)."
            ) from cause
        return found[0]

    # -- follow -------------------------------------------------------------------------

    def refresh(self, follow: str | None = None) -> Snapshot:
        """A snapshot of every run, and of the followed run's new output.

        One batch (one SSH round trip) carries it all: the listing of the run
        directories, at most one squeue and one sacct call, and the new bytes of the files
        shown. Scheduler or connection outages never raise: the snapshot carries the error
        and the runs keep their last known states.
        """
        if not self._listed:
            # At start-up the runs are not known yet: list them first (no scheduler call),
            # so that the poll below covers every run and none shows an unknown state.
            first = self._refresh_once(None, poll=False, max_new=self.listing_batch)
            if first.error is not None:
                return first
            # Poll what was just read; reading more runs can wait for the next refresh.
            return self._refresh_once(follow, max_new=0 if self.listing_batch else None)
        return self._refresh_once(follow, max_new=self.listing_batch)

    def _refresh_once(
        self, follow: str | None, *, poll: bool = True, max_new: int | None = None
    ) -> Snapshot:
        prev = self._infos
        polled = [
            job_id for info in prev if (job_id := _latest_job_id(info)) and not self._end_of(info)
        ]
        table = self._table_requests(prev)
        fpass = self._follow_begin(follow) if follow else None
        listing_reads = self.store.listing_reads()
        poll_cmds = self.scheduler.poll_commands(polled) if poll else []
        batch = Batch(
            commands=[self.store.listing_command(), *poll_cmds],
            reads=[*listing_reads, *(r.request() for r in table)],
        )
        if fpass is not None:
            batch.reads += fpass.requests()
        try:
            result = self.executor.run_batch(batch)
            infos = self.store.apply_listing(
                result.commands[0],
                result.reads[: len(listing_reads)],
                max_new=max_new,
            )
        except (ExecutorError, RunStoreError) as exc:
            self._connection = "reconnecting" if isinstance(exc, ExecutorError) else "ok"
            return self._snapshot(self._views, str(exc), 0)
        n = len(listing_reads) + len(table)
        for reader, res in zip(table, result.reads[len(listing_reads) : n], strict=True):
            reader.read_new(res)
        error: str | None = None
        self._listed = True
        try:
            statuses = self.scheduler.parse_poll(polled, result.commands[1:]) if poll else {}
            self._status.update(statuses)
            self._connection = "ok"
            if poll:  # a complete answer: what it did not mention, the scheduler does not know
                for job_id in self._missing.observe(polled, statuses):
                    self._status[job_id] = lost_status(job_id)
        except SchedulerUnavailable as exc:
            self._connection = "controller unreachable"
            error = exc.message
        except AccountingUnavailable as exc:
            self._status.update(exc.partial)  # squeue still answered
            self._connection = "ok"
            error = exc.message
        except SchedulerError as exc:
            error = exc.message
        self._infos = infos
        error = self._read_just_ended(infos) or error
        error = self._record_ends(infos) or error
        self._views = tuple(self._view(info) for info in reversed(infos))
        detail = None
        if fpass is not None:
            try:
                detail = self._follow_finish(fpass, result.reads[n:])
            except ExecutorError as exc:
                error = error or str(exc)
        return self._snapshot(self._views, error, len(poll_cmds), detail)

    def _end_of(self, info: RunInfo) -> JobStatus | None:
        """How the run's latest attempt ended, if that is known: recorded in jobs.jsonl
        (by anyone, any time), or just polled. None while it may still run."""
        job_id = _latest_job_id(info)
        if job_id is None:
            return None
        rec = info.ends.get(job_id)
        if rec is not None:
            cached = self._ended.get(job_id)
            if cached is None or cached[0] is not rec:
                lost = rec.get("state") == JobState.LOST.value
                scope = self._scheduler_identity() if lost else ""
                ended = status_of_end(rec, scope=scope) if scope is not None else None
                cached = self._ended[job_id] = (rec, ended)
            if cached[1] is not None:
                return cached[1]
        status = self._status.get(job_id)
        return status if status is not None and status.state.is_terminal else None

    def _status_of(self, info: RunInfo) -> JobStatus | None:
        """The latest attempt's status: its recorded end, else what the last poll said."""
        job_id = _latest_job_id(info)
        return (self._end_of(info) or self._status.get(job_id)) if job_id else None

    def _scheduler_identity(self) -> str | None:
        """The scheduler's identity (scopes LOST verdicts); asked once, when first needed."""
        if self._identity is None:
            try:
                self._identity = self.scheduler.identity()
            except (SchedulerError, ExecutorError):
                return None
        return self._identity

    def _record_ends(self, infos: Sequence[RunInfo]) -> str | None:
        """Append the end of every latest attempt that just ended to its jobs.jsonl, once.

        From then on no instance polls that attempt again. A LOST verdict is written only
        with the scheduler's identity, so that it binds no other cluster sharing the runs
        root; where that identity cannot be had, the verdict stays in this process.
        """
        for info in infos:
            job_id = _latest_job_id(info)
            if job_id is None or job_id in self._recorded:
                continue
            status = self._status.get(job_id)
            if status is None or not status.state.is_terminal:
                continue
            lost = status.state is JobState.LOST
            rec = info.ends.get(job_id)
            if rec is not None and (lost or rec.get("state") != JobState.LOST.value):
                continue  # already recorded (a LOST one gives way to a real end)
            scope = self._scheduler_identity() if lost else None
            if lost and scope is None:
                continue
            try:
                self.store.append_job(info.ref, end_record(status, scope=scope))
            except (ExecutorError, OSError) as exc:
                return f"could not record the end of job {job_id} in {info.run_id}: {exc}"
            self._recorded.add(job_id)
        return None

    def _read_just_ended(self, infos: Sequence[RunInfo]) -> str | None:
        """One more read of the table files of runs whose end this refresh just learned.

        The poll may answer after this refresh's reads (the local scheduler reads its
        state last), so those reads can predate the job's last rows: without this, a row
        would show COMPLETED with the final epoch missing until the next refresh. One
        extra batch, only in a refresh where jobs end.
        """
        ended = [
            info
            for info in infos
            if info.run_id in self._table
            and (final := self._end_of(info)) is not None
            and self._table[info.run_id].read_after_end != final.job_id
        ]
        readers = self._table_requests(ended)
        if not readers:
            return None
        try:
            result = self.executor.run_batch(Batch(reads=[r.request() for r in readers]))
        except ExecutorError as exc:
            for info in ended:  # read them at the next refresh instead
                self._table[info.run_id].read_after_end = None
            return str(exc)
        for reader, res in zip(readers, result.reads, strict=True):
            reader.read_new(res)
        return None

    def _table_requests(self, infos: Sequence[RunInfo]) -> list[_Feedable]:
        """Reads for the jobs table: metrics/progress of runs not yet known to be finished."""
        out: list[_Feedable] = []
        for info in infos:
            t = self._table.get(info.run_id)
            if t is None:
                t = self._table[info.run_id] = _TableReaders(info.ref, info.kind)
            final = self._end_of(info)
            if final is not None:
                if t.read_after_end == final.job_id:
                    continue  # ended, and its files were read once more since: done
                t.read_after_end = final.job_id  # this read catches the last rows
            out += t.readers()
        return out

    def _view_of(self, run_id: str) -> RunView:
        infos = self.store.list_runs()
        if self._listed:
            self._infos = infos  # the next refresh polls a run just submitted here
        for info in infos:
            if info.run_id == run_id:
                return self._view(info)
        raise KeyError(run_id)

    def _view(self, info: RunInfo) -> RunView:
        """The run's row; rebuilt only when something it shows has changed."""
        t = self._table.get(info.run_id)
        status = self._status_of(info)
        key = (
            len(info.jobs),
            status,
            len(t.metrics.rows) if t else -1,
            id(t.progress.latest) if t else 0,
            id(t.run_json) if t else 0,
            id(t.preflight) if t else 0,
        )
        cached = self._view_cache.get(info.run_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        view = self._build_view(info)
        self._view_cache[info.run_id] = (key, view)
        return view

    def _build_view(self, info: RunInfo) -> RunView:
        spec = self._specs.get(info.run_id)
        if spec is None:  # spec.json never changes: parse it once
            spec = self._specs[info.run_id] = _spec_of(info)
        attempts = tuple(_attempt(j) for j in info.jobs)
        job_id = attempts[-1].job_id if attempts else None
        status = self._status_of(info)
        state = status.state if status else JobState.UNKNOWN
        exit_code = status.exit_code if status else None
        t = self._table.get(info.run_id)
        rows = t.metrics.rows if t else []
        last = rows[-1] if rows else {}
        metric = "val_rmse" if spec.task == "regression" else "val_acc"
        prog = t.progress.latest if t else None
        rj = t.run_json if t else None
        return RunView(
            run_id=info.run_id,
            name=spec.name,
            run_dir=info.ref.path,
            group=info.group,
            created_at=info.created_at,
            spec=spec,
            attempts=attempts,
            state=state,
            reason=status.reason if status else ("" if job_id else "not submitted"),
            elapsed_sec=status.elapsed_sec if status else 0.0,
            epochs_done=len(rows),
            epochs_total=spec.epochs,
            last_train_loss=_num(last.get("train_loss")),
            last_val_metric=_num(last.get(metric)),
            val_metric_name=metric,
            throughput=_num(last.get("throughput_samples_per_sec")),
            progress=_progress(prog) if state.is_active else None,
            hosts=tuple(rj.get("hosts", ())) if rj else (),
            world_size=rj.get("world_size") if rj else None,
            backend=rj.get("backend") if rj else None,
            rendezvous=rj.get("rendezvous") if rj else None,
            exit_code=exit_code,
            note=outcome_note(state, exit_code, rj, job_id),
            kind=info.kind,
            preflight=summarize(t.preflight if t else None) if info.kind == "preflight" else None,
        )

    def _snapshot(
        self,
        views: tuple[RunView, ...],
        error: str | None,
        calls: int,
        detail: RunDetail | None = None,
    ) -> Snapshot:
        return Snapshot(
            detail=detail,
            taken_at=time.time(),
            runs=views,
            location=self.location,
            scheduler_version=self.scheduler_version(),
            connection=self._connection,
            error=error,
            scheduler_calls=calls,
            unread=self.store.unread,
        )

    def follow(self, run_id: str) -> RunDetail:
        """New log lines, metrics and progress of one run since its last follow()."""
        fpass = self._follow_begin(run_id)
        result = self.executor.run_batch(Batch(reads=fpass.requests()))
        return self._follow_finish(fpass, result.reads)

    def _follow_begin(self, run_id: str) -> _FollowPass:
        info = self._info(run_id)
        job_id = _latest_job_id(info)
        f = self._followers.get(run_id)
        fresh = f is None or f.job_id != job_id
        if f is None or fresh:
            f = self._followers[run_id] = _Follower(info.ref, job_id)
        detail = RunDetail(run_id, out_reset=fresh, err_reset=fresh)
        return _FollowPass(info, f, detail, (f.out.generation, f.err.generation))

    def _follow_finish(self, fpass: _FollowPass, reads: Sequence[ReadResult]) -> RunDetail:
        f, detail = fpass.follower, fpass.detail
        fpass.feed(reads)
        # A reader that restarted (first look at a big log, truncation) asks for one more
        # read at once, so opening a run shows its tail without waiting a whole tick.
        for _ in range(2):
            if not fpass.pending:
                break
            fpass.feed(self.executor.run_batch(Batch(reads=fpass.requests())).reads)
        detail.out_reset = detail.out_reset or f.out.generation != fpass.gens[0]
        detail.err_reset = detail.err_reset or f.err.generation != fpass.gens[1]
        detail.metrics = list(f.metrics.rows)
        detail.progress = _progress(f.progress.latest)
        job_id = f.job_id
        final = self._end_of(self._info(detail.run_id))
        if final is not None and final.job_id == job_id and job_id:
            if f.accounting is None:
                f.accounting = self._save_accounting(fpass.info.ref, job_id)
            detail.accounting = f.accounting
        return detail

    def _save_accounting(self, ref: RunRef, job_id: str) -> str:
        try:
            text = self.scheduler.accounting(job_id)
        except (SchedulerError, ExecutorError) as exc:
            return f"(accounting unavailable: {exc})"
        if text:
            self.store.write_text(ref, SACCT_FILE, text)
        return text

    def _info(self, run_id: str) -> RunInfo:
        for info in self._infos:
            if info.run_id == run_id:
                return info
        for info in self.store.list_runs():
            if info.run_id == run_id:
                return info
        raise KeyError(f"no run {run_id!r} under {self.store.root}")

    # -- control ------------------------------------------------------------------------

    def cancel(self, run_id: str) -> None:
        """Cancel the latest attempt of the run; the run directory stays as it is."""
        info = self._info(run_id)
        job_id = _latest_job_id(info)
        if job_id is None:
            raise SchedulerError(f"{run_id} was never submitted")
        self.scheduler.cancel(job_id)

    def retry(self, run_id: str) -> RunView:
        """Submit the run's script again as a new attempt; the trainer resumes from its
        checkpoint. Refused while the latest attempt may still run."""
        info = self._info(run_id)
        prev = _latest_job_id(info)
        if prev is not None:
            status = self._status_of(info)
            if status is None:
                status = self.scheduler.poll([prev]).get(prev)
            if status is not None and status.state.is_active:
                raise SchedulerError(
                    f"job {prev} is still {status.state.value}; cancel it (c) before retrying"
                )
        self._submit_attempt(
            info.ref,
            retry_of=prev,
            attempt=len(info.jobs) + 1,
            recorded=[str(j.get("job_id")) for j in info.jobs],
        )
        return self._view_of(run_id)

    def verify(self, run_id: str) -> list[Check]:
        """The checklist. A training run: completed, nodes, world size and backend, epochs,
        checkpoint, accounting saved. A preflight run: completed, every rank answered,
        bandwidth rows, nodes, accounting saved."""
        info = self._info(run_id)
        spec = _spec_of(info)
        job_id = _latest_job_id(info)
        status = self._end_of(info)  # a recorded end needs no scheduler call
        if status is None and job_id:
            status = self.scheduler.poll([job_id]).get(job_id)
        state = status.state if status else JobState.UNKNOWN
        exit_code = status.exit_code if status else None
        run_json = self.store.read_run_json(info.ref)
        checks = [completed_check(state, exit_code, run_json, job_id)]
        if info.kind == "preflight":
            doc = self.store.read_json(info.ref, PREFLIGHT_FILE)
            checks += preflight_checks(spec, state, summarize(doc))
        else:
            rows = self.store.read_metrics(info.ref)
            ckpt = self.executor.stat(info.ref.file("checkpoints/latest.pt"))
            epochs = [int(e) for r in rows if (e := r.get("epoch")) is not None]
            checks += training_checks(spec, state, run_json, epochs, ckpt.size if ckpt else None)
        if job_id and status is not None and status.state.is_terminal:
            self._save_accounting(info.ref, job_id)
        have = self.executor.stat(info.ref.file(SACCT_FILE)) is not None
        checks.append(accounting_check(bool(status and status.state.is_terminal), have))
        return checks

    # -- compare ------------------------------------------------------------------------

    def groups(self) -> dict[str, list[RunView]]:
        """Runs by comparison group (only groups with a name), newest group first."""
        out: dict[str, list[RunView]] = {}
        for v in self._views or tuple(self._view(i) for i in self.store.list_runs()):
            if v.group:
                out.setdefault(v.group, []).append(v)
        return out

    def compare(self, group: str) -> pd.DataFrame:
        """The scaling table of a group: speedup and efficiency against the smallest size."""
        from ddp_tui.results import load_run, scaling_table

        runs = [load_run(self.store, i) for i in self.store.list_runs() if i.group == group]
        return scaling_table(runs)

    def export_comparison(self, group: str) -> list[str]:
        from ddp_tui.results import export_comparison

        return export_comparison(self.store, group)

    def close(self) -> None:
        self.executor.close()


# -- helpers ----------------------------------------------------------------------------


class _Feedable(Protocol):
    @property
    def needs_reread(self) -> bool: ...

    def request(self) -> FileRead: ...
    def read_new(self, result: ReadResult) -> Any: ...


@dataclass
class _JsonFileReader:
    path: str
    data: dict[str, Any] | None = None
    needs_reread: bool = False

    def request(self) -> FileRead:
        return FileRead(self.path)

    def read_new(self, result: ReadResult) -> dict[str, Any] | None:
        self.data = _json_or_none(result) or self.data
        return self.data


class _TableReaders:
    """What the jobs table needs of one run, read incrementally: a training run's
    metrics, progress and run.json; a preflight run's preflight.json and run.json."""

    def __init__(self, ref: RunRef, kind: str) -> None:
        self.metrics = MetricsReader(ref.file(METRICS_FILE))
        self.progress = ProgressReader(ref.file(PROGRESS_FILE))
        self._run_json = _JsonFileReader(ref.file(RUN_JSON))
        self._preflight = _JsonFileReader(ref.file(PREFLIGHT_FILE))
        self._readers: list[_Feedable] = (
            [self._preflight, self._run_json]
            if kind == "preflight"
            else [self.metrics, self.progress, self._run_json]
        )
        #: The attempt whose end has been followed by one last read of the files.
        self.read_after_end: str | None = None

    @property
    def run_json(self) -> dict[str, Any] | None:
        return self._run_json.data

    @property
    def preflight(self) -> dict[str, Any] | None:
        return self._preflight.data

    def readers(self) -> list[_Feedable]:
        return self._readers


class _Follower:
    def __init__(self, ref: RunRef, job_id: str | None) -> None:
        self.job_id = job_id
        jid = job_id or "none"
        self.out = LogReader(ref.file(f"slurm-{jid}.out"))
        self.err = LogReader(ref.file(f"slurm-{jid}.err"))
        self.metrics = MetricsReader(ref.file(METRICS_FILE))
        self.progress = ProgressReader(ref.file(PROGRESS_FILE))
        self.accounting: str | None = None


# sbatch alone is not enough: a workstation may have the client without a cluster. A
# configless cluster has no slurm.conf, so then ask the controller once.
_SLURM_PROBE = (
    'command -v sbatch >/dev/null 2>&1 && { [ -n "${SLURM_CONF:-}" ] '
    "|| [ -e /etc/slurm/slurm.conf ] || scontrol ping >/dev/null 2>&1; }"
)


def _has_slurm(executor: Executor) -> bool:
    """Whether Slurm is usable on the executor's machine."""
    try:
        return executor.run(["sh", "-c", _SLURM_PROBE], timeout=15).ok
    except ExecutorError:
        return False


class _FollowPass:
    """One round of reads for the followed run (possibly spread over two batches)."""

    def __init__(
        self, info: RunInfo, follower: _Follower, detail: RunDetail, gens: tuple[int, int]
    ) -> None:
        self.info = info
        self.follower = follower
        self.detail = detail
        self.gens = gens
        f = follower
        self.pending: list[_Feedable] = [f.out, f.err, f.metrics, f.progress]
        self._run_json = FileRead(info.ref.file(RUN_JSON))

    def requests(self) -> list[FileRead]:
        return [r.request() for r in self.pending] + [self._run_json]

    def feed(self, reads: Sequence[ReadResult]) -> None:
        f, d = self.follower, self.detail
        for reader, res in zip(self.pending, reads, strict=False):
            new = reader.read_new(res)
            if reader is f.out:
                d.out_lines += new
            elif reader is f.err:
                d.err_lines += new
        if reads:
            d.run_json = _json_or_none(reads[-1]) or d.run_json
        self.pending = [r for r in (f.out, f.err, f.metrics, f.progress) if r.needs_reread]


def _latest_job_id(info: RunInfo) -> str | None:
    job = info.latest_job
    jid = job.get("job_id") if job else None
    return str(jid) if jid else None


def _attempt_record(job_id: str, scheduler: str, retry_of: str | None, n: int) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "scheduler": scheduler,
        "submitted_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "retry_of": retry_of,
        "attempt": n,
    }


def _attempt(doc: Mapping[str, Any]) -> Attempt:
    return Attempt(
        job_id=str(doc.get("job_id", "")),
        scheduler=str(doc.get("scheduler", "")),
        submitted_at=str(doc.get("submitted_at", "")),
        retry_of=str(doc["retry_of"]) if doc.get("retry_of") else None,
        attempt=int(doc.get("attempt", 0) or 0),
    )


def _spec_of(info: RunInfo) -> ExperimentSpec:
    try:
        return ExperimentSpec.from_dict(info.spec)
    except SpecError:
        # A spec.json written by another version: show what can be shown.
        return ExperimentSpec(name=str(info.spec.get("name", info.run_id)))


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _progress(doc: Mapping[str, Any] | None) -> Progress | None:
    if not doc:
        return None
    try:
        return Progress(
            epoch=int(doc.get("epoch", 0)),
            step=int(doc.get("step", 0)),
            steps_per_epoch=int(doc.get("steps_per_epoch", 0)),
            loss=_num(doc.get("loss")),
            samples_per_sec=_num(doc.get("samples_per_sec")),
        )
    except (TypeError, ValueError):
        return None


def _json_or_none(result: ReadResult) -> dict[str, Any] | None:
    if result.stat is None or not result.data:
        return None
    try:
        doc = json.loads(result.data.decode("utf-8", "replace"))
    except ValueError:
        return None  # being rewritten right now: keep the last good copy
    return doc if isinstance(doc, dict) else None
