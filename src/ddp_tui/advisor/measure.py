"""From what a run directory holds to the advisor's inputs (pure: the files are read already).

A trainer run measures all four parts of its epochs (``docs/step-breakdown.md``). A user's
script, or a trainer run made without the calibration, measures the data wait only: its
compute column holds the all-reduce too, so the comm part is inferred later, across the group
(:func:`ddp_tui.advisor.model.infer_comm`), and the breakdown says which parts were inferred.

A script with no epochs (an iteration loop) has step windows for rows: the advisor's unit is
then one optimizer step (:func:`window_times`), the first window, with the start-up, left out
like the first epoch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ddp_tui.advisor.cores import core_share
from ddp_tui.advisor.inputs import Breakdown, FabricSample, RankTime, SizeRun
from ddp_tui.reports.results import RunData, epoch_rows, steady_median, summarize

_INFERRED = ("compute_sec", "comm_sec", "other_sec")


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: Any) -> int | None:
    number = _num(value)
    return int(number) if number is not None and number.is_integer() and number > 0 else None


def _whole(*values: Any) -> int | None:
    """The first of ``values`` that is a count, 0 included (workers: 0 is the main process)."""
    for value in values:
        number = _num(value)
        if number is not None and number.is_integer() and number >= 0:
            return int(number)
    return None


def breakdown(rows: Sequence[Mapping[str, float | None]], epoch_time: float) -> Breakdown | None:
    """The steady epoch split four ways; the rest (``other``) makes the parts sum to
    ``epoch_time``. None without a compute column (nothing was timed inside the epoch)."""
    compute = steady_median(rows, "compute_time_sec")
    if compute is None:
        return None
    data = steady_median(rows, "data_load_time_sec") or 0.0
    comm = steady_median(rows, "comm_time_sec")
    inferred: tuple[str, ...] = ()
    if comm is None:
        comm, inferred = 0.0, _INFERRED
    # Medians of parts need not sum to the median epoch: the remainder is "other", and a
    # part larger than the epoch (a noisy epoch) is scaled down to fit.
    timed = compute + data + comm
    if timed > epoch_time > 0:
        scale = epoch_time / timed
        compute, data, comm = compute * scale, data * scale, comm * scale
    other = max(0.0, epoch_time - (compute + data + comm))
    return Breakdown(compute, data, comm, other, inferred)


@dataclass(frozen=True)
class WindowTimes:
    """An iteration loop's steady optimizer step, from its step windows."""

    step_sec: float
    #: Samples/s over all ranks (None: the script counts no samples).
    throughput: float | None
    #: The wait for data per step (0: not measured).
    data_sec: float


def window_times(rows: Sequence[Mapping[str, float | None]]) -> WindowTimes | None:
    """The steady step of a run whose rows are step windows (each ``step`` the optimizer step at
    the window's end, ``epoch_time_sec`` the window's seconds): the median over the windows after
    the first, as :func:`steady_median` treats epochs, since the first pays for the start-up.
    None when the rows are epochs, or no window says how long it took."""
    if not rows or any(r.get("epoch") is not None for r in rows):
        return None
    per_step: list[dict[str, float | None]] = []
    previous = 0.0
    for row in rows:
        step = _num(row.get("step"))
        if step is None:
            continue
        steps, previous = step - previous, step
        seconds, data = _num(row.get("epoch_time_sec")), _num(row.get("data_load_time_sec"))
        timed = steps > 0 and seconds is not None and seconds > 0
        per_step.append(
            {
                "step_sec": seconds / steps if timed and seconds is not None else None,
                "data_sec": data / steps if timed and data is not None else None,
                "throughput_samples_per_sec": row.get("throughput_samples_per_sec"),
            }
        )
    step_sec = steady_median(per_step, "step_sec")
    if step_sec is None or step_sec <= 0:
        return None
    data = min(steady_median(per_step, "data_sec") or 0.0, step_sec)
    return WindowTimes(step_sec, steady_median(per_step, "throughput_samples_per_sec"), data)


def _ranks(step_times: Sequence[Mapping[str, Any]]) -> tuple[RankTime, ...]:
    """The last epoch's per-rank step times (the steadiest; the first pays for warm-up)."""
    for line in reversed(step_times):
        ranks = line.get("ranks")
        if not isinstance(ranks, list):
            continue
        out: list[RankTime] = []
        for item in ranks:
            if not isinstance(item, Mapping):
                continue
            rank, step, busy = _num(item.get("rank")), _num(item.get("step_median_sec")), None
            busy = _num(item.get("busy_median_sec"))
            if rank is None or step is None:
                continue
            host = item.get("host")
            out.append(
                RankTime(
                    int(rank), str(host) if host else "?", step, step if busy is None else busy
                )
            )
        if out:
            return tuple(sorted(out, key=lambda r: r.rank))
    return ()


