"""Planning a submit: the spec checked once (itself, then against the cluster), a run id
allocated, and the job script rendered once for that run's directory.

The policy lives here: a Slurm cluster whose sinfo does not answer can still be submitted to
(sbatch has the last word), with a warning that its checks were skipped; the job's python and
data root are checked on the cluster only when sinfo answered (else this may be a preview of
a Slurm script where there is no Slurm); a user's script is found, and its project
snapshotted, only once its own fields are right.
"""

from __future__ import annotations

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import Executor, ExecutorError
from ddp_tui.remote.backends.scheduler import PartitionInfo, Scheduler, SchedulerError
from ddp_tui.remote.backends.scheduler_facts import SchedulerFacts
from ddp_tui.remote.store.runs import RunStore, new_run_id
from ddp_tui.remote.submit.env_detect import EnvDetector
from ddp_tui.remote.submit.env_preflight import EnvPreflight, environment_checks
from ddp_tui.remote.submit.plan import (
    SubmitPlan,
    local_cpus,
    make_plan,
    plan_spec,
    spec_errors,
)
from ddp_tui.remote.submit.prequeue import prequeue_errors
from ddp_tui.remote.submit.scripts import prepare_script
from ddp_tui.spec import ExperimentSpec
from ddp_tui.spec.cluster_fit import with_gpu_type_resolved
from ddp_tui.spec.environments import environment_issues

#: A user's script's own fields: while one is wrong, the script is not looked for.
SCRIPT_FIELDS = frozenset({"script", "project_dir", "code_mode", "snapshot_max_mb"})


class Planner:
    """Plans submits for one cluster and profile."""

    def __init__(
        self,
        executor: Executor,
        scheduler: Scheduler,
        store: RunStore,
        facts: SchedulerFacts,
        *,
        profile: Profile,
        location: str,
    ) -> None:
        self.executor = executor
        self.scheduler = scheduler
        self.store = store
        self.facts = facts
        self.profile = profile
        self.location = location
        self.detector = EnvDetector(
            executor, scheduler, runs_root=store.root, profile=profile, where=location
        )
        self.env_preflight = EnvPreflight(
            executor, scheduler, runs_root=store.root, profile=profile, where=location
        )

    def plan(
        self,
        spec: ExperimentSpec,
        *,
        kind: str = "train",
        group: str | None = None,
        dry_run: bool = False,
    ) -> SubmitPlan:
        """What submitting ``spec`` will do. ``kind="preflight"`` plans a collective test
        of the same shape. ``dry_run``: a plan that is only shown sends no job to check the
        environment."""
        warnings: list[str] = []
        try:
            parts: list[PartitionInfo] | None = self.facts.partitions()
        except (SchedulerError, ExecutorError) as exc:
            parts = None  # the cluster-aware pass needs sinfo; self-checks still apply
            if self.scheduler.name == "slurm":
                warnings.append(
                    "partition, GPUs per node and time limit were not checked against the "
                    f"cluster: sinfo did not answer ({' '.join(str(exc).split())})"
                )
        if self.scheduler.name == "slurm" and parts:
            # The GPU type as the cluster names it (Slurm's are case-sensitive: it refuses
            # H100 for h100), before the group is named, so that both ask for one group.
            spec = with_gpu_type_resolved(spec, parts)
        spec, group = plan_spec(spec, kind, group)
        if self.scheduler.name == "local" and parts:
            # After the group is named: a clamped run compares with the spec as it was asked.
            spec, clamped = local_cpus(spec, parts[0].cpus_per_node)
            warnings += clamped
        errors = spec_errors(spec, self.scheduler.name, parts)
        # The environment's pitfalls (spec/environments.py): refused or warned here, before a
        # job waits in the queue to meet them.
        env_errors, env_warnings = environment_issues(spec, scheduler=self.scheduler.name)
        errors += env_errors
        warnings += env_warnings
        if parts is not None:
            errors += prequeue_errors(
                self.executor, spec, self.profile, where=self.location, kind=kind, known=errors
            )
            # What the partition offers, and the one-node environment check job
            # (remote/submit/env_preflight.py): after the login node's checks, before a queue.
            env = environment_checks(
                self.detector, self.env_preflight, spec, known=errors, send=not dry_run
            )
            errors += env.errors
            warnings += env.warnings
        snapshot = None
        wrong = {e.field for e in errors}
        if kind == "train" and spec.entry == "script" and not wrong & SCRIPT_FIELDS:
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
