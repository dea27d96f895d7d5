"""Concrete changes, each only where the measurements support it, each with its number; and
the stragglers.

Each change is priced by asking the model the same question with one input changed (twice
the batch per GPU, no data wait, half the gradient bytes, ...) at the recommended size, and
its efficiency is against the smallest size with the same change: a larger batch or
accumulation also makes one rank faster per sample, and that is not scaling.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace

from ddp_tui.advisor.data_wait import remedies
from ddp_tui.advisor.inputs import SizeRun
from ddp_tui.advisor.model import Estimate, ScalingModel
from ddp_tui.advisor.result import Change, Straggler
from ddp_tui.advisor.words import duration

#: A rank this much slower than the median rank is a straggler.
STRAGGLER = 0.10
#: Shares of the epoch past which a part is worth a change.
DATA_SHARE = 0.10
COMM_SHARE = 0.15
#: The memory a GPU may fill before a bigger batch is not advised.
MEMORY_ROOM = 0.45
ACCUMULATION = 4


def stragglers(runs: Sequence[SizeRun]) -> list[Straggler]:
    """Ranks whose own time per step (the step less its all-reduce wait) is at least
    :data:`STRAGGLER` above the median rank's, in each run that recorded per-rank times."""
    found: list[Straggler] = []
    for run in runs:
        if len(run.ranks) < 2:
            continue
        median = statistics.median(r.busy_median_sec for r in run.ranks)
        if median <= 0:
            continue
        for rank in run.ranks:
            slower = rank.busy_median_sec / median - 1
            if slower >= STRAGGLER - 1e-9:
                found.append(
                    Straggler(
                        run.run_id,
                        run.world_size,
                        rank.rank,
                        rank.host,
                        slower,
                        rank.busy_median_sec,
                        median,
                    )
                )
    return found


