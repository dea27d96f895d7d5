"""The Jobs screen's groups (issue 23): a sweep's runs fold into one row with its member
count, its counts per state and its GPU-hours; the row opens to show them; cancel and retry on
it reach its members. The grouping is a pure function (tested first), then the app on the
fake facade (tests/tui/fakes.py: a sweep in fixed states no real scheduler holds still)."""

from __future__ import annotations

from dataclasses import replace

from ddp_tui.remote.backends.states import ACTIVE_STATES, COUNT_ORDER, TERMINAL_STATES, JobState
from ddp_tui.remote.model.views import RunView
from ddp_tui.tui.job_groups import (
    JobLine,
    RunGroup,
    counts_label,
    group_name,
    group_row_key,
    job_lines,
    multi_run_groups,
    state_counts,
)
from ddp_tui.tui.jobs_table import COLUMNS, group_values, row_values
from ddp_tui.tui.modals import ConfirmModal
from ddp_tui.tui.screens.jobs import JobsScreen, JobsTable
from tests.tui.conftest import SIZE, fake_app, settle, wait_until
from tests.tui.fakes import SAMPLE_SWEEP, FakeCluster, sample_runs

GROUP = "9f2c4e1a7b3d5f60"  # the sample sweep's comparison group key
SWEEP_ID = SAMPLE_SWEEP  # what folds its runs into one row
SWEEP = ["sweep-2x2", "sweep-1x2", "sweep-1x1"]


def _names(lines: list[JobLine]) -> list[str]:
    return [line.group.name if line.group else line.run.name if line.run else "" for line in lines]


def _cells(values: tuple[str, ...], *columns: str) -> dict[str, str]:
    keys = [key for key, _, _ in COLUMNS]
    return {column: values[keys.index(column)] for column in columns}


def live_sweep() -> list[RunView]:
    """The sample runs with the sweep's three runs running, pending and failed."""
    states = {"sweep-2x2": JobState.RUNNING, "sweep-1x2": JobState.PENDING}
    return [
        replace(r, state=states.get(r.name, JobState.FAILED)) if r.group == GROUP else r
        for r in sample_runs()
    ]


# -- the pure grouping -------------------------------------------------------------------


def test_counts_per_state_put_running_first_and_completed_last() -> None:
    runs = sample_runs()
    states = [JobState.COMPLETED, JobState.PENDING, JobState.RUNNING, JobState.PENDING]
    mixed = [replace(runs[0], state=s) for s in states]
    assert counts_label(state_counts(mixed)) == "1 RUNNING 2 PENDING 1 COMPLETED"
    group = multi_run_groups(live_sweep())[SWEEP_ID]
    assert group.summary == "3 runs: 1 RUNNING 1 PENDING 1 FAILED"
    assert [r.name for r in group.live] == ["sweep-2x2", "sweep-1x2"]
    assert [r.name for r in group.retryable] == ["sweep-1x1"]


def test_the_count_order_is_every_state_once_active_first_completed_last() -> None:
    # The order lives with the states (remote/backends/states.py); a state added there and
    # left out of it would count after all the others.
    assert sorted(COUNT_ORDER) == sorted(JobState) and len(COUNT_ORDER) == len(JobState)
    active = len(ACTIVE_STATES)
    assert set(COUNT_ORDER[:active]) == ACTIVE_STATES
    assert set(COUNT_ORDER[active:]) - TERMINAL_STATES == {JobState.UNKNOWN}
    assert COUNT_ORDER[-2:] == (JobState.UNKNOWN, JobState.COMPLETED)


def test_a_group_is_named_by_its_members_common_prefix() -> None:
    assert group_name(["lr-sweep-g1", "lr-sweep-g2"]) == "lr-sweep"
    # Cut back to whole parts: not "grid-lr0." of lr0.1 and lr0.01.
    assert group_name(["grid-lr0.1-b32", "grid-lr0.01-b32", "grid-lr0.1-b64"]) == "grid"
    assert group_name(["run", "run-2"]) == "run"
    # Nothing in common: the first name without its suffix.
    assert group_name(["alpha-3", "beta-4"]) == "alpha"
    assert group_name(["solo"]) == "solo"


def test_a_group_folds_into_one_row_where_its_newest_run_stands() -> None:
    lines = job_lines(sample_runs())
    assert _names(lines) == ["mnist-cnn", "queued", "broken", "sweep", "old-cancel"]
    row = lines[3]
    assert row.key == group_row_key(SWEEP_ID) and not row.expanded
    assert row.group is not None and [m.name for m in row.group.members] == SWEEP
    # A single run of a group (every training run has one) is shown as that run.
    assert lines[0].group is None and lines[0].run is not None and lines[0].run.group is None
    lone = replace(sample_runs()[0], group="lonely")
    assert job_lines([lone])[0].run is lone


def test_runs_submitted_one_by_one_stay_rows_of_their_own_though_they_compare_as_one() -> None:
    # Two plain submits of the same form: one comparison group, but no sweep. Folded, the
    # run just submitted would vanish behind a closed "experiment  2 runs" row.
    first, second = (
        replace(sample_runs()[0], run_id=f"20231114-23000{i}-mnist-000{i}", group=GROUP)
        for i in range(2)
    )
    lines = job_lines([second, first])
    assert [line.run for line in lines] == [second, first]
    assert all(line.group is None for line in lines)
    # Made one by the user (the same sweep id), they fold.
    folded = job_lines([replace(r, sweep="s1") for r in (second, first)])
    assert len(folded) == 1 and folded[0].group is not None and folded[0].key == "group:s1"


