"""validate_for_cluster(): a spec against what the cluster reports about its partitions."""

from __future__ import annotations

from collections.abc import Sequence

from ddp_tui.spec.convert import is_int
from ddp_tui.spec.errors import FieldError
from ddp_tui.spec.experiment import ExperimentSpec
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
