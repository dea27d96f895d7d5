"""The scaling model: per-step times measured at some sizes, predicted at others.

One optimizer step of one rank takes ``data + compute + exposed(compute, allreduce) + rest``.
With the batch per GPU fixed, data and compute per step do not change with the world size (but
on a CPU node, where more ranks share the same cores, compute follows what each rank has:
:mod:`.cores`); the all-reduce does (:mod:`.fabric`), and backward hides part of it. How much
is Pollux's overlap: the step's compute and communication together take ``(c^g + T^g)^(1/g)``,
from ``c + T`` (g = 1, no overlap) to ``max(c, T)`` (g large, perfect overlap). g is fitted to
the group's multi-rank runs, whose exposed all-reduce is measured. Where a run's exposed
all-reduce is longer than even no overlap allows, the all-reduce ran slower in training than
the wire's measure says (it shares the CPU, memory or PCIe with the compute): g is then 1 and
the all-reduce is scaled by the fitted ``slowdown``. An epoch is ``steps(n)`` such steps plus
what the epoch does outside its steps (validation, the checkpoint), which shrinks with the
steps because validation is sharded too.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ddp_tui.advisor.cores import compute_scale, thread_gain
from ddp_tui.advisor.fabric import Link, allreduce_sec, fit_link, probe_link, ring_factor
from ddp_tui.advisor.inputs import Breakdown, FabricSample, SizeRun

GAMMA_MAX = 16.0
#: With no multi-rank run to fit on, the overlap is assumed to be none: the prediction is then
#: the slow end of what overlap allows, and its bounds reach down to perfect overlap.
GAMMA_PRIOR = 1.0
INTRA, INTER = "intra-node", "inter-node"
#: DDP's default bucket cap, for runs that did not record theirs.
DEFAULT_BUCKET_MB = 25.0


def together(compute: float, comm: float, gamma: float) -> float:
    """Compute and all-reduce of one step, overlapped by ``gamma``."""
    if comm <= 0:
        return compute
    if compute <= 0:
        return comm
    if gamma >= GAMMA_MAX:
        return max(compute, comm)
    top = max(compute, comm)
    return float(top * ((compute / top) ** gamma + (comm / top) ** gamma) ** (1 / gamma))


def fit_gamma(compute: float, comm: float, exposed: float) -> float:
    """The gamma for which ``together(compute, comm) - compute == exposed`` (bisection)."""
    target = compute + exposed
    if target >= compute + comm:
        return 1.0
    if target <= max(compute, comm):
        return GAMMA_MAX
    lo, hi = 1.0, GAMMA_MAX
    for _ in range(60):
        mid = (lo + hi) / 2
        if together(compute, comm, mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class Overlap:
    """How a step's all-reduce meets its compute: overlapped by ``gamma``, after being slowed
    by ``slowdown`` (1: as fast as the wire's measure)."""

    gamma: float
    slowdown: float = 1.0


def fit_overlap(compute: float, comm: float, exposed: float) -> Overlap:
    """The overlap that makes the model give ``exposed`` for a step of ``compute`` whose
    all-reduce takes ``comm`` on the wire."""
    if comm > 0 and exposed > comm:
        return Overlap(1.0, exposed / comm)
    return Overlap(fit_gamma(compute, comm, exposed))


@dataclass(frozen=True)
class StepTimes:
    """One measured run's epoch, per optimizer step of one rank."""

    run: SizeRun
    steps: float
    compute: float
    data: float
    comm: float  # exposed
    rest: float  # the training loop's own overhead
    outside: float  # per epoch: what the epoch does outside its steps


def step_times(run: SizeRun) -> StepTimes | None:
    """The run's steady epoch per step; None without a breakdown."""
    b = run.breakdown
    if b is None:
        return None
    steps = float(run.steps_per_epoch or 0)
    unit_steps = steps <= 0
    if unit_steps:  # a script that gave no step count: the epoch is one "step"
        steps = 1.0
    compute, data, comm = b.compute_sec / steps, b.data_sec / steps, b.comm_sec / steps
    if run.throughput and run.global_batch and not unit_steps:
        step = run.global_batch / run.throughput  # the loop's step, validation excluded
        rest = max(0.0, step - compute - data - comm)
        outside = max(0.0, run.epoch_time_sec - steps * (compute + data + comm + rest))
    else:
        rest, outside = b.other_sec / steps, 0.0
    return StepTimes(run, steps, compute, data, comm, rest, outside)


def ranks_on_node(world_size: int, nodes: int) -> int:
    """Ranks on each node of a job of ``world_size`` ranks on ``nodes`` nodes."""
    return math.ceil(world_size / max(1, nodes))


def infer_comm(runs: Sequence[SizeRun]) -> list[SizeRun]:
    """Where a run's comm was not measured (a script), the time its steps take beyond the
    smallest size's steps is taken to be the all-reduce; at one rank there is none to infer."""
    timed = [r for r in runs if r.breakdown is not None]
    if not timed:
        return list(runs)
    base = min(timed, key=lambda r: r.world_size)
    assert base.breakdown is not None
    gain = thread_gain(r.cores for r in runs)
    base_steps = float(base.steps_per_epoch or 0)
    out: list[SizeRun] = []
    for run in runs:
        b = run.breakdown
        if b is None or "comm_sec" not in b.inferred:
            out.append(run)
            continue
        if run.world_size == 1:
            out.append(replace(run, breakdown=replace(b, inferred=("compute_sec", "other_sec"))))
            continue
        busy = b.compute_sec + b.other_sec
        base_busy = base.breakdown.compute_sec + base.breakdown.other_sec
        if base_steps and run.steps_per_epoch:
            expected = base_busy / base_steps * run.steps_per_epoch
        else:  # a sharded epoch: each rank does 1/n of the work
            expected = base_busy * base.world_size / run.world_size
        # A CPU rank that shares its node's cores with more ranks is slower by itself.
        ranks = ranks_on_node(run.world_size, run.nodes)
        expected *= compute_scale(base.cores, base.device, ranks, gain)
        comm = min(busy, max(0.0, busy - expected)) if run is not base else 0.0
        compute = max(0.0, b.compute_sec - comm)
        other = b.other_sec - max(0.0, comm - b.compute_sec)
        out.append(replace(run, breakdown=Breakdown(compute, b.data_sec, comm, other, b.inferred)))
    return out


@dataclass(frozen=True)
class Fabric:
    """The links the group's all-reduces run over, by kind."""

    links: dict[str, Link]

    def link(self, nodes: int) -> tuple[Link | None, bool]:
        """The link for a job on ``nodes`` nodes, and whether it is borrowed from the other
        kind (a multi-node size predicted from single-node measures, or the reverse)."""
        kind, other = (INTER, INTRA) if nodes > 1 else (INTRA, INTER)
        if kind in self.links:
            return self.links[kind], False
        if other in self.links:
            return self.links[other], True
        return None, False


def message_bytes(runs: Sequence[SizeRun]) -> float | None:
    """The size of the messages DDP sends: one bucket's share of the gradients."""
    for run in runs:
        if run.grad_bytes:
            cap = (run.bucket_cap_mb or DEFAULT_BUCKET_MB) * 2**20
            return (
                min(float(run.grad_bytes), cap)
                if not run.buckets
                else run.grad_bytes / max(1, run.buckets)
            )
    return None


def build_fabric(
    runs: Sequence[SizeRun], samples: Sequence[FabricSample], around_bytes: float | None
) -> Fabric:
    """Links from the preflights first (a whole table, on the same partition), else from the
    trainer's own probes; per kind, the largest world measured (closest to what is predicted)."""
    links: dict[str, Link] = {}
    target = around_bytes or 2**20
    for sample in sorted(samples, key=lambda s: s.world_size):
        kind = INTER if sample.nodes > 1 else INTRA
        link = fit_link(sample, kind, target)
        if link is not None:
            links[kind] = link
    measured = set(links)  # a preflight's whole table beats a probe's one message
    for run in sorted(runs, key=lambda r: r.world_size):
        kind = INTER if run.nodes > 1 else INTRA
        if kind in measured:
            continue
        if run.probe is not None:
            link = probe_link(run.run_id, run.world_size, run.probe, kind)
            if link is not None:
                links[kind] = link
    return Fabric(links)


@dataclass(frozen=True)
class Estimate:
    epoch_time_sec: float
    step_sec: float
    throughput: float | None
    comm_sec: float  # exposed, per epoch
    link: str
    #: The cores one rank has of a CPU node (None: a GPU run, or not known).
    cores_per_rank: float | None = None


@dataclass(frozen=True)
class ScalingModel:
    """Fitted to a group's runs; :meth:`predict` answers for any world size."""

    references: tuple[StepTimes, ...]
    fabric: Fabric
    grad_bytes: float | None
    buckets: int
    overlap: Overlap
    #: The bounds: the fitted runs' most (fast) and least (slow) favourable overlaps.
    fast: Overlap
    slow: Overlap
    fitted: bool
    #: What threads buy a CPU rank's compute (:func:`~ddp_tui.advisor.cores.thread_gain`).
    thread_gain: float = 1.0

    def reference(self, world_size: int) -> StepTimes:
        """The measured run nearest below ``world_size`` (the smallest, for a smaller size):
        its per-step compute is what a rank of that size does."""
        below = [r for r in self.references if r.run.world_size <= world_size]
        if below:
            return max(below, key=lambda r: r.run.world_size)
        return min(self.references, key=lambda r: r.run.world_size)

    def compute_scale(self, ref: StepTimes, world_size: int, nodes: int) -> float:
        """How many times as long a step's compute takes at ``world_size`` as in ``ref``."""
        ranks = ranks_on_node(world_size, nodes)
        return compute_scale(ref.run.cores, ref.run.device, ranks, self.thread_gain)

    def steps(self, ref: StepTimes, world_size: int) -> float:
        run = ref.run
        if run.by_steps:  # an iteration loop's unit is one optimizer step at every size
            return 1.0
        if run.train_samples and run.batch_per_gpu:
            per_rank = math.ceil(run.train_samples / world_size)
            steps = float(math.ceil(per_rank / (run.batch_per_gpu * run.grad_accum)))
        else:
            steps = ref.steps * run.world_size / world_size
        if run.max_steps_per_epoch:
            steps = min(steps, float(run.max_steps_per_epoch))
        return max(steps, 1.0) if run.steps_per_epoch else steps

    def allreduce(self, ref: StepTimes, world_size: int, nodes: int) -> tuple[float, str]:
        """The step's all-reduce at ``world_size`` on ``nodes`` nodes, and the link's kind."""
        if world_size <= 1:
            return 0.0, "none"
        link, _ = self.fabric.link(nodes)
        if self.grad_bytes and link is not None:
            return allreduce_sec(link, world_size, self.grad_bytes, self.buckets), link.kind
        # No bytes or no link: scale the comm of the largest multi-rank run by the ring.
        measured = [r for r in self.references if r.run.world_size > 1 and r.comm > 0]
        if not measured:
            return 0.0, "unknown"
        big = max(measured, key=lambda r: r.run.world_size)
        scaled = big.comm * ring_factor(world_size) / ring_factor(big.run.world_size)
        return scaled, "scaled"

    def predict(
        self,
        world_size: int,
        nodes: int,
        *,
        overlap: Overlap | None = None,
        what_if: Mapping[str, float] | None = None,
    ) -> Estimate:
        """The epoch at ``world_size``. ``what_if`` scales the step's parts: ``batch`` and
        ``accum`` (samples per step, and compute and data with them), ``data`` (the wait) and
        ``grad_bytes``."""
        ref = self.reference(world_size)
        how = overlap or self.overlap
        what_if = what_if or {}
        batch = what_if.get("batch", 1.0)
        accum = what_if.get("accum", 1.0)
        work = batch * accum  # micro-batches' worth of compute and data per step
        # A CPU rank computes with the cores it has of its node: fewer as more ranks share it.
        share = ref.run.cores.at(ranks_on_node(world_size, nodes)) if ref.run.cores else None
        compute = ref.compute * work * self.compute_scale(ref, world_size, nodes)
        data = ref.data * work * what_if.get("data", 1.0)
        comm, kind = self.allreduce(ref, world_size, nodes)
        comm *= what_if.get("grad_bytes", 1.0)
        # A script's inferred all-reduce is exposed time already.
        if kind == "scaled":
            exposed = comm
        else:
            exposed = together(compute, comm * how.slowdown, how.gamma) - compute
        step = data + compute + exposed + ref.rest
        steps = self.steps(ref, world_size) / work
        epoch = steps * step + ref.outside * steps / max(self.steps(ref, ref.run.world_size), 1e-9)
        throughput = None
        if ref.run.global_batch:  # None: a script's, unknown
            throughput = ref.run.global_batch * work * world_size / ref.run.world_size / step
        per_rank = share.per_rank if share is not None and ref.run.device == "cpu" else None
        return Estimate(epoch, step, throughput, steps * exposed, kind, per_rank)


def fit(runs: Sequence[SizeRun], samples: Sequence[FabricSample] = ()) -> ScalingModel | None:
    """The model of ``runs`` (None: no run has a breakdown to build on)."""
    runs = infer_comm(runs)
    refs = [s for s in (step_times(r) for r in runs) if s is not None]
    if not refs:
        return None
    around = message_bytes(runs)
    fabric = build_fabric(runs, samples, around)
    grad = next((float(r.grad_bytes) for r in runs if r.grad_bytes), None)
    buckets = next((r.buckets for r in runs if r.buckets), None)
    if buckets is None and grad:
        cap = next((r.bucket_cap_mb for r in runs if r.bucket_cap_mb), None) or DEFAULT_BUCKET_MB
        buckets = max(1, math.ceil(grad / (cap * 2**20)))
    fits: list[Overlap] = []
    if grad:
        for ref in refs:
            run = ref.run
            if run.world_size < 2 or run.breakdown is None or run.breakdown.inferred:
                continue
            link, _ = fabric.link(run.nodes)
            if link is None:
                continue
            comm = allreduce_sec(link, run.world_size, grad, buckets or 1)
            fits.append(fit_overlap(ref.compute, comm, ref.comm))
    if fits:
        overlap = Overlap(
            statistics.median(f.gamma for f in fits), statistics.median(f.slowdown for f in fits)
        )
        fast = Overlap(max(f.gamma for f in fits), min(f.slowdown for f in fits))
        slow = Overlap(min(f.gamma for f in fits), max(f.slowdown for f in fits))
    else:
        overlap, fast, slow = Overlap(GAMMA_PRIOR), Overlap(GAMMA_MAX), Overlap(1.0)
    return ScalingModel(
        references=tuple(sorted(refs, key=lambda r: r.run.world_size)),
        fabric=fabric,
        grad_bytes=grad,
        buckets=buckets or 1,
        overlap=overlap,
        fast=fast,
        slow=slow,
        fitted=bool(fits),
        thread_gain=thread_gain(r.cores for r in runs),
    )


def backtest(
    runs: Sequence[SizeRun], samples: Sequence[FabricSample] = ()
) -> dict[str, float | None]:
    """Per run: (predicted - measured) / measured epoch time, with the model fitted on the other
    runs only (the fabric's preflights stay: they measure the wire, not the run). None where
    no other run is left to fit on."""
    errors: dict[str, float | None] = {}
    for run in runs:
        others = [r for r in runs if r.run_id != run.run_id]
        model = fit(others, samples) if others else None
        if model is None:
            errors[run.run_id] = None
            continue
        if not model.fabric.links and run.probe is not None:
            # Without a preflight, the held-out run's own probe is the only measure of the
            # wire at its size: use it, its timings stay held out.
            model = replace(model, fabric=build_fabric([run], (), message_bytes(runs)))
        est = model.predict(run.world_size, run.nodes)
        errors[run.run_id] = (est.epoch_time_sec - run.epoch_time_sec) / run.epoch_time_sec
    return errors
