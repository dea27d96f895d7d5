"""The Jobs table sorts by any column (``o``) and shows the columns picked (``t``): the
order is a pure function of the lines (tested first), then the app on the fake facade."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.tui.job_groups import group_row_key, job_lines
from ddp_tui.tui.job_sorting import RUN_VALUES, sort_lines
from ddp_tui.tui.jobs_table import COLUMNS
from ddp_tui.tui.screens.jobs import JobsScreen, JobsTable
from ddp_tui.tui.table_options import ColumnsModal, SortModal
from tests.tui.conftest import SIZE, fake_app, settle, wait_until
from tests.tui.fakes import SAMPLE_SWEEP, FakeCluster, sample_runs


def _keys(lines: list) -> list[str]:
    return [line.key for line in lines]


def test_every_column_sorts() -> None:
    assert set(RUN_VALUES) == {key for key, _, _ in COLUMNS}
    lines = job_lines(sample_runs(), expanded={SAMPLE_SWEEP})
    for column in RUN_VALUES:
        for descending in (False, True):
            ordered = sort_lines(lines, column, descending=descending)
            assert sorted(_keys(ordered)) == sorted(_keys(lines)), column


def test_numbers_sort_as_numbers_and_rows_without_one_go_last_either_way() -> None:
    runs = sample_runs()
    thru = {r.run_id: r.throughput for r in runs}
    lines = job_lines(runs)  # the sweep folded
    for descending in (False, True):
        ordered = [line for line in sort_lines(lines, "thru", descending=descending)]
        values = [thru[line.key] for line in ordered if line.run is not None]
        present = [v for v in values if v is not None]
        assert present == sorted(present, reverse=descending)
        # Each run without a throughput comes after every run with one.
        assert values[len(present) :] == [None] * (len(values) - len(present))
    # A pending run has no elapsed time: it sorts last, not as 0 first.
    by_elapsed = sort_lines(lines, "elapsed")
    assert by_elapsed[-1].run is not None and by_elapsed[-1].run.state is JobState.PENDING


def test_a_groups_members_stay_under_its_row_and_keep_their_order() -> None:
    lines = job_lines(sample_runs(), expanded={SAMPLE_SWEEP})
    row = group_row_key(SAMPLE_SWEEP)
    members = [line.key for line in lines if line.member]
    for column in ("name", "hours", "state"):
        for descending in (False, True):
            keys = _keys(sort_lines(lines, column, descending=descending))
            at = keys.index(row)
            assert keys[at + 1 : at + 1 + len(members)] == members


def test_unsorted_is_the_order_given_and_a_bad_column_is_named() -> None:
    lines = job_lines(sample_runs())
    assert sort_lines(lines, None) == lines
    with pytest.raises(ValueError, match="cannot sort by 'colour'"):
        sort_lines(lines, "colour")


def test_equal_values_keep_the_order_given() -> None:
    runs = [replace(r, name="same") for r in sample_runs() if r.sweep is None]
    lines = job_lines(runs)
    assert sort_lines(lines, "name") == lines


async def test_o_sorts_by_a_picked_column_and_t_hides_a_column() -> None:
    app = fake_app(FakeCluster(runs=sample_runs()))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        table = screen.query_one(JobsTable)
        newest_first = list(table.order)
        await pilot.press("o")
        await wait_until(pilot, lambda: isinstance(app.screen, SortModal), "the sort chooser")
        # Down to "Samples/s": newest first, then the columns in order.
        for _ in range(1 + [key for key, _, _ in COLUMNS].index("thru")):
            await pilot.press("down")
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.sort_column == "thru", "the sort")
        assert screen.sort_descending  # a number: the largest first
        runs = {r.run_id: r for r in sample_runs()}
        shown = [runs[k].throughput for k in table.order if k in runs]
        present = [v for v in shown if v is not None]
        assert present == sorted(present, reverse=True) and table.order != newest_first
        assert "by Samples/s ↓" in str(screen.query_one("#jobs-status").render())
        screen.sort_by(None)
        await pilot.pause()
        assert table.order == newest_first

        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, ColumnsModal), "the chooser")
        modal = app.screen
        assert isinstance(modal, ColumnsModal)
        picker = modal.query_one("#columns")
        picker.deselect("loss")  # type: ignore[attr-defined]
        picker.deselect("val")  # type: ignore[attr-defined]
        modal.query_one("#done").press()  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: "loss" not in table.shown_columns, "the columns")
        assert "val" not in table.shown_columns and "name" in table.shown_columns
        header = table.render_line(0).text
        assert "Loss" not in header and "Samples/s" in header
        # The hidden cells keep their values: shown again, nothing is missing.
        table.show_columns([key for key, _, _ in COLUMNS])
        assert "Loss" in table.render_line(0).text
