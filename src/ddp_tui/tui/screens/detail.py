"""Run detail: summary, progress within the epoch, per-epoch metrics and plots, logs,
verification checklist and accounting."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, ProgressBar, Static, TabbedContent, TabPane
from textual_plotext import PlotextPlot

from ddp_tui.remote.states import JobState
from ddp_tui.tui.cluster_io import FOLLOW_INTERVAL
from ddp_tui.tui.formatting import duration, metric_label, number, rate, state_text
from ddp_tui.tui.header import StatusHeader
from ddp_tui.tui.logview import LogPane
from ddp_tui.tui.messages import ChecksReady, DetailReady, FollowFailed
from ddp_tui.tui.modals import checks_text
from ddp_tui.tui.screens.base import RUN_ACTION_BINDINGS, BaseScreen
from ddp_tui.tui.screens.jobs import run_size

if TYPE_CHECKING:
    from ddp_tui.remote.views import Check, Progress, RunDetail, RunView, Snapshot

#: metrics.csv column -> (table header, how to format)
METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("epoch", "Epoch"),
    ("train_loss", "Train loss"),
    ("train_acc", "Train acc"),
    ("val_loss", "Val loss"),
    ("val_acc", "Val acc"),
    ("val_mae", "Val MAE"),
    ("val_rmse", "Val RMSE"),
    ("lr", "LR"),
    ("epoch_time_sec", "Epoch time"),
    ("throughput_samples_per_sec", "Samples/s"),
    ("gpu_mem_peak_mib", "Peak MiB"),
    ("world_size", "World"),
)


def metric_cell(column: str, value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if column in ("epoch", "world_size"):
        return str(int(value))
    if column == "epoch_time_sec":
        # A small script's epochs can be sub-second: m:ss would show them all as 0:00.
        return f"{value:.2f}s" if value < 10 else duration(value)
    if column == "throughput_samples_per_sec":
        return rate(value)
    if column == "gpu_mem_peak_mib":
        return f"{value:.0f}"
    return number(value)


def summary_text(run: RunView | None, run_json: Mapping[str, object] | None, run_id: str) -> Text:
    """The summary block: state, attempts, hosts, world size, backend, rendezvous."""
    text = Text()
    if run is None:
        text.append(f" {run_id}", style="bold")
        text.append("  waiting for the run to appear in a refresh...", style="dim")
        return text
    text.append(f" {run.name}", style="bold")
    text.append("  ")
    text.append_text(state_text(run.state))
    if run.reason:
        text.append(f" ({run.reason})", style="dim")
    text.append(f"  {run_size(run)}  elapsed {duration(run.elapsed_sec)}")
    text.append(f"  {run.run_id}", style="dim")
    text.append("\n attempts: ")
    if run.attempts:
        text.append(", ".join(f"#{a.attempt} job {a.job_id}" for a in run.attempts), style="cyan")
    else:
        text.append("none", style="dim")
    if run.group:
        text.append(f"   group {run.group}", style="dim")
    spec = run.spec
    if spec.entry == "script":
        text.append("\n script: ")
        text.append(f"{spec.script} {spec.script_args}".strip(), style="bold")
        where = "in place" if spec.code_mode == "in-place" else f"snapshot of {spec.project_dir}"
        text.append(f"   {where}, metrics {spec.metrics}", style="dim")
    hosts: Sequence[str] = run.hosts
    world = run.world_size
    backend = run.backend
    rendezvous = run.rendezvous
    if run_json:
        listed = run_json.get("hosts")
        if not hosts and isinstance(listed, list):
            hosts = [str(h) for h in listed]
        world = world or _int_or_none(run_json.get("world_size"))
        backend = backend or _str_or_none(run_json.get("backend"))
        rendezvous = rendezvous or _str_or_none(run_json.get("rendezvous"))
    if run.note:
        text.append(f"\n {run.note}", style="bold yellow")
    if run.preflight is not None:
        text.append(f"\n {run.preflight.describe()}", style="bold")
        hosts = hosts or run.preflight.hosts
        world = world or run.preflight.world_size
        backend = backend or run.preflight.backend
    text.append("\n hosts: ")
    text.append(", ".join(hosts) if hosts else "-", style="bold")
    text.append(f"   world size: {world if world is not None else '-'}")
    text.append(f"   backend: {backend or '-'}")
    text.append(f"   rendezvous: {rendezvous or '-'}")
    return text


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def progress_text(run: RunView | None, progress: Progress | None) -> Text:
    if run is not None and run.preflight is not None:
        return Text(f" {run.state.value.lower()}: {run.preflight.describe()}")
    if run is not None and run.state.is_terminal:
        # The bar keeps the last step reached; the label says the run is over.
        return Text(f" ended {run.state.value}: {run.epochs_done}/{run.epochs_total} epochs")
    if progress is None:
        if run is not None and run.epochs_total:
            return Text(f" epoch {run.epochs_done}/{run.epochs_total}")
        return Text(" no progress yet", style="dim")
    total = f"/{run.epochs_total}" if run is not None and run.epochs_total else ""
    return Text(
        f" epoch {progress.epoch}{total}  step {progress.step}/{progress.steps_per_epoch}"
        f"  loss {number(progress.loss)}  {rate(progress.samples_per_sec)}"
    )


class DetailScreen(BaseScreen):
    """One run, followed at about one second while this screen is on top: it registers its
    run with the I/O owner, which posts each ``RunDetail`` here."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("1", "tab('logs')", "Logs"),
        Binding("2", "tab('metrics')", "Metrics"),
        Binding("3", "tab('checks')", "Checks"),
        *RUN_ACTION_BINDINGS,
    ]

    def __init__(self, run_id: str, *, follow_interval: float = FOLLOW_INTERVAL) -> None:
        super().__init__()
        self.run_id = run_id
        self.follow_interval = follow_interval
        self.run: RunView | None = None
        self.run_json: dict[str, object] | None = None
        self.progress: Progress | None = None
        self.metrics: list[dict[str, float | None]] = []
        self.checks: list[Check] = []
        self.accounting: str | None = None
        self.follow_error: str | None = None
        self._verified_job: str | None = None  # the attempt whose end was verified

    def compose(self) -> ComposeResult:
        yield StatusHeader("Run")
        yield Static("", id="summary")
        with Horizontal(id="progress-row"):
            yield Static("", id="progress-label")
            yield ProgressBar(total=None, show_eta=False, id="progress")
        with TabbedContent(initial="logs", id="detail-tabs"):
            with TabPane("Logs", id="logs"):
                yield LogPane(id="logpane")
            with TabPane("Metrics", id="metrics"), Vertical():
                table: DataTable[str] = DataTable(id="metrics-table", zebra_stripes=True)
                yield table
                with Horizontal(id="plots"):
                    yield PlotextPlot(id="plot-loss")
                    yield PlotextPlot(id="plot-val")
                    yield PlotextPlot(id="plot-thru")
            with TabPane("Checks", id="checks"), VerticalScroll():
                yield Static("Verification", classes="section")
                yield Static(checks_text([]), id="checks-list")
                yield Static("Accounting", classes="section")
                yield Static(Text("Shown once the job has ended.", style="dim"), id="accounting")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#metrics-table", DataTable)
        for key, label in METRIC_COLUMNS:
            table.add_column(label, key=key)
        self.watch(self.app, "snapshot", self._snapshot_changed, init=True)
        self._follow()
        self._draw_plots()
        self.query_one(LogPane).view("out").focus()  # f follows, / searches at once

    def on_screen_resume(self) -> None:
        self._follow()

    def on_screen_suspend(self) -> None:
        self._unfollow()

    def on_unmount(self) -> None:
        self._unfollow()

    def _follow(self) -> None:
        io = self.ddp_app.io
        if io is not None:
            io.follow(self, self.run_id, self.follow_interval)

    def _unfollow(self) -> None:
        io = self.ddp_app.io
        if io is not None:
            io.unfollow(self)

    # -- data in ----------------------------------------------------------------

    def _snapshot_changed(self, snapshot: Snapshot | None = None) -> None:
        snapshot = self.ddp_app.snapshot
        if snapshot is not None:
            self.run = next((r for r in snapshot.runs if r.run_id == self.run_id), self.run)
        if self.run is not None and self.run.progress is not None and self.progress is None:
            self.progress = self.run.progress
        self._draw_summary()
        run = self.run
        if run is not None and run.state.is_terminal and run.job_id != self._verified_job:
            # Each attempt is verified once it has ended (a retry gets its own checklist).
            self._verified_job = run.job_id
            self.verify()

    def verify(self) -> None:
        """Ask for the checklist; it lands in the Checks tab."""
        self.ask_verify(self.run_id)

    @on(ChecksReady)
    def _checks_ready(self, message: ChecksReady) -> None:
        self.show_checks(message.checks)

    @on(DetailReady)
    def _detail_ready(self, message: DetailReady) -> None:
        self.apply_detail(message.detail)

    @on(FollowFailed)
    def _follow_failed(self, message: FollowFailed) -> None:
        self.follow_error = message.error
        self._draw_summary()

    def apply_detail(self, detail: RunDetail) -> None:
        """Fold one incremental ``RunDetail`` into the screen."""
        self.follow_error = None
        self.query_one(LogPane).feed(detail)
        if detail.run_json is not None:
            self.run_json = dict(detail.run_json)
        if detail.progress is not None:
            self.progress = detail.progress
        if detail.metrics and detail.metrics != self.metrics:
            self._show_metrics(detail.metrics)
        if detail.accounting:
            self.accounting = detail.accounting
            self.query_one("#accounting", Static).update(Text(detail.accounting))
        self._draw_summary()

    def show_checks(self, checks: Sequence[Check]) -> None:
        self.checks = list(checks)
        self.query_one("#checks-list", Static).update(checks_text(self.checks))

    # -- drawing ------------------------------------------------------------------

    def _draw_summary(self) -> None:
        summary = summary_text(self.run, self.run_json, self.run_id)
        if self.follow_error:
            summary.append(f"\n following failed: {self.follow_error}", style="red")
        self.query_one("#summary", Static).update(summary)
        self.query_one("#progress-label", Static).update(progress_text(self.run, self.progress))
        bar = self.query_one("#progress", ProgressBar)
        progress = self.progress
        if self.run is not None and self.run.state is JobState.COMPLETED:
            bar.update(total=1, progress=1)  # the last progress line predates the end
        elif progress is not None and progress.steps_per_epoch > 0:
            bar.update(
                total=progress.steps_per_epoch,
                progress=min(progress.step, progress.steps_per_epoch),
            )
        elif self.run is not None and self.run.state.is_terminal:
            bar.update(total=1, progress=1 if self.run.epochs_done else 0)

    def _show_metrics(self, rows: list[dict[str, float | None]]) -> None:
        table: DataTable[str] = self.query_one("#metrics-table", DataTable)
        if len(rows) < len(self.metrics) or rows[: len(self.metrics)] != self.metrics:
            table.clear()
            start = 0
        else:
            start = len(self.metrics)
        for row in rows[start:]:
            table.add_row(*(metric_cell(key, row.get(key)) for key, _ in METRIC_COLUMNS))
        self.metrics = [dict(row) for row in rows]
        self._draw_plots()

    def _draw_plots(self) -> None:
        rows = self.metrics
        epochs = sorted({float(e) for r in rows if (e := r.get("epoch")) is not None})

        def series(column: str) -> tuple[list[float], list[float]]:
            xs: list[float] = []
            ys: list[float] = []
            for r in rows:
                x, y = r.get("epoch"), r.get(column)
                if x is not None and y is not None and math.isfinite(y):
                    xs.append(float(x))
                    ys.append(float(y))
            return xs, ys

        val_name = self.run.val_metric_name if self.run is not None else "val_acc"
        quality: tuple[str, tuple[tuple[str, str], ...]]
        if val_name == "val_acc" and not series("val_acc")[0]:
            # A user's script may report training accuracy only: plot that rather than nothing.
            quality = ("Train acc", (("train_acc", "train"),))
        else:
            quality = (f"Val {metric_label(val_name)}", ((val_name, metric_label(val_name)),))
        plots = (
            ("#plot-loss", "Loss", (("train_loss", "train"), ("val_loss", "val"))),
            ("#plot-val", *quality),
            ("#plot-thru", "Samples/s", (("throughput_samples_per_sec", "samples/s"),)),
        )
        for selector, title, lines in plots:
            widget = self.query_one(selector, PlotextPlot)
            plt = widget.plt
            plt.clear_data()
            plt.clear_figure()
            plt.title(title)
            plt.xlabel("epoch")
            for column, label in lines:
                xs, ys = series(column)
                if xs:
                    plt.plot(xs, ys, label=label, marker="braille")
            if epochs:
                plt.xticks(epochs[:: max(1, len(epochs) // 8)])
            widget.refresh()

    @on(TabbedContent.TabActivated, "#detail-tabs")
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "checks":
            self.verify()

    # -- keys ---------------------------------------------------------------------

    def action_back(self) -> None:
        self.dismiss(None)

    def action_tab(self, tab: str) -> None:
        self.query_one("#detail-tabs", TabbedContent).active = tab

    def action_cancel_run(self) -> None:
        self.ddp_app.confirm_cancel(self.run_id)

    def action_retry(self) -> None:
        self.ddp_app.retry_run(self.run_id)

    def action_edit(self) -> None:
        self.ddp_app.edit_run(self.run_id)

    def action_verify(self) -> None:
        self.action_tab("checks")
        self.verify()
