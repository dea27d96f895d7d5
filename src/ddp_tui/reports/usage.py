"""What a run costs in allocated resources: GPU-hours, or CPU-hours for a CPU run.

A run's cost is what its job *holds*, not what it uses: the allocated devices times the
job's elapsed (wall-clock) time. On GPUs that is ``nodes x gpus_per_node`` GPUs; on the CPU
(``device = "cpu"``) it is the cores the job script asks for, ``nodes x tasks per node x
cpus_per_task``, where a torchrun job runs one task per node (its processes share that
task's cores) and an srun job one task per process (the job script's ``--ntasks-per-node``).

Pure and light (no pandas): ``ls`` and the Jobs screen show these numbers too. The facade
gives the elapsed time (see docs/compare.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from ddp_tui.spec import ExperimentSpec

HoursUnit = Literal["GPU", "CPU"]
#: The units, in the order a mixed group names them ("GPU/CPU").
HOURS_UNITS: Final[tuple[HoursUnit, ...]] = ("GPU", "CPU")


def device_hours(count: int, seconds: float) -> float:
    """What ``count`` devices (GPUs, processes or cores) held for ``seconds`` cost, in
    device-hours."""
    return count * seconds / 3600


def as_spec(spec: Mapping[str, Any] | ExperimentSpec) -> ExperimentSpec:
    """``spec`` as an :class:`ExperimentSpec`: a ``spec.json`` mapping is read leniently, a
    field of the wrong type (another version wrote it) taking its default, so that one odd
    field costs that field and not the whole run's row."""
    from ddp_tui.spec import (  # not at import: the jobs screen's first paint
        ExperimentSpec,
        SpecError,
    )

    if isinstance(spec, ExperimentSpec):
        return spec
    data = dict(spec)
    try:
        return ExperimentSpec.from_dict(data)
    except SpecError as exc:
        bad = {e.field for e in exc.errors}
        return ExperimentSpec.from_dict({k: v for k, v in data.items() if k not in bad})


def job_tasks(spec: Mapping[str, Any] | ExperimentSpec) -> int:
    """The Slurm tasks of the run's job: the job script's shape (sbatch_templates) is one
    task per node under torchrun, one per process under srun."""
    s = as_spec(spec)
    return s.nodes * (s.gpus_per_node if s.launcher == "srun" else 1)


def allocated_cores(spec: Mapping[str, Any] | ExperimentSpec) -> int:
    """The cores the run's job holds: each of its tasks holds ``cpus_per_task``."""
    s = as_spec(spec)
    return job_tasks(s) * s.cpus_per_task


def allocated(spec: Mapping[str, Any] | ExperimentSpec) -> tuple[int, HoursUnit]:
    """What the run's job holds: (GPUs, "GPU") on cuda, (cores, "CPU") on the CPU."""
    s = as_spec(spec)
    if s.device == "cpu":
        return allocated_cores(s), "CPU"
    return s.nodes * s.gpus_per_node, "GPU"


def resource_hours(
    spec: Mapping[str, Any] | ExperimentSpec, elapsed_sec: float
) -> tuple[float, HoursUnit]:
    """(hours, unit): the allocated GPUs (or, on the CPU, cores) times ``elapsed_sec``.
    A negative or non-finite elapsed time counts as none."""
    count, unit = allocated(spec)
    seconds = elapsed_sec if math.isfinite(elapsed_sec) and elapsed_sec > 0 else 0.0
    return device_hours(count, seconds), unit


def hours_unit(units: set[str] | frozenset[str]) -> str:
    """The unit of several runs' hours together: "GPU", "CPU", or "GPU/CPU" for a mix
    (each run then in its own unit)."""
    return "/".join(u for u in HOURS_UNITS if u in units) or "GPU"


def hours_text(hours: float, unit: str) -> str:
    """A run's hours for a table cell: ``0.0123`` for GPU-hours, ``0.0123 CPU`` for
    CPU-hours (the column is headed GPU-h)."""
    # Three significant digits, but never an exponent: 1,234 GPU-hours read as 1234.
    text = f"{hours:.3g}" if hours < 1000 else f"{hours:.0f}"
    return text if unit == "GPU" else f"{text} {unit}"
