"""Run detail: summary, progress within the epoch, per-epoch metrics and plots, logs,
verification checklist and accounting, resource telemetry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, ProgressBar, Static, TabbedContent, TabPane
from textual_plotext import PlotextPlot

from ddp_tui.remote.backends.states import JobState
from ddp_tui.tui.cluster_io import FOLLOW_INTERVAL, Request
from ddp_tui.tui.diagnosis_panel import (
    LAST_LINES,
    DiagnosisPanel,
    PanelState,
    evidence_stream,
    panel_text,
)
from ddp_tui.tui.formatting import metric_label
from ddp_tui.tui.header import StatusHeader
from ddp_tui.tui.logview import STREAMS, LogPane
from ddp_tui.tui.messages import (
    ChecksReady,
    DetailReady,
    DiagnosisReady,
    FollowFailed,
    RequestFailed,
    UsageReady,
    WaitReady,
)
from ddp_tui.tui.modals import checks_text
from ddp_tui.tui.resources_pane import ResourcesPane
from ddp_tui.tui.run_summary import (
    METRIC_COLUMNS,
    metric_cell,
    metric_cells,
    progress_text,
    summary_text,
)
from ddp_tui.tui.screens.base import RUN_ACTION_BINDINGS, BaseScreen
from ddp_tui.tui.shell_launch import NodeChooser, ShellPlanned, run_shell
from ddp_tui.tui.stacks_view import StacksReady, StacksScreen

if TYPE_CHECKING:
    from ddp_tui.diagnosis import Evidence
    from ddp_tui.remote.model.views import Check, Progress, RunDetail, RunView, Snapshot
    from ddp_tui.remote.store.tail import PlotSeries
    from ddp_tui.reports.efficiency import UsageReport

__all__ = ["METRIC_COLUMNS", "DetailScreen", "metric_cell", "progress_text", "summary_text"]


def _worth_diagnosing(run: RunView) -> bool:
    """An ended training or script run that did not simply complete (a preflight's result
    is its own diagnosis)."""
    return run.kind != "preflight" and run.state is not JobState.COMPLETED


class DetailScreen(BaseScreen):
    """One run, followed at about one second while this screen is on top: it registers its
    run with the I/O owner, which posts each ``RunDetail`` here."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("1", "tab('logs')", "Logs"),
        Binding("2", "tab('metrics')", "Metrics"),
        Binding("3", "tab('checks')", "Checks"),
        # Not in the footer: at 120 columns it would push out the run's own keys (t, g);
        # the tab bar names Resources and help lists 4.
        Binding("4", "tab('resources')", "Resources", show=False),
        *RUN_ACTION_BINDINGS,
        # Shown only where they apply (check_action): the panel names them too.
        Binding("g", "evidence", "Evidence"),
        Binding("t", "estimate", "Why waits"),
        Binding("z", "right_size", "Right-size"),
        Binding("d", "diagnose", "Diagnose", show=False),
        Binding("s", "shell", "Shell", show=False),
        Binding("k", "stacks", "Stacks", show=False),
    ]

    def __init__(self, run_id: str, *, follow_interval: float = FOLLOW_INTERVAL) -> None:
        super().__init__()
        self.run_id = run_id
        self.follow_interval = follow_interval
        self.run: RunView | None = None
        self.run_json: dict[str, object] | None = None
        self.progress: Progress | None = None
        #: The metrics rows in the table: the newest (all of a short run).
        self.metrics: list[dict[str, float | None]] = []
        #: Rows the run has so far; the table shows the last ``len(metrics)``.
        self.metrics_total = 0
        #: What the plots draw: a bounded sample of every row, per column.
        self.metrics_plot: dict[str, PlotSeries] = {}
        self.checks: list[Check] = []
        self.accounting: str | None = None
        self.follow_error: str | None = None
        self._verified_job: str | None = None  # the attempt whose end was verified
        #: What the ended attempt used (``ClusterAPI.usage``), asked once per attempt.
        self.usage: UsageReport | None = None
        self.panel = PanelState()
        self._keys_for: tuple[object, ...] = ()  # what check_action last answered for

    def compose(self) -> ComposeResult:
        yield StatusHeader("Run")
        yield Static("", id="summary")
        yield DiagnosisPanel(id="diagnosis")
        with Horizontal(id="progress-row"):
            yield Static("", id="progress-label")
            yield ProgressBar(total=None, show_eta=False, id="progress")
        with TabbedContent(initial="logs", id="detail-tabs"):
            with TabPane("Logs", id="logs"):
                yield LogPane(id="logpane")
            with TabPane("Metrics", id="metrics"), Vertical():
                yield Static("", id="metrics-note", markup=False)
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
                yield Static("Usage and right-sizing", classes="section")
                yield Static(Text("Shown once the job has ended.", style="dim"), id="usage")
            with TabPane("Resources", id="resources"):
                yield ResourcesPane(id="resources-pane")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#metrics-table", DataTable)
        for key, label in METRIC_COLUMNS:
            table.add_column(label, key=key)
        self.query_one("#metrics-note", Static).display = False  # until rows are hidden
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
            self.ask_usage()
            if run.diagnosis is None and _worth_diagnosing(run):
                self.diagnose()  # the refresh has none (yet): read the tails now

    def verify(self) -> None:
        """Ask for the checklist; it lands in the Checks tab."""
        self.ask_verify(self.run_id)

    @on(ChecksReady)
    def _checks_ready(self, message: ChecksReady) -> None:
        self.show_checks(message.checks)

    def ask_usage(self) -> None:
        """Ask what the ended attempt used (one sacct with its steps, on Slurm); it lands
        in the Checks tab, and ``z`` opens Compose right-sized from it."""
        run_id = self.run_id
        self.ask(
            Request(
                "Usage",
                lambda cluster: cluster.usage(run_id),
                lambda report: UsageReady(run_id, report),
                key=("usage", run_id),
            )
        )

    @on(UsageReady)
    def _usage_ready(self, message: UsageReady) -> None:
        from ddp_tui.reports.usage_text import usage_text

        self.usage = message.report
        text = usage_text(message.report)
        if message.report.ended and message.report.suggestion.spec_changes():
            text += "z edits a copy right-sized (Compose, with these filled in)\n"
        self.query_one("#usage", Static).update(Text(text))
        self.refresh_bindings()

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
        # Each comparison is bounded (the newest rows, the plot sample), never the whole file.
        if detail.metrics_total and (
            detail.metrics_total != self.metrics_total or detail.metrics != self.metrics
        ):
            self._show_metrics(detail.metrics, detail.metrics_total)
        if detail.metrics_plot and detail.metrics_plot != self.metrics_plot:
            self.metrics_plot = detail.metrics_plot
            self._draw_plots()
        if detail.heartbeats:
            self.panel.heartbeats = list(detail.heartbeats)
        self.panel.stall = detail.stall  # each read says whether it is (still) stalled
        if detail.resources is not None:  # None: no news (the pane redraws only on a change)
            self.query_one(ResourcesPane).show(detail.resources)
        if detail.accounting:
            self.accounting = detail.accounting
            self.query_one("#accounting", Static).update(Text(detail.accounting))
        self._draw_summary()

    def show_checks(self, checks: Sequence[Check]) -> None:
        self.checks = list(checks)
        self.query_one("#checks-list", Static).update(checks_text(self.checks))

    # -- diagnosis, stall, pending reason ------------------------------------------

    def diagnose(self) -> None:
        """Diagnose the latest attempt from its logs' tails, read now."""
        run_id, run = self.run_id, self.run
        self.panel.diagnosed_job = run.job_id if run is not None else None
        self.panel.diagnosis = None
        self.panel.diagnosing = self.ask(
            Request(
                "Diagnose",
                lambda cluster: cluster.diagnose(run_id),
                lambda diagnosis: DiagnosisReady(run_id, diagnosis),
                key=("diagnose", run_id),
            )
        )
        self._draw_panel()

    @on(DiagnosisReady)
    def _diagnosis_ready(self, message: DiagnosisReady) -> None:
        self.panel.diagnosis = message.diagnosis
        self.panel.diagnosing = False
        self.panel.evidence_index = 0
        self._draw_panel()

    @on(WaitReady)
    def _wait_ready(self, message: WaitReady) -> None:
        self.panel.wait = message.wait
        self.panel.asking = False
        self._draw_panel()

    @on(RequestFailed)
    def _request_failed(self, message: RequestFailed) -> None:
        # The app still shows the failure (the message bubbles on); the panel stops waiting.
        if message.what in ("Diagnose", "Why it waits"):
            self.panel.diagnosing = self.panel.asking = False
            self._draw_panel()

    def _last_lines(self) -> list[tuple[str, str]]:
        pane = self.query_one(LogPane)
        pane.flush()
        return [
            (f".{stream}", line)
            for stream in STREAMS
            for line in pane.view(stream).lines[-LAST_LINES:]
            if line.strip()
        ]

    def _draw_panel(self) -> None:
        run = self.run
        stall = (self.panel.stall or run.stall) if run is not None else None
        stalled = stall is not None and run is not None and not run.state.is_terminal
        text = panel_text(
            run,
            self.panel,
            last_lines=self._last_lines() if stalled else (),
            now=self.ddp_app.clock(),
        )
        self.query_one(DiagnosisPanel).show_text(text)
        keys = (run.state if run is not None else None, bool(self._evidence()))
        if keys != self._keys_for:
            self._keys_for = keys
            self.refresh_bindings()

    def _evidence(self) -> list[Evidence]:
        """The evidence lines of the shown diagnosis that are in a log tab."""
        run = self.run
        if run is None or not run.state.is_terminal:
            return []
        diagnosis = self.panel.diagnosis_of(run)
        return [e for e in diagnosis.evidence if evidence_stream(e)] if diagnosis else []

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        run = self.run
        if action == "evidence":
            return bool(self._evidence())
        if action == "right_size":
            return self.usage is not None and bool(self.usage.suggestion.spec_changes())
        if action == "estimate":
            return run is not None and run.state is JobState.PENDING
        if action == "diagnose":
            return run is not None and run.state.is_terminal
        return True

    # -- drawing ------------------------------------------------------------------

    def _draw_summary(self) -> None:
        summary = summary_text(self.run, self.run_json, self.run_id)
        if self.follow_error:
            summary.append(f"\n following failed: {self.follow_error}", style="red")
        self.query_one("#summary", Static).update(summary)
        self._draw_panel()
        self.query_one("#progress-label", Static).update(progress_text(self.run, self.progress))
        bar = self.query_one("#progress", ProgressBar)
        progress = self.progress
        if self.run is not None and self.run.state is JobState.COMPLETED:
            bar.update(total=1, progress=1)  # the last progress line predates the end
        elif self.run is not None and self.run.by_steps and self.run.steps_total:
            total = self.run.steps_total  # a script with no epochs: steps of its budget
            bar.update(total=total, progress=min(self.run.steps_done or 0, total))
        elif progress is not None and progress.steps_per_epoch > 0:
            bar.update(
                total=progress.steps_per_epoch,
                progress=min(progress.step, progress.steps_per_epoch),
            )
        elif self.run is not None and self.run.state.is_terminal:
            bar.update(total=1, progress=1 if self.run.epochs_done else 0)

    def _show_metrics(self, rows: list[dict[str, float | None]], total: int) -> None:
        """Show ``rows``, the last of ``total``: new rows are appended and the oldest beyond
        the window dropped, so the table keeps its place; anything else redraws it."""
        table: DataTable[str] = self.query_one("#metrics-table", DataTable)
        first = total - len(rows)  # the index of rows[0] in the file
        old_total = self.metrics_total
        old_first = old_total - len(self.metrics)
        # Rows both windows hold must agree (a rewritten file starts the table over).
        both = max(first, old_first)
        agree = self.metrics[both - old_first :] == rows[both - first : old_total - first]
        if not self.metrics or first < old_first or first >= old_total or not agree:
            table.clear()
            start, dropped = first, range(0)
        else:
            start, dropped = old_total, range(old_first, first)
        for index in range(start, total):
            row = rows[index - first]
            table.add_row(*metric_cells(row), key=str(index))
        for index in dropped:
            table.remove_row(str(index))
        self.metrics = [dict(row) for row in rows]
        self.metrics_total = total
        note = self.query_one("#metrics-note", Static)
        hidden = total - len(rows)
        note.display = hidden > 0
        if hidden:
            note.update(
                f"The last {len(rows):,} of {total:,} rows; {hidden:,} earlier rows are not "
                "in the table (the plots draw all of them, sampled)."
            )

    def _draw_plots(self) -> None:
        sample = self.metrics_plot

        def series(column: str) -> tuple[list[float], list[float]]:
            xs, ys = sample.get(column, ((), ()))
            return list(xs), list(ys)

        epochs = sorted({x for xs, _ in sample.values() for x in xs})
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
            plt.xlabel("step" if self.run is not None and self.run.by_steps else "epoch")
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

    def action_evidence(self) -> None:
        """Show the next evidence line in its log (the first again after the last)."""
        found = self._evidence()
        if not found:
            return
        evidence = found[self.panel.evidence_index % len(found)]
        self.panel.evidence_index += 1
        stream = evidence_stream(evidence)
        assert stream is not None
        self.action_tab("logs")
        if not self.query_one(LogPane).goto_line(stream, evidence.line, evidence.text):
            self.notify(
                f"{evidence.label} is not in the log pane (yet)", severity="warning", markup=False
            )

    def action_right_size(self) -> None:
        """Edit a copy with the usage report's suggestion filled in (Compose, to check
        and submit)."""
        if self.usage is None:
            return
        self.ddp_app.edit_run(self.run_id, changes=self.usage.suggestion.spec_changes())

    def action_estimate(self) -> None:
        """Ask the scheduler why the pending run waits and when it should start (on demand
        only: squeue --start runs the controller's backfill simulation, and sprio, sshare
        and the limits are more queries; see ``ClusterAPI.why_waiting``)."""
        run_id = self.run_id
        self.panel.asking = self.ask(
            Request(
                "Why it waits",
                lambda cluster: cluster.why_waiting(run_id),
                lambda wait: WaitReady(run_id, wait),
                key=("why_waiting", run_id),
            )
        )
        self._draw_panel()

    def action_diagnose(self) -> None:
        self.diagnose()

    def action_shell(self, node: str | None = None) -> None:
        """A shell where the job runs (docs/shell.md): planned on the I/O thread, then
        :meth:`_shell_planned` picks a node if the job has several, and opens it."""
        run_id, chosen = self.run_id, node is not None
        self.ask(
            Request(
                "Shell",
                lambda cluster: cluster.shell_command(run_id, node),
                lambda plan: ShellPlanned(plan, chosen),
                key=("shell", run_id),
            )
        )

    @on(ShellPlanned)
    def _shell_planned(self, message: ShellPlanned) -> None:
        plan = message.plan
        if len(plan.nodes) > 1 and not message.chosen:
            self.app.push_screen(NodeChooser(plan), self._node_chosen)
            return
        run_shell(self.app, self.ddp_app.cluster, plan)

    def _node_chosen(self, node: str | None) -> None:
        if node is not None:
            self.action_shell(node)

    def action_stacks(self) -> None:
        """Every rank's stack (docs/stacks.md), taken on the I/O thread, then shown."""
        run_id = self.run_id
        self.ask(
            Request(
                "Stacks",
                lambda cluster: cluster.stacks(run_id),
                StacksReady,
                key=("stacks", run_id),
            )
        )

    @on(StacksReady)
    def _stacks_ready(self, message: StacksReady) -> None:
        self.app.push_screen(StacksScreen(message.taken))
