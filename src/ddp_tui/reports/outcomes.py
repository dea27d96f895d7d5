"""What a group's runs achieved, and what differs between them: Compare's outcome table and
``ddp-tui diff``.

A group is any set of runs submitted together (a size sweep, a sweep over any field, or
runs given one group by hand). Its outcome table has one row per run: first the spec
fields whose values differ between the runs (:func:`differing_fields`), then the outcomes
(:data:`OUTCOME_COLUMNS`): the final and the best value of the group's validation metric,
the epochs done, the wall time, the GPU-hours (:mod:`ddp_tui.reports.usage`), the throughput,
and what each run's ended job used of the CPUs and memory it held (its recorded usage).
The best run by the metric is marked; :func:`sort_outcomes` orders by any column.
:func:`run_diff` sets two runs side by side.

Pure: the facade (:mod:`ddp_tui.remote.groups.outcomes_io`) reads the runs' files and their
elapsed times and hands them here as :class:`Member` values. docs/compare.md describes what
is shown and the rules behind it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import pandas as pd

from ddp_tui.jobfiles import METRICS_COLUMNS
from ddp_tui.reports.results import RunData, epoch_rows, summarize, to_markdown
from ddp_tui.reports.usage import as_spec, hours_unit, resource_hours
from ddp_tui.spec import FIELDS, SCALE_FIELDS, ExperimentSpec
from ddp_tui.spec.vocabulary import LABEL_FIELDS

#: The outcome columns of :attr:`Outcomes.frame`, after the differing fields.
OUTCOME_COLUMNS: Final = (
    "final_val",
    "best_val",
    "epochs_done",
    "wall_sec",
    "gpu_hours",
    "throughput",
    "cpu_used",
    "mem_used",
)
#: The validation metrics a group is judged by, in order of preference: the first that any
#: run of the group reported is the group's metric.
VAL_METRICS: Final = ("val_acc", "val_rmse", "val_mae", "val_loss")
#: Words of a metric's name that make it count down (lower is better). Every other metric
#: counts up: acc, accuracy, f1, auc, precision, recall, bleu, map, iou, dice, r2, ...
LOWER_IS_BETTER: Final = frozenset(
    {
        "loss",
        "nll",
        "mae",
        "mse",
        "rmse",
        "mape",
        "error",
        "err",
        "wer",
        "cer",
        "perplexity",
        "ppl",
        "time",
        "sec",
        "latency",
        "mib",
    }
)
#: Beside the fields and outcomes, what a frame can be sorted by.
_OTHER_SORT_COLUMNS: Final = ("state", "run_id")
#: What a CPU group's hours are headed by in text, the same column as ``gpu_hours``.
_HOURS_ALIASES: Final = {"cpu_hours": "gpu_hours"}
_THROUGHPUT: Final = "throughput_samples_per_sec"


def metric_direction(metric: str) -> int:
    """+1 when a higher value of ``metric`` is better, -1 when a lower one is.

    Decided by the name's words (split at anything not a letter or digit, case ignored):
    a name with a word of :data:`LOWER_IS_BETTER` (``val_loss``, ``val_mae``, ``val_rmse``,
    ``test_error``, ``perplexity``) counts down; every other name (``val_acc``,
    ``val_accuracy``, ``f1``, ``auc``) counts up."""
    words = set(re.split(r"[^a-z0-9]+", metric.lower()))
    return -1 if words & LOWER_IS_BETTER else 1


def _canon(value: Any) -> Any:
    """A value made comparable across spellings: 1 and 1.0 alike, lists as tuples."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _canon(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_canon(v) for v in value)
    return value


def differing_fields(specs: Sequence[Mapping[str, Any] | ExperimentSpec]) -> list[str]:
    """The spec fields whose values are not the same in every spec, in the order the spec
    declares them (``FIELDS``). Label fields (``name``, ``telemetry_sec``: see
    ``spec.vocabulary.LABEL_FIELDS``) never count; the size fields (``nodes``,
    ``gpus_per_node``) do. A field a ``spec.json`` lacks has its default."""
    if len(specs) < 2:
        return []
    full = [as_spec(s) for s in specs]
    return [
        name
        for name in FIELDS
        if name not in LABEL_FIELDS and len({_canon(getattr(s, name)) for s in full}) > 1
    ]


