"""What one submit will do, decided once, before anything is written.

A :class:`SubmitPlan` holds the checked spec, the run id and directory allocated for it,
and the job script rendered for that directory: :meth:`Cluster.submit` writes exactly
that script, so what a dry run or the compose preview shows is what runs (see
docs/architecture.md, "The facade"). Pure data and pure functions: the facade
brings the partitions and the run id; no I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ddp_tui.errors import DdpTuiError
from ddp_tui.remote.store.snapshot import SnapshotManifest
from ddp_tui.sbatch_templates import render_preflight, render_training
from ddp_tui.spec import (
    ExperimentSpec,
    FieldError,
    PartitionInfo,
    SpecError,
    validate,
    validate_for_cluster,
)
from ddp_tui.spec.convert import is_int

#: The kinds of run a plan can make (``RunInfo.kind`` reads them back from spec.json).
PLAN_KINDS = ("train", "preflight")


@dataclass(frozen=True)
class SubmitPlan:
    """What one submit will do, made once: the checked spec and the exact job script."""

    spec: ExperimentSpec
    kind: str  # "train" or "preflight" (the kinds RunStore records)
    group: str | None
    run_id: str  # allocated at plan time ("" when not ok)
    run_dir: str  # the directory submit will create ("" when not ok)
    script: str  # byte for byte the job.sbatch that submit writes ("" when not ok)
    errors: tuple[FieldError, ...]
    warnings: tuple[str, ...] = ()
    #: A user's script: the project files submit copies into the run (None: in place, or
    #: the built-in trainer).
    snapshot: SnapshotManifest | None = None
    #: The sweep the run is a member of (its id: the first member's run id), or None for a
    #: run submitted alone. What the user submitted as one folds into one Jobs row;
    #: ``group`` is wider (every run of an equal spec, for Compare).
    sweep: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the plan can be submitted (no errors)."""
        return not self.errors


class ValidationFailed(DdpTuiError):
    """The spec has errors; ``errors`` name each field and what is allowed."""

    title = "Spec"

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in self.errors))


def spec_errors(
    spec: ExperimentSpec, scheduler: str, partitions: Sequence[PartitionInfo] | None
) -> list[FieldError]:
    """Every error of the spec itself, then those against the cluster: the local
    scheduler's one-node limit, and Slurm's partitions (None: sinfo did not answer, so
    only the self-checks apply)."""
    errors = validate(spec)
    if scheduler == "local" and spec.needs_slurm:
        errors.append(
            FieldError(
                "nodes" if spec.nodes > 1 else "launcher",
                "the local scheduler runs one-node torchrun jobs only; "
                "use nodes = 1 and launcher = torchrun, or a Slurm profile",
            )
        )
    if scheduler == "slurm" and partitions is not None:
        errors += validate_for_cluster(spec, partitions)
    return errors


def local_cpus(spec: ExperimentSpec, cpus: int) -> tuple[ExperimentSpec, list[str]]:
    """The spec a job of the local scheduler runs on a machine of ``cpus`` CPUs: it cannot have
    more than the machine (the default asks 4 of every laptop), so a larger ``cpus_per_task``
    becomes ``cpus``, with a warning that says so; its processes share them (the job script
    sizes their threads). A spec whose fields are wrong is left for the checks to report."""
    asked, procs = spec.cpus_per_task, spec.gpus_per_node
    if not (is_int(asked) and is_int(procs)) or spec.launcher != "torchrun" or asked <= cpus:
        return spec, []
    threads = max(1, cpus // max(1, procs))
    return spec.replace(cpus_per_task=cpus), [
        f"cpus_per_task: {asked} asked, but this machine has {cpus} CPUs: the local job gets "
        f"{cpus}, shared by its {procs} process(es) ({threads} thread(s) each)"
    ]


def plan_spec(
    spec: ExperimentSpec, kind: str, group: str | None
) -> tuple[ExperimentSpec, str | None]:
    """The spec and group a run of ``kind`` gets: a preflight is named ``<name>-preflight``
    and is in no group; a training run's group defaults to the spec's group key."""
    if kind == "preflight":
        return spec.replace(name=f"{spec.name}-preflight"), None
    if kind == "train":
        return spec, group or spec.group_key()
    raise ValueError(f"kind must be one of {PLAN_KINDS}, got {kind!r}")


def make_plan(
    spec: ExperimentSpec,
    kind: str,
    group: str | None,
    errors: Sequence[FieldError],
    *,
    run_id: str,
    run_dir: str,
    warnings: Sequence[str] = (),
    snapshot: SnapshotManifest | None = None,
) -> SubmitPlan:
    """The plan of an already checked spec (``errors`` from :func:`spec_errors`): its
    script is rendered once, for ``run_dir``, without validating the spec again.
    ``warnings`` say what could not be checked; they do not stop a submit."""
    notes = tuple(warnings)
    if errors:
        return SubmitPlan(spec, kind, group, "", "", "", tuple(errors), notes)
    render = render_preflight if kind == "preflight" else render_training
    try:
        script = render(spec, run_dir, checked=True)
    except SpecError as exc:  # the runs root cannot go on #SBATCH lines
        return SubmitPlan(spec, kind, group, "", "", "", tuple(exc.errors), notes)
    return SubmitPlan(spec, kind, group, run_id, run_dir, script, (), notes, snapshot)


def require_ok(plans: Sequence[SubmitPlan]) -> None:
    """Raise :class:`ValidationFailed` with every error of ``plans`` unless all are ok: a
    sweep submits all of its plans or none."""
    errors = [e for p in plans for e in p.errors]
    if errors:
        raise ValidationFailed(errors)
