"""Compare: one group of runs side by side.

For any group, the outcome table (the fields that differ between its runs, then what each
achieved, the best run marked; sorted by any column) and an overlay plot of a metric per
epoch, one line per run. For a group whose runs differ in size, also the scaling table with
speedup vs ideal, and the scaling advisor's Advice panel with its predicted speedup beside
the measured one (the advice needs several sizes: a group of one size has neither)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Footer, Select, Static
from textual_plotext import PlotextPlot

from ddp_tui.tui.advice_panel import AdvicePanel
from ddp_tui.tui.cluster_io import Request
from ddp_tui.tui.formatting import describe_error, duration, metric_label, number, rate, size
from ddp_tui.tui.header import StatusHeader
from ddp_tui.tui.messages import AdviceReady, ComparisonReady, Notice
from ddp_tui.tui.overlay_plot import draw_overlay, overlay_lines, overlay_metrics, overlay_x
from ddp_tui.tui.screens.base import BaseScreen
from ddp_tui.tui.speedup_plot import Line, SeriesPoint, draw_speedup, speedup_lines

if TYPE_CHECKING:
    import pandas as pd

    from ddp_tui.advisor import Advice
    from ddp_tui.remote.api import ClusterAPI
    from ddp_tui.remote.model.views import RunView, Snapshot
    from ddp_tui.reports.outcomes import Outcomes


@dataclass(frozen=True)
class GroupInfo:
    key: str
    label: str
    signature: tuple[tuple[str, str, int], ...]  # (run_id, state, epochs done): recompute on change
    #: How many sizes (nodes x GPUs) its runs have: the scaling table and advice need two.
    sizes: int = 1


@dataclass
class OutcomesReady(Message, bubble=False):
    """A group's outcome table (:meth:`ClusterAPI.outcomes`) for Compare."""

    group: str
    outcomes: Outcomes


def run_group(run: RunView) -> str | None:
    """The comparison group of a run: its sweep key, if it was submitted as one."""
    return run.group


def groups_of(runs: Sequence[RunView]) -> list[GroupInfo]:
    """Groups with their runs, newest group first (runs arrive newest first)."""
    members: dict[str, list[RunView]] = {}
    for run in runs:
        key = run_group(run)
        if key:
            members.setdefault(key, []).append(run)
    groups: list[GroupInfo] = []
    for key, group_runs in members.items():
        first = group_runs[-1]
        sizes = sorted({(int(r.spec.nodes), int(r.spec.gpus_per_node)) for r in group_runs})
        shown = ", ".join(size(n, g) for n, g in sizes)
        label = f"{first.spec.workload}: {len(group_runs)} runs ({shown})"
        signature = tuple(sorted((r.run_id, r.state.value, r.epochs_done) for r in group_runs))
        groups.append(GroupInfo(key, label, signature, len(sizes)))
    return groups


def _float(value: Any) -> float | None:
    try:
        result = float(value)
    except (TypeError, ValueError):  # None, pd.NA, text
        return None
    return result if math.isfinite(result) else None


COLUMNS: tuple[tuple[str, str], ...] = (
    ("size", "NxG"),
    ("world_size", "World"),
    ("global_batch", "Global batch"),
    ("throughput", "Samples/s"),
    ("epoch_time", "Epoch time"),
    ("speedup", "Speedup"),
    ("ideal_speedup", "Ideal"),
    ("efficiency", "Efficiency"),
    ("final_val_metric", "Final val"),
    ("peak_mem_mib", "Peak MiB"),
    # From the resource telemetry (per device / per node, the largest; util over all devices).
    # MiB like Peak MiB; short labels, so that the table fits 132 columns.
    ("gpu_mem_peak_mib", "GPU peak"),
    ("gpu_mem_mode_mib", "GPU mode"),
    ("host_mem_peak_mib", "Host peak"),
    ("gpu_util_avg", "GPU util%"),
)


def comparison_rows(frame: pd.DataFrame) -> list[dict[str, float | None]]:
    """The frame's rows as plain floats (missing: None), whatever its dtypes."""
    rows: list[dict[str, float | None]] = []
    for record in frame.to_dict(orient="records"):
        rows.append({str(key): _float(value) for key, value in record.items()})
    return rows