def value_text(name: str, value: Any) -> str:
    """A field's value as a table cell or a label shows it: as the CLI takes it, and
    ``default`` for an empty value (the field's default applies)."""
    spec_field = FIELDS.get(name)
    text = spec_field.text(value) if spec_field is not None else str(value)
    return text if text else "default"


@dataclass(frozen=True)
class Member:
    """One run of a group as the outcome table needs it: its files (read already), how long
    its job has held its resources, and its state in words."""

    run: RunData
    #: Seconds of wall time the run's job held its allocation (the latest attempt's
    #: elapsed time: docs/compare.md).
    elapsed_sec: float = 0.0
    state: str | None = None
    #: What the latest attempt used of what it held, once it ended (fractions: its CPUs busy
    #: on average, its largest node's peak memory of the memory per node); None: not
    #: measured. Not the scaling table's efficiency (speedup per GPU).
    cpu_used: float | None = None
    mem_used: float | None = None


@dataclass(frozen=True)
class Outcomes:
    """A group's outcome table (see the module docstring and docs/compare.md)."""

    group: str
    #: The group's validation metric (``val_acc``, ``val_rmse``, ...).
    metric: str
    #: +1: higher is better; -1: lower is better (:func:`metric_direction`).
    direction: int
    #: The fields that differ between the runs: the first columns of :attr:`frame`.
    fields: tuple[str, ...]
    #: Index ``run_id``; columns ``*fields, *OUTCOME_COLUMNS, "best", "state"``; the unit of
    #: ``gpu_hours`` in ``attrs["hours_unit"]`` ("GPU", "CPU" or "GPU/CPU").
    frame: pd.DataFrame
    #: The best run: the best final value of :attr:`metric` (ties: the best best value).
    best: str | None
    #: Run id -> its differing fields' values (``lr=0.1 batch_per_gpu=32``), or the run id
    #: where nothing differs: the legend of an overlay plot.
    labels: Mapping[str, str]
    #: Run id -> metrics.csv column -> ((epoch, value), ...): every column the run wrote
    #: (each epoch once, the last row written for it), for an overlay plot.
    series: Mapping[str, Mapping[str, tuple[tuple[int, float], ...]]] = field(repr=False)
    #: The group's hours together (each run in its own unit where the group mixes them).
    total_hours: float = 0.0

    @property
    def hours_unit(self) -> str:
        return str(self.frame.attrs.get("hours_unit", "GPU"))

    @property
    def shows_scaling(self) -> bool:
        """Whether the group's scaling table says something: its runs differ in size, or
        in nothing at all (one run, or runs of one configuration)."""
        return not self.fields or any(f in SCALE_FIELDS for f in self.fields)

    @property
    def sort_columns(self) -> tuple[str, ...]:
        """What :func:`sort_outcomes` takes."""
        return (*self.fields, *OUTCOME_COLUMNS, *_OTHER_SORT_COLUMNS)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _series(rows: Sequence[Mapping[str, float | None]]) -> dict[str, tuple[tuple[int, float], ...]]:
    columns: dict[str, list[tuple[int, float]]] = {}
    by_steps = not any(row.get("epoch") is not None for row in rows)
    for row in rows:
        # An epoch's row, or, for a script with no epochs, a step window's: at its step.
        epoch = row.get("step") if by_steps else row.get("epoch")
        if epoch is None or not math.isfinite(epoch):
            continue
        for name, value in row.items():
            v = _finite(value)
            if name not in ("epoch", "step") and v is not None:
                columns.setdefault(name, []).append((int(epoch), v))
    return {name: tuple(points) for name, points in columns.items()}


