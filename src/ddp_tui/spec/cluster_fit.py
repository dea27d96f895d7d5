"""validate_for_cluster(): a spec against what the cluster reports about its partitions;
with_gpu_type_resolved(): its ``gpu_type`` as the cluster names it."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddp_tui.spec.convert import is_int
from ddp_tui.spec.errors import FieldError
from ddp_tui.spec.experiment import ExperimentSpec
from ddp_tui.spec.gpu_types import GPU_TYPE_PATTERN, GpuKind, and_words, resolve_gpu_type
from ddp_tui.spec.partitions import PartitionInfo
from ddp_tui.spec.timefmt import format_time_limit, parse_time_limit


def validate_for_cluster(
    spec: ExperimentSpec, partitions: Sequence[PartitionInfo]
) -> list[FieldError]:
    """Check ``spec`` against what ``sinfo`` reports: the partition exists, and GPUs per node,
    node count and time limit fit it. An empty partition means the cluster's default one."""
    if not partitions:
        return []
    by_name = {p.name: p for p in partitions}
    names = ", ".join(sorted(by_name))
    errors: list[FieldError] = []
    wanted: list[PartitionInfo] = []
    if isinstance(spec.partition, str) and spec.partition:
        for name in spec.partition.split(","):
            info = by_name.get(name)
            if info is None:
                errors.append(
                    FieldError("partition", f"no partition {name!r} on this cluster; have: {names}")
                )
            else:
                wanted.append(info)
    else:
        default = next((p for p in partitions if p.is_default), None)
        if default is not None:
            wanted.append(default)
    gpu_type = _gpu_kind(spec, wanted, partitions)
    if isinstance(gpu_type, FieldError):
        errors.append(gpu_type)
    elif gpu_type is not None and is_int(spec.nodes) and 0 < gpu_type.nodes < spec.nodes:
        # Measured: Slurm refuses -N3 --gpus-per-node=h100:1 with two h100 nodes, by the
        # same words as any request it cannot place.
        errors.append(
            FieldError(
                "nodes",
                f"{gpu_type.nodes} node{'s' if gpu_type.nodes != 1 else ''} of the "
                f"partition have {gpu_type.words(nodes=False)}, got {spec.nodes}",
            )
        )
    for p in wanted:
        where = f"partition {p.name}"
        if spec.device == "cuda" and is_int(spec.gpus_per_node):
            if p.gpus_per_node <= 0:
                errors.append(
                    FieldError(
                        "device",
                        f"{where} has no GPUs; use device cpu or a GPU partition",
                    )
                )
            elif spec.gpus_per_node > p.gpus_per_node:
                errors.append(
                    FieldError(
                        "gpus_per_node",
                        f"{where} has {p.gpus_per_node} GPUs per node, got {spec.gpus_per_node}",
                    )
                )
        if is_int(spec.nodes):
            limit = p.nodes if p.max_nodes is None else min(p.nodes, p.max_nodes)
            if spec.nodes > limit:
                errors.append(
                    FieldError("nodes", f"{where} allows at most {limit} nodes, got {spec.nodes}")
                )
        if is_int(spec.cpus_per_task) and p.cpus_per_node > 0:
            tasks = spec.gpus_per_node if spec.launcher == "srun" else 1
            if is_int(tasks) and spec.cpus_per_task * tasks > p.cpus_per_node:
                errors.append(
                    FieldError(
                        "cpus_per_task",
                        f"{where} has {p.cpus_per_node} CPUs per node; {tasks} task(s) x "
                        f"{spec.cpus_per_task} CPUs do not fit",
                    )
                )
        if p.max_time_min is not None and isinstance(spec.time_limit, str):
            try:
                minutes = parse_time_limit(spec.time_limit)
            except ValueError:
                continue  # validate() reports it
            if minutes > p.max_time_min:
                errors.append(
                    FieldError(
                        "time_limit",
                        f"{where} allows at most {format_time_limit(p.max_time_min)}, "
                        f"got {spec.time_limit}",
                    )
                )
    return errors


def _places(spec: ExperimentSpec, partitions: Sequence[PartitionInfo]) -> list[PartitionInfo]:
    """The partitions the job may run in: those it names (the known ones), else the default."""
    if isinstance(spec.partition, str) and spec.partition:
        names = spec.partition.split(",")
        return [p for p in partitions if p.name in names]
    return [p for p in partitions if p.is_default]


def _gpu_kind(
    spec: ExperimentSpec, wanted: Sequence[PartitionInfo], partitions: Sequence[PartitionInfo]
) -> GpuKind | FieldError | None:
    """The kind ``spec.gpu_type`` names in the partitions the job may run in; a FieldError
    naming what is there where it is absent or ambiguous (Slurm's own refusal, "Requested
    node configuration is not available", names nothing); None when nothing is asked or
    there is nothing to look in."""
    asked = spec.gpu_type
    if not isinstance(asked, str) or not re.fullmatch(GPU_TYPE_PATTERN, asked):
        return None  # none asked, or validate() reports it
    places = list(wanted) or list(partitions)
    if spec.device != "cuda" or not places:
        return None
    kinds: dict[tuple[str, str], GpuKind] = {}
    for p in places:  # of several partitions, the one with the most nodes of a kind counts
        for k in p.gpu_kinds:
            if (k.source, k.raw) not in kinds or k.nodes > kinds[k.source, k.raw].nodes:
                kinds[k.source, k.raw] = k
    found = resolve_gpu_type(asked, list(kinds.values()))
    if isinstance(found, GpuKind):
        return found
    where = and_words([p.name for p in places])
    where = f"partition{'s' if len(places) > 1 else ''} {where}"
    if found:
        return FieldError(
            "gpu_type",
            f"{asked} matches {and_words([k.words() for k in found])} in {where}; a job asks "
            "for one GPU type (Slurm cannot take either of two): name one of them",
        )
    if kinds:
        has = f"which has {and_words([k.words() for k in kinds.values()])}"
    elif any(p.gpus_per_node > 0 for p in places):
        has = "whose GPUs have no type"
    else:
        has = "which has no GPUs"
    return FieldError("gpu_type", f"{asked} is not in {where}, {has}; {_cluster_kinds(partitions)}")


def _cluster_kinds(partitions: Sequence[PartitionInfo]) -> str:
    """``the cluster has a100 (A100) in debug and small, and h100 (H100 80GB) in debug``."""
    where: dict[tuple[str, str], tuple[GpuKind, list[str]]] = {}
    for p in partitions:
        for k in p.gpu_kinds:
            where.setdefault((k.source, k.raw), (k, []))[1].append(p.name)
    if not where:
        return "no partition of this cluster names a GPU type: leave gpu_type empty"
    items = [f"{k.words(nodes=False)} in {and_words(names)}" for k, names in where.values()]
    listed = items[0] if len(items) == 1 else f"{', '.join(items[:-1])}, and {items[-1]}"
    return f"the cluster has {listed}"


def with_gpu_type_resolved(
    spec: ExperimentSpec, partitions: Sequence[PartitionInfo]
) -> ExperimentSpec:
    """``spec`` with its ``gpu_type`` as the cluster names it (``H100`` -> ``h100``, a
    feature's kind -> ``feature:NAME``), which the job script asks for; unchanged where it
    names nothing there (:func:`validate_for_cluster` says why)."""
    kind = _gpu_kind(spec, _places(spec, partitions), partitions)
    if isinstance(kind, GpuKind) and kind.request != spec.gpu_type:
        return spec.replace(gpu_type=kind.request)
    return spec
