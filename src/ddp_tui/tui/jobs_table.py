"""The Jobs screen's table of runs: its columns, its cells, and the widget that draws them.

The widget draws with the line API and diffs rows (see :class:`JobsTable`), so a refresh of
thousands of runs costs only the cells that changed. Its rows are
:class:`~ddp_tui.tui.job_groups.JobLine` s: runs, and groups folded into one row
(:func:`~ddp_tui.tui.job_groups.job_lines` decides which, once per refresh).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final

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

from ddp_tui.remote.backends.states import JobState
from ddp_tui.reports.usage import hours_text, resource_hours
from ddp_tui.tui.foreign_rows import array_group, array_values, job_values
from ddp_tui.tui.formatting import STATE_STYLES, duration, metric_label, number, rate
from ddp_tui.tui.job_groups import CLOSED, INDENT, OPEN, JobLine, RunGroup, counts_label
from ddp_tui.tui.run_summary import run_size

if TYPE_CHECKING:
    from ddp_tui.remote.backends.user_jobs import UserJob
    from ddp_tui.remote.model.views import RunView
    from ddp_tui.tui.foreign_rows import JobArray

# (key, label, width). Fixed widths: the table never measures cells, so an in-place
# update costs a few microseconds (update_width=True re-measures the whole column).
# The last column, the reason, is at least its width and takes whatever the window has
# left: a wide window shows "waiting for free nodes" whole, a narrow one its start (the
# status line below the table says the selected run's reason in full). Cells are one
# space apart, so that every column but the wide-only ones fits a 120-column terminal.
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("name", "Name", 18),
    ("job", "Job", 8),
    ("state", "State", 13),
    ("size", "NxG", 5),
    ("elapsed", "Elapsed", 8),
    ("epoch", "Epoch", 10),  # "450/600 it": a loop's steps of its budget
    ("loss", "Loss", 7),
    ("val", "Val", 11),
    ("thru", "Samples/s", 9),
    ("hours", "GPU-h", 10),  # a CPU run's CPU-hours say so: "0.12 CPU" (usage.hours_text)
    ("eff", "Efficiency", 17),  # "cpu 45% mem 30%" of an ended job (efficiency_text)
    ("reason", "Reason", 9),
)
#: Columns shown by default only where the window has room for every column: a 120-column
#: terminal keeps the reason (the stall and fix marks are on it). The column picker (``t``)
#: shows or hides them whatever the width.
WIDE_ONLY: Final = frozenset({"eff"})
_NAME = 0
_STATE = 2  # the state column's index: it is drawn in the state's colour
_REASON = len(COLUMNS) - 1
_GAP = 1  # the space before each cell

Row = tuple[str, ...]


def hours_cell(hours: float, unit: str) -> str:
    """``0.12`` GPU-hours, ``0.12 CPU`` CPU-hours, as ``ls`` writes them; ``-`` for none
    (a run that has not started)."""
    return hours_text(hours, unit) if hours > 0 else "-"


def row_values(run: RunView, *, member: bool = False) -> Row:
    """The plain values of one row; the table updates only the cells whose value changed.
    ``member``: the run is shown under its group's row (its name is indented)."""
    val = "-"
    if run.preflight is not None:  # no validation metric: its bus bandwidth instead
        val = run.preflight.bandwidth_label
    elif run.last_val_metric is not None:
        val = f"{metric_label(run.val_metric_name)} {number(run.last_val_metric)}"
    return (
        INDENT + run.name if member else run.name,
        run.job_id or "-",
        run.state_label,  # "*": Run detail says how the trainer's record disagrees
        run_size(run),
        duration(run.elapsed_sec) if run.elapsed_sec else "-",
        run.epoch_label,
        number(run.last_train_loss),
        val,
        rate(run.throughput),
        hours_cell(*resource_hours(run.spec, run.used_sec)),
        run.efficiency_label,
        run.reason_label,
    )