def size_run(run: RunData, step_times: Sequence[Mapping[str, Any]] = ()) -> SizeRun | None:
    """One run as the advisor sees it; None when it has no steady epoch time yet.
    ``step_times``: the lines of its ``step_times.jsonl``, parsed (empty: none)."""
    summary = summarize(run)
    rows = epoch_rows(run.metrics)
    rj: Mapping[str, Any] = run.run_json or {}
    spec = run.spec
    windows = window_times(rows)
    unit_time = windows.step_sec if windows is not None else summary.epoch_time
    if summary.world_size is None or unit_time is None or unit_time <= 0:
        return None
    ddp = rj.get("ddp") if isinstance(rj.get("ddp"), Mapping) else {}
    pipeline = rj.get("input_pipeline")
    pipeline = pipeline if isinstance(pipeline, Mapping) else {}
    probe_doc = rj.get("allreduce_probe")
    probe: tuple[int, float] | None = None
    if isinstance(probe_doc, Mapping):
        nbytes, seconds = _int(probe_doc.get("bytes")), _num(probe_doc.get("time_sec"))
        if nbytes and seconds and seconds > 0:
            probe = (nbytes, seconds)
    totals = [d.total_mib for d in run.resources.devices] if run.resources else []
    known_totals = [t for t in totals if t]
    script = spec.get("entry") == "script"
    nodes = summary.nodes or 1
    measured = SizeRun(
        run_id=run.run_id,
        world_size=summary.world_size,
        nodes=nodes,
        gpus_per_node=summary.gpus_per_node or max(1, summary.world_size // nodes),
        epoch_time_sec=unit_time,
        throughput=summary.throughput,
        steps_per_epoch=_int(rj.get("steps_per_epoch")),
        global_batch=summary.global_batch,
        breakdown=breakdown(rows, unit_time) if windows is None else None,
        grad_bytes=_int(rj.get("grad_bytes")),
        buckets=_int(ddp.get("buckets")) if isinstance(ddp, Mapping) else None,
        bucket_cap_mb=_num(ddp.get("bucket_cap_mb")) if isinstance(ddp, Mapping) else None,
        probe=probe,
        ranks=_ranks(step_times),
        batch_per_gpu=None if script else _int(spec.get("batch_per_gpu")),
        grad_accum=_int(spec.get("grad_accum")) or 1,
        workers=_whole(rj.get("loader_workers"), spec.get("workers")),
        epochs=summary.epochs_total,
        max_steps_per_epoch=_int(spec.get("max_steps_per_epoch")),
        train_samples=_int(rj.get("train_samples")),
        gpu_mem_peak_mib=summary.gpu_mem_peak_mib or summary.peak_mem_mib,
        gpu_mem_total_mib=min(known_totals) if known_totals else None,
        partition=str(spec["partition"]) if spec.get("partition") else None,
        script=script,
        device=str(spec["device"]) if spec.get("device") else None,
        cores=core_share(rj, spec),
        dataset=str(spec["dataset"]) if spec.get("dataset") else None,
        prefetch=_int(pipeline.get("prefetch")),
        decode=str(pipeline["decode"]) if pipeline.get("decode") else None,
    )
    return measured if windows is None else _by_steps(measured, windows, rj, spec)


def _by_steps(
    run: SizeRun, windows: WindowTimes, rj: Mapping[str, Any], spec: Mapping[str, Any]
) -> SizeRun:
    """An iteration loop's run in the advisor's terms, one optimizer step for an epoch: its
    samples per step (all ranks) follow from the rate and the step time, the budget is the
    spec's ``max_steps`` (else run.json's, else the steps done), and the step's time outside
    the data wait is compute with the all-reduce in it, inferred across the group like any
    script's."""
    samples = windows.throughput * windows.step_sec if windows.throughput else None
    budget = (
        _int(spec.get("max_steps")) or _int(rj.get("max_steps")) or _int(rj.get("steps_completed"))
    )
    return replace(
        run,
        epoch_time_sec=windows.step_sec,
        throughput=windows.throughput,
        steps_per_epoch=1,
        global_batch=max(1, round(samples)) if samples else None,
        breakdown=Breakdown(
            windows.step_sec - windows.data_sec, windows.data_sec, 0.0, 0.0, _INFERRED
        ),
        batch_per_gpu=None,
        epochs=budget,
        max_steps_per_epoch=None,
        train_samples=None,
        by_steps=True,
    )


def fabric_sample(
    run_id: str, preflight: Mapping[str, Any], nodes: int, partition: str | None = None
) -> FabricSample | None:
    """A passed preflight's all-reduce table (None: failed, one rank, or no table)."""
    world = _int(preflight.get("world_size"))
    if preflight.get("ok") is not True or world is None or world < 2:
        return None
    rows: list[tuple[int, float]] = []
    for row in preflight.get("bandwidth") or ():
        if not isinstance(row, Mapping):
            continue
        nbytes, micros = _int(row.get("bytes")), _num(row.get("time_us"))
        if nbytes and micros and micros > 0:
            rows.append((nbytes, micros / 1e6))
    if not rows:
        return None
    return FabricSample(run_id, world, max(1, nodes), tuple(sorted(rows)), partition)
