"""What submitting a sweep will do, decided once, before anything is written.

A sweep's members (:func:`ddp_tui.spec.expand_sweep`) are each planned exactly like a
single submit (:meth:`Cluster.plan`): checked against the cluster, given a run id and
directory, and their own ``job.sbatch`` rendered. Members that ask Slurm for the same
resources (the ``#SBATCH`` options that are not a run's own name, place or log files) then
go as one **job array**: one sbatch whose task ``i`` runs member ``i``'s own script in its
own run directory (``sbatch_templates/array.sbatch.j2``). A member whose resources differ
from every other member's is submitted as an ordinary job, in the same group.

The local scheduler allocates nothing, so all of a sweep's members share one array there,
and its ``%K`` throttle is what ``--max-concurrent`` sets on both schedulers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ddp_tui.remote.store.runs import new_run_id
from ddp_tui.remote.submit.plan import SubmitPlan, ValidationFailed
from ddp_tui.sbatch_templates import render_array, resource_directives
from ddp_tui.spec import (
    ExperimentSpec,
    FieldError,
    SpecError,
    Sweep,
    SweepMember,
    expand_sweep,
)

#: Where the job array scripts live, under the runs root. The run listing skips it: its
#: name is no run id.
ARRAYS_DIR = ".arrays"
#: The array script's name in its directory.
ARRAY_SCRIPT = "array.sbatch"


@dataclass(frozen=True)
class ArrayPlan:
    """One job array of a sweep: task ``i`` runs member ``members[i]``."""

    members: tuple[int, ...]  # indices into SweepPlan.members / .plans
    array_dir: str
    script: str  # byte for byte the array.sbatch that submit writes
    max_concurrent: int | None

    @property
    def directive(self) -> str:
        """The ``--array`` value, e.g. ``0-5%2``."""
        throttle = f"%{self.max_concurrent}" if self.max_concurrent else ""
        return f"0-{len(self.members) - 1}{throttle}"


@dataclass(frozen=True)
class SweepPlan:
    """A sweep's members, each planned as a single submit, and the arrays they go in."""

    group: str
    members: tuple[SweepMember, ...]
    plans: tuple[SubmitPlan, ...]
    arrays: tuple[ArrayPlan, ...]
    max_concurrent: int | None = None

    @property
    def errors(self) -> list[FieldError]:
        """Every member's errors, named ``sweep[<index>] <field>``."""
        return [e for p in self.plans for e in p.errors]

    @property
    def ok(self) -> bool:
        return bool(self.plans) and not self.errors

    @property
    def warnings(self) -> list[str]:
        """What the members' plans could not check, each once."""
        return list(dict.fromkeys(w for p in self.plans for w in p.warnings))

    @property
    def singles(self) -> tuple[int, ...]:
        """The members submitted as ordinary jobs (their resources are their own)."""
        in_arrays = {i for a in self.arrays for i in a.members}
        return tuple(i for i in range(len(self.plans)) if i not in in_arrays)

    def summary(self) -> str:
        """What submit will do, in words: "6 runs: one job array of 6, at most 2 at once"."""
        n = len(self.plans)
        parts = []
        for a in self.arrays:
            limit = f", at most {a.max_concurrent} at once" if a.max_concurrent else ""
            parts.append(f"a job array of {len(a.members)}{limit}")
        if self.singles:
            k = len(self.singles)
            parts.append(f"{k} separate job{'s' if k != 1 else ''}")
        if len(self.arrays) == 1:
            parts[0] = parts[0].replace("a job array", "one job array", 1)
        return f"{n} run{'s' if n != 1 else ''}: " + ", ".join(parts)

    def scripts(self) -> list[str]:
        """Every script one submit hands to the scheduler, in submit order: each array's,
        then each separate member's own."""
        return [a.script for a in self.arrays] + [self.plans[i].script for i in self.singles]


def member_plan(plan: SubmitPlan, index: int) -> SubmitPlan:
    """``plan`` with its errors named ``sweep[<index>] <field>``."""
    errors = tuple(FieldError(f"sweep[{index}] {e.field}", e.message) for e in plan.errors)
    return replace(plan, errors=errors)


def plan_sweep(
    plan_one: Callable[[ExperimentSpec, str], SubmitPlan],
    spec: ExperimentSpec,
    sweep: Sweep,
    *,
    scheduler: str,
    runs_root: str,
    max_concurrent: int | None = None,
) -> SweepPlan:
    """Plan every member of ``sweep`` over ``spec`` with ``plan_one(member_spec, group)``
    (the facade's single-submit plan), then group them into job arrays. Raises
    :class:`ValidationFailed` when the sweep itself is wrong (a bad value, too many
    members); a member the cluster refuses shows as that member's errors."""
    try:
        if max_concurrent is not None:  # the caller's limit wins, checked as the sweep's own
            sweep = replace(sweep, max_concurrent=max_concurrent)
        members = expand_sweep(spec, sweep)
    except SpecError as exc:  # the sweep's own values: nothing is planned
        raise ValidationFailed(exc.errors) from None
    limit = sweep.max_concurrent
    group = spec.group_key()
    plans = tuple(member_plan(plan_one(m.spec, group), m.index) for m in members)
    if plans and plans[0].ok:
        # One id for what the user submitted as one: the first member's run id, unique
        # under the runs root and made at plan time like every run id.
        plans = tuple(replace(p, sweep=plans[0].run_id) for p in plans)
    arrays: tuple[ArrayPlan, ...] = ()
    if all(p.ok for p in plans):
        arrays = _arrays(plans, spec.name, scheduler, runs_root, limit)
    return SweepPlan(group, tuple(members), plans, arrays, limit)


def _arrays(
    plans: Sequence[SubmitPlan],
    name: str,
    scheduler: str,
    runs_root: str,
    limit: int | None,
) -> tuple[ArrayPlan, ...]:
    """The job arrays of ``plans``: one per set of equal resource options (everything in
    one on the local scheduler), each of at least two members."""
    batches: dict[tuple[str, ...], list[int]] = {}
    for i, p in enumerate(plans):
        if p.kind != "train":
            continue
        key = () if scheduler == "local" else resource_directives(p.spec)
        batches.setdefault(key, []).append(i)
    out = []
    for k, indices in enumerate(b for b in batches.values() if len(b) > 1):
        array_id = new_run_id(f"{name}-array{k}" if k else f"{name}-array")
        array_dir = f"{runs_root.rstrip('/')}/{ARRAYS_DIR}/{array_id}"
        # On the local scheduler the members may differ in size: it reads the array's
        # options for one node only, and each member's own script starts its processes.
        script = render_array(
            plans[indices[0]].spec,
            [plans[i].run_dir for i in indices],
            array_dir,
            job_name=name,
            max_concurrent=limit,
        )
        out.append(ArrayPlan(tuple(indices), array_dir, script, limit))
    return tuple(out)