def comparison_cells(row: dict[str, float | None]) -> list[Text | str]:
    nodes, gpus = row.get("nodes"), row.get("gpus_per_node")
    efficiency = row.get("efficiency")
    eff: Text | str = "-"
    if efficiency is not None:
        style = "green" if efficiency >= 0.9 else "yellow" if efficiency >= 0.7 else "red"
        eff = Text(f"{efficiency:.0%}", style=style)

    def integer(key: str) -> str:
        value = row.get(key)
        return "-" if value is None else str(int(value))

    def times(key: str) -> str:
        value = row.get(key)
        return "-" if value is None else f"{value:.2f}x"

    def fixed(key: str, digits: int = 0) -> str:
        value = row.get(key)
        return "-" if value is None else f"{value:.{digits}f}"

    return [
        size(int(nodes), int(gpus)) if nodes is not None and gpus is not None else "-",
        integer("world_size"),
        integer("global_batch"),
        rate(row.get("throughput")),
        duration(row.get("epoch_time")),
        times("speedup"),
        times("ideal_speedup"),
        eff,
        number(row.get("final_val_metric")),
        fixed("peak_mem_mib"),
        fixed("gpu_mem_peak_mib"),
        fixed("gpu_mem_mode_mib"),
        fixed("host_mem_peak_mib"),
        fixed("gpu_util_avg", 1),
    ]


