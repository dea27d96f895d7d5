"""Compare's outcome table: its columns and cells, from a group's
:class:`~ddp_tui.reports.outcomes.Outcomes`.

Pure (no widgets): the Compare screen lays the cells out in a ``DataTable``. The first
columns are the spec fields that differ between the runs, then the outcomes; the best run's
row says "best" and is drawn bold. Imported only when Compare opens (pandas comes with
:mod:`ddp_tui.reports.outcomes`).
"""

from __future__ import annotations

import math
from typing import Any, Final

from rich.text import Text

from ddp_tui.reports.efficiency_cells import share_text
from ddp_tui.reports.outcomes import OUTCOME_COLUMNS, Outcomes, value_text
from ddp_tui.tui.formatting import duration, metric_label, number, rate

#: The marker column (not a column of the frame): "best" on the best run's row.
BEST_COLUMN: Final = "best"
BEST_STYLE: Final = "bold green"
#: The arrow a sorted column's header gets.
ASCENDING, DESCENDING = "▲", "▼"


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return math.isnan(value)
    except TypeError:  # text, pd.NA
        return str(value) in ("<NA>", "")


def outcome_columns(outcomes: Outcomes) -> list[tuple[str, str]]:
    """(key, header) of each column: the marker, the differing fields, the outcomes, the
    state. Keys are the frame's columns, so that a header names what it sorts by."""
    metric = metric_label(outcomes.metric)
    headers = {
        "final_val": f"Final {metric}",
        "best_val": f"Best {metric}",
        "epochs_done": "Epochs",
        "wall_sec": "Wall",
        "gpu_hours": f"{outcomes.hours_unit}-h",
        "throughput": "Samples/s",
        # What the run's ended job used of what it held; not the scaling table's efficiency.
        "cpu_used": "CPU used",
        "mem_used": "Mem used",
    }
    return [
        (BEST_COLUMN, ""),
        *((name, name) for name in outcomes.fields),
        *((name, headers.get(name, name)) for name in OUTCOME_COLUMNS),
        ("state", "State"),
    ]


def outcome_cell(outcomes: Outcomes, column: str, value: Any) -> str:
    """One cell's text: a field's value as the CLI takes it, an outcome in its unit."""
    if column in outcomes.fields:
        return value_text(column, None if _missing(value) else value)
    if column in ("cpu_used", "mem_used"):
        return share_text(None if _missing(value) else float(value))
    if _missing(value):
        return "-"
    if column in ("final_val", "best_val"):
        return number(float(value))
    if column == "epochs_done":
        return str(int(value))
    if column == "wall_sec":
        return duration(float(value))
    if column == "gpu_hours":
        return number(float(value), 3)
    if column == "throughput":
        return rate(float(value))
    return str(value)


def outcome_rows(outcomes: Outcomes) -> list[tuple[str, list[Text]]]:
    """(run id, cells) of each row in the frame's order; the best run's row bold, marked."""
    frame = outcomes.frame
    columns = [key for key, _ in outcome_columns(outcomes)]
    rows: list[tuple[str, list[Text]]] = []
    for run_id, record in zip(frame.index, frame.to_dict(orient="records"), strict=True):
        best = str(run_id) == outcomes.best
        style = BEST_STYLE if best else ""
        cells = [
            Text("best" if best else "", style=style)
            if key == BEST_COLUMN
            else Text(outcome_cell(outcomes, key, record.get(key)), style=style)
            for key in columns
        ]
        rows.append((str(run_id), cells))
    return rows


def sort_arrow(outcomes: Outcomes, column: str) -> str:
    """How ``column`` reads in the frame's order: descending, ascending, or "" where it is
    the same throughout (or mixes numbers and text). Read from the sorted frame itself, so
    that the header says what :func:`~ddp_tui.reports.outcomes.sort_outcomes` did."""
    if column not in outcomes.frame.columns:
        return ""
    values = [v for v in outcomes.frame[column].tolist() if not _missing(v)]
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    if len(values) < 2 or not (numbers or all(isinstance(v, str) for v in values)):
        return ""
    first, last = values[0], values[-1]
    if first == last:
        return ""
    return DESCENDING if first > last else ASCENDING
