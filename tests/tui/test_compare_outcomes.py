"""Compare's outcome table and overlay plot (issue 23): what differs between a group's runs
first, then what each achieved, the best run marked; sorted by a key or a header's click;
one line per run of a chosen metric per epoch, its legend naming each run by what differs.

The outcome table is the real :func:`ddp_tui.reports.outcomes.outcome_table` of a fixed 2x2 grid
(lr x batch per GPU: ``tests/tui/fakes.py``'s ``sample_members``), which the fake facade
also answers; the app tests drive Compare on that fake, since no real scheduler holds a
finished grid still on demand."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import DataTable

from ddp_tui.reports.outcomes import Outcomes, outcome_table, sort_outcomes
from ddp_tui.tui.outcomes_table import (
    ASCENDING,
    DESCENDING,
    outcome_columns,
    outcome_rows,
    sort_arrow,
)
from ddp_tui.tui.overlay_plot import BEST_MARK, overlay_lines, overlay_metrics
from ddp_tui.tui.screens.compare import CompareScreen
from tests.tui.conftest import SIZE, fake_app, settle, wait_until
from tests.tui.fakes import OUTCOME_GRID, SAMPLE_SWEEP, FakeCluster, sample_members, sample_runs

#: The grid's runs by (lr, batch per GPU); the best by final accuracy is lr 0.1, batch 128.
RUN = {(lr, batch): run_id for run_id, lr, batch, _ in OUTCOME_GRID}
BEST = RUN[(0.1, 128)]


def grid() -> Outcomes:
    return outcome_table("g", sample_members())


def _texts(outcomes: Outcomes) -> list[list[str]]:
    return [[cell.plain for cell in cells] for _, cells in outcome_rows(outcomes)]


# -- the pure parts ----------------------------------------------------------------------


def test_the_differing_fields_come_first_then_the_outcomes() -> None:
    keys = [key for key, _ in outcome_columns(grid())]
    assert keys[:3] == ["best", "batch_per_gpu", "lr"]
    assert keys[3:] == [
        "final_val",
        "best_val",
        "epochs_done",
        "wall_sec",
        "gpu_hours",
        "throughput",
        "cpu_used",
        "mem_used",
        "state",
    ]
    headers = dict(outcome_columns(grid()))
    assert headers["final_val"] == "Final acc" and headers["gpu_hours"] == "GPU-h"
    # What each job used of what it held: named apart from the scaling table's efficiency.
    assert (headers["cpu_used"], headers["mem_used"]) == ("CPU used", "Mem used")


def test_what_each_run_used_shows_in_percent_and_not_measured_as_a_dash() -> None:
    keys = [key for key, _ in outcome_columns(grid())]
    cells = {
        run_id: dict(zip(keys, row, strict=True))
        for run_id, row in zip([r for r, _ in outcome_rows(grid())], _texts(grid()), strict=True)
    }
    first, second = OUTCOME_GRID[0][0], OUTCOME_GRID[1][0]
    assert (cells[first]["cpu_used"], cells[first]["mem_used"]) == ("50%", "20%")
    assert (cells[second]["cpu_used"], cells[second]["mem_used"]) == ("55%", "—")
    # Sorted by it, the most used first; the run not measured last either way.
    for descending in (True, False):
        order = [
            r for r, _ in outcome_rows(sort_outcomes(grid(), "mem_used", descending=descending))
        ]
        assert order[-1] == second


def test_the_best_run_is_marked_and_bold() -> None:
    rows = outcome_rows(grid())
    marked = [run_id for run_id, cells in rows if cells[0].plain == "best"]
    assert marked == [BEST]
    cells = dict(rows)[BEST]
    assert all("bold" in str(cell.style) for cell in cells)
    assert [c.plain for c in cells[1:4]] == ["128", "0.1", "0.88"]
    assert not any("bold" in str(c.style) for run_id, row in rows if run_id != BEST for c in row)


def test_the_arrow_says_how_the_sorted_column_reads() -> None:
    by_final = sort_outcomes(grid(), "final_val")  # accuracy: the best first
    assert next(run_id for run_id, _ in outcome_rows(by_final)) == BEST
    assert sort_arrow(by_final, "final_val") == DESCENDING
    assert sort_arrow(sort_outcomes(grid(), "wall_sec"), "wall_sec") == ASCENDING
    assert sort_arrow(grid(), "epochs_done") == ""  # 3 epochs each: no order to show


def test_the_overlay_has_a_line_per_run_labelled_by_what_differs() -> None:
    outcomes = grid()
    assert overlay_metrics(outcomes)[0] == "val_acc"  # the group's metric first
    assert set(overlay_metrics(outcomes)) == {"val_acc", "train_loss", "throughput_samples_per_sec"}
    lines = overlay_lines(outcomes, "val_acc")
    assert list(lines) == [
        "batch_per_gpu=64 lr=0.01",
        "batch_per_gpu=64 lr=0.1",
        "batch_per_gpu=128 lr=0.01",
        "batch_per_gpu=128 lr=0.1" + BEST_MARK,
    ]  # the table's order
    assert lines["batch_per_gpu=64 lr=0.1"] == [(1.0, 0.62), (2.0, 0.80), (3.0, 0.86)]
    # Too many runs for one plot: the first in the table's order (sorted: the best).
    top = overlay_lines(sort_outcomes(outcomes, "final_val"), "val_acc", limit=2)
    assert list(top) == ["batch_per_gpu=128 lr=0.1" + BEST_MARK, "batch_per_gpu=64 lr=0.1"]


# -- Compare on the fake facade ----------------------------------------------------------


async def _open_compare(pilot, fake: FakeCluster) -> CompareScreen:  # type: ignore[no-untyped-def]
    from ddp_tui.tui.job_groups import group_row_key
    from ddp_tui.tui.jobs_table import JobsTable

    await settle(pilot)
    table = pilot.app.screen.query_one(JobsTable)
    table.move_cursor(table.order.index(group_row_key(SAMPLE_SWEEP)))  # the sweep's row
    await pilot.press("s")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, CompareScreen), "Compare")
    screen = pilot.app.screen
    assert isinstance(screen, CompareScreen)
    await wait_until(pilot, lambda: screen.shown is not None, "the outcome table")
    assert ("outcomes", "9f2c4e1a7b3d5f60") in fake.calls
    return screen


def _order(screen: CompareScreen) -> list[str]:
    table = screen.query_one("#outcomes-table", DataTable)
    return [str(row.key.value) for row in table.ordered_rows]


async def test_compare_sorts_by_keys_marks_the_best_and_plots_every_run() -> None:
    fake = FakeCluster()
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_compare(pilot, fake)
        table = screen.query_one("#outcomes-table", DataTable)
        assert table.row_count == 4
        fields_order = [RUN[0.01, 64], RUN[0.1, 64], RUN[0.01, 128], RUN[0.1, 128]]
        assert _order(screen) == fields_order  # batch, then lr: the grid row by row
        assert table.get_row(BEST)[0].plain == "best"

        await pilot.press("o", "o", "o")  # batch_per_gpu, lr, then the final accuracy
        await wait_until(pilot, lambda: screen.sort_column == "final_val", "sorted by final")
        assert _order(screen) == [BEST, RUN[0.1, 64], RUN[0.01, 64], RUN[0.01, 128]]
        assert (
            str(table.ordered_columns[table.get_column_index("final_val")].label) == "Final acc ▼"
        )
        await pilot.press("d")  # the other way
        await wait_until(pilot, lambda: _order(screen)[0] == RUN[0.01, 128], "reversed")
        assert _order(screen)[-1] == BEST
        assert table.get_row(BEST)[0].plain == "best"  # marked wherever it stands

        # The overlay: a line per run, its legend what differs; m plots the next metric.
        others = [f"batch_per_gpu={b} lr={lr}" for lr, b in RUN if (lr, b) != (0.1, 128)]
        best = "batch_per_gpu=128 lr=0.1" + BEST_MARK
        assert sorted(screen.overlay) == sorted([*others, best])
        before = screen.overlay
        await pilot.press("m")
        await wait_until(pilot, lambda: screen.overlay != before, "the next metric")
        assert screen.overlay_metric == "train_loss"
        # A group of several sizes keeps its scaling table and advice.
        assert screen.query_one("#scaling").display
        await wait_until(pilot, lambda: len(screen.rows) == 3, "the scaling table")


async def test_a_header_click_sorts_by_its_column() -> None:
    fake = FakeCluster()
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_compare(pilot, fake)
        table = screen.query_one("#outcomes-table", DataTable)
        index = table.get_column_index("wall_sec")
        x = sum(c.get_render_width(table) for c in table.ordered_columns[:index]) + 2
        await pilot.click("#outcomes-table", offset=(x, 0))
        await wait_until(pilot, lambda: screen.sort_column == "wall_sec", "sorted by wall")
        walls = [RUN[0.1, 64], RUN[0.1, 128], RUN[0.01, 64], RUN[0.01, 128]]  # 600 s + 60 s x i
        assert _order(screen) == walls
        await pilot.click("#outcomes-table", offset=(x, 0))  # again: the other way
        await wait_until(pilot, lambda: _order(screen) == walls[::-1], "reversed")


async def test_a_group_of_one_size_has_no_scaling_table_or_advice() -> None:
    runs = [
        replace(r, spec=r.spec.replace(nodes=1, gpus_per_node=1)) if r.group else r
        for r in sample_runs()
    ]
    fake = FakeCluster(runs=runs)
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_compare(pilot, fake)
        assert not screen.query_one("#scaling").display
        assert screen.query_one("#outcomes-table", DataTable).row_count == 4
        assert not any(call == "advise" for call, _ in fake.calls)  # it needs several sizes
