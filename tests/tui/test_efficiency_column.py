"""Jobs shows what each ended job used of the CPUs and memory it held (``cpu 45% mem 30%``,
"—" where nothing was measured), for ddp-tui's runs and the user's other jobs alike, and sorts
by it; a 120-column window keeps its reason column and shows the efficiency when picked
(``t``). The app on the fake facade: its runs carry a recorded efficiency
(tests/tui/fakes/data.py) as a refresh reads it from usage.json, its foreign jobs one as the
listing's sacct gives it; those are tested against the real Slurm test cluster in
tests/integration/test_usage_slurm.py and tests/integration/test_user_jobs_slurm.py."""

from __future__ import annotations

from ddp_tui.reports.efficiency_cells import NO_FIGURE, efficiency_text
from ddp_tui.tui.job_sorting import sort_lines
from ddp_tui.tui.jobs_table import COLUMNS, WIDE_ONLY
from ddp_tui.tui.screens.jobs import JobsScreen, JobsTable
from ddp_tui.tui.table_options import ColumnsModal
from tests.tui.conftest import SIZE, fake_app, settle, wait_until
from tests.tui.fakes import FakeCluster, sample_runs, sample_user_jobs

#: Room for every column: the sum of their widths and the space before each.
WIDE = (sum(width + 1 for _, _, width in COLUMNS) + 2, 40)
BROKEN = "20231114-220500-broken-e5f6"  # FAILED, cpu 8% mem 61%
RUNNING = "20231114-221500-mnist-cnn-a1b2"
NOTEBOOK = "job:1150"  # a job not ddp-tui's, ended: cpu 31% mem 12%


def test_one_cell_for_both_figures_and_a_dash_for_none() -> None:
    assert efficiency_text(0.45, 0.3) == "cpu 45% mem 30%"
    assert efficiency_text(0.123, None) == f"cpu 12% mem {NO_FIGURE}"
    assert efficiency_text(None, None) == NO_FIGURE == "—"
    assert efficiency_text(0.0, 0.0) == "cpu 0% mem 0%"  # measured nothing used: 0, shown
    runs = {r.run_id: r for r in sample_runs()}
    assert runs[BROKEN].efficiency_label == "cpu 8% mem 61%"
    assert runs[RUNNING].efficiency_label == NO_FIGURE  # running: none recorded


async def test_the_column_shows_for_runs_and_jobs_and_sorts_by_cpu_with_none_last() -> None:
    app = fake_app(FakeCluster(runs=sample_runs()))
    async with app.run_test(size=WIDE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        table = screen.query_one(JobsTable)
        assert "eff" in table.shown_columns and "reason" in table.shown_columns
        header = table.render_line(0).text
        assert "Efficiency" in header and "Reason" in header
        assert table.get_cell(BROKEN, "eff") == "cpu 8% mem 61%"
        assert table.get_cell(RUNNING, "eff") == NO_FIGURE
        row = table.render_line(1 + table.order.index(BROKEN)).text
        assert "cpu 8% mem 61%" in row  # drawn, not only held

        await pilot.press("a")
        await wait_until(pilot, lambda: NOTEBOOK in table.order, "the other jobs")
        assert table.get_cell(NOTEBOOK, "eff") == "cpu 31% mem 12%"
        assert table.get_cell("job:1202", "eff") == NO_FIGURE  # running

        screen.sort_by("eff", True)
        await pilot.pause()
        status = str(screen.query_one("#jobs-status").render())
        assert "by Efficiency ↓" in status
        cpu = _measured_cpu()
        top = [key for key in table.order if cpu.get(key) is not None]
        shown = [cpu[key] for key in top]
        assert shown == sorted(shown, reverse=True) and NOTEBOOK in top
        # Every row measured comes before every row that is not, the folded sweep aside
        # (its row sorts by its members' first measured value).
        first_none = min(i for i, key in enumerate(table.order) if cpu.get(key) is None and
                         not key.startswith("group:"))  # fmt: skip
        assert all(table.order.index(key) < first_none for key in top)
        screen.sort_by("eff", False)
        await pilot.pause()
        ascending = [cpu[key] for key in table.order if cpu.get(key) is not None]
        assert ascending == sorted(ascending)
        assert cpu.get(table.order[-1]) is None  # none last either way


def _measured_cpu() -> dict[str, float]:
    """Each row's CPU efficiency where one was measured, by row key."""
    cpu: dict[str, float] = {}
    for run in sample_runs():
        if run.efficiency is not None and run.efficiency.cpu is not None:
            cpu[run.run_id] = run.efficiency.cpu
    for job in sample_user_jobs():
        if job.cpu_efficiency is not None:
            cpu[f"job:{job.job_id}"] = job.cpu_efficiency
    return cpu


def test_sorting_by_efficiency_puts_rows_without_one_last_either_way() -> None:
    from ddp_tui.tui.foreign_rows import foreign_lines
    from ddp_tui.tui.job_groups import job_lines

    lines = job_lines(sample_runs()) + foreign_lines(sample_user_jobs())
    for descending in (True, False):
        keys = [line.key for line in sort_lines(lines, "eff", descending=descending)]
        measured = {BROKEN, NOTEBOOK}
        assert set(keys[: len(measured) + 1]) >= measured  # the folded sweep among them
        assert RUNNING in keys[len(measured) + 1 :]


async def test_a_narrow_window_keeps_its_reason_and_shows_the_efficiency_when_picked() -> None:
    assert {"eff"} == WIDE_ONLY
    app = fake_app(FakeCluster(runs=sample_runs()))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(JobsTable)
        assert "eff" not in table.shown_columns and "reason" in table.shown_columns
        assert "Efficiency" not in table.render_line(0).text
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, ColumnsModal), "the chooser")
        modal = app.screen
        assert isinstance(modal, ColumnsModal)
        picker = modal.query_one("#columns")
        picker.select("eff")  # type: ignore[attr-defined]
        for key in ("loss", "val"):  # room for it in 120 columns
            picker.deselect(key)  # type: ignore[attr-defined]
        modal.query_one("#done").press()  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: "eff" in table.shown_columns, "the columns")
        header = table.render_line(0).text
        assert "Efficiency" in header and "Reason" in header and "Val" not in header
        # Picked, it stays whatever the window does.
        await pilot.resize_terminal(100, 40)
        await pilot.pause()
        assert "eff" in table.shown_columns
