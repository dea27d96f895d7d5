"""Per-run summaries and the scaling comparison of a group, with Markdown and CSV export.

Inputs are what a run directory holds: ``metrics.csv`` rows, ``spec.json``'s spec,
the trainer's ``run.json`` and the resource telemetry's summary (read by
:mod:`ddp_tui.remote.groups.comparison`; everything here is pure; the telemetry's summaries are
made by :mod:`ddp_tui.resources` and re-exported here). Throughput and epoch time are the
median of the epochs after the first (the first pays for warm-up, compilation and cold
caches), or of the only epoch when there is just one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

# Re-exported: the issue asks for the telemetry summaries "in results.py" too.
from ddp_tui.resources import ResourceSummary as ResourceSummary
from ddp_tui.resources import summarize_samples as summarize_samples

MetricsRows = Sequence[Mapping[str, float | None]]

SCALING_COLUMNS = [
    "nodes",
    "gpus_per_node",
    "world_size",
    "global_batch",
    "throughput",
    "epoch_time",
    "speedup",
    "ideal_speedup",
    "efficiency",
    "final_val_metric",
    "peak_mem_mib",
    "gpu_mem_peak_mib",
    "gpu_mem_mode_mib",
    "host_mem_peak_mib",
    "gpu_util_avg",
]
#: The columns of the resource telemetry (:class:`ResourceSummary`'s fields of the same names).
_RESOURCE_COLUMNS = ("gpu_mem_peak_mib", "gpu_mem_mode_mib", "host_mem_peak_mib", "gpu_util_avg")
_INT_COLUMNS = ("nodes", "gpus_per_node", "world_size", "global_batch")

# Spec field names, with the spellings accepted for each (first found wins).
_SPEC_KEYS: dict[str, tuple[str, ...]] = {
    "nodes": ("nodes", "num_nodes"),
    "gpus_per_node": ("gpus_per_node", "procs_per_node", "nproc_per_node"),
    "batch_size": ("batch_size", "batch_per_gpu", "batch_size_per_gpu"),
    "grad_accum": ("grad_accum", "gradient_accumulation"),
    "epochs": ("epochs",),
}


@dataclass(frozen=True)
class RunData:
    """What the summaries need of one run."""

    run_id: str
    spec: Mapping[str, Any]  # ExperimentSpec.to_dict()
    metrics: MetricsRows
    run_json: Mapping[str, Any] | None = None
    group: str | None = None
    #: The resource telemetry's summary (None: the run wrote none).
    resources: ResourceSummary | None = None


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    group: str | None
    state: str | None  # run.json's state
    epochs_done: int
    epochs_total: int | None
    final_train_loss: float | None
    final_val_metric: float | None
    val_metric_name: str | None  # "val_acc" or "val_rmse"
    throughput: float | None  # samples/s over all ranks
    epoch_time: float | None  # seconds
    peak_mem_mib: float | None  # the trainer's, per epoch (torch.cuda.max_memory_allocated)
    # From the resource telemetry (None without it): what the devices and hosts reported.
    gpu_mem_peak_mib: float | None
    gpu_mem_mode_mib: float | None
    host_mem_peak_mib: float | None
    gpu_util_avg: float | None
    world_size: int | None
    nodes: int | None
    gpus_per_node: int | None
    global_batch: int | None


def _spec_value(spec: Mapping[str, Any], key: str) -> Any:
    for name in _SPEC_KEYS[key]:
        if spec.get(name) is not None:
            return spec[name]
    return None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _num(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def epoch_rows(metrics: MetricsRows) -> list[Mapping[str, float | None]]:
    """Rows ordered by epoch; an epoch written twice (a resumed run) keeps its last row. A
    script with no epochs: its step windows, ordered by step."""
    by_epoch: dict[float, Mapping[str, float | None]] = {}
    windows: dict[float, Mapping[str, float | None]] = {}
    for row in metrics:
        epoch, step = row.get("epoch"), row.get("step")
        if epoch is not None and math.isfinite(epoch):
            by_epoch[epoch] = row
        elif epoch is None and step is not None and math.isfinite(step):
            windows[step] = row
    if by_epoch:
        return [by_epoch[e] for e in sorted(by_epoch)]
    return [windows[s] for s in sorted(windows)]


def steady_median(rows: Sequence[Mapping[str, float | None]], column: str) -> float | None:
    """Median of ``column`` over the epochs after the first (all, if only one has a value)."""
    values = [v for v in (_num(r.get(column)) for r in rows[1:]) if v is not None]
    if not values:
        values = [v for v in (_num(r.get(column)) for r in rows[:1]) if v is not None]
    return statistics.median(values) if values else None


def _last(rows: Sequence[Mapping[str, float | None]], column: str) -> float | None:
    for row in reversed(rows):
        value = _num(row.get(column))
        if value is not None:
            return value
    return None


def summarize(run: RunData) -> RunSummary:
    rows = epoch_rows(run.metrics)
    rj = run.run_json or {}
    spec = run.spec

    val_name: str | None = None
    val: float | None = None
    for name in ("val_acc", "val_rmse"):
        val = _last(rows, name)
        if val is not None:
            val_name = name
            break

    peaks = [v for v in (_num(r.get("gpu_mem_peak_mib")) for r in rows) if v is not None]

    world = _as_int(rj.get("world_size"))
    if world is None and rows:
        world = _as_int(rows[-1].get("world_size"))
    nodes = _as_int(_spec_value(spec, "nodes"))
    if nodes is None and isinstance(rj.get("hosts"), list) and rj["hosts"]:
        nodes = len(rj["hosts"])
    per_node = _as_int(_spec_value(spec, "gpus_per_node"))
    if world is None and nodes is not None and per_node is not None:
        world = nodes * per_node
    if per_node is None and world is not None and nodes:
        per_node = world // nodes

    # A user's script has its own batch size, which the spec does not know.
    script = spec.get("entry") == "script"
    batch = None if script else _as_int(_spec_value(spec, "batch_size"))
    accum = _as_int(_spec_value(spec, "grad_accum")) or 1
    global_batch = batch * world * accum if batch is not None and world is not None else None

    epochs_total = _as_int(_spec_value(spec, "epochs"))
    if epochs_total is None:
        epochs_total = _as_int(rj.get("epochs"))
    state = rj.get("state")
    res = run.resources

    return RunSummary(
        run_id=run.run_id,
        group=run.group,
        state=state if isinstance(state, str) else None,
        epochs_done=sum(1 for r in rows if r.get("epoch") is not None),  # windows are no epochs
        epochs_total=epochs_total,
        final_train_loss=_last(rows[-1:], "train_loss"),
        final_val_metric=val,
        val_metric_name=val_name,
        throughput=steady_median(rows, "throughput_samples_per_sec"),
        epoch_time=steady_median(rows, "epoch_time_sec"),
        peak_mem_mib=max(peaks) if peaks else None,
        gpu_mem_peak_mib=res.gpu_mem_peak_mib if res else None,
        gpu_mem_mode_mib=res.gpu_mem_mode_mib if res else None,
        host_mem_peak_mib=res.host_mem_peak_mib if res else None,
        gpu_util_avg=res.gpu_util_avg if res else None,
        world_size=world,
        nodes=nodes,
        gpus_per_node=per_node,
        global_batch=global_batch,
    )


def summaries_frame(runs: Iterable[RunData | RunSummary]) -> pd.DataFrame:
    """One row per run (index ``run_id``), every field of :class:`RunSummary`."""
    summaries = [r if isinstance(r, RunSummary) else summarize(r) for r in runs]
    df = pd.DataFrame([asdict(s) for s in summaries], columns=list(RunSummary.__annotations__))
    return df.set_index("run_id")


def scaling_table(runs: Iterable[RunData | RunSummary]) -> pd.DataFrame:
    """The scaling comparison of one group, smallest world size first (index ``run_id``).

    The baseline is the run with the smallest world size that has a throughput;
    speedup = throughput / baseline throughput, ideal = world size / baseline world
    size, efficiency = speedup / ideal. Where a run has an epoch time but no throughput (a
    user's script that reports no sample counts), the whole group is compared by epoch
    time instead: speedup = baseline epoch time / epoch time. ``df.attrs["val_metric"]``
    names the metric, ``df.attrs["speedup_from"]`` the measure (throughput or epoch_time).
    """
    summaries = [r if isinstance(r, RunSummary) else summarize(r) for r in runs]
    summaries.sort(key=lambda s: (s.world_size or 0, s.nodes or 0, s.run_id))
    untimed = any(s.epoch_time and not s.throughput for s in summaries)
    measure = "epoch_time" if untimed else "throughput"

    def rate(s: RunSummary) -> float | None:
        # Both measures as "more is faster", so that speedup is one ratio for either.
        if measure == "throughput":
            return s.throughput
        return 1.0 / s.epoch_time if s.epoch_time else None

    measured = [s for s in summaries if rate(s) and s.world_size]
    base = min(measured, key=lambda s: s.world_size or 0) if measured else None

    records: list[dict[str, Any]] = []
    for s in summaries:
        speedup = ideal = efficiency = None
        base_rate = rate(base) if base is not None else None
        if base is not None and base_rate and base.world_size and s.world_size:
            ideal = s.world_size / base.world_size
            run_rate = rate(s)
            if run_rate is not None:
                speedup = run_rate / base_rate
                efficiency = speedup / ideal
        records.append(
            {
                "run_id": s.run_id,
                "nodes": s.nodes,
                "gpus_per_node": s.gpus_per_node,
                "world_size": s.world_size,
                "global_batch": s.global_batch,
                "throughput": s.throughput,
                "epoch_time": s.epoch_time,
                "speedup": speedup,
                "ideal_speedup": ideal,
                "efficiency": efficiency,
                "final_val_metric": s.final_val_metric,
                "peak_mem_mib": s.peak_mem_mib,
                **{col: getattr(s, col) for col in _RESOURCE_COLUMNS},
            }
        )
    df = pd.DataFrame(records, columns=["run_id", *SCALING_COLUMNS]).set_index("run_id")
    for col in _INT_COLUMNS:
        df[col] = df[col].astype("Int64")
    for col in SCALING_COLUMNS:
        if col not in _INT_COLUMNS:
            df[col] = df[col].astype("float64")
    names = {s.val_metric_name for s in summaries if s.val_metric_name}
    df.attrs["val_metric"] = names.pop() if len(names) == 1 else "val_metric"
    df.attrs["baseline"] = base.run_id if base is not None else None
    df.attrs["speedup_from"] = measure
    return df


_FORMATS: dict[str, str] = {
    "throughput": "{:.1f}",
    "epoch_time": "{:.2f}",
    "speedup": "{:.2f}",
    "ideal_speedup": "{:.2f}",
    "efficiency": "{:.1%}",
    "final_val_metric": "{:.4f}",
    "peak_mem_mib": "{:.0f}",
    "gpu_mem_peak_mib": "{:.0f}",
    "gpu_mem_mode_mib": "{:.0f}",
    "host_mem_peak_mib": "{:.0f}",
    "gpu_util_avg": "{:.1f}",
    "final_train_loss": "{:.4f}",
}


def _cell(value: Any, fmt: str | None) -> str:
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return (fmt or "{:.4g}").format(value)
    text = str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def to_markdown(
    df: pd.DataFrame, *, index: bool = True, formats: Mapping[str, str] | None = None
) -> str:
    """A GitHub-flavoured Markdown table; numbers right-aligned, empty cells for missing."""
    fmts = {**_FORMATS, **(formats or {})}
    headers: list[str] = []
    numeric: list[bool] = []
    columns: list[list[str]] = []
    if index:
        headers.append(str(df.index.name or ""))
        numeric.append(pd.api.types.is_numeric_dtype(df.index.dtype))
        columns.append([_cell(v, None) for v in df.index])
    for col in df.columns:
        headers.append(str(col))
        numeric.append(pd.api.types.is_numeric_dtype(df[col].dtype))
        columns.append([_cell(v, fmts.get(str(col))) for v in df[col].tolist()])
    widths = [
        max([len(h), 3, *(len(c) for c in cells)])
        for h, cells in zip(headers, columns, strict=True)
    ]

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(cells, widths, numeric, strict=True)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = (
        "| "
        + " | ".join(
            ("-" * (w - 1) + ":") if num else "-" * w
            for w, num in zip(widths, numeric, strict=True)
        )
        + " |"
    )
    out = [line(headers), rule]
    out += [line([col[i] for col in columns]) for i in range(len(df))]
    return "\n".join(out) + "\n"


def to_csv(df: pd.DataFrame, *, index: bool = True) -> str:
    """The table as CSV text (full precision, empty cells for missing)."""
    return df.to_csv(index=index, lineterminator="\n")


def comparison_markdown(group: str, df: pd.DataFrame) -> str:
    """The ``comparison.md`` document of a group's :func:`scaling_table`."""
    metric = df.attrs.get("val_metric", "val_metric")
    baseline = df.attrs.get("baseline")
    if df.attrs.get("speedup_from") == "epoch_time":
        basis = (
            "Speedup is the baseline's epoch time over each run's (some runs report no "
            "sample counts, so no throughput), epoch time being the median of the epochs "
            "after the first"
        )
    else:
        basis = "Throughput is samples/s over all ranks, the median of the epochs after the first"
    md = [
        f"# Scaling comparison: {group}",
        "",
        f"Baseline: `{baseline}` (smallest world size). {basis}; efficiency = speedup / ideal "
        f"speedup. `final_val_metric` is {metric}.",
        "",
        to_markdown(df),
    ]
    return "\n".join(md)
