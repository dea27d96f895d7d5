"""What the scaling advisor is given: a group's measured runs and the fabric's measured speed.

Plain frozen dataclasses, filled by :mod:`ddp_tui.advisor.measure` from what the run directories
hold (``metrics.csv``, ``run.json``, ``step_times.jsonl``, telemetry, a preflight's
``preflight.json``). Times are seconds per epoch, the mean over ranks, unless a name says
otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddp_tui.advisor.cores import CoreShare

#: The parts of an epoch the breakdown splits it into, in the order reports show them.
PARTS = ("compute_sec", "data_sec", "comm_sec", "other_sec")


@dataclass(frozen=True)
class Breakdown:
    """One epoch of one rank (the mean over ranks), split four ways; the parts sum to the
    epoch time. ``inferred`` names the parts that were worked out rather than measured (a
    user's script: the observation layer measures the data wait, not the all-reduce)."""

    compute_sec: float
    data_sec: float
    comm_sec: float
    other_sec: float
    inferred: tuple[str, ...] = ()

    @property
    def total_sec(self) -> float:
        return self.compute_sec + self.data_sec + self.comm_sec + self.other_sec

    def share(self, part: str) -> float:
        """``part``'s fraction of the epoch (0 for an empty epoch)."""
        total = self.total_sec
        return float(getattr(self, part)) / total if total > 0 else 0.0


@dataclass(frozen=True)
class RankTime:
    """One rank's steady step times in one epoch (``step_times.jsonl``)."""

    rank: int
    host: str
    step_median_sec: float
    #: The step time less the rank's exposed all-reduce wait: what the rank itself spent.
    busy_median_sec: float


@dataclass(frozen=True)
class SizeRun:
    """One measured run of the group, at one size."""

    run_id: str
    world_size: int
    nodes: int
    gpus_per_node: int
    #: Steady epoch time: the median of the epochs after the first.
    epoch_time_sec: float
    #: Samples/s over all ranks in the training loop (None: a script that counts no samples).
    throughput: float | None
    #: Optimizer steps per epoch (None: unknown).
    steps_per_epoch: int | None
    #: Samples one optimizer step takes over all ranks (batch x world x accumulation).
    global_batch: int | None
    breakdown: Breakdown | None
    #: Bytes one all-reduce of the gradients moves per rank (None: not recorded).
    grad_bytes: int | None = None
    buckets: int | None = None
    bucket_cap_mb: float | None = None
    #: The trainer's own all-reduce measure at this size: (message bytes, seconds).
    probe: tuple[int, float] | None = None
    ranks: tuple[RankTime, ...] = ()
    batch_per_gpu: int | None = None
    grad_accum: int = 1
    workers: int | None = None
    epochs: int | None = None
    #: Steps per epoch capped by the spec (``max_steps_per_epoch``); None: not capped.
    max_steps_per_epoch: int | None = None
    #: Training samples of the whole dataset (run.json's ``train_samples``).
    train_samples: int | None = None
    gpu_mem_peak_mib: float | None = None
    gpu_mem_total_mib: float | None = None
    partition: str | None = None
    #: A user's own script (its parts are partly inferred).
    script: bool = False
    #: "cpu" or "cuda" (None: not recorded).
    device: str | None = None
    #: The spec's dataset, and how its input pipeline ran (run.json's ``input_pipeline``):
    #: batches each loader worker kept ready, and where JPEGs were decoded ("cpu", "gpu").
    dataset: str | None = None
    prefetch: int | None = None
    decode: str | None = None
    #: What each rank had of its node's cores (None: not known).
    cores: CoreShare | None = None
    #: An iteration loop's run, measured by its step windows: the "epoch" fields then hold one
    #: optimizer step (``epoch_time_sec`` is the steady time per step, ``steps_per_epoch`` 1,
    #: ``epochs`` the step budget), and a step stays one step at every size.
    by_steps: bool = False


@dataclass(frozen=True)
class FabricSample:
    """A preflight's all-reduce table: message bytes and seconds, at one world size."""

    run_id: str
    world_size: int
    nodes: int
    rows: tuple[tuple[int, float], ...]
    partition: str | None = None


@dataclass(frozen=True)
class AdvisorInputs:
    group: str
    runs: tuple[SizeRun, ...]
    fabric: tuple[FabricSample, ...] = ()
    #: The partition's size in GPUs (CPU processes for a CPU run; None: unknown): sizes are
    #: predicted up to it, and none beyond it is recommended.
    max_world_size: int | None = None
    #: The efficiency the advice keeps to (the profile's, else ``--threshold``).
    threshold: float = 0.8
    #: The whole training (all epochs) must end within this many seconds (``--deadline``).
    deadline_sec: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
