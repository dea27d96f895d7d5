"""The jobs screen: every run, newest first, with filter, cancel, retry, edit and verify keys.

The runs of a group (a sweep, an array) fold into one row (:mod:`ddp_tui.tui.job_groups`);
cancel and retry on that row act on its members, after a question."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var
from textual.widgets import Footer, Input, Static

from ddp_tui.tui.cluster_io import Request
from ddp_tui.tui.foreign_rows import foreign_lines, job_matches, job_status
from ddp_tui.tui.header import StatusHeader
from ddp_tui.tui.job_groups import RunGroup, group_row_key, job_lines
from ddp_tui.tui.job_sorting import sort_lines
from ddp_tui.tui.jobs_table import COLUMNS, JobsTable, group_hour_totals, row_values, run_matches
from ddp_tui.tui.messages import ActionDone, ChecksReady
from ddp_tui.tui.run_summary import run_size
from ddp_tui.tui.screens.base import RUN_ACTION_BINDINGS, BaseScreen

if TYPE_CHECKING:
    from collections.abc import Callable

    from ddp_tui.remote.api import ClusterAPI
    from ddp_tui.remote.backends.user_jobs import UserJob
    from ddp_tui.remote.model.views import RunView

# The table's parts are imported from here by tests and benchmarks.
__all__ = ["COLUMNS", "JobsScreen", "JobsTable", "row_values", "run_matches", "run_size"]


class JobsScreen(BaseScreen):
    """Every run, newest first; a group's runs under one row that opens."""

    BINDINGS = [
        Binding("enter", "open", "Open"),
        Binding("n", "new", "New"),
        *RUN_ACTION_BINDINGS,
        Binding("s", "compare", "Compare"),
        Binding("slash", "filter", "Filter"),
        Binding("f", "toggle_finished", "Finished"),
        Binding("a", "all_jobs", "All jobs", show=False),
        Binding("o", "sort", "Sort", show=False),  # in help (?): the footer is full
        Binding("t", "columns", "Columns", show=False),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    show_finished: var[bool] = var(True)
    filter_text: var[str] = var("")
    #: The column the table is sorted by (None: newest first), and which way.
    sort_column: var[str | None] = var(None)
    sort_descending: var[bool] = var(False)

    def __init__(self) -> None:
        super().__init__()
        #: The groups whose rows are open (their members shown below).
        self.expanded: set[str] = set()
        #: How many runs the filter keeps, counted once per refresh (not per cursor move).
        self._kept = 0

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
        self.watch(self.app, "snapshot", self._snapshot_changed, init=True)
        self.watch(self.app, "foreign", self._snapshot_changed, init=False)
        self.watch(table, "cursor_row", self._render_status, init=False)

    # -- rendering ------------------------------------------------------------

    def keeps(self, run: RunView) -> bool:
        """The filter: finished runs (unless hidden) that match the search."""
        return (self.show_finished or not run.state.is_terminal) and run_matches(
            run, self.filter_text
        )

    def keeps_job(self, job: UserJob) -> bool:
        """The filter, for a job that is not ddp-tui's: as for a run."""
        return (self.show_finished or not job.state.is_terminal) and job_matches(
            job, self.filter_text
        )

    def _snapshot_changed(self, snapshot: object) -> None:
        # One parameter: Textual calls a watcher of two with (old, new).
        self._render_snapshot()

    def _render_snapshot(self, select: str | None = None) -> None:
        snapshot = self.ddp_app.snapshot
        runs = snapshot.runs if snapshot is not None else ()
        table = self.query_one(JobsTable)
        kept = {run.run_id for run in runs if self.keeps(run)}
        self._kept = len(kept)
        lines = job_lines(
            runs,
            expanded=self.expanded,
            keep=lambda run: run.run_id in kept,
            reveal=bool(self.filter_text),
        )
        foreign = self.ddp_app.foreign or ()
        if foreign:
            # ddp-tui's runs first, then the other jobs (each newest first); a sort mixes them.
            lines += foreign_lines(
                foreign,
                expanded=self.expanded,
                keep=self.keeps_job,
                reveal=bool(self.filter_text),
            )
            self._kept += sum(1 for job in foreign if self.keeps_job(job))
        lines = sort_lines(lines, self.sort_column, descending=self.sort_descending)
        select = select or self.ddp_app.take_selection()
        if select is not None and not any(line.key == select for line in lines):
            # A run behind its group's closed row (a sweep just submitted): the group's row.
            run = self.ddp_app.run_by_id(select)
            if run is not None and run.sweep:
                select = group_row_key(run.sweep)
        table.show_lines(lines, select=select)
        self.query_one("#empty", Static).display = snapshot is not None and not runs and not foreign
        self._render_status()

    def _render_status(self) -> None:
        """The status line: counts, the filter, and the selected run's reason in full."""
        snapshot = self.ddp_app.snapshot
        table = self.query_one(JobsTable)
        total = len(snapshot.runs) if snapshot else 0
        active = sum(1 for run in snapshot.runs if run.state.is_active) if snapshot else 0
        parts = [f"{total} runs", f"{active} active"]
        foreign = self.ddp_app.foreign
        if foreign is not None:
            parts.append(f"{len(foreign)} other jobs (a hides)")
            total += len(foreign)
        if self.ddp_app.foreign_error:
            parts.append(f"other jobs: {self.ddp_app.foreign_error}")
        if snapshot is not None and snapshot.stalled:
            parts.append(f"{snapshot.stalled} stalled")
        if self._kept != total:
            parts.append(f"{self._kept} shown")
        if self.filter_text:
            parts.append(f"filter {self.filter_text!r}")
        if not self.show_finished:
            parts.append("finished hidden (f)")
        if self.sort_column is not None:
            label = next(label for key, label, _ in COLUMNS if key == self.sort_column)
            parts.append(f"by {label} {'↓' if self.sort_descending else '↑'} (o)")
        group = table.selected_group
        selected = self.ddp_app.run_by_id(table.selected_run_id or "")
        job, array = table.selected_job, table.selected_array
        if job is not None:
            parts.append(job_status(job))
        elif array is not None:
            parts.append(f"array {array.master} (not ddp-tui's): {len(array.tasks)} tasks")
        elif group is not None:
            hours = "".join(
                f", {h:.3g} {unit}-hours" for unit, h in group_hour_totals(group).items()
            )
            parts.append(f"{group.name}: {group.summary}{hours}")
        elif selected is not None and selected.reason_label:
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

    # -- sort and columns -------------------------------------------------------

    def action_sort(self) -> None:
        """Pick the column to sort by (the same one again flips its direction)."""
        # Imported here: its widgets are not needed for the first paint.
        from ddp_tui.tui.table_options import SortModal

        columns = [(key, label) for key, label, _ in COLUMNS]

        def chosen(choice: tuple[str | None, bool] | None) -> None:
            if choice is not None:
                self.sort_by(*choice)

        self.app.push_screen(SortModal(columns, self.sort_column, self.sort_descending), chosen)

    def sort_by(self, column: str | None, descending: bool = False) -> None:
        """Sort the table by ``column`` (None: newest first); groups keep their members."""
        self.sort_column, self.sort_descending = column, descending
        self._render_snapshot()

    def action_columns(self) -> None:
        """Pick the columns shown."""
        from ddp_tui.tui.table_options import ColumnsModal

        table = self.query_one(JobsTable)

        def chosen(keys: list[str] | None) -> None:
            if keys is not None:
                table.show_columns(keys)

        columns = [(key, label) for key, label, _ in COLUMNS]
        self.app.push_screen(ColumnsModal(columns, table.shown_columns), chosen)

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

    # -- groups ---------------------------------------------------------------

    @on(JobsTable.GroupToggled, "#jobs")
    def _group_toggled(self, event: JobsTable.GroupToggled) -> None:
        self.toggle_group(event.group, event.expand)

    def toggle_group(self, group: str, expand: bool | None = None) -> None:
        """Open (``expand`` True), close (False) or flip (None) a group's row; the cursor
        stays on that row."""
        if expand is None:
            expand = group not in self.expanded
        if expand:
            self.expanded.add(group)
        else:
            self.expanded.discard(group)
        self._render_snapshot(select=group_row_key(group))

    # -- run actions ----------------------------------------------------------

    def _selected(self) -> str | None:
        table = self.query_one(JobsTable)
        run_id = table.selected_run_id
        if run_id is None:
            if table.selected_group is not None:
                self.notify(
                    "That is a group's row: open it (enter) and pick one of its runs.",
                    severity="warning",
                )
            elif table.selected_job is not None or table.selected_array is not None:
                self.notify(
                    "That job is not ddp-tui's: enter opens it, c cancels it.",
                    severity="warning",
                )
            else:
                self.notify("No run selected.", severity="warning")
        return run_id

    @on(JobsTable.RowSelected, "#jobs")
    def _row_selected(self, event: JobsTable.RowSelected) -> None:
        self.ddp_app.open_run(event.run_id)

    @on(JobsTable.JobSelected, "#jobs")
    def _job_selected(self, event: JobsTable.JobSelected) -> None:
        self.ddp_app.open_job(event.job)

    def action_open(self) -> None:
        table = self.query_one(JobsTable)
        if (group := table.selected_group) is not None:
            self.toggle_group(group.key)
        elif (array := table.selected_array) is not None:
            self.toggle_group(array.key)
        elif (job := table.selected_job) is not None:
            self.ddp_app.open_job(job)
        elif run_id := self._selected():
            self.ddp_app.open_run(run_id)

    def action_all_jobs(self) -> None:
        """List every job of yours beside ddp-tui's runs (one more squeue and sacct per
        refresh while shown), or stop."""
        on = self.ddp_app.foreign is None
        self.ddp_app.list_all_jobs(on)
        self.notify("Listing all your jobs..." if on else "Showing ddp-tui's runs only")

    def action_new(self) -> None:
        self.ddp_app.open_compose()

    def action_cancel_run(self) -> None:
        table = self.query_one(JobsTable)
        if (group := table.selected_group) is not None:
            self.confirm_cancel_group(group)
        elif (job := table.selected_job) is not None:
            self.ddp_app.confirm_cancel_job(job)
        elif (array := table.selected_array) is not None:
            self.ddp_app.confirm_cancel_job(array.tasks[0], whole_array=True)
        elif run_id := self._selected():
            self.ddp_app.confirm_cancel(run_id)

    def action_retry(self) -> None:
        if (group := self.query_one(JobsTable).selected_group) is not None:
            self.confirm_retry_group(group)
        elif run_id := self._selected():
            self.ddp_app.retry_run(run_id)

    def confirm_cancel_group(self, group: RunGroup) -> None:
        """Ask, then cancel every queued or running member (``cancel_group``: a job array
        with one call)."""
        live = group.live
        if not live:
            self.notify(
                f"No run of {group.name} is queued or running: nothing to cancel.",
                severity="warning",
                markup=False,
            )
            return

        def cancel(cluster: ClusterAPI) -> str:
            jobs = cluster.cancel_group(group.key)  # an array: one scancel of its id
            return f"Cancelled {group.name} (job {', '.join(jobs) or 'none still live'})."

        self._confirm_group(
            f"Cancel the {len(live)} queued or running runs of {group.name} "
            f"({len(group.members)} runs)?",
            "Cancel runs",
            "Cancel",
            cancel,
        )

    def confirm_retry_group(self, group: RunGroup) -> None:
        """Ask, then retry every member that ended without completing (failed, cancelled,
        timed out, ...), each as a new attempt of its own (``retry_group``)."""
        ended = group.retryable
        if not ended:
            self.notify(
                f"No run of {group.name} failed, was cancelled or timed out: nothing to retry.",
                severity="warning",
                markup=False,
            )
            return
        asked = {run.run_id for run in ended}

        def retry(cluster: ClusterAPI) -> str:
            done = cluster.retry_group(group.key)
            text = f"Retrying {len(done.retried)} runs of {group.name}."
            refused = [(run_id, why) for run_id, why in done.skipped if run_id in asked]
            if refused:
                text += f" Not retried: {len(refused)} ({refused[0][1]})."
            return text

        self._confirm_group(
            f"Retry the {len(ended)} runs of {group.name} that ended without completing?",
            "Retry runs",
            "Retry",
            retry,
        )

    def _confirm_group(
        self, question: str, yes: str, what: str, call: Callable[[ClusterAPI], str]
    ) -> None:
        from ddp_tui.tui.modals import ConfirmModal

        def answered(confirmed: bool | None) -> None:
            if confirmed:
                self.ask(Request(what, call, ActionDone))  # the app notifies and refreshes

        self.app.push_screen(ConfirmModal(question, yes=yes, no="Keep"), answered)

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
        table = self.query_one(JobsTable)
        group = table.selected_group
        run_id = group.members[0].run_id if group is not None else table.selected_run_id
        self.ddp_app.open_compare(run_id)
