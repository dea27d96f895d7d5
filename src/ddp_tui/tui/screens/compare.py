"""Compare: one group of runs that differ only in size, side by side, with speedup vs ideal;
the scaling advisor's Advice panel and its predicted speedup beside the measured one."""

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
from textual.widgets import DataTable, Footer, Select, Static
from textual_plotext import PlotextPlot

from ddp_tui.tui.advice_panel import AdvicePanel
from ddp_tui.tui.formatting import describe_error, duration, metric_label, number, rate, size
from ddp_tui.tui.header import StatusHeader
from ddp_tui.tui.messages import AdviceReady, ComparisonReady, Notice
from ddp_tui.tui.screens.base import BaseScreen
from ddp_tui.tui.speedup_plot import Line, SeriesPoint, draw_speedup, speedup_lines

if TYPE_CHECKING:
    import pandas as pd

    from ddp_tui.advisor import Advice
    from ddp_tui.remote.api import ClusterAPI
    from ddp_tui.remote.views import RunView, Snapshot


@dataclass(frozen=True)
class GroupInfo:
    key: str
    label: str
    signature: tuple[tuple[str, str, int], ...]  # (run_id, state, epochs done): recompute on change


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
        groups.append(GroupInfo(key, label, signature))
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
    """Pick a group; see throughput, speedup and efficiency per size, and the advice: the
    size to run, predictions for sizes not run; ``x`` exports."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("g", "pick_group", "Group"),
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
        self._computed: tuple[str, tuple[tuple[str, str, int], ...]] | None = None

    def compose(self) -> ComposeResult:
        yield StatusHeader("Compare")
        yield Select[str]([], prompt="Pick a group of runs (a sweep)", id="group", compact=True)
        yield Static("", id="compare-note", markup=False)
        with Vertical(id="compare-body"):
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
        self._computed = (self.group, signature)
        self.compute(self.group)
        self.ask_advice(self.group)

    def compute(self, group: str) -> None:
        self.ask(
            "Compare",
            lambda cluster: cluster.compare(group),
            lambda frame: ComparisonReady(group, frame),
            key="compare",  # only the newest comparison matters
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
            "Advise",
            advise,
            lambda answer: AdviceReady(group, *answer),
            key="advise",  # only the newest advice matters
            failed=lambda error: AdviceReady(group, None, error=describe_error(error)),
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
            "Export",
            lambda cluster: cluster.export_comparison(group),
            lambda paths: Notice("Exported " + ", ".join(paths), title="Comparison"),
        )