def group_metric(runs: Sequence[RunData]) -> str:
    """The first of :data:`VAL_METRICS` that any run reported; with none yet, the
    built-in trainer's for the runs' task (``val_rmse`` for regression, else ``val_acc``)."""
    for name in VAL_METRICS:
        if any(_finite(row.get(name)) is not None for run in runs for row in run.metrics):
            return name
    regression = any(run.spec.get("task") == "regression" for run in runs)
    return "val_rmse" if regression else "val_acc"


def _sort_key(value: Any) -> tuple[int, Any]:
    """Numbers before texts, so that a column mixing them still sorts."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value))
    return (1, str(value))


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def _column(frame: pd.DataFrame, name: str) -> dict[str, Any]:
    """A column as run id -> value."""
    return {str(k): v for k, v in frame[name].items()}


def _ordered(ids: Sequence[str], values: Mapping[str, Any], descending: bool) -> list[str]:
    """``ids`` by their ``values`` (stable: ties keep their order), missing values last."""
    present = [i for i in ids if not _missing(values[i])]
    missing = [i for i in ids if _missing(values[i])]
    present.sort(key=lambda i: _sort_key(values[i]), reverse=descending)  # stable both ways
    return present + missing


def _frame_order(frame: pd.DataFrame, fields: Sequence[str]) -> list[str]:
    """The default order: by the differing fields, the first most significant (a grid reads
    row by row), then by run id."""
    ids = sorted(str(i) for i in frame.index)
    for name in reversed(fields):
        ids = _ordered(ids, _column(frame, name), descending=False)
    return ids


def outcome_table(group: str, members: Sequence[Member], *, metric: str | None = None) -> Outcomes:
    """The outcome table of ``members`` (one group's runs). ``metric``: the one to judge by
    (default: :func:`group_metric`). Rows in the order of the differing fields."""
    runs = [m.run for m in members]
    metric = metric or group_metric(runs)
    direction = metric_direction(metric)
    fields = tuple(differing_fields([r.spec for r in runs]))
    records: list[dict[str, Any]] = []
    series: dict[str, Mapping[str, tuple[tuple[int, float], ...]]] = {}
    labels: dict[str, str] = {}
    units: set[str] = set()
    total = 0.0
    for m in members:
        run = m.run
        spec = as_spec(run.spec)
        rows = epoch_rows(run.metrics)
        values = [v for v in (_finite(r.get(metric)) for r in rows) if v is not None]
        hours, unit = resource_hours(spec, m.elapsed_sec)
        units.add(unit)
        total += hours
        summary = summarize(run)
        records.append(
            {
                "run_id": run.run_id,
                **{name: getattr(spec, name) for name in fields},
                "final_val": values[-1] if values else None,
                "best_val": (max(values) if direction > 0 else min(values)) if values else None,
                "epochs_done": summary.epochs_done,
                "wall_sec": max(0.0, m.elapsed_sec),
                "gpu_hours": hours,
                "throughput": summary.throughput,
                "cpu_used": m.cpu_used,
                "mem_used": m.mem_used,
                "best": False,
                "state": m.state,
            }
        )
        series[run.run_id] = _series(rows)
        labels[run.run_id] = (
            " ".join(f"{n}={value_text(n, getattr(spec, n))}" for n in fields) or run.run_id
        )
    columns = ["run_id", *fields, *OUTCOME_COLUMNS, "best", "state"]
    frame = pd.DataFrame(records, columns=columns).set_index("run_id")
    numbers = (
        "final_val",
        "best_val",
        "wall_sec",
        "gpu_hours",
        "throughput",
        "cpu_used",
        "mem_used",
    )
    for col in numbers:
        frame[col] = frame[col].astype("float64")
    frame["epochs_done"] = frame["epochs_done"].astype("Int64")
    frame["best"] = frame["best"].astype(bool)
    best = _best(frame, direction)
    if best is not None:
        frame.loc[best, "best"] = True
    frame = frame.loc[_frame_order(frame, fields)]
    frame.attrs.update(
        {"group": group, "metric": metric, "direction": direction, "hours_unit": hours_unit(units)}
    )
    return Outcomes(
        group=group,
        metric=metric,
        direction=direction,
        fields=fields,
        frame=frame,
        best=best,
        labels=labels,
        series=series,
        total_hours=total,
    )


def _best(frame: pd.DataFrame, direction: int) -> str | None:
    """The run with the best final value (ties: the best best value, then the first run id);
    None while no run has one."""
    final, best = _column(frame, "final_val"), _column(frame, "best_val")
    candidates = sorted(i for i, v in final.items() if not _missing(v))

    def score(run_id: str) -> tuple[float, float]:
        return (
            direction * float(final[run_id]),
            -math.inf if _missing(best[run_id]) else direction * float(best[run_id]),
        )

    return max(candidates, key=score) if candidates else None


def sort_outcomes(outcomes: Outcomes, column: str, *, descending: bool | None = None) -> Outcomes:
    """The table ordered by ``column`` (a differing field, an outcome, ``state`` or
    ``run_id``; ``cpu_hours`` names ``gpu_hours``). Missing values always come last.

    By default the metric's columns put the best first (descending where higher is better),
    ``throughput`` the fastest first, and every other column ascends. Raises ValueError
    naming ``column`` and the columns allowed."""
    name = _HOURS_ALIASES.get(column, column)
    allowed = outcomes.sort_columns
    if name not in allowed:
        raise ValueError(f"cannot sort by {column!r}: the columns are {', '.join(allowed)}")
    if descending is None:
        if name in ("final_val", "best_val"):
            descending = outcomes.direction > 0
        else:
            descending = name == "throughput"
    frame = outcomes.frame
    ids = [str(i) for i in frame.index]
    values = {i: i for i in ids} if name == "run_id" else _column(frame, name)
    ordered = frame.loc[_ordered(ids, values, descending)]
    ordered.attrs.update(frame.attrs)
    return replace(outcomes, frame=ordered)


_FORMATS: Final = {
    "final_val": "{:.4f}",
    "best_val": "{:.4f}",
    "wall_sec": "{:.0f}",
    "gpu_hours": "{:.3g}",
    "cpu_hours": "{:.3g}",  # the same column, headed for a CPU group (hours_column)
    "throughput": "{:.1f}",
    "cpu_used": "{:.0%}",
    "mem_used": "{:.0%}",
}


def hours_column(unit: str) -> str:
    """How the hours column is headed in text: ``gpu_hours``, or ``cpu_hours`` for a group
    of CPU runs (a mixed group keeps ``gpu_hours``, each run in its own unit)."""
    return "cpu_hours" if unit == "CPU" else "gpu_hours"


def display_frame(outcomes: Outcomes) -> pd.DataFrame:
    """The table as text shows it: field values as the CLI takes them, ``best`` marked in
    words, whole seconds, the hours column headed by its unit."""
    df = outcomes.frame.copy()
    for name in outcomes.fields:
        df[name] = [value_text(name, None if _missing(v) else v) for v in df[name]]
    df["wall_sec"] = df["wall_sec"].round().astype("Int64")
    df["best"] = ["best" if b else "" for b in df["best"]]
    df["state"] = ["" if _missing(s) else str(s) for s in df["state"]]
    return df.rename(columns={"gpu_hours": hours_column(outcomes.hours_unit)})


def outcomes_note(outcomes: Outcomes) -> str:
    """What differs, the metric and its direction, and how the best is chosen, in a line."""
    word = "higher" if outcomes.direction > 0 else "lower"
    differ = ", ".join(outcomes.fields) if outcomes.fields else "nothing (one configuration)"
    return (
        f"Differs: {differ}. Metric: {outcomes.metric} ({word} is better); the run with the "
        "best final value is marked best."
    )


def outcomes_markdown(outcomes: Outcomes) -> str:
    """The outcome table in Markdown, with :func:`outcomes_note` above it and the total
    hours below."""
    table = to_markdown(display_frame(outcomes), formats=_FORMATS).rstrip("\n")
    return "\n".join([outcomes_note(outcomes), "", table, "", total_hours_text(outcomes)]) + "\n"


def total_hours_text(outcomes: Outcomes) -> str:
    """``Total: 1.23 GPU-hours over 6 runs``."""
    n = len(outcomes.frame)
    unit = outcomes.hours_unit
    return f"Total: {outcomes.total_hours:.3g} {unit}-hours over {n} run{'s' if n != 1 else ''}"


def with_outcomes(
    table: pd.DataFrame, outcomes: Outcomes, *, display: bool = False
) -> pd.DataFrame:
    """One row per run, in the outcome table's order: its columns, then those of ``table``
    (the group's scaling table, index ``run_id``) that it lacks; ``table``'s attrs. An
    export's one table; ``display``: the outcome columns as text shows them
    (:func:`display_frame`)."""
    extra = [c for c in table.columns if c not in outcomes.frame.columns]
    base = display_frame(outcomes) if display else outcomes.frame
    joined = base.join(table[extra], how="left")
    joined.attrs = dict(table.attrs)
    return joined


@dataclass(frozen=True)
class RunDiff:
    """Two runs side by side (``ddp-tui diff``)."""

    run_a: str
    run_b: str
    metric: str
    direction: int
    hours_unit: str
    #: (field, value in a, value in b) for each spec field that differs, in spec order.
    fields: tuple[tuple[str, Any, Any], ...]
    #: (outcome, a, b) for each of :data:`OUTCOME_COLUMNS` and ``state``.
    summary: tuple[tuple[str, Any, Any], ...]
    #: Index ``epoch``; for each metric either run wrote (the group metric first),
    #: ``<column>_a`` and ``<column>_b``.
    metrics: pd.DataFrame = field(repr=False)


def _metric_order(metric: str, names: set[str]) -> list[str]:
    contract = [c for c in METRICS_COLUMNS if c in names and c != metric]
    others = sorted(names - set(contract) - {metric})
    return [metric, *contract, *others] if metric in names else [*contract, *others]


def run_diff(a: Member, b: Member) -> RunDiff:
    """What differs between two runs: their fields, outcomes, and metrics per epoch."""
    if a.run.run_id == b.run.run_id:
        raise ValueError(f"diff needs two different runs, got {a.run.run_id!r} twice")
    table = outcome_table("", [a, b])
    frame = table.frame
    ids = (a.run.run_id, b.run.run_id)
    spec_a, spec_b = as_spec(a.run.spec), as_spec(b.run.spec)
    fields = tuple((n, getattr(spec_a, n), getattr(spec_b, n)) for n in table.fields)
    summary = tuple(
        (col, _plain(frame.at[ids[0], col]), _plain(frame.at[ids[1], col]))
        for col in (*OUTCOME_COLUMNS, "state")
    )
    series_a, series_b = table.series[ids[0]], table.series[ids[1]]
    names = _metric_order(table.metric, set(series_a) | set(series_b))
    epochs = sorted({e for s in (series_a, series_b) for pts in s.values() for e, _ in pts})
    data: dict[str, list[float]] = {}
    for name in names:
        for suffix, series in (("a", series_a), ("b", series_b)):
            points = dict(series.get(name, ()))
            data[f"{name}_{suffix}"] = [points.get(e, math.nan) for e in epochs]
    metrics = pd.DataFrame(data, index=pd.Index(epochs, name="epoch"), dtype="float64")
    return RunDiff(
        run_a=ids[0],
        run_b=ids[1],
        metric=table.metric,
        direction=table.direction,
        hours_unit=table.hours_unit,
        fields=fields,
        summary=summary,
        metrics=metrics,
    )


def _plain(value: Any) -> Any:
    """A cell as a plain Python value: None for missing, int/float/str/bool otherwise."""
    if _missing(value):
        return None
    if hasattr(value, "item"):  # a numpy scalar
        return value.item()
    return value