class CompareScreen(BaseScreen):
    """Pick a group; see what differs between its runs and what each achieved, sorted by
    any column (``o``, ``d``, or a header's click), a metric per epoch for each (``m``);
    for a group of several sizes, throughput, speedup and efficiency per size, and the
    advice: the size to run, predictions for sizes not run; ``x`` exports."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("g", "pick_group", "Group"),
        Binding("o", "sort_next", "Sort"),
        Binding("d", "sort_flip", "Direction"),
        Binding("m", "next_metric", "Metric"),
        Binding("x", "export", "Export"),
    ]

    def __init__(self, group: str | None = None) -> None:
        super().__init__()
        self.group = group
        self.groups: list[GroupInfo] = []
        self.rows: list[dict[str, float | None]] = []
        self.val_metric = "val_metric"
        self.advice: Advice | None = None
        #: The advice's plot points (empty: no advice yet, or none).
        self.series: list[SeriesPoint] = []
        #: The lines the plot drew last, by name (see :func:`speedup_lines`).
        self.plot_lines: dict[str, Line] = {}
        #: The group's outcome table as it came, and as shown (sorted).
        self.outcomes: Outcomes | None = None
        self.shown: Outcomes | None = None
        #: The column the outcome table is sorted by (None: the default order) and its
        #: direction (None: the column's default, see ``sort_outcomes``).
        self.sort_column: str | None = None
        self.descending: bool | None = None
        #: The overlay plot's metric (None: the group's own) and its lines, by legend label.
        self.overlay_metric: str | None = None
        self.overlay: dict[str, Line] = {}
        self._computed: tuple[str, tuple[tuple[str, str, int], ...]] | None = None

    def compose(self) -> ComposeResult:
        yield StatusHeader("Compare")
        yield Select[str]([], prompt="Pick a group of runs (a sweep)", id="group", compact=True)
        yield Static("", id="compare-note", markup=False)
        with Vertical(id="compare-body"):
            yield Static("", id="outcomes-note", markup=False)
            outcomes: DataTable[Text | str] = DataTable(id="outcomes-table", cursor_type="row")
            yield outcomes
            yield PlotextPlot(id="plot-overlay")
            with Vertical(id="scaling"):
                table: DataTable[Text | str] = DataTable(id="compare-table", cursor_type="row")
                yield table
                with Horizontal(id="compare-lower"):
                    yield PlotextPlot(id="plot-speedup")
                    yield AdvicePanel(id="advice")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#compare-table", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        self.watch(self.app, "snapshot", self._snapshot_changed, init=True)
        self._draw_plot()
        self._draw_overlay()

    def _snapshot_changed(self, snapshot: Snapshot | None = None) -> None:
        snapshot = self.ddp_app.snapshot
        groups = groups_of(snapshot.runs) if snapshot is not None else []
        select = self.query_one("#group", Select)
        keys = {g.key for g in groups}
        if groups and self.group not in keys:
            self.group = groups[0].key  # the newest group until the user picks another
        if [(g.key, g.label) for g in groups] != [(g.key, g.label) for g in self.groups]:
            self.groups = groups
            with self.prevent(Select.Changed):
                select.set_options([(g.label, g.key) for g in groups])
                if self.group in {g.key for g in groups}:
                    select.value = self.group
        self.groups = groups
        note = self.query_one("#compare-note", Static)
        if not groups:
            note.update(
                "No groups yet. Submit a sweep from Compose (ctrl+g), e.g. sizes 1,2,4 GPUs."
                if snapshot is not None
                else "Waiting for the first refresh..."
            )
        elif self.group is None:
            note.update("Pick a group (g).")
        self._maybe_compute()

    @on(Select.Changed, "#group")
    def _group_changed(self, event: Select.Changed) -> None:
        self.group = None if event.value is Select.NULL else str(event.value)
        self._maybe_compute()

    def _maybe_compute(self) -> None:
        if self.group is None or self.ddp_app.io is None:
            return
        info = next((g for g in self.groups if g.key == self.group), None)
        signature = info.signature if info is not None else ()
        if self._computed == (self.group, signature):
            return
        if self._computed is None or self._computed[0] != self.group:
            self._forget_outcomes()  # another group: its own columns, sort and metric
        self._computed = (self.group, signature)
        self.ask_outcomes(self.group)
        scaling = info is None or info.sizes > 1
        self.query_one("#scaling").display = scaling
        if scaling:
            self.compute(self.group)
            self.ask_advice(self.group)
        else:
            self.query_one("#compare-note", Static).update(
                "One size: no scaling table or advice (they compare runs of several sizes)."
            )

    def ask_outcomes(self, group: str) -> None:
        """Ask for the group's outcome table: read on the I/O thread, like the comparison."""
        self.ask(
            Request(
                "Outcomes",
                lambda cluster: cluster.outcomes(group),
                lambda outcomes: OutcomesReady(group, outcomes),
                key="outcomes",  # only the newest matters
            )
        )

    def compute(self, group: str) -> None:
        self.ask(
            Request(
                "Compare",
                lambda cluster: cluster.compare(group),
                lambda frame: ComparisonReady(group, frame),
                key="compare",  # only the newest comparison matters
            )
        )

    def ask_advice(self, group: str) -> None:
        """Ask for the group's advice after its comparison: a separate request, so the table
        never waits for the model; a failure is the panel's one line, not a notification."""
        from ddp_tui.advisor.report import speedup_series

        def advise(cluster: ClusterAPI) -> tuple[Advice, list[SeriesPoint]]:
            advice = cluster.advise(group)
            return advice, speedup_series(advice)  # on the I/O thread, off the UI's

        self.query_one(AdvicePanel).show_waiting()
        self.ask(
            Request(
                "Advise",
                advise,
                lambda answer: AdviceReady(group, *answer),
                key="advise",  # only the newest advice matters
                failed=lambda error: AdviceReady(group, None, error=describe_error(error)),
            )
        )

    @on(AdviceReady)
    def _advice_ready(self, message: AdviceReady) -> None:
        if message.group != self.group:
            return
        self.show_advice(message.advice, message.series, message.error)

    def show_advice(
        self, advice: Advice | None, series: Sequence[SeriesPoint] = (), error: str = ""
    ) -> None:
        panel = self.query_one(AdvicePanel)
        self.advice = advice
        self.series = list(series)
        if advice is None:
            panel.show_failure(error or "the advisor gave no answer")
        else:
            panel.show_advice(advice)
        self._draw_plot()

    @on(ComparisonReady)
    def _comparison_ready(self, message: ComparisonReady) -> None:
        if message.group != self.group:
            return
        self.show_comparison(message.frame)

    def show_comparison(self, frame: pd.DataFrame) -> None:
        self.val_metric = str(frame.attrs.get("val_metric", "val_metric"))
        self.rows = comparison_rows(frame)
        table = self.query_one("#compare-table", DataTable)
        table.clear()
        for key, column in table.columns.items():
            if key.value == "final_val_metric":
                column.label = Text(f"Final {metric_label(self.val_metric)}")
        for row in self.rows:
            table.add_row(*comparison_cells(row))
        baseline = frame.attrs.get("baseline")
        note = f"{len(self.rows)} sizes; baseline: the smallest world size"
        if baseline:
            note += f" ({baseline})"
        if frame.attrs.get("speedup_from") == "epoch_time":
            note += "; speedup from epoch time (no sample counts reported)"
        note += f"; final val = {metric_label(self.val_metric)}; x exports Markdown and CSV"
        self.query_one("#compare-note", Static).update(note)
        self._draw_plot()

    def _draw_plot(self) -> None:
        widget = self.query_one("#plot-speedup", PlotextPlot)
        self.plot_lines = speedup_lines(self.rows, self.series)
        draw_speedup(widget.plt, self.plot_lines)
        widget.refresh()

    # -- the outcome table and the overlay plot --------------------------------------

    def _forget_outcomes(self) -> None:
        self.outcomes = self.shown = None
        self.sort_column = self.descending = self.overlay_metric = None

    @on(OutcomesReady)
    def _outcomes_ready(self, message: OutcomesReady) -> None:
        if message.group != self.group:
            return
        self.show_outcomes(message.outcomes)

    def show_outcomes(self, outcomes: Outcomes) -> None:
        """Show a group's outcome table, in the order the user sorted by (kept across the
        group's refreshes), and its overlay plot."""
        self.outcomes = outcomes
        if self.sort_column not in outcomes.sort_columns:
            self.sort_column = self.descending = None
        if self.overlay_metric not in overlay_metrics(outcomes):
            self.overlay_metric = None
        self._sort()

    def _sort(self) -> None:
        from ddp_tui.reports.outcomes import sort_outcomes

        if self.outcomes is None:
            return
        shown = self.outcomes
        if self.sort_column is not None:
            shown = sort_outcomes(shown, self.sort_column, descending=self.descending)
        self.shown = shown
        self._fill_outcomes()
        self._draw_overlay()

    def _fill_outcomes(self) -> None:
        from ddp_tui.reports.outcomes import total_hours_text
        from ddp_tui.tui.outcomes_table import outcome_columns, outcome_rows, sort_arrow

        shown = self.shown
        if shown is None:
            return
        table = self.query_one("#outcomes-table", DataTable)
        selected = None
        if table.row_count and table.cursor_row < table.row_count:
            selected = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        table.clear(columns=True)
        for key, label in outcome_columns(shown):
            if key == self.sort_column:
                label = f"{label} {sort_arrow(shown, key)}".rstrip()
            table.add_column(label, key=key)
        ids = []
        for run_id, cells in outcome_rows(shown):
            table.add_row(*cells, key=run_id)
            ids.append(run_id)
        if selected in ids:
            table.move_cursor(row=ids.index(selected), animate=False)
        word = "higher" if shown.direction > 0 else "lower"
        differs = ", ".join(shown.fields) if shown.fields else "nothing"
        order = f"sorted by {self.sort_column}" if self.sort_column else "fields' order"
        self.query_one("#outcomes-note", Static).update(
            f"Differs: {differs} · {metric_label(shown.metric)}: {word} is better · {order} "
            f"(o, d) · {total_hours_text(shown)}"
        )

    def _draw_overlay(self) -> None:
        widget = self.query_one("#plot-overlay", PlotextPlot)
        shown = self.shown
        metric = ""
        if shown is not None:
            metrics = overlay_metrics(shown)
            metric = self.overlay_metric or (metrics[0] if metrics else shown.metric)
            self.overlay = overlay_lines(shown, metric)
        else:
            self.overlay = {}
        x = overlay_x(shown) if shown is not None else "epoch"
        draw_overlay(widget.plt, self.overlay, metric, len(shown.frame) if shown else 0, x)
        widget.refresh()

    def action_sort_next(self) -> None:
        """Sort by the next column (after the last, back to the default order)."""
        if self.outcomes is None:
            return
        columns = [c for c in self.outcomes.sort_columns if c != "run_id"]
        index = columns.index(self.sort_column) + 1 if self.sort_column in columns else 0
        self.sort_by(columns[index] if index < len(columns) else None)

    def sort_by(self, column: str | None, descending: bool | None = None) -> None:
        self.sort_column = column
        self.descending = descending
        self._sort()

    def action_sort_flip(self) -> None:
        """Reverse the sorted column's order."""
        from ddp_tui.tui.outcomes_table import DESCENDING, sort_arrow

        if self.shown is None or self.sort_column is None:
            self.notify("Sort by a column first (o).", severity="warning")
            return
        self.sort_by(self.sort_column, sort_arrow(self.shown, self.sort_column) != DESCENDING)

    @on(DataTable.HeaderSelected, "#outcomes-table")
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        column = str(event.column_key.value)
        if self.outcomes is None or column not in self.outcomes.sort_columns:
            return
        if column == self.sort_column:
            self.action_sort_flip()
        else:
            self.sort_by(column)

    def action_next_metric(self) -> None:
        """Plot the next metric per epoch."""
        if self.shown is None:
            return
        metrics = overlay_metrics(self.shown)
        if not metrics:
            self.notify("No run of this group has written a metric yet.", severity="warning")
            return
        current = self.overlay_metric or metrics[0]
        index = metrics.index(current) + 1 if current in metrics else 0
        self.overlay_metric = metrics[index % len(metrics)]
        self._draw_overlay()

    def action_back(self) -> None:
        self.dismiss(None)

    def action_pick_group(self) -> None:
        select = self.query_one("#group", Select)
        select.focus()
        select.action_show_overlay()

    def action_export(self) -> None:
        if self.group is None:
            self.notify("Pick a group first (g).", severity="warning")
            return
        self.export(self.group)

    def export(self, group: str) -> None:
        self.ask(
            Request(
                "Export",
                lambda cluster: cluster.export_comparison(group),
                lambda paths: Notice("Exported " + ", ".join(paths), title="Comparison"),
            )
        )
