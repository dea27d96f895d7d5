"""Runs and fabric tables built from the model's own equations, so a test knows the truth."""

from __future__ import annotations

from ddp_tui.advisor import Breakdown, FabricSample, RankTime, SizeRun
from ddp_tui.advisor.fabric import Link, allreduce_sec
from ddp_tui.advisor.model import together

GRAD = 46_800_000  # ResNet-18's float32 gradients
LINK = Link(alpha_sec=20e-6, beta_bytes_per_sec=1.2e9, kind="intra-node", source="test")


def table(world: int, link: Link = LINK, nodes: int = 1) -> FabricSample:
    """A preflight's all-reduce table that follows ``link`` exactly."""
    rows = tuple((2**k, allreduce_sec(link, world, 2**k)) for k in range(10, 29))
    return FabricSample(f"pf{world}", world, nodes, rows)


def run(
    world: int,
    *,
    compute: float = 0.09,
    data: float = 0.005,
    rest: float = 0.002,
    gamma: float = 2.0,
    link: Link = LINK,
    steps_at_one: int = 400,
    per_node: int | None = None,
    ranks: tuple[RankTime, ...] = (),
    buckets: int = 3,
    **extra: object,
) -> SizeRun:
    """A run whose every number follows the model: per-step compute, data and rest fixed,
    the all-reduce of :data:`GRAD` over ``link``, overlapped by ``gamma``."""
    per_node = per_node or world
    steps = steps_at_one // world
    comm = allreduce_sec(link, world, GRAD, buckets)
    exposed = together(compute, comm, gamma) - compute
    step = compute + data + rest + exposed
    epoch = steps * step
    fields: dict[str, object] = dict(
        run_id=f"r{world}",
        world_size=world,
        nodes=max(1, world // per_node),
        gpus_per_node=min(world, per_node),
        epoch_time_sec=epoch,
        throughput=32 * world / step,
        steps_per_epoch=steps,
        global_batch=32 * world,
        breakdown=Breakdown(steps * compute, steps * data, steps * exposed, steps * rest),
        grad_bytes=GRAD,
        buckets=buckets,
        bucket_cap_mb=25.0,
        ranks=ranks,
        batch_per_gpu=32,
        epochs=10,
        train_samples=32 * steps_at_one,
    )
    fields.update(extra)
    return SizeRun(**fields)  # type: ignore[arg-type]
