"""What a cluster says about one of its partitions: the facts a spec is checked against.

The schedulers (``ddp_tui.remote``) report them; the domain only reads them, so the type
lives here and the scheduler interface imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddp_tui.spec.gpu_types import GpuKind


@dataclass(frozen=True)
class PartitionInfo:
    name: str
    nodes: int
    gpus_per_node: int
    cpus_per_node: int
    max_time_min: int | None  # None: unlimited
    max_nodes: int | None
    is_default: bool = False
    states: tuple[str, ...] = field(default_factory=tuple)
    #: Nodes free for a new job right now, as the scheduler last said (None: unknown).
    idle_nodes: int | None = None
    #: The GPU types its nodes have (GRES types, else features naming a model), each with
    #: its node count; empty where every GPU is untyped (``spec/gpu_types.py``).
    gpu_kinds: tuple[GpuKind, ...] = ()