def changes_for(
    runs: Sequence[SizeRun],
    model: ScalingModel,
    target: tuple[int, int],
    found: Sequence[Straggler],
    rate: Callable[[Estimate], float],
    base: tuple[int, int],
) -> list[Change]:
    """The changes worth making at ``target`` (world size, nodes); ``rate`` is what speedup is
    measured by, ``base`` the (world size, nodes) efficiency is against."""
    world, nodes = target

    def efficiency(**what_if: float) -> tuple[Estimate, float]:
        at = model.predict(world, nodes, what_if=what_if)
        one = model.predict(*base, what_if=what_if)
        return at, rate(at) / rate(one) / (world / base[0]) if rate(one) > 0 else 0.0

    now, eff_now = efficiency()
    largest = max((r for r in runs if r.breakdown is not None), key=lambda r: r.world_size)
    shown = f"world size {world}"
    out: list[Change] = []

    def priced(kind: str, text: str, what_if: dict[str, float], **numbers: object) -> Change:
        after, eff = efficiency(**what_if)
        # A rank of the target size may compute a little faster than the baseline's did (the
        # runs' noise): with the communication removed, that would read as more than linear.
        eff = min(eff, max(1.0, eff_now))
        return Change(
            kind,
            f"{text}: efficiency at {shown} {eff_now:.0%} -> {eff:.0%}, epoch "
            f"{duration(now.epoch_time_sec)} -> {duration(after.epoch_time_sec)}",
            {
                "world_size": world,
                "efficiency_before": eff_now,
                "efficiency_after": eff,
                "epoch_time_before_sec": now.epoch_time_sec,
                "epoch_time_after_sec": after.epoch_time_sec,
                **numbers,
            },
        )

    b = largest.breakdown
    assert b is not None
    data_share = b.share("data_sec")
    if data_share >= DATA_SHARE and "data_sec" not in b.inferred:
        fixes = remedies(largest)
        what = "; or ".join(r.text for r in fixes) or "a faster input pipeline"
        change = priced(
            "data_wait",
            f"ranks wait for data {data_share:.0%} of each epoch at world size "
            f"{largest.world_size} ({duration(b.data_sec)} of {duration(b.total_sec)}); to hide "
            f"it: {what}. Without the wait",
            {"data": 0.0},
            data_share=data_share,
            workers=largest.workers,
            settings=[asdict(r) for r in fixes],
        )
        saved = change.numbers["epoch_time_before_sec"] - change.numbers["epoch_time_after_sec"]
        out.append(
            replace(
                change,
                text=f"{change.text} (saves {duration(saved)} an epoch)",
                numbers={**change.numbers, "saves_sec_per_epoch": saved},
            )
        )
    peak, total = largest.gpu_mem_peak_mib, largest.gpu_mem_total_mib
    if peak and total and peak / total <= MEMORY_ROOM and largest.batch_per_gpu:
        batch = largest.batch_per_gpu
        out.append(
            priced(
                "batch",
                f"GPU memory peaks at {peak:.0f} of {total:.0f} MiB: a batch per GPU of "
                f"{2 * batch} (now {batch}) fits and halves the all-reduces per sample",
                {"batch": 2.0},
                memory_peak_mib=peak,
                memory_total_mib=total,
                batch_per_gpu=batch,
            )
        )
    comm_share = now.comm_sec / now.epoch_time_sec if now.epoch_time_sec > 0 else 0.0
    if comm_share >= COMM_SHARE:
        out.append(
            priced(
                "accumulation",
                f"the exposed all-reduce is {comm_share:.0%} of the epoch at {shown}: "
                f"accumulating {ACCUMULATION} micro-batches per step (grad_accum "
                f"{ACCUMULATION}) all-reduces {ACCUMULATION}x less per sample (the global "
                "batch grows with it: retune the learning rate)",
                {"accum": float(ACCUMULATION)},
                comm_share=comm_share,
            )
        )
        if model.grad_bytes:
            out.append(
                priced(
                    "bf16_compression",
                    f"the exposed all-reduce is {comm_share:.0%} of the epoch: bf16 gradient "
                    "compression (DDP's bf16_compress_hook) halves the bytes it moves",
                    {"grad_bytes": 0.5},
                    comm_share=comm_share,
                )
            )
    bucket = _bucket_change(model, world, nodes, comm_share)
    if bucket is not None:
        out.append(bucket)
    for s in found:
        wait = s.busy_median_sec - s.median_busy_sec
        out.append(
            Change(
                "exclude",
                f"rank {s.rank} on {s.host} is {s.slower_by:.0%} slower than the median rank at "
                f"world size {s.world_size}, and every other rank waits {duration(wait)} a step "
                f"for it: exclude the host (sbatch --exclude={s.host}) or find what slows it",
                {
                    "host": s.host,
                    "rank": s.rank,
                    "run_id": s.run_id,
                    "slower_by": s.slower_by,
                    "wait_per_step_sec": wait,
                },
            )
        )
    return out


def _bucket_change(model: ScalingModel, world: int, nodes: int, comm_share: float) -> Change | None:
    """One bucket cannot overlap backward at all; many small ones pay the latency each."""
    grad = model.grad_bytes
    if not grad or world < 2 or comm_share < DATA_SHARE:
        return None
    mib = grad / 2**20
    if model.buckets == 1 and mib >= 4:
        cap = max(1.0, round(mib / 4))
        return Change(
            "bucket_cap",
            f"all {mib:.0f} MiB of gradients sit in one bucket, so the all-reduce starts only "
            f"when backward ends ({comm_share:.0%} of the epoch exposed): bucket_cap_mb={cap:.0f} "
            "makes about four buckets that go out while backward runs (DDP's bucket_cap_mb; "
            "the built-in trainer's --bucket-cap-mb, in the spec's extra_trainer_args)",
            {"buckets": 1, "bucket_cap_mb": cap, "comm_share": comm_share},
        )
    link, _ = model.fabric.link(nodes)
    if link is None or model.buckets <= 2:
        return None
    latency = model.buckets * 2 * (world - 1) * link.alpha_sec
    ref = model.reference(world)
    per_epoch = latency * model.steps(ref, world)
    total = model.predict(world, nodes).epoch_time_sec
    if total <= 0 or per_epoch / total < 0.05:
        return None
    return Change(
        "bucket_cap",
        f"{model.buckets} buckets pay the link's latency {model.buckets} times a step "
        f"({duration(per_epoch)} of each {duration(total)} epoch at world size {world}): a "
        "larger bucket_cap_mb sends fewer, bigger messages (the built-in trainer's "
        "--bucket-cap-mb, in the spec's extra_trainer_args)",
        {"buckets": model.buckets, "latency_per_epoch_sec": per_epoch},
    )
