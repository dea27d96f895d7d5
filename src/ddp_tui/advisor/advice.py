"""The advice: per size, measured and predicted; the size to run, and why.

Speedup and efficiency are against the group's smallest measured size, by throughput like
Compare's table (or by epoch time where a script counts no samples). A size that was run
is judged on what was measured; the others on the model (:mod:`.model`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from ddp_tui.advisor.changes import changes_for, stragglers
from ddp_tui.advisor.inputs import AdvisorInputs, SizeRun
from ddp_tui.advisor.model import INTER, Estimate, ScalingModel, backtest, fit, infer_comm
from ddp_tui.advisor.result import (
    Advice,
    Measured,
    ModelFacts,
    Predicted,
    Recommendation,
    SizeAdvice,
    gpu_hours,
)
from ddp_tui.advisor.words import duration, size_words

#: Predictions reach this many times the largest measured size.
REACH = 4


def candidate_sizes(runs: Sequence[SizeRun], max_world_size: int | None) -> list[tuple[int, int]]:
    """(world size, nodes): the measured sizes, then powers of two up to ``REACH`` times the
    largest measured one, or to the partition's size where that is larger. Past one node a
    size is whole nodes of the largest run's per-node count."""
    per_node = max(runs, key=lambda r: r.world_size).gpus_per_node or 1
    top = max(r.world_size for r in runs) * REACH
    if max_world_size:
        top = max(top, max_world_size)
    shapes = {(r.world_size, r.nodes) for r in runs}
    n = 1
    while n <= top:
        if n <= per_node:
            shapes.add((n, 1))
        elif n % per_node == 0:
            shapes.add((n, n // per_node))
        n *= 2
    if max_world_size and max_world_size % per_node == 0:
        shapes.add((max_world_size, max(1, max_world_size // per_node)))
    return sorted(shapes)


class _Rates:
    """Speedup and efficiency against the baseline run, by one measure for all sizes."""

    def __init__(self, runs: Sequence[SizeRun]) -> None:
        self.base = min(runs, key=lambda r: (r.world_size, r.run_id))
        self.by_throughput = all(r.throughput for r in runs)
        self.base_rate = self.rate(self.base.throughput, self.base.epoch_time_sec)

    def rate(self, throughput: float | None, epoch_time: float) -> float:
        if self.by_throughput and throughput:
            return throughput
        return 1.0 / epoch_time if epoch_time > 0 else 0.0

    def speedup(self, throughput: float | None, epoch_time: float) -> float:
        return self.rate(throughput, epoch_time) / self.base_rate if self.base_rate else 0.0

    def efficiency(self, speedup: float, world_size: int) -> float:
        return speedup / (world_size / self.base.world_size)

    def of(self, estimate: Estimate) -> float:
        """A model estimate's rate, by the group's measure."""
        return self.rate(estimate.throughput, estimate.epoch_time_sec)


def _measured(run: SizeRun, rates: _Rates) -> Measured:
    speedup = rates.speedup(run.throughput, run.epoch_time_sec)
    return Measured(
        run_id=run.run_id,
        epoch_time_sec=run.epoch_time_sec,
        throughput=run.throughput,
        speedup=speedup,
        efficiency=rates.efficiency(speedup, run.world_size),
        breakdown=run.breakdown,
    )


def _predicted(
    model: ScalingModel, world: int, nodes: int, rates: _Rates, width: float
) -> Predicted:
    est = model.predict(world, nodes)
    # Widened by the backtest's worst error, as a factor: a 40% error gives /1.4 and x1.4.
    fast = model.predict(world, nodes, overlap=model.fast).epoch_time_sec / (1 + width)
    slow = model.predict(world, nodes, overlap=model.slow).epoch_time_sec * (1 + width)
    low, high = min(fast, est.epoch_time_sec), max(slow, est.epoch_time_sec)
    speedup = rates.speedup(est.throughput, est.epoch_time_sec)
    s_low = speedup * est.epoch_time_sec / high
    s_high = speedup * est.epoch_time_sec / low if low > 0 else speedup
    # The model has no source of superlinear scaling: a bound past linear is the widening's,
    # not a possibility, unless the estimate itself is past it.
    s_high = min(s_high, max(speedup, world / rates.base.world_size))
    return Predicted(
        epoch_time_sec=est.epoch_time_sec,
        epoch_time_low_sec=low,
        epoch_time_high_sec=high,
        throughput=est.throughput,
        speedup=speedup,
        speedup_low=s_low,
        speedup_high=s_high,
        efficiency=rates.efficiency(speedup, world),
        efficiency_low=rates.efficiency(s_low, world),
        efficiency_high=rates.efficiency(s_high, world),
        gpu_hours_per_epoch=gpu_hours(world, est.epoch_time_sec),
        comm_sec=est.comm_sec,
        link=est.link,
        cores_per_rank=est.cores_per_rank,
    )


def best_estimate(size: SizeAdvice) -> tuple[float, float] | None:
    """(epoch time, efficiency): measured where the size was run, else predicted."""
    if size.measured is not None and size.measured.efficiency is not None:
        return size.measured.epoch_time_sec, size.measured.efficiency
    if size.predicted is not None:
        return size.predicted.epoch_time_sec, size.predicted.efficiency
    return None


def _known(sizes: Sequence[SizeAdvice]) -> list[tuple[SizeAdvice, tuple[float, float]]]:
    """The sizes the partition holds that have an estimate, with it."""
    return [(s, e) for s in sizes if s.fits_partition and (e := best_estimate(s)) is not None]


def _by_threshold(
    sizes: Sequence[SizeAdvice], threshold: float, unit: str = "epoch"
) -> Recommendation:
    known = _known(sizes)
    fit_ = [(s, e) for s, e in known if e[1] >= threshold - 1e-9]
    if not fit_:
        return Recommendation(None, None, None, "no size has an efficiency estimate", "none")
    size, (epoch, eff) = max(fit_, key=lambda item: item[0].world_size)
    how = "measured" if size.measured is not None else "predicted"
    reason = (
        f"{size_words(size.world_size, size.nodes, size.gpus_per_node)} is the largest size "
        f"whose efficiency stays at or above {threshold:.0%}: {eff:.0%} {how}, "
        f"{duration(epoch)} and {gpu_hours(size.world_size, epoch):.3g} GPU-hours per {unit}"
    )
    beyond = [(s, e) for s, e in known if s.world_size > size.world_size]
    if beyond:
        nxt, (n_epoch, n_eff) = min(beyond, key=lambda item: item[0].world_size)
        reason += (
            f"; {nxt.world_size} would be {n_eff:.0%} "
            f"({duration(n_epoch)}, {gpu_hours(nxt.world_size, n_epoch):.3g} GPU-hours per {unit})"
        )
    return Recommendation(size.world_size, size.nodes, size.gpus_per_node, reason, "threshold")


def _by_deadline(
    sizes: Sequence[SizeAdvice], deadline: float, epochs: int, unit: str = "epoch"
) -> Recommendation:
    known = _known(sizes)
    if not known:
        return Recommendation(None, None, None, "no size has a time estimate", "none")
    whole = f"{epochs} {unit}{'s' if epochs != 1 else ''}"

    def cost(item: tuple[SizeAdvice, tuple[float, float]]) -> tuple[float, float]:
        s, (epoch, _) = item
        return gpu_hours(s.world_size, epoch * epochs), epoch

    meets = [item for item in known if item[1][0] * epochs <= deadline]
    if meets:
        size, (epoch, _) = min(meets, key=cost)
        reason = (
            f"{size_words(size.world_size, size.nodes, size.gpus_per_node)} runs {whole} in "
            f"{duration(epoch * epochs)}, within the deadline of {duration(deadline)}, for "
            f"{cost((size, (epoch, 0.0)))[0]:.3g} GPU-hours: the fewest of the "
            f"{len(meets)} size{'s' if len(meets) != 1 else ''} that meet it"
        )
    else:
        size, (epoch, _) = min(known, key=lambda item: item[1][0])
        reason = (
            f"no size runs {whole} within {duration(deadline)}; "
            f"{size_words(size.world_size, size.nodes, size.gpus_per_node)} is the fastest, "
            f"{duration(epoch * epochs)}"
        )
    return Recommendation(size.world_size, size.nodes, size.gpus_per_node, reason, "deadline")


def _notes(
    inputs: AdvisorInputs,
    runs: Sequence[SizeRun],
    model: ScalingModel | None,
    sizes: Sequence[SizeAdvice],
) -> list[str]:
    notes = list(inputs.notes)
    if runs and runs[0].by_steps:
        notes.append(
            "an iteration loop with no epochs: times are per optimizer step, from its step "
            "windows (the first, with the start-up, left out), and the whole run is its step "
            "budget; a step keeps its batch per rank at every size"
        )
    for run in runs:
        if run.breakdown is not None and run.breakdown.inferred:
            what = ", ".join(p.removesuffix("_sec") for p in run.breakdown.inferred)
            who = "a user's script" if run.script else "no calibration"
            notes.append(
                f"{run.run_id} ({who}): {what} inferred, not measured: the data wait is "
                "measured, the all-reduce is the time its steps take beyond the smallest size's"
            )
    if model is None:
        return notes
    shares = _core_shares(model, sizes)
    if shares:
        notes.append(
            "CPU ranks share their node's cores, and compute per step is scaled by the cores "
            f"a rank has: {shares}"
        )
    if not model.fabric.links:
        notes.append(
            "no all-reduce bandwidth measured: run a preflight on the same partition "
            "(ddp-tui preflight) at the largest size you consider"
        )
    elif INTER not in model.fabric.links and any(s.nodes > 1 for s in sizes):
        notes.append(
            "sizes past one node assume the single-node bandwidth (no multi-node preflight): "
            "a network is slower, so treat those predictions as optimistic"
        )
    if not model.fitted:
        notes.append(
            "no multi-rank run with a measured all-reduce to fit the overlap on: predictions "
            "assume backward hides none of it, their lower bound that it hides all"
        )
    return notes


def _core_shares(model: ScalingModel, sizes: Sequence[SizeAdvice]) -> str:
    """``2 at world size 1, 1 at 2, 0.5 at 4``: the cores a rank has at each size of a CPU
    group, measured where a run said, else as the model has it; empty where no size differs
    (a GPU group, or runs that did not say)."""
    had: dict[int, float] = {}
    for ref in model.references:
        if ref.run.device == "cpu" and ref.run.cores is not None:
            had[ref.run.world_size] = ref.run.cores.per_rank
    for size in sizes:
        cores = size.predicted.cores_per_rank if size.predicted is not None else None
        if size.world_size not in had and cores is not None:
            had[size.world_size] = cores
    if len(set(had.values())) < 2:
        return ""
    parts = [f"{cores:g} at {world}" for world, cores in sorted(had.items())]
    return parts[0].replace(" at ", " at world size ", 1) + "".join(f", {p}" for p in parts[1:])


def advise(inputs: AdvisorInputs) -> Advice:
    """The group's advice (see :mod:`ddp_tui.advisor`)."""
    runs = sorted(inputs.runs, key=lambda r: (r.world_size, r.run_id))
    if len({r.by_steps for r in runs}) > 1:
        # A step and an epoch are no common unit: the runs with epochs are the group's.
        left = [r.run_id for r in runs if r.by_steps]
        runs = [r for r in runs if not r.by_steps]
        inputs = replace(
            inputs,
            notes=(
                *inputs.notes,
                f"left out, measured by steps where the others have epochs: {', '.join(left)}",
            ),
        )
    unit = "step" if runs and runs[0].by_steps else "epoch"
    if not runs:
        return Advice(
            group=inputs.group,
            threshold=inputs.threshold,
            deadline_sec=inputs.deadline_sec,
            sizes=(),
            recommendation=Recommendation(
                None, None, None, "no run of the group has a steady epoch yet", "none"
            ),
            changes=(),
            stragglers=(),
            model=None,
            notes=tuple(inputs.notes),
        )
    model = fit(runs, inputs.fabric)
    errors = backtest(runs, inputs.fabric) if model is not None else {}
    known_errors = [abs(e) for e in errors.values() if e is not None and math.isfinite(e)]
    width = max(known_errors, default=0.0)
    rates = _Rates(runs)
    # A script's comm is inferred across the group; fit() and each backtest infer it from
    # the runs they are given, the table shows it inferred from all of them.
    shown = {r.run_id: r for r in infer_comm(runs)}
    per_node = max(runs, key=lambda r: r.world_size).gpus_per_node or 1
    sizes: list[SizeAdvice] = []
    for world, nodes in candidate_sizes(runs, inputs.max_world_size):
        run = next((r for r in runs if r.world_size == world and r.nodes == nodes), None)
        sizes.append(
            SizeAdvice(
                world_size=world,
                nodes=nodes,
                gpus_per_node=run.gpus_per_node if run else min(world, per_node),
                measured=_measured(shown[run.run_id], rates) if run else None,
                predicted=_predicted(model, world, nodes, rates, width) if model else None,
                backtest_error=errors.get(run.run_id) if run else None,
                fits_partition=inputs.max_world_size is None or world <= inputs.max_world_size,
            )
        )
    epochs = max((r.epochs for r in runs if r.epochs), default=1)
    if inputs.deadline_sec:
        rec = _by_deadline(sizes, inputs.deadline_sec, epochs, unit)
    else:
        rec = _by_threshold(sizes, inputs.threshold, unit)
    facts = None
    cpu = any(r.device == "cpu" and r.cores is not None for r in runs)
    if model is not None:
        facts = ModelFacts(
            gamma=model.overlap.gamma if model.fitted else None,
            gamma_low=model.slow.gamma,
            gamma_high=model.fast.gamma,
            slowdown=model.overlap.slowdown if model.fitted else None,
            fitted=model.fitted,
            grad_bytes=int(model.grad_bytes) if model.grad_bytes else None,
            buckets=model.buckets if model.grad_bytes else None,
            links={
                kind: {
                    "alpha_sec": link.alpha_sec,
                    "busbw_gbps": link.busbw_gbps,
                    "source": link.source,
                }
                for kind, link in model.fabric.links.items()
            },
            rate_from="throughput" if rates.by_throughput else "epoch_time",
            thread_gain=model.thread_gain if cpu else None,
            thread_gain_measured=any(r.cores.gain is not None for r in runs if r.cores),
        )
    # Changes are priced where they matter: the recommended size, or the largest one run
    # when that is larger (a change may be what makes it worth running).
    largest = max(runs, key=lambda r: r.world_size)
    if rec.world_size is not None and rec.world_size > largest.world_size:
        target, target_nodes = rec.world_size, rec.nodes or 1
    else:
        target, target_nodes = largest.world_size, largest.nodes
    found = stragglers(runs)
    return Advice(
        group=inputs.group,
        threshold=inputs.threshold,
        deadline_sec=inputs.deadline_sec,
        sizes=tuple(sizes),
        recommendation=rec,
        changes=tuple(
            changes_for(
                runs,
                model,
                (target, target_nodes),
                found,
                rates.of,
                (rates.base.world_size, rates.base.nodes),
            )
        )
        if model is not None
        else (),
        stragglers=tuple(found),
        model=facts,
        notes=tuple(_notes(inputs, runs, model, sizes)),
    )