def test_an_open_group_lists_its_members_under_it_in_order() -> None:
    lines = job_lines(sample_runs(), expanded={SWEEP_ID})
    assert _names(lines) == ["mnist-cnn", "queued", "broken", "sweep", *SWEEP, "old-cancel"]
    assert lines[3].expanded
    assert [line.member for line in lines[4:7]] == [True, True, True]
    assert not lines[7].member


def test_a_search_inside_a_group_shows_the_group_open_with_the_matches() -> None:
    def keep(run: RunView) -> bool:
        return "1x" in run.name

    lines = job_lines(sample_runs(), keep=keep, reveal=True)
    assert _names(lines) == ["sweep", "sweep-1x2", "sweep-1x1"]
    assert lines[0].expanded
    # The row still counts every member: cancel and retry on it reach all of them.
    assert lines[0].group is not None and len(lines[0].group.members) == 3
    # Nothing of the group kept: no row for it.
    assert "sweep" not in _names(job_lines(sample_runs(), keep=lambda r: r.group is None))


def test_a_group_row_shows_its_count_state_counts_and_hours() -> None:
    group: RunGroup = multi_run_groups(live_sweep())[SWEEP_ID]
    values = group_values(group, expanded=False)
    assert _cells(values, "name", "job", "state", "size", "hours", "reason") == {
        "name": "▸ sweep",
        "job": "3 jobs",
        "state": "3 runs",
        "size": "mixed",
        # 2x2 for 300 s, 1x2 for 360 s, 1x1 for 420 s: (1200 + 720 + 420) / 3600
        "hours": "0.65",
        "reason": "1 RUNNING 1 PENDING 1 FAILED",
    }
    assert group_values(group, expanded=True)[0] == "▾ sweep"


def test_every_run_has_its_gpu_hours_or_cpu_hours() -> None:
    running = sample_runs()[0]  # 2 nodes x 2 GPUs for 754 s
    assert _cells(row_values(running), "hours") == {"hours": "0.838"}
    # On the CPU, the allocated cores: torchrun runs one task per node, of 4 cores here.
    cpu = replace(running, spec=running.spec.replace(device="cpu", cpus_per_task=4))
    assert _cells(row_values(cpu), "hours") == {"hours": f"{2 * 4 * 754 / 3600:.3g} CPU"}
    assert _cells(row_values(sample_runs()[1]), "hours") == {"hours": "-"}  # pending
    assert row_values(running, member=True)[0] == "  mnist-cnn"


# -- the app on the fake facade ----------------------------------------------------------


async def test_the_group_row_opens_closes_and_cancels_its_live_runs() -> None:
    fake = FakeCluster(runs=live_sweep())
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        table = screen.query_one(JobsTable)
        key = group_row_key(SWEEP_ID)
        assert table.row_count == 5 and key in table.order  # 7 runs, the sweep's 3 in one row
        assert table.get_cell(key, "state") == "3 runs"
        assert table.get_cell(key, "reason") == "1 RUNNING 1 PENDING 1 FAILED"
        table.move_cursor(table.order.index(key))
        await pilot.pause()
        status = str(screen.query_one("#jobs-status").render())
        assert "sweep: 3 runs: 1 RUNNING 1 PENDING 1 FAILED, 0.65 GPU-hours" in status

        await pilot.press("enter")  # opens the group, the cursor stays on its row
        await wait_until(pilot, lambda: table.row_count == 8, "the members listed")
        assert table.selected_key == key
        members = table.order[table.cursor_row + 1 : table.cursor_row + 4]
        assert [app.run_by_id(m).name for m in members] == SWEEP  # type: ignore[union-attr]
        assert table.get_cell(members[0], "name") == "  sweep-2x2"
        await pilot.press("down", "left")  # left on a member closes its group
        await wait_until(pilot, lambda: table.row_count == 5, "the group closed")
        assert table.selected_key == key
        await pilot.press("space")
        await wait_until(pilot, lambda: table.row_count == 8, "open again with space")
        await pilot.press("minus")
        await wait_until(pilot, lambda: table.row_count == 5, "closed with -")

        await pilot.press("c")  # on the group's row: asks, then cancels the live runs
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal), "the question")
        assert "2 queued or running runs of sweep" in app.screen.question
        await pilot.press("y")
        await wait_until(pilot, lambda: ("cancel_group", SWEEP_ID) in fake.calls, "the cancel")
        assert not any(call == "cancel" for call, _ in fake.calls)  # one call for the group
        await wait_until(
            pilot,
            lambda: table.get_cell(key, "reason") == "1 FAILED 2 CANCELLED",
            "the refresh after",
        )


async def test_retry_on_the_group_row_retries_the_runs_that_ended_badly() -> None:
    fake = FakeCluster(runs=live_sweep())
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(JobsTable)
        table.move_cursor(table.order.index(group_row_key(SWEEP_ID)))
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal), "the question")
        await pilot.press("n")  # declined: nothing retried
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "Jobs again")
        assert not any(call == "retry" for call, _ in fake.calls)
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal), "the question")
        await pilot.press("y")
        await wait_until(pilot, lambda: ("retry_group", SWEEP_ID) in fake.calls, "the retry")
        failed = next(r.run_id for r in live_sweep() if r.name == "sweep-1x1")
        assert [run_id for call, run_id in fake.calls if call == "retry"] == [failed]


async def test_a_search_opens_the_group_of_a_matching_run() -> None:
    app = fake_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(JobsTable)
        await pilot.press("slash", *"1x2", "enter")
        await wait_until(pilot, lambda: table.row_count == 2, "the group and its match")
        assert table.get_cell(table.order[0], "name") == "▾ sweep"
        assert table.get_cell(table.order[1], "name") == "  sweep-1x2"
        assert "7 runs · 2 active · 1 shown" in str(app.screen.query_one("#jobs-status").render())
