"""The jobs screen: every run, newest first, with filter, cancel, retry, edit and verify keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var
from textual.widgets import DataTable, Footer, Input, Static

from ddp_tui.tui.formatting import duration, metric_label, number, rate, size, state_text
from ddp_tui.tui.header import StatusHeader
from ddp_tui.tui.screens.base import BaseScreen

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import RunView, Snapshot

# (key, label, width). Fixed widths: the table never measures cells, so an in-place
# update costs a few microseconds (update_width=True re-measures the whole column).
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("name", "Name", 22),
    ("job", "Job", 9),
    ("state", "State", 13),
    ("size", "NxG", 6),
    ("elapsed", "Elapsed", 8),
    ("epoch", "Epoch", 7),
    ("loss", "Loss", 8),
    ("val", "Val", 11),
    ("thru", "Samples/s", 9),
)

Row = tuple[str, ...]


def run_size(run: RunView) -> str:
    spec = run.spec
    return size(int(getattr(spec, "nodes", 1)), int(getattr(spec, "gpus_per_node", 1)))


def row_values(run: RunView) -> Row:
    """The plain values of one row; the table updates only the cells whose value changed."""
    epochs = f"{run.epochs_done}/{run.epochs_total}" if run.epochs_total else "-"
    val = "-"
    if run.last_val_metric is not None:
        val = f"{metric_label(run.val_metric_name)} {number(run.last_val_metric)}"
    return (
        run.name,
        run.job_id or "-",
        run.state.value,
        run_size(run),
        duration(run.elapsed_sec) if run.elapsed_sec else "-",
        epochs,
        number(run.last_train_loss),
        val,
        rate(run.throughput),
    )


def run_matches(run: RunView, needle: str) -> bool:
    """Case-insensitive substring match on name, run id, job ids, state and group."""
    if not needle:
        return True
    haystack = " ".join(
        [run.name, run.run_id, run.state.value, run.group or ""]
        + [attempt.job_id for attempt in run.attempts]
    ).lower()
    return all(word in haystack for word in needle.lower().split())


class JobsTable(DataTable[Text | str]):
    """The runs table. :meth:`show_runs` diffs rows: unchanged cells are never touched."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.order: list[str] = []
        self._rows: dict[str, Row] = {}
        for key, label, width in COLUMNS:
            self.add_column(label, width=width, key=key)

    @staticmethod
    def _cells(values: Row) -> list[Text | str]:
        cells: list[Text | str] = list(values)
        from ddp_tui.remote.states import JobState

        try:
            cells[2] = state_text(JobState(values[2]))
        except ValueError:
            cells[2] = Text(values[2])
        # Names come from users: never let them be read as markup.
        cells[0] = Text(values[0])
        return cells

    @property
    def selected_run_id(self) -> str | None:
        if not self.order or not 0 <= self.cursor_row < len(self.order):
            return None
        return self.order[self.cursor_row]

    def show_runs(self, runs: Sequence[RunView], select: str | None = None) -> int:
        """Show ``runs`` in this order; returns the number of cells written."""
        order = [run.run_id for run in runs]
        values = {run.run_id: row_values(run) for run in runs}
        if order != self.order:
            keep = select or self.selected_run_id
            self.clear()
            self.order = order
            self._rows = values
            for run_id in order:
                self.add_row(*self._cells(values[run_id]), key=run_id)
            if keep in values:
                self.move_cursor(row=order.index(keep), animate=False)
            return len(order) * len(COLUMNS)
        written = 0
        column_keys = [key for key, _, _ in COLUMNS]
        for run_id, new in values.items():
            old = self._rows.get(run_id)
            if old == new:
                continue
            cells = self._cells(new)
            for index, column in enumerate(column_keys):
                if old is None or old[index] != new[index]:
                    self.update_cell(run_id, column, cells[index])
                    written += 1
            self._rows[run_id] = new
        if select in values:
            self.move_cursor(row=order.index(select), animate=False)
        return written


class JobsScreen(BaseScreen):
    """Every run, newest first."""

    BINDINGS = [
        Binding("enter", "open", "Open"),
        Binding("n", "new", "New"),
        Binding("c", "cancel_run", "Cancel"),
        Binding("r", "retry", "Retry"),
        Binding("e", "edit", "Edit"),
        Binding("v", "verify", "Verify"),
        Binding("s", "compare", "Compare"),
        Binding("slash", "filter", "Filter"),
        Binding("f", "toggle_finished", "Finished"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    show_finished: var[bool] = var(True)
    filter_text: var[str] = var("")

    def compose(self) -> ComposeResult:
        yield StatusHeader("Jobs")
        yield Input(placeholder="filter: name, job id, state, group", id="filter")
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
        self.query_one(JobsTable).focus()
        self.watch(self.app, "snapshot", self._render_snapshot, init=True)

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
        active = sum(1 for run in snapshot.runs if run.state.is_active) if snapshot else 0
        parts = [f"{total} runs", f"{active} active"]
        if len(runs) != total:
            parts.append(f"{len(runs)} shown")
        if self.filter_text:
            parts.append(f"filter {self.filter_text!r}")
        if not self.show_finished:
            parts.append("finished hidden (f)")
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

    @on(DataTable.RowSelected, "#jobs")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.ddp_app.open_run(str(event.row_key.value))

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
            self.ddp_app.verify_run(run_id)

    def action_compare(self) -> None:
        run_id = self.query_one(JobsTable).selected_run_id
        self.ddp_app.open_compare(run_id)
