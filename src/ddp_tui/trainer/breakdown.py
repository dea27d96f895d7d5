"""The step breakdown: data wait, compute, exposed communication and the rest (see
docs/step-breakdown.md for what each is and how it is measured).

A calibration at the start of each epoch times forward+backward under ``ddp.no_sync()`` (no
all-reduce) on the first training batch; each real step's all-reducing micro-step minus that
pure compute is the communication backward did not hide. Also here: what run.json records about
the gradient's all-reduce (its bytes, DDP's buckets, the trainer's own bandwidth probe), and the
fake slow rank the tests use.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from .checkpoint import rng_state, set_rng_state
from .distributed import World
from .errors import UsageError
from .evaluate import batch_loss
from .preflight import all_reduce_seconds, bus_bandwidth
from .timing import StepTime, seconds, stamp

#: A fake for tests: ``R:SECONDS`` makes rank R sleep SECONDS in each step's data fetch (a
#: slow host cannot be produced on demand).
FAKE_SLOW_RANK_ENV = "DDP_TUI_FAKE_SLOW_RANK"
#: Timed all-reduces of the probe, after its two warm-ups.
PROBE_ITERS = 5


def grad_bytes(module: nn.Module) -> int:
    """The bytes one all-reduce of the gradients moves per rank."""
    return sum(p.numel() * p.element_size() for p in module.parameters() if p.requires_grad)


def bucket_count(ddp: DistributedDataParallel) -> int | None:
    """How many gradient buckets DDP built (rebuilt after its first steps), or None where this
    torch does not say: ``_get_ddp_logging_data`` is private API."""
    try:
        data = ddp._get_ddp_logging_data()  # type: ignore[no-untyped-call]
    except Exception:  # private API: any failure only leaves the count unknown
        return None
    sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes")
    if not isinstance(sizes, str) or not sizes.strip():
        return None
    return len(sizes.split(","))


def allreduce_probe(world: World, nbytes_grad: int, bucket_cap_mb: float) -> dict[str, Any] | None:
    """Collective: time an all-reduce of one bucket's worth of float32 (the gradient's bytes,
    at most the bucket cap), the slowest rank's time; None for a single process."""
    if not world.distributed:
        return None
    device = world.device
    nbytes = max(4, min(nbytes_grad, int(bucket_cap_mb * 2**20)))
    nbytes -= nbytes % 4

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    elapsed = all_reduce_seconds(world, nbytes, PROBE_ITERS, sync)
    n = world.world_size
    return {
        "bytes": nbytes,
        "time_sec": elapsed,
        "busbw_gbps": bus_bandwidth(nbytes / elapsed / 1e9, n) if elapsed > 0 else None,
        "world_size": n,
    }


def fake_slow_rank_delay(rank: int) -> float:
    """Seconds this rank sleeps in each step's data fetch (the test fake; 0 without it)."""
    raw = os.environ.get(FAKE_SLOW_RANK_ENV, "").strip()
    if not raw:
        return 0.0
    who, _, secs = raw.partition(":")
    try:
        target, delay = int(who), float(secs)
    except ValueError:
        raise UsageError(
            FAKE_SLOW_RANK_ENV, f"expected RANK:SECONDS such as 1:0.05, got {raw!r}"
        ) from None
    if delay < 0:
        raise UsageError(FAKE_SLOW_RANK_ENV, f"SECONDS must be at least 0, got {delay:g}")
    return delay if target == rank else 0.0


def sleep_if_slow(delay: float) -> None:
    if delay:
        time.sleep(delay)


@dataclass(frozen=True)
class Calibrated:
    """Pure forward+backward seconds per micro-step (the median of ``steps``)."""

    steps: int
    fwd_bwd_sec: float
    #: A CPU rank of several threads: the same passes on one thread, what its threads buy
    #: (the advisor's model of ranks that share a node's cores; docs/advisor.md).
    one_thread_sec: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "fwd_bwd_sec": self.fwd_bwd_sec,
            "one_thread_fwd_bwd_sec": self.one_thread_sec,
        }


