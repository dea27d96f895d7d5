"""The jobs screen: every run, newest first, with filter, cancel, retry, edit and verify keys."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.cells import set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive, var
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Footer, Input, Static

from ddp_tui.remote.states import JobState
from ddp_tui.tui.formatting import STATE_STYLES, duration, metric_label, number, rate, size
from ddp_tui.tui.header import StatusHeader
from ddp_tui.tui.messages import ChecksReady
from ddp_tui.tui.screens.base import RUN_ACTION_BINDINGS, BaseScreen

if TYPE_CHECKING:
    from ddp_tui.remote.views import RunView, Snapshot

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
    val = "-"
    if run.preflight is not None:  # no validation metric: its bus bandwidth instead
        val = run.preflight.bandwidth_label
    elif run.last_val_metric is not None:
        val = f"{metric_label(run.val_metric_name)} {number(run.last_val_metric)}"
    return (
        run.name,
        run.job_id or "-",
        run.state_label,  # "*": Run detail says how the trainer's record disagrees
        run_size(run),
        duration(run.elapsed_sec) if run.elapsed_sec else "-",
        run.epoch_label,
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


class JobsTable(ScrollView, can_focus=True):
    """The runs table, drawn with the line API: a paint renders only the visible rows.

    :meth:`show_runs` diffs rows, so a refresh that changes a few cells costs a few
    string comparisons plus one repaint of the visible lines, however many runs exist.
    """

    DEFAULT_CSS = """
    JobsTable {
        height: 1fr;
        overflow-x: hidden;
        background: $surface;
    }
    JobsTable > .jobs-table--header {
        text-style: bold;
        background: $panel;
        color: $foreground;
    }
    JobsTable > .jobs-table--even {
        background: $surface-lighten-1;
    }
    JobsTable > .jobs-table--cursor {
        background: $panel-lighten-2;
    }
    JobsTable:focus > .jobs-table--cursor {
        background: $accent 60%;
        color: $foreground;
    }
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "jobs-table--header",
        "jobs-table--even",
        "jobs-table--cursor",
    }

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select", "Open", show=False),
    ]

    @dataclass
    class RowSelected(Message):
        """Enter or a click on a row."""

        table: JobsTable
        run_id: str

        @property
        def control(self) -> JobsTable:
            return self.table

    cursor_row: reactive[int] = reactive(0, always_update=True, init=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.order: list[str] = []
        self._rows: dict[str, Row] = {}
        self._width = sum(width + 2 for _, _, width in COLUMNS)

    # -- data -------------------------------------------------------------------

    @property
    def selected_run_id(self) -> str | None:
        if not self.order or not 0 <= self.cursor_row < len(self.order):
            return None
        return self.order[self.cursor_row]

    @property
    def row_count(self) -> int:
        return len(self.order)

    def get_cell(self, run_id: str, column: str) -> str:
        """The text of one cell (tests and benchmarks read the table through this)."""
        index = next(i for i, (key, _, _) in enumerate(COLUMNS) if key == column)
        return self._rows[run_id][index]

    def show_runs(self, runs: Sequence[RunView], select: str | None = None) -> int:
        """Show ``runs`` in this order; returns the number of cells whose text changed."""
        order = [run.run_id for run in runs]
        values = {run.run_id: row_values(run) for run in runs}
        if order != self.order:
            keep = select or self.selected_run_id
            old_row = self.cursor_row
            self.order = order
            self._rows = values
            self.virtual_size = Size(self._width, len(order) + 1)
            if keep in values:
                self.move_cursor(order.index(keep))
            else:
                self.move_cursor(min(old_row, max(0, len(order) - 1)))
            self.refresh()
            return len(order) * len(COLUMNS)
        written = 0
        for run_id, new in values.items():
            old = self._rows.get(run_id)
            if old != new:
                written += sum(1 for a, b in zip(old or (), new, strict=False) if a != b) or len(
                    new
                )
                self._rows[run_id] = new
        if select in values:
            self.move_cursor(order.index(select))
        if written:
            self.refresh()
        return written

    # -- cursor -------------------------------------------------------------------

    def move_cursor(self, row: int) -> None:
        if not self.order:
            self.cursor_row = 0
            return
        self.cursor_row = max(0, min(row, len(self.order) - 1))
        self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        visible = max(1, self.scrollable_content_region.height - 1)  # minus the header line
        top = round(self.scroll_y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False)

    def watch_cursor_row(self) -> None:
        self.refresh()

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        page = max(1, self.scrollable_content_region.height - 2)
        self.move_cursor(self.cursor_row + direction * page)

    def action_first(self) -> None:
        self.move_cursor(0)

    def action_last(self) -> None:
        self.move_cursor(len(self.order) - 1)

    def action_select(self) -> None:
        run_id = self.selected_run_id
        if run_id is not None:
            self.post_message(self.RowSelected(self, run_id))

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            return
        row = round(self.scroll_y) + event.y - 1
        if 0 <= row < len(self.order):
            already = row == self.cursor_row
            self.move_cursor(row)
            if already or event.chain > 1:
                self.action_select()

    # -- drawing ------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        if y == 0:
            style = base + self.get_component_rich_style("jobs-table--header")
            return self._strip([label for _, label, _ in COLUMNS], style, None, width)
        index = round(self.scroll_y) + y - 1
        if not 0 <= index < len(self.order):
            return Strip.blank(width, base)
        values = self._rows[self.order[index]]
        style = base
        if index % 2:
            style = style + self.get_component_rich_style("jobs-table--even")
        if index == self.cursor_row:
            style = style + self.get_component_rich_style("jobs-table--cursor")
        return self._strip(values, style, values[2], width)

    def _strip(self, cells: Sequence[str], style: Style, state: str | None, width: int) -> Strip:
        segments: list[Segment] = []
        for index, ((_, _, cell_width), text) in enumerate(zip(COLUMNS, cells, strict=True)):
            cell_style = style
            if state is not None and index == 2:
                cell_style = style + Style.parse(_state_style(state))
            segments.append(Segment(" " + set_cell_size(text, cell_width) + " ", cell_style))
        return Strip(segments, self._width).crop_extend(0, width, style)


def _state_style(state: str) -> str:
    try:
        return STATE_STYLES.get(JobState(state.split(" ", 1)[0]), "") or "none"
    except ValueError:
        return "none"


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
