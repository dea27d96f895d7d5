"""The submit service: compose (defaults, partitions, plans), submit a plan or a sweep, and
retry a run; every submit goes through one transaction (:mod:`.submission`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from ddp_tui.remote.backends.scheduler import PartitionInfo
from ddp_tui.remote.model.views import RunView
from ddp_tui.remote.store.runs import RunInfo, RunRef
from ddp_tui.remote.submit.array_submit import submit_sweep
from ddp_tui.remote.submit.env_detect import DETECT_WAIT_SEC, Detection
from ddp_tui.remote.submit.plan import SubmitPlan
from ddp_tui.remote.submit.planning import Planner
from ddp_tui.remote.submit.submission import RECOVER_SUBMIT_SEC, create_planned_run, submit_attempt
from ddp_tui.remote.submit.sweep_plan import SweepPlan, plan_sweep
from ddp_tui.spec import ExperimentSpec, FieldError, Sweep


class SubmitService:
    """Plans (with ``planner``) and submits runs. ``views_of`` gives the rows of run ids (the
    runs service's), ``info`` a run as listed."""

    def __init__(
        self,
        planner: Planner,
        *,
        views_of: Callable[[Sequence[str]], list[RunView]],
        info: Callable[[str], RunInfo],
    ) -> None:
        self.planner = planner
        self.scheduler = planner.scheduler
        self.store = planner.store
        self.facts = planner.facts
        self.profile = planner.profile
        self._views_of = views_of
        self._info = info
        #: How long a submit whose answer was lost looks for its job before giving up.
        self.recover_submit_sec = RECOVER_SUBMIT_SEC

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
        return self.facts.partitions()

    def detect_environment(
        self, partition: str, *, recheck: bool = False, wait_sec: float = DETECT_WAIT_SEC
    ) -> Detection:
        """What ``partition`` offers a job's environment (container runtimes, ``module``,
        GPUs; :mod:`.env_detect`): remembered for a day, else found by a probe job, waited
        for at most ``wait_sec``; ``recheck`` forgets what is remembered first."""
        return self.planner.detector.detect(partition, recheck=recheck, wait_sec=wait_sec)

    def recheck_environment(self, spec: ExperimentSpec) -> None:
        """Forget what was detected on ``spec``'s partition and its environment check: the
        next plan finds both out again (``--recheck-environment``)."""
        self.planner.detector.forget(spec.partition)
        self.planner.env_preflight.forget(spec)

    def validate(self, spec: ExperimentSpec) -> list[FieldError]:
        """The errors a plan of ``spec`` would have (none: it can be submitted)."""
        return list(self.plan(spec).errors)

    def plan(
        self,
        spec: ExperimentSpec,
        *,
        kind: str = "train",
        group: str | None = None,
        dry_run: bool = False,
    ) -> SubmitPlan:
        """What submitting ``spec`` will do (:class:`~.planning.Planner`); ``dry_run``
        sends no job to find out about the environment (what is remembered still counts)."""
        return self.planner.plan(spec, kind=kind, group=group, dry_run=dry_run)

    def plan_sweep(
        self,
        spec: ExperimentSpec,
        sweep: Sweep,
        *,
        max_concurrent: int | None = None,
        dry_run: bool = False,
    ) -> SweepPlan:
        """Every member of ``sweep`` over ``spec`` planned as a single submit, one group,
        and the job arrays they go in (:mod:`ddp_tui.remote.submit.sweep_plan`); ``dry_run``
        as :meth:`plan`."""
        return plan_sweep(
            lambda member, group: self.plan(member, group=group, dry_run=dry_run),
            spec,
            sweep,
            scheduler=self.scheduler.name,
            runs_root=self.store.root,
            max_concurrent=max_concurrent,
        )

    def submit(self, plan: SubmitPlan) -> RunView:
        """Create the plan's run directory with exactly its script, submit, record the
        attempt. Refused (:class:`ValidationFailed`) when the plan has errors or its run
        directory exists already (the plan was submitted before)."""
        return self._views_of([self._submit_new(plan)])[0]

    def _submit_new(self, plan: SubmitPlan) -> str:
        ref = create_planned_run(self.store, plan)
        self._attempt(ref, seen=0, fresh=True)
        return ref.run_id

    def submit_sweep(self, plan: SweepPlan) -> list[RunView]:
        """Submit a sweep: each job array with one submit, every other member alone
        (:mod:`ddp_tui.remote.submit.array_submit`); nothing unless every member is ok."""
        run_ids = submit_sweep(
            self.scheduler,
            self.store,
            plan,
            lambda i: self._submit_new(plan.plans[i]),
            recover_sec=self.recover_submit_sec,
        )
        return self._views_of(run_ids)

    def retry(self, run_id: str, *, seen: int | None = None) -> RunView:
        """Submit the run's script again as a new attempt; the trainer resumes from its
        checkpoint. ``seen``: how many attempts the caller saw (default: as last listed);
        refused (:class:`AttemptRefused`, naming the other job) when another instance
        submitted since, or while any job of the run is alive."""
        info = self._info(run_id)
        self._attempt(info.ref, seen=len(info.jobs) if seen is None else seen)
        return self._views_of([run_id])[0]

    def _attempt(self, ref: RunRef, *, seen: int | None, fresh: bool = False) -> str:
        return submit_attempt(
            self.scheduler,
            self.store,
            ref,
            seen=seen,
            fresh=fresh,
            recover_sec=self.recover_submit_sec,
        )