def calibrate(
    *,
    steps: int,
    train_model: Any,
    module: nn.Module,
    ddp: DistributedDataParallel | None,
    batch: tuple[torch.Tensor, torch.Tensor],
    task: str,
    autocast: Callable[[], AbstractContextManager[Any]],
    device: torch.device,
) -> Calibrated | None:
    """Time ``steps`` forward+backward passes on ``batch`` without all-reduce (after one untimed
    warm-up), then leave everything as it was: gradients dropped, RNG states and buffers
    (BatchNorm's running statistics) restored, DDP's buffer-broadcast flag restored. The
    GradScaler is not used (the gradients are thrown away). None when ``steps`` is 0."""
    if steps <= 0:
        return None
    cuda = device.type == "cuda"
    rng = rng_state(device)
    buffers = [b.detach().clone() for b in module.buffers()]
    # A no_sync forward clears the flag that makes the next forward broadcast rank 0's
    # buffers; the first real step must do what it would have done without calibration.
    forward_sync = ddp.require_forward_param_sync if ddp is not None else None
    x, y = batch

    def median_pass() -> float:
        pairs = []
        for i in range(steps + 1):
            module.zero_grad(set_to_none=True)  # as after every real step
            with ddp.no_sync() if ddp is not None else nullcontext():
                start = stamp(cuda)
                with autocast():
                    out = train_model(x)
                batch_loss(task, out, y).backward()  # type: ignore[no-untyped-call]
                end = stamp(cuda)
            if i:  # the first pass warms up (allocator, kernels) and is not timed
                pairs.append((start, end))
        return statistics.median(seconds(pairs))

    fwd_bwd = median_pass()
    one_thread = None
    threads = torch.get_num_threads()
    if device.type == "cpu" and threads > 1:
        # Right after the first passes, under the same load: their ratio is what the
        # threads buy, however busy the machine.
        torch.set_num_threads(1)
        try:
            one_thread = median_pass()
        finally:
            torch.set_num_threads(threads)
    module.zero_grad(set_to_none=True)
    with torch.no_grad():
        for buf, saved in zip(module.buffers(), buffers, strict=True):
            buf.copy_(saved)
    if ddp is not None and forward_sync is not None:
        ddp.require_forward_param_sync = forward_sync
    set_rng_state(rng, device)
    return Calibrated(steps, fwd_bwd, one_thread)


def exposed_comm_sum(steps: Sequence[StepTime], fwd_bwd_sec: float) -> float:
    """Sum over steps of (all-reducing micro-step's forward+backward - pure compute); not
    clamped here: the epoch's sum is clamped once, so that noise does not bias it upwards."""
    return sum(s.sync_fwd_bwd - fwd_bwd_sec for s in steps)


@dataclass(frozen=True)
class RankEpoch:
    """One rank's epoch: a ``ranks`` item of ``step_times.jsonl``."""

    rank: int
    host: str
    step_median_sec: float | None
    busy_median_sec: float | None
    data_sec: float
    compute_sec: float
    comm_sec: float | None
    #: The input's way onto the device, apart from the host's wait in ``data_sec``: the
    #: host-to-device copies, and the device-side decode and normalisation. On a GPU both run
    #: on the prefetcher's side stream, overlapped with compute (docs/step-breakdown.md).
    transfer_sec: float = 0.0
    input_prep_sec: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "host": self.host,
            "step_median_sec": self.step_median_sec,
            "busy_median_sec": self.busy_median_sec,
            "data_sec": self.data_sec,
            "compute_sec": self.compute_sec,
            "comm_sec": self.comm_sec,
            "transfer_sec": self.transfer_sec,
            "input_prep_sec": self.input_prep_sec,
        }


def rank_epoch(
    world: World,
    steps: Sequence[StepTime],
    calibrated: Calibrated | None,
    *,
    data_sec: float,
    measured_sec: float,
    comm_raw_sec: float,
    transfer_sec: float = 0.0,
    input_prep_sec: float = 0.0,
) -> RankEpoch:
    """This rank's breakdown of an epoch.

    ``measured_sec`` is the epoch's forward+backward+optimizer total and ``comm_raw_sec`` the
    unclamped exposed-communication sum (both including a resumed attempt's partial sums, as
    are ``transfer_sec`` and ``input_prep_sec``);
    ``steps`` are this attempt's steps of the epoch (for the medians).
    """
    walls = [s.wall for s in steps]
    comm: float | None
    if not world.distributed:
        comm, busy = 0.0, walls
    elif calibrated is None:
        comm, busy = None, []
    else:
        c = calibrated.fwd_bwd_sec
        comm = max(0.0, comm_raw_sec)
        busy = [max(0.0, s.wall - (s.sync_fwd_bwd - c)) for s in steps]
    return RankEpoch(
        rank=world.rank,
        host=world.host,
        step_median_sec=statistics.median(walls) if walls else None,
        busy_median_sec=statistics.median(busy) if busy else None,
        data_sec=data_sec,
        compute_sec=max(0.0, measured_sec - (comm or 0.0)),
        comm_sec=comm,
        transfer_sec=transfer_sec,
        input_prep_sec=input_prep_sec,
    )


def breakdown_columns(ranks: Sequence[RankEpoch], epoch_time_sec: float) -> dict[str, Any]:
    """metrics.csv's breakdown cells: the means over ranks, and the rest of the epoch."""
    n = len(ranks)
    data = sum(r.data_sec for r in ranks) / n
    compute = sum(r.compute_sec for r in ranks) / n
    comms = [r.comm_sec for r in ranks]
    comm = None if any(c is None for c in comms) else sum(c or 0.0 for c in comms) / n
    return {
        "data_load_time_sec": data,
        "compute_time_sec": compute,
        "comm_time_sec": comm,
        "other_time_sec": max(0.0, epoch_time_sec - (data + compute + (comm or 0.0))),
    }
