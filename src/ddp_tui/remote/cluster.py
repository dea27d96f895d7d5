"""The one facade the UI and the CLI use: plan, submit, follow, compare, cancel, retry, verify.

It owns no state of its own beyond caches: the run directories are the truth, so the
app on a login node and the app on a laptop see the same experiments. What it shows is
the read model of :mod:`ddp_tui.remote.model.views`, built by
:mod:`ddp_tui.remote.model.view_building`
from the files read by :mod:`ddp_tui.remote.observe.followers` and the states kept by
:mod:`ddp_tui.remote.observe.attempt_states` (see docs/architecture.md).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ddp_tui.diagnosis import Diagnosis
from ddp_tui.remote.backends.executor import (
    Batch,
    CommandResult,
    Executor,
    ExecutorError,
    ReadResult,
)
from ddp_tui.remote.backends.scheduler import (
    AccountingUnavailable,
    PartitionInfo,
    Scheduler,
    SchedulerError,
    SchedulerUnavailable,
)
from ddp_tui.remote.connect import connect
from ddp_tui.remote.groups.group_control import GroupRetry, cancel_group, retry_group
from ddp_tui.remote.live.shells import ShellPlan, job_status, plan_shell
from ddp_tui.remote.live.stacks import (
    DEFAULT_TIMEOUT_SEC,
    SavedStacks,
    StacksTaken,
    last_saved,
    stacks_before_cancel,
    take_stacks,
)
from ddp_tui.remote.model.events import NotifyEvent
from ddp_tui.remote.model.verification import RunFiles, damage_check, verify_run
from ddp_tui.remote.model.view_building import (
    latest_job_id,
    spec_of,
)
from ddp_tui.remote.model.views import Check, RunDetail, RunView, Snapshot
from ddp_tui.remote.observe.attempt_states import AttemptStates
from ddp_tui.remote.observe.diagnosing import (
    STALL_FILE,
    DiagnosisReads,
    diagnose,
    stall_note,
)
from ddp_tui.remote.observe.followers import FollowPass, MetricsCache, TelemetryCache
from ddp_tui.remote.observe.following import Following
from ddp_tui.remote.observe.notify import Notifier
from ddp_tui.remote.observe.run_table import DIAGNOSES_PER_REFRESH, RunTable
from ddp_tui.remote.store.history import LOST_GRACE_SEC
from ddp_tui.remote.store.run_jobs import IntentReconciler, cancel_run
from ddp_tui.remote.store.runs import (
    CHECKPOINT_FILE,
    CHECKPOINTS_DIR,
    PREFLIGHT_FILE,
    SACCT_FILE,
    RunInfo,
    RunRef,
    RunStore,
    RunStoreError,
    new_run_id,
    spec_nodes,
)
from ddp_tui.remote.store.space import free_of, free_space_command
from ddp_tui.remote.submit.array_submit import submit_sweep
from ddp_tui.remote.submit.plan import (
    SubmitPlan,
    make_plan,
    plan_spec,
    spec_errors,
)
from ddp_tui.remote.submit.prequeue import prequeue_errors
from ddp_tui.remote.submit.scripts import prepare_script
from ddp_tui.remote.submit.submission import RECOVER_SUBMIT_SEC, create_planned_run, submit_attempt
from ddp_tui.remote.submit.sweep_plan import SweepPlan, plan_sweep
from ddp_tui.resources import ResourceSummary
from ddp_tui.spec import ExperimentSpec, FieldError, Sweep

if TYPE_CHECKING:
    import pandas as pd

    from ddp_tui.advisor import Advice
    from ddp_tui.config import Profile
    from ddp_tui.outcomes import Outcomes, RunDiff


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
        self.states = AttemptStates(scheduler, store, lost_grace_sec=lost_grace_sec)
        self.intents = IntentReconciler(scheduler, store)
        #: How long a submit whose answer was lost looks for its job before giving up.
        self.recover_submit_sec = RECOVER_SUBMIT_SEC
        self._version: str | None = None
        self._partitions: list[PartitionInfo] | None = None
        #: New run directories read per refresh (None: all). The app sets it so that its
        #: first table does not wait for thousands of finished runs to be read.
        self.listing_batch = listing_batch
        self.table = RunTable(self.states, stall_after_sec=profile.stall_after_min * 60)
        if listing_batch:
            self.table.diagnoses_per_refresh = DIAGNOSES_PER_REFRESH
        self._stall_cancelled: set[str] = set()  # job ids cancelled here for a stall
        #: Claims each run end, stall and finished group once across processes.
        self.notifier = Notifier(executor, store.root)
        self.following = Following(executor, scheduler, store, self.states, self.table)
        #: Runs' telemetry kept read for Compare and `resources` (new bytes only, each call).
        self.telemetry = TelemetryCache(executor)
        #: The compared group's metrics rows, kept read (new rows only, each compare).
        self.compare_metrics = MetricsCache(executor)
        self._connection = "ok"
        self._infos: list[RunInfo] = []
        self._listed = False
        self._views: tuple[RunView, ...] = ()

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
        """Connect as the profile says (see :func:`ddp_tui.remote.connect.connect`)."""
        from ddp_tui.config import get_profile

        profile = profile or get_profile(None)
        c = connect(
            profile,
            host=host,
            runs_root=runs_root,
            local_state_dir=local_state_dir,
            prompter=prompter,
            state_callback=state_callback,
        )
        return cls(
            c.executor,
            c.scheduler,
            c.store,
            profile=profile,
            location=c.location,
            listing_batch=listing_batch,
        )

    # -- compose ------------------------------------------------------------------------

    @property
    def scheduler_name(self) -> str:
        return self.scheduler.name

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
        """The errors a plan of ``spec`` would have (none: it can be submitted)."""
        return list(self.plan(spec).errors)

    def plan(
        self, spec: ExperimentSpec, *, kind: str = "train", group: str | None = None
    ) -> SubmitPlan:
        """What submitting ``spec`` will do: the spec checked once (itself, then against
        the cluster), a run id allocated, and the job script rendered once for that run's
        directory. ``kind="preflight"`` plans a collective test of the same shape."""
        spec, group = plan_spec(spec, kind, group)
        warnings: list[str] = []
        try:
            parts: list[PartitionInfo] | None = self.partitions()
        except (SchedulerError, ExecutorError) as exc:
            parts = None  # the cluster-aware pass needs sinfo; self-checks still apply
            if self.scheduler.name == "slurm":
                # Submitting stays possible (sbatch has the last word), but the user should
                # know the partition, GPU and time-limit checks were skipped.
                warnings.append(
                    "partition, GPUs per node and time limit were not checked against the "
                    f"cluster: sinfo did not answer ({' '.join(str(exc).split())})"
                )
        errors = spec_errors(spec, self.scheduler.name, parts)
        # The job's python and data root, on the cluster (not when sinfo failed: then this
        # may be a preview of a Slurm script where there is no Slurm).
        if parts is not None:
            errors += prequeue_errors(
                self.executor, spec, self.profile, where=self.location, kind=kind, known=errors
            )
        snapshot = None
        # A user's script is found (and its project snapshotted) once its own fields are
        # right; the trainer's preflight of the same shape needs neither.
        script_fields = {"script", "project_dir", "code_mode", "snapshot_max_mb"}
        wrong = {e.field for e in errors}
        if kind == "train" and spec.entry == "script" and not wrong & script_fields:
            prep = prepare_script(spec, self.executor)
            spec, snapshot = prep.spec, prep.snapshot
            errors += prep.errors
            warnings += prep.warnings
        ref = self.store.ref(new_run_id(spec.name))
        return make_plan(
            spec,
            kind,
            group,
            errors,
            run_id=ref.run_id,
            run_dir=ref.path,
            warnings=warnings,
            snapshot=snapshot,
        )

    def plan_sweep(
        self, spec: ExperimentSpec, sweep: Sweep, *, max_concurrent: int | None = None
    ) -> SweepPlan:
        """Every member of ``sweep`` over ``spec`` planned as a single submit, one group,
        and the job arrays they go in (:mod:`ddp_tui.remote.submit.sweep_plan`)."""
        return plan_sweep(
            lambda member, group: self.plan(member, group=group),
            spec,
            sweep,
            scheduler=self.scheduler.name,
            runs_root=self.store.root,
            max_concurrent=max_concurrent,
        )

    # -- submit -------------------------------------------------------------------------

    def submit(self, plan: SubmitPlan) -> RunView:
        """Create the plan's run directory with exactly its script, submit, record the
        attempt. Refused (:class:`ValidationFailed`) when the plan has errors or its run
        directory exists already (the plan was submitted before)."""
        ref = create_planned_run(self.store, plan)
        self._submit_attempt(ref, seen=0, fresh=True)
        return self._view_of(ref.run_id)

    def submit_sweep(self, plan: SweepPlan) -> list[RunView]:
        """Submit a sweep: each job array with one submit, every other member alone
        (:mod:`ddp_tui.remote.submit.array_submit`); nothing unless every member is ok."""
        run_ids = submit_sweep(
            self.scheduler,
            self.store,
            plan,
            lambda i: self.submit(plan.plans[i]).run_id,
            recover_sec=self.recover_submit_sec,
        )
        return self._views_of(run_ids)

    def _submit_attempt(self, ref: RunRef, *, seen: int | None, fresh: bool = False) -> str:
        return submit_attempt(
            self.scheduler,
            self.store,
            ref,
            seen=seen,
            fresh=fresh,
            recover_sec=self.recover_submit_sec,
        )

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
        states = self.states
        polled = [
            job_id
            for info in self._infos
            if (job_id := latest_job_id(info)) and not states.end_of(info)
        ]
        table = self.table.requests(self._infos)
        fpass = self.following.begin(self._info(follow)) if follow else None
        listing_reads = self.store.listing_reads()
        poll_cmds = self.scheduler.poll_commands(polled) if poll else []
        space_cmds = self._space_commands()
        batch = Batch(
            commands=[self.store.listing_command(), *poll_cmds, *space_cmds],
            reads=[*listing_reads, *(r.request() for r in table)],
        )
        if fpass is not None:
            batch.reads += fpass.requests()
        try:
            result = self.executor.run_batch(batch)
            infos = self.store.apply_listing(
                result.commands[0], result.reads[: len(listing_reads)], max_new=max_new
            )
        except (ExecutorError, RunStoreError) as exc:
            self._connection = "reconnecting" if isinstance(exc, ExecutorError) else "ok"
            return self._snapshot(self._views, str(exc), 0)
        n = len(listing_reads) + len(table)
        for reader, res in zip(table, result.reads[len(listing_reads) : n], strict=True):
            reader.read_new(res)
        polls = result.commands[1 : 1 + len(poll_cmds)]
        if space_cmds:
            self._note_space(result.commands[-1])
        error: str | None = None
        self._listed = True
        try:
            statuses = self.scheduler.parse_poll(polled, polls) if poll else {}
            self._connection = "ok"
            if poll:  # a complete answer: what it did not mention, the scheduler does not know
                states.observe_complete_poll(polled, statuses)
        except SchedulerUnavailable as exc:
            self._connection = "controller unreachable"
            error = exc.message
        except AccountingUnavailable as exc:
            states.update(exc.partial)  # squeue still answered
            self._connection = "ok"
            error = exc.message
        except SchedulerError as exc:
            error = exc.message
        self._infos = infos
        error = self._reconcile_intents(infos) or error
        error = self._read_just_ended(infos) or error
        error = states.record_ends(infos, self.table.end_extra) or error
        self._views = tuple(self.table.view(info) for info in reversed(infos))
        if self.profile.cancel_stalled:
            error = self._cancel_stalled(self._views) or error
        events: tuple[NotifyEvent, ...] = ()
        if poll:
            events, notify_error = self.notifier.after_refresh(
                infos,
                self._views,
                states.just_recorded,
                scope=states.identity,
                complete=not self.store.unread,
            )
            error = error or notify_error
        detail = None
        if fpass is not None:
            try:
                detail = self._follow_finish(fpass, result.reads[n:])
            except ExecutorError as exc:
                error = error or str(exc)
        return self._snapshot(self._views, error, len(poll_cmds), detail, events)

    def take_events(self, *, final: bool = False) -> list[NotifyEvent]:
        """The events this process claimed since the last call (the CLI delivers them);
        ``final``: claim the ends still waiting for their diagnosis first (before exit)."""
        if final:
            self.notifier.flush()
        return self.notifier.take()

    def _reconcile_intents(self, infos: Sequence[RunInfo]) -> str | None:
        """Adopt the jobs of submitters that died between their intent and their job id
        (the next listing shows them); an error only says why it could not be done now."""
        return self.intents.reconcile_listed(infos)

    def _read_just_ended(self, infos: Sequence[RunInfo]) -> str | None:
        """One more read of the table files of runs whose end this refresh just learned.

        The poll may answer after this refresh's reads (the local scheduler reads its
        state last), so those reads can predate the job's last rows: without this, a row
        would show COMPLETED with the final epoch missing until the next refresh. One
        extra batch, only in a refresh where jobs end.
        """
        ended = self.table.just_ended(infos)
        readers = self.table.requests(ended)
        if not readers:
            return None
        space_cmds = self._space_commands()
        try:
            result = self.executor.run_batch(
                Batch(commands=space_cmds, reads=[r.request() for r in readers])
            )
        except ExecutorError as exc:
            self.table.unread_end(ended)  # read them at the next refresh instead
            return str(exc)
        for reader, res in zip(readers, result.reads, strict=True):
            reader.read_new(res)
        if space_cmds:
            self._note_space(result.commands[-1])
        return None

    def _space_commands(self) -> list[Sequence[str]]:
        """The runs root's free-space command, where a diagnosis is being read: a full disk
        keeps a job's own last words out of its logs (rules_disk.disk_full_by_space)."""
        return [free_space_command(self.store.root)] if self.table.diagnosing else []

    def _note_space(self, answer: CommandResult) -> None:
        self.table.runs_root_free = free_of(answer)
        self.table.runs_root = self.store.root

    def _cancel_stalled(self, views: Sequence[RunView]) -> str | None:
        """Cancel each stalled job once, leaving a note that says why (the profile's
        ``cancel_stalled``; off by default: a slow epoch is not a hang)."""
        for v in views:
            job_id = v.job_id
            if v.stall is None or job_id is None or job_id in self._stall_cancelled:
                continue
            self._stall_cancelled.add(job_id)
            ref = RunRef(v.run_id, v.run_dir)
            stuck = stacks_before_cancel(self.executor, self.scheduler, ref, job_id)
            try:
                note = stall_note(job_id, v.stall, stuck=stuck)
                self.executor.write_atomic(ref.file(STALL_FILE), note)
                self.scheduler.cancel(job_id)
            except (ExecutorError, SchedulerError) as exc:
                return f"could not cancel stalled job {job_id}: {exc}"
        return None

    def _view_of(self, run_id: str) -> RunView:
        return self._views_of([run_id])[0]

    def _views_of(self, run_ids: Sequence[str]) -> list[RunView]:
        """The rows of ``run_ids`` from one listing (a sweep's members: not one each)."""
        infos = self.store.list_runs()
        if self._listed:
            self._infos = infos  # the next refresh polls a run just submitted here
        by_id = {info.run_id: info for info in infos}
        missing = [r for r in run_ids if r not in by_id]
        if missing:
            raise KeyError(missing[0])
        return [self.table.view(by_id[r]) for r in run_ids]

    def _snapshot(
        self,
        views: tuple[RunView, ...],
        error: str | None,
        calls: int,
        detail: RunDetail | None = None,
        events: tuple[NotifyEvent, ...] = (),
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
            events=events,
        )

    def follow(self, run_id: str) -> RunDetail:
        """New log lines, metrics and progress of one run since its last follow()."""
        fpass = self.following.begin(self._info(run_id))
        result = self.executor.run_batch(Batch(reads=fpass.requests()))
        return self._follow_finish(fpass, result.reads)

    def restart_follow(self, run_id: str) -> None:
        """The next follow of ``run_id`` starts over, as for a run never followed (for a
        screen that newly shows it: it has none of the lines sent before)."""
        self.following.restart(run_id)

    def _follow_finish(self, fpass: FollowPass, reads: Sequence[ReadResult]) -> RunDetail:
        run_id = fpass.detail.run_id
        view = next((v for v in self._views if v.run_id == run_id), None)
        return self.following.finish(fpass, reads, self._info(run_id), view)

    def _info(self, run_id: str) -> RunInfo:
        for info in self._infos:
            if info.run_id == run_id:
                return info
        for info in self.store.list_runs():
            if info.run_id == run_id:
                return info
        raise KeyError(f"no run {run_id!r} under {self.store.root}")

    # -- diagnosis ----------------------------------------------------------------------

    def diagnose(self, run_id: str) -> Diagnosis | None:
        """Why the run's latest attempt ended as it did, from its logs' tails read now.

        None while it may still run, and where no rule recognises what it left (never a
        guess). One batch: the tails, run.json, the checkpoint's stat and, for an NCCL run,
        its ranks' flight recorder dumps (docs/flight-recorder.md).
        """
        info = self._info(run_id)
        status = self.states.end_of(info)
        job_id = latest_job_id(info)
        if status is None and job_id:
            status = self.scheduler.poll([job_id]).get(job_id)
        if status is None or not status.state.is_terminal or info.kind != "train":
            return None
        reads = DiagnosisReads(info.ref, status.job_id, spec=self.table.spec_of(info))
        readers = reads.readers()
        batch = Batch(
            commands=[free_space_command(self.store.root)], reads=[r.request() for r in readers]
        )
        result = self.executor.run_batch(batch)
        for reader, res in zip(readers, result.reads, strict=True):
            reader.read_new(res)
        reads.runs_root_free, reads.runs_root = free_of(result.commands[0]), self.store.root
        return diagnose(self.table.spec_of(info), status, reads)

    def estimated_start(self, run_id: str) -> str:
        """When the scheduler expects the pending job to start, in its words ("" when it
        does not say). Asked only on demand: Slurm runs a backfill simulation for it."""
        job_id = latest_job_id(self._info(run_id))
        return self.scheduler.estimated_start(job_id) if job_id else ""

    def resources(self, run_id: str) -> ResourceSummary:
        """The run's resource telemetry summarised, from its files as they are now (one
        batch of reads; an empty summary where it wrote none)."""
        info = self._info(run_id)
        return self.telemetry.readers(info.ref, spec_nodes(info.spec)).accumulator.summary()

    # -- a shell where the job runs ----------------------------------------------------

    def shell_command(self, run_id: str, node: str | None = None) -> ShellPlan:
        """Where a shell beside the run's job opens (its first node, or ``node``) and with
        which command; :class:`ShellUnavailable` says why none can (see
        :mod:`ddp_tui.remote.live.shells`). One poll of the job."""
        info = self._info(run_id)
        status = job_status(info, self.states, self.scheduler)
        via = self.executor.description if self.executor.description != "local" else None
        return plan_shell(info, status, self.scheduler, node=node, via=via)

    def open_shell(self, plan: ShellPlan) -> int:
        """Run ``plan``'s shell on the user's terminal until it exits; its exit status. The
        caller frees the terminal first (the app suspends) and calls from the main thread."""
        return self.executor.interactive(plan.argv, cwd=plan.cwd)

    # -- every rank's stack --------------------------------------------------------------

    def stacks(
        self, run_id: str, *, timeout: float = DEFAULT_TIMEOUT_SEC, py_spy: str = "auto"
    ) -> StacksTaken:
        """Every rank's Python stack of the run's running job, grouped, with which ranks
        are behind; saved under the run's ``stacks/`` (:mod:`ddp_tui.remote.live.stacks`)."""
        info = self._info(run_id)
        return take_stacks(
            self.executor,
            self.scheduler,
            info.ref,
            latest_job_id(info),
            timeout=timeout,
            py_spy=py_spy,
        )

    def last_stacks(self, run_id: str) -> SavedStacks | None:
        """The newest stacks saved in the run, if any were taken."""
        return last_saved(self.executor, self._info(run_id).ref)

    # -- control ------------------------------------------------------------------------

    def cancel(self, run_id: str) -> list[str]:
        """Cancel every live job of the run (recorded in ``jobs.jsonl`` or not); returns
        their ids. The run directory stays as it is."""
        return cancel_run(self.scheduler, self.store, self._info(run_id).ref)

    def retry(self, run_id: str, *, seen: int | None = None) -> RunView:
        """Submit the run's script again as a new attempt; the trainer resumes from its
        checkpoint. ``seen``: how many attempts the caller saw (default: as last listed);
        refused (:class:`AttemptRefused`, naming the other job) when another instance
        submitted since, or while any job of the run is alive."""
        info = self._info(run_id)
        self._submit_attempt(info.ref, seen=len(info.jobs) if seen is None else seen)
        return self._view_of(run_id)

    def cancel_group(self, group: str) -> list[str]:
        """Cancel every live job of the group's runs: a job array with one call
        (:mod:`ddp_tui.remote.groups.group_control`); returns the ids cancelled."""
        infos = [i for i in self.store.list_runs() if i.group == group]
        return cancel_group(self.scheduler, infos)

    def retry_group(self, group: str) -> GroupRetry:
        """Retry each run of the group that ended without finishing (failed, cancelled,
        timed out, ...), each as its own new attempt; the others are left as they are."""
        views = [v for v in self.refresh().runs if v.group == group]
        return retry_group([(v.run_id, v.state) for v in views], self.retry)

    def verify(self, run_id: str) -> list[Check]:
        """The checklist (:func:`ddp_tui.remote.model.verification.verify_run`) over the run's
        files as they are now; an ended job's accounting is saved first."""
        info = self._info(run_id)
        job_id = latest_job_id(info)
        status = self.states.end_of(info)  # a recorded end needs no scheduler call
        if status is None and job_id:
            status = self.scheduler.poll([job_id]).get(job_id)
        if job_id and status is not None and status.state.is_terminal:
            self.following.save_accounting(info.ref, job_id)
        ref, preflight = info.ref, info.kind == "preflight"
        spec = spec_of(info)
        script = not preflight and spec.entry == "script"
        files = RunFiles(
            run_json=self.store.read_run_json(ref),
            preflight=self.store.read_json(ref, PREFLIGHT_FILE) if preflight else None,
            metrics=() if preflight else self.store.read_metrics(ref),
            checkpoint_bytes=None
            if preflight or script
            else self.store.file_size(ref, CHECKPOINT_FILE),
            accounting_saved=self.store.file_size(ref, SACCT_FILE) is not None,
            script_checkpoints=self._listing(ref.file(CHECKPOINTS_DIR)) if script else None,
        )
        checks = verify_run(spec, info.kind, job_id, status, files)
        damage = self.table.view(info).damage
        return [damage_check(damage), *checks] if damage else checks

    def _listing(self, path: str) -> tuple[str, ...]:
        """The names in a directory of a run ((): none, or no such directory)."""
        try:
            return tuple(self.executor.listdir(path))
        except (OSError, ExecutorError):
            return ()

    # -- compare ------------------------------------------------------------------------

    def groups(self) -> dict[str, list[RunView]]:
        """Runs by comparison group (only groups with a name), newest group first."""
        out: dict[str, list[RunView]] = {}
        for v in self._views or tuple(self.table.view(i) for i in self.store.list_runs()):
            if v.group:
                out.setdefault(v.group, []).append(v)
        return out

    def compare(self, group: str) -> pd.DataFrame:
        """The scaling table of a group: speedup and efficiency against the smallest size."""
        from ddp_tui.remote.groups.comparison import load_group  # pandas, only when comparing
        from ddp_tui.results import scaling_table

        return scaling_table(load_group(self.store, group, self.telemetry, self.compare_metrics))

    def outcomes(self, group: str) -> Outcomes:
        """The group's outcome table: the fields that differ between its runs, then each
        run's metric, epochs, wall time, GPU-hours and throughput, the best run marked
        (:mod:`ddp_tui.outcomes`). ``group``: a group key, or the id of a run in it."""
        from ddp_tui.remote.groups.outcomes_io import load_outcomes  # pandas, only when comparing

        return load_outcomes(
            self.store, group, self.groups(), telemetry=self.telemetry, metrics=self.compare_metrics
        )

    def diff(self, run_a: str, run_b: str) -> RunDiff:
        """Two runs side by side: the fields that differ, their outcomes and their metrics
        per epoch. ``run_a``, ``run_b``: run ids (the CLI resolves prefixes and job ids)."""
        from ddp_tui.remote.groups.outcomes_io import load_diff  # pandas, only when comparing

        infos = [self._info(run_id) for run_id in (run_a, run_b)]
        return load_diff(
            self.store, [(i, self.table.view(i)) for i in infos], telemetry=self.telemetry
        )

    def export_comparison(self, group: str) -> list[str]:
        """Write the group's comparison (Markdown and CSV) and its scaling advice (in the
        Markdown, and ``advice.csv``) next to the runs; their paths."""
        from ddp_tui.remote.groups.advising import export_group

        return export_group(
            self.store,
            group,
            partitions=self._known_partitions(),
            telemetry=self.telemetry,
            metrics=self.compare_metrics,
            threshold=self.profile.advisor_threshold,
        )

    def advise(
        self, group: str, *, threshold: float | None = None, deadline_sec: float | None = None
    ) -> Advice:
        """The group's scaling advice (:mod:`ddp_tui.remote.groups.advising`); ``threshold``: the
        efficiency to keep to, else the profile's ``advisor_threshold``."""
        from ddp_tui.remote.groups.advising import advise_group  # pandas, only when advising

        return advise_group(
            self.store,
            group,
            partitions=self._known_partitions(),
            telemetry=self.telemetry,
            metrics=self.compare_metrics,
            threshold=self.profile.advisor_threshold if threshold is None else threshold,
            deadline_sec=deadline_sec,
        )

    def _known_partitions(self) -> list[PartitionInfo]:
        """The partitions, or none while sinfo does not answer: the advice then goes on
        without the partition's size."""
        try:
            return self.partitions()
        except (SchedulerError, ExecutorError):
            return []

    def close(self) -> None:
        self.executor.close()
