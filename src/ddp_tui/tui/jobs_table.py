"""The Jobs screen's table of runs: its columns, its cells, and the widget that draws them.

The widget draws with the line API and diffs rows (see :class:`JobsTable`), so a refresh of
thousands of runs costs only the cells that changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ddp_tui.remote.states import JobState
from ddp_tui.tui.formatting import STATE_STYLES, duration, metric_label, number, rate
from ddp_tui.tui.run_summary import run_size

if TYPE_CHECKING:
    from ddp_tui.remote.views import RunView

# (key, label, width). Fixed widths: the table never measures cells, so an in-place
# update costs a few microseconds (update_width=True re-measures the whole column).
# The last column, the reason, is at least its width and takes whatever the window has
# left: a wide window shows "waiting for free nodes" whole, a narrow one its start (the
# status line below the table says the selected run's reason in full).
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("name", "Name", 18),
    ("job", "Job", 8),
    ("state", "State", 13),
    ("size", "NxG", 5),
    ("elapsed", "Elapsed", 8),
    ("epoch", "Epoch", 7),
    ("loss", "Loss", 7),
    ("val", "Val", 11),
    ("thru", "Samples/s", 9),
    ("reason", "Reason", 12),
)
_STATE = 2  # the state column's index: it is drawn in the state's colour
_REASON = len(COLUMNS) - 1

Row = tuple[str, ...]


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
        run.reason_label,
    )


def reason_style(run: RunView) -> str:
    """How the reason cell stands out: a stall most, then a failure with a fix to make
    (a damaged run directory is one)."""
    if run.damage:
        return "fix"
    if run.stall is not None and not run.state.is_terminal:
        return "stalled"
    if run.diagnosis is not None and run.diagnosis.needs_fix:
        return "fix"
    return ""


def run_matches(run: RunView, needle: str) -> bool:
    """Case-insensitive substring match on name, run id, job ids, state, group and reason
    (``/stalled`` finds the stalled runs)."""
    if not needle:
        return True
    haystack = " ".join(
        [run.name, run.run_id, run.state_label, run.group or "", run.reason_label]
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
    JobsTable > .jobs-table--stalled {
        color: $warning;
        text-style: bold;
    }
    JobsTable > .jobs-table--fix {
        color: $error;
    }
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "jobs-table--header",
        "jobs-table--even",
        "jobs-table--cursor",
        "jobs-table--stalled",
        "jobs-table--fix",
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
        self._marks: dict[str, str] = {}  # run id -> reason_style(), where it has one
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
        marks = {run.run_id: mark for run in runs if (mark := reason_style(run))}
        marks_changed = marks != self._marks
        self._marks = marks
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
        if written or marks_changed:
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
            return self._strip([label for _, label, _ in COLUMNS], style, width)
        index = round(self.scroll_y) + y - 1
        if not 0 <= index < len(self.order):
            return Strip.blank(width, base)
        run_id = self.order[index]
        values = self._rows[run_id]
        style = base
        if index % 2:
            style = style + self.get_component_rich_style("jobs-table--even")
        if index == self.cursor_row:
            style = style + self.get_component_rich_style("jobs-table--cursor")
        return self._strip(values, style, width, state=values[_STATE], mark=self._marks.get(run_id))

    def _strip(
        self,
        cells: Sequence[str],
        style: Style,
        width: int,
        *,
        state: str | None = None,
        mark: str | None = None,
    ) -> Strip:
        segments: list[Segment] = []
        marked = None
        if mark:
            marked = self.get_component_rich_style(f"jobs-table--{mark}", partial=True)
        # The reason column takes what the fixed columns leave of the window.
        rest = max(COLUMNS[_REASON][2], width - (self._width - COLUMNS[_REASON][2]))
        for index, ((_, _, cell_width), text) in enumerate(zip(COLUMNS, cells, strict=True)):
            cell_style = style
            if state is not None and index == _STATE:
                cell_style = style + Style.parse(_state_style(state))
                if marked is not None and mark == "stalled":  # its state is marked too
                    cell_style = cell_style + marked
            if index == _REASON:
                cell_width = rest
                if marked is not None:
                    cell_style = style + marked
                if cell_len(text) > cell_width:
                    text = set_cell_size(text, cell_width - 1) + "…"
            segments.append(Segment(" " + set_cell_size(text, cell_width) + " ", cell_style))
        return Strip(segments).crop_extend(0, width, style)


def _state_style(state: str) -> str:
    try:
        return STATE_STYLES.get(JobState(state.split(" ", 1)[0]), "") or "none"
    except ValueError:
        return "none"