def group_hour_totals(group: RunGroup) -> dict[str, float]:
    """The members' hours summed per unit ("GPU", "CPU"), units with none left out."""
    totals: dict[str, float] = {}
    for run in group.members:
        hours, unit = resource_hours(run.spec, run.used_sec)
        totals[unit] = totals.get(unit, 0.0) + hours
    return {unit: hours for unit, hours in sorted(totals.items(), reverse=True) if hours > 0}


def group_hours(group: RunGroup) -> str:
    """A group row's hours cell (a group mixing GPU and CPU runs shows both)."""
    return " + ".join(hours_cell(h, unit) for unit, h in group_hour_totals(group).items()) or "-"


def _group_job(group: RunGroup) -> str:
    """The array's job id where every member is one index of it; else how many jobs."""
    jobs = {run.job_id for run in group.members if run.job_id}
    bases = {job.split("_", 1)[0] for job in jobs}
    if len(bases) == 1 and all("_" in job for job in jobs):
        return bases.pop()
    return f"{len(jobs)} jobs" if jobs else "-"


def _group_size(group: RunGroup) -> str:
    sizes = {run_size(run) for run in group.members}
    return sizes.pop() if len(sizes) == 1 else "mixed"


def group_values(group: RunGroup, *, expanded: bool) -> Row:
    """A group's row: its name, member count, total hours and counts per state."""
    return (
        (OPEN if expanded else CLOSED) + group.name,
        _group_job(group),
        f"{len(group.members)} runs",
        _group_size(group),
        "-",
        "-",
        "-",
        "-",
        "-",
        group_hours(group),
        "-",
        counts_label(group.counts),  # the state cell has the member count
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


def group_style(group: RunGroup) -> str:
    """A group row's reason stands out as its most urgent member's would: a folded group
    must not hide a stall or a failure to fix."""
    marks = {reason_style(run) for run in group.members}
    return next((mark for mark in ("stalled", "fix") if mark in marks), "")


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

    :meth:`show_lines` diffs rows, so a refresh that changes a few cells costs a few
    string comparisons plus one repaint of the visible lines, however many runs exist.
    A group's row opens and closes with enter or space (or right and left, + and -): the
    table asks its screen with :class:`GroupToggled`, which owns what is open.
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
    JobsTable > .jobs-table--group {
        text-style: bold;
    }
    JobsTable > .jobs-table--stalled {
        color: $warning;
        text-style: bold;
    }
    JobsTable > .jobs-table--fix {
        color: $error;
    }
    JobsTable > .jobs-table--foreign {
        color: $text-muted;
    }
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "jobs-table--header",
        "jobs-table--even",
        "jobs-table--cursor",
        "jobs-table--group",
        "jobs-table--stalled",
        "jobs-table--fix",
        "jobs-table--foreign",
    }

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select", "Open", show=False),
        Binding("space", "toggle_group", "Open/close group", show=False),
        Binding("right,plus", "expand(True)", "Open group", show=False),
        Binding("left,minus", "expand(False)", "Close group", show=False),
    ]

    @dataclass
    class RowSelected(Message):
        """Enter or a click on a run's row."""

        table: JobsTable
        run_id: str

        @property
        def control(self) -> JobsTable:
            return self.table

    @dataclass
    class JobSelected(Message):
        """Enter or a click on the row of a job that is not ddp-tui's."""

        table: JobsTable
        job: UserJob

        @property
        def control(self) -> JobsTable:
            return self.table

    @dataclass
    class GroupToggled(Message):
        """A group's row asked to open (``expand`` True), close (False) or flip (None)."""

        table: JobsTable
        group: str
        expand: bool | None

        @property
        def control(self) -> JobsTable:
            return self.table

    cursor_row: reactive[int] = reactive(0, always_update=True, init=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.order: list[str] = []  # row keys: run ids, and group_row_key() of group rows
        self._rows: dict[str, Row] = {}
        self._marks: dict[str, str] = {}  # row key -> reason_style(), where it has one
        self._groups: dict[str, RunGroup] = {}  # group rows' keys -> their group
        self._jobs: dict[str, UserJob] = {}  # the user's other jobs' row keys -> the job
        self._arrays: dict[str, JobArray] = {}  # their folded arrays' row keys -> the array
        self._parents: dict[str, str] = {}  # member rows' run ids -> their group's key
        #: The columns shown (indices into COLUMNS, in order): the column picker's choice,
        #: else every column the window has room for (:meth:`fit_columns`).
        self.shown: tuple[int, ...] = ()
        self._width = 0
        self._picked = False
        self.fit_columns(0)

    def show_columns(self, keys: Sequence[str]) -> None:
        """Show only the columns named (the name column always), whatever the width; the
        rows keep every value, so a column shown again needs no refresh."""
        self._picked = True
        self._show(keys)

    def fit_columns(self, width: int) -> None:
        """Unless columns were picked: every column, the :data:`WIDE_ONLY` ones only where
        ``width`` has room for all."""
        if self._picked:
            return
        room = width >= sum(w + _GAP for _, _, w in COLUMNS)
        self._show([key for key, _, _ in COLUMNS if room or key not in WIDE_ONLY])

    def _show(self, keys: Sequence[str]) -> None:
        wanted = {"name", *keys}
        unknown = wanted - {key for key, _, _ in COLUMNS}
        if unknown:
            raise ValueError(f"no such column: {', '.join(sorted(unknown))}")
        shown = tuple(i for i, (key, _, _) in enumerate(COLUMNS) if key in wanted)
        if shown == self.shown:
            return
        self.shown = shown
        self._width = sum(COLUMNS[i][2] + _GAP for i in self.shown)
        if self.is_mounted:
            self.virtual_size = Size(self._width, len(self.order) + 1)
            self.refresh()

    def on_resize(self) -> None:
        self.fit_columns(self.scrollable_content_region.width)

    @property
    def shown_columns(self) -> tuple[str, ...]:
        """The keys of the columns shown, in order."""
        return tuple(COLUMNS[i][0] for i in self.shown)

    # -- data -------------------------------------------------------------------

    @property
    def selected_key(self) -> str | None:
        """The key of the row under the cursor (a run id or a group row's key)."""
        if not self.order or not 0 <= self.cursor_row < len(self.order):
            return None
        return self.order[self.cursor_row]

    @property
    def selected_run_id(self) -> str | None:
        """The run under the cursor; None on a group's row or another job's."""
        key = self.selected_key
        if key is None or key in self._groups or key in self._jobs or key in self._arrays:
            return None
        return key

    @property
    def selected_job(self) -> UserJob | None:
        """The user's other job (not ddp-tui's) under the cursor."""
        return self._jobs.get(self.selected_key or "")

    @property
    def selected_array(self) -> JobArray | None:
        """The folded job array (not ddp-tui's) under the cursor."""
        return self._arrays.get(self.selected_key or "")

    @property
    def selected_group(self) -> RunGroup | None:
        """The group whose row is under the cursor."""
        return self._groups.get(self.selected_key or "")

    def parent_group(self, run_id: str) -> str | None:
        """The group key of a run shown under its group's row."""
        return self._parents.get(run_id)

    @property
    def row_count(self) -> int:
        return len(self.order)

    def get_cell(self, key: str, column: str) -> str:
        """The text of one cell (tests and benchmarks read the table through this)."""
        index = next(i for i, (name, _, _) in enumerate(COLUMNS) if name == column)
        return self._rows[key][index]

    def show_runs(self, runs: Sequence[RunView], select: str | None = None) -> int:
        """Show ``runs`` in this order, one row each; see :meth:`show_lines`."""
        return self.show_lines([JobLine(run.run_id, run=run) for run in runs], select)

    def show_lines(self, lines: Sequence[JobLine], select: str | None = None) -> int:
        """Show ``lines`` in this order; returns the number of cells whose text changed.
        ``select``: a row key to put the cursor on."""
        order: list[str] = []
        values: dict[str, Row] = {}
        marks: dict[str, str] = {}
        groups: dict[str, RunGroup] = {}
        parents: dict[str, str] = {}
        jobs: dict[str, UserJob] = {}
        arrays: dict[str, JobArray] = {}
        for line in lines:
            order.append(line.key)
            mark = ""
            if line.array is not None:
                arrays[line.key] = line.array
                values[line.key] = array_values(line.array, expanded=line.expanded)
                mark = "foreign"
            elif line.job is not None:
                jobs[line.key] = line.job
                values[line.key] = job_values(line.job, member=line.member)
                mark = "foreign"
                if line.member and line.job.array_job_id:
                    parents[line.key] = array_group(line.job.array_job_id)
            elif line.group is not None:
                groups[line.key] = line.group
                values[line.key] = group_values(line.group, expanded=line.expanded)
                mark = group_style(line.group)
            elif line.run is not None:
                values[line.key] = row_values(line.run, member=line.member)
                mark = reason_style(line.run)
                if line.member and line.run.sweep:
                    parents[line.key] = line.run.sweep
            else:
                raise ValueError(f"job line {line.key!r} has neither a run nor a group")
            if mark:
                marks[line.key] = mark
        self._groups = groups
        self._parents = parents
        self._jobs = jobs
        self._arrays = arrays
        marks_changed = marks != self._marks
        self._marks = marks
        if order != self.order:
            keep = select or self.selected_key
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
        for key, new in values.items():
            old = self._rows.get(key)
            if old != new:
                written += sum(1 for a, b in zip(old or (), new, strict=False) if a != b) or len(
                    new
                )
                self._rows[key] = new
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

    @property
    def _selected_fold(self) -> str | None:
        """The group key of the sweep or job array whose row is under the cursor."""
        if (group := self.selected_group) is not None:
            return group.key
        if (array := self.selected_array) is not None:
            return array.key
        return None

    def action_select(self) -> None:
        """Enter: open the run or job, or open or close the group."""
        fold = self._selected_fold
        if fold is not None:
            self.post_message(self.GroupToggled(self, fold, None))
            return
        if (job := self.selected_job) is not None:
            self.post_message(self.JobSelected(self, job))
            return
        run_id = self.selected_run_id
        if run_id is not None:
            self.post_message(self.RowSelected(self, run_id))

    def action_toggle_group(self) -> None:
        """Space: open or close the group under the cursor."""
        if (fold := self._selected_fold) is not None:
            self.post_message(self.GroupToggled(self, fold, None))

    def action_expand(self, expand: bool) -> None:
        """Open (right, +) or close (left, -) the group under the cursor; on a member's
        row, left closes its group."""
        if (fold := self._selected_fold) is not None:
            self.post_message(self.GroupToggled(self, fold, expand))
        elif not expand and (parent := self.parent_group(self.selected_key or "")):
            self.post_message(self.GroupToggled(self, parent, False))

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
        key = self.order[index]
        values = self._rows[key]
        style = base
        if index % 2:
            style = style + self.get_component_rich_style("jobs-table--even")
        if key in self._groups or key in self._arrays:
            style = style + self.get_component_rich_style("jobs-table--group", partial=True)
        if index == self.cursor_row:
            style = style + self.get_component_rich_style("jobs-table--cursor")
        return self._strip(values, style, width, state=values[_STATE], mark=self._marks.get(key))

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
        # The last column shown takes what the others leave of the window (the reason,
        # unless the column picker hid it).
        last = self.shown[-1]
        rest = max(COLUMNS[last][2], width - (self._width - COLUMNS[last][2]))
        for index in self.shown:
            cell_width, text = COLUMNS[index][2], cells[index]
            cell_style = style
            if state is not None and index == _STATE:
                cell_style = style + Style.parse(_state_style(state))
                if marked is not None and mark == "stalled":  # its state is marked too
                    cell_style = cell_style + marked
            if marked is not None and index == (_NAME if mark == "foreign" else _REASON):
                # A stall or a fix marks the reason; another's job its name, muted.
                cell_style = style + marked
            if index == last:
                cell_width = rest
                if cell_len(text) > cell_width:
                    text = set_cell_size(text, cell_width - 1) + "…"
            segments.append(Segment(" " * _GAP + set_cell_size(text, cell_width), cell_style))
        return Strip(segments).crop_extend(0, width, style)


def _state_style(state: str) -> str:
    try:
        return STATE_STYLES.get(JobState(state.split(" ", 1)[0]), "") or "none"
    except ValueError:
        return "none"
