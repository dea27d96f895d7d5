"""The jobs screen: every run, newest first, with filter, cancel, retry, edit and verify keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var
from textual.widgets import Footer, Input, Static

from ddp_tui.tui.header import StatusHeader
from ddp_tui.tui.jobs_table import COLUMNS, JobsTable, row_values, run_matches
from ddp_tui.tui.messages import ChecksReady
from ddp_tui.tui.run_summary import run_size
from ddp_tui.tui.screens.base import RUN_ACTION_BINDINGS, BaseScreen

if TYPE_CHECKING:
    from ddp_tui.remote.views import RunView, Snapshot

# The table's parts are imported from here by tests and benchmarks.
__all__ = ["COLUMNS", "JobsScreen", "JobsTable", "row_values", "run_matches", "run_size"]


class JobsScreen(BaseScreen):
    """Every run, newest first."""

    BINDINGS = [
        Binding("enter", "open", "Open"),
        Binding("n", "new", "New"),
        *RUN_ACTION_BINDINGS,
        Binding("s", "compare", "Compare"),
        Binding("slash", "filter", "Filter"),
        Binding("f", "toggle_finished", "Finished"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    show_finished: var[bool] = var(True)
    filter_text: var[str] = var("")

    def compose(self) -> ComposeResult:
        yield StatusHeader("Jobs")
        yield Input(placeholder="filter: name, job id, state, group, reason", id="filter")
        yield JobsTable(id="jobs")
        yield Static(
            Text.from_markup(
                "No runs yet. Press [b]n[/b] to compose an experiment, [b]?[/b] for help."
            ),
            id="empty",
        )
        yield Static("", id="jobs-status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        table = self.query_one(JobsTable)
        table.focus()
        self.watch(self.app, "snapshot", self._render_snapshot, init=True)
        self.watch(table, "cursor_row", self._render_status, init=False)

    # -- rendering ------------------------------------------------------------

    def visible_runs(self, snapshot: Snapshot | None) -> list[RunView]:
        if snapshot is None:
            return []
        return [
            run
            for run in snapshot.runs
            if (self.show_finished or not run.state.is_terminal)
            and run_matches(run, self.filter_text)
        ]

    def _render_snapshot(self, snapshot: Snapshot | None = None) -> None:
        snapshot = self.ddp_app.snapshot
        runs = self.visible_runs(snapshot)
        table = self.query_one(JobsTable)
        table.show_runs(runs, select=self.ddp_app.take_selection())
        total = len(snapshot.runs) if snapshot else 0
        self.query_one("#empty", Static).display = snapshot is not None and total == 0
        self._render_status()

    def _render_status(self) -> None:
        """The status line: counts, the filter, and the selected run's reason in full."""
        snapshot = self.ddp_app.snapshot
        table = self.query_one(JobsTable)
        total = len(snapshot.runs) if snapshot else 0
        active = sum(1 for run in snapshot.runs if run.state.is_active) if snapshot else 0
        parts = [f"{total} runs", f"{active} active"]
        if snapshot is not None and snapshot.stalled:
            parts.append(f"{snapshot.stalled} stalled")
        if table.row_count != total:
            parts.append(f"{table.row_count} shown")
        if self.filter_text:
            parts.append(f"filter {self.filter_text!r}")
        if not self.show_finished:
            parts.append("finished hidden (f)")
        selected = self.ddp_app.run_by_id(table.selected_run_id or "")
        if selected is not None and selected.reason_label:
            parts.append(f"{selected.name}: {selected.reason_label}")
        if snapshot is None:
            parts = ["waiting for the first refresh..."]
        self.query_one("#jobs-status", Static).update(" · ".join(parts))

    def watch_show_finished(self) -> None:
        if self.is_mounted:
            self._render_snapshot()

    def watch_filter_text(self) -> None:
        if self.is_mounted:
            self._render_snapshot()

    # -- filter ---------------------------------------------------------------

    def action_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.display = True
        field.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        field = self.query_one("#filter", Input)
        if not field.value.strip():
            field.display = False
        self.query_one(JobsTable).focus()

    def action_clear_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.value = ""
        field.display = False
        self.filter_text = ""
        self.query_one(JobsTable).focus()

    def action_toggle_finished(self) -> None:
        self.show_finished = not self.show_finished
        self.notify("Showing finished runs" if self.show_finished else "Hiding finished runs")

    # -- run actions ----------------------------------------------------------

    def _selected(self) -> str | None:
        run_id = self.query_one(JobsTable).selected_run_id
        if run_id is None:
            self.notify("No run selected.", severity="warning")
        return run_id

    @on(JobsTable.RowSelected, "#jobs")
    def _row_selected(self, event: JobsTable.RowSelected) -> None:
        self.ddp_app.open_run(event.run_id)

    def action_open(self) -> None:
        if run_id := self._selected():
            self.ddp_app.open_run(run_id)

    def action_new(self) -> None:
        self.ddp_app.open_compose()

    def action_cancel_run(self) -> None:
        if run_id := self._selected():
            self.ddp_app.confirm_cancel(run_id)

    def action_retry(self) -> None:
        if run_id := self._selected():
            self.ddp_app.retry_run(run_id)

    def action_edit(self) -> None:
        if run_id := self._selected():
            self.ddp_app.edit_run(run_id)

    def action_verify(self) -> None:
        if run_id := self._selected():
            self.ask_verify(run_id)

    @on(ChecksReady)
    def _checks_ready(self, message: ChecksReady) -> None:
        from ddp_tui.tui.modals import ChecksModal

        if not self.is_current:
            return  # another screen was opened meanwhile: it shows its own checklist
        run = self.ddp_app.run_by_id(message.run_id)
        name = run.name if run is not None else message.run_id
        self.app.push_screen(ChecksModal(f"Verification of {name}", message.checks))

    def action_compare(self) -> None:
        run_id = self.query_one(JobsTable).selected_run_id
        self.ddp_app.open_compare(run_id)
