"""What the scaling advisor answers: per size, what was measured and what the model predicts;
the size to run and why; the changes the measurements support; the stragglers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddp_tui.advisor.inputs import Breakdown
from ddp_tui.reports.usage import device_hours

#: What ``world_size`` GPUs (or processes) busy for ``seconds`` cost, in GPU-hours: the one
#: formula that Compare's and ``ls``'s GPU-hours use too (:mod:`ddp_tui.reports.usage`).
gpu_hours = device_hours


@dataclass(frozen=True)
class Measured:
    run_id: str
    epoch_time_sec: float
    throughput: float | None
    #: Against the group's smallest measured size (1.0 there).
    speedup: float | None
    efficiency: float | None
    breakdown: Breakdown | None


@dataclass(frozen=True)
class Predicted:
    epoch_time_sec: float
    #: Bounds: the overlap of compute and all-reduce between the fitted extremes (or, with no
    #: multi-rank run to fit on, between none and perfect), widened by the backtest's error.
    epoch_time_low_sec: float
    epoch_time_high_sec: float
    throughput: float | None
    speedup: float
    speedup_low: float
    speedup_high: float
    efficiency: float
    efficiency_low: float
    efficiency_high: float
    gpu_hours_per_epoch: float
    #: The exposed all-reduce per epoch in the prediction, and the link it assumed.
    comm_sec: float
    link: str  # "intra-node", "inter-node" or "none" (one rank)
    #: The cores one rank has of its node in a CPU run, which its compute is scaled by
    #: (None: a GPU run, where a rank has its device, or a run that did not say).
    cores_per_rank: float | None = None


@dataclass(frozen=True)
class SizeAdvice:
    world_size: int
    nodes: int
    gpus_per_node: int
    measured: Measured | None
    predicted: Predicted | None
    #: (predicted - measured) / measured epoch time, fitted without this size's run.
    backtest_error: float | None = None
    #: Whether the partition holds this size (a size past it is shown, never recommended).
    fits_partition: bool = True


@dataclass(frozen=True)
class Recommendation:
    world_size: int | None
    nodes: int | None
    gpus_per_node: int | None
    reason: str
    rule: str  # "threshold", "deadline" or "none"


@dataclass(frozen=True)
class Change:
    """A concrete change, with the number behind it."""

    #: "data_wait", "batch", "accumulation", "bf16_compression", "bucket_cap", "exclude".
    kind: str
    text: str
    #: The numbers the text quotes (shares, efficiencies before and after, a size, a host).
    numbers: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Straggler:
    run_id: str
    world_size: int
    rank: int
    host: str
    #: How much slower than the median rank, as a fraction (0.23: 23% slower).
    slower_by: float
    busy_median_sec: float
    median_busy_sec: float


@dataclass(frozen=True)
class ModelFacts:
    """What the predictions rest on, for the report to show."""

    #: The overlap exponent (Pollux's gamma; 1 = none, large = perfect); None: not fitted.
    gamma: float | None
    gamma_low: float
    gamma_high: float
    #: How much slower the all-reduce ran in training than the wire's measure (1: as fast);
    #: None: not fitted.
    slowdown: float | None
    #: Whether a multi-rank run with a measured all-reduce was there to fit the two on.
    fitted: bool
    grad_bytes: int | None
    buckets: int | None
    #: Per link kind: {"alpha_sec": ..., "busbw_gbps": ..., "source": ...}.
    links: dict[str, dict[str, Any]]
    #: "throughput" or "epoch_time": what speedup and efficiency are measured by.
    rate_from: str
    #: A CPU group: a rank's compute speed on ``c`` cores is ``c ** thread_gain``
    #: (docs/advisor.md, "Ranks that share a node's cores"); None: a GPU group.
    thread_gain: float | None = None
    #: Whether a run measured it (its calibration on one thread), else 1 was assumed.
    thread_gain_measured: bool = False


@dataclass(frozen=True)
class Advice:
    group: str
    threshold: float
    deadline_sec: float | None
    sizes: tuple[SizeAdvice, ...]
    recommendation: Recommendation
    changes: tuple[Change, ...]
    stragglers: tuple[Straggler, ...]
    model: ModelFacts | None
    #: Assumptions and gaps in words (inferred parts, a borrowed link, no bandwidth).
    notes: tuple[str, ...] = ()

    def size(self, world_size: int) -> SizeAdvice | None:
        return next((s for s in self.sizes if s.world_size == world_size), None)
