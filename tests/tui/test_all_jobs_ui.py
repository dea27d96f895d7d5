"""Jobs lists every job of the user with ``a``: the jobs ddp-tui did not submit are rows of
their own, marked, filtered and sorted with the runs; a job array's tasks fold into one row;
enter opens a job (its logs, why it waits, what it used) and ``c`` cancels it. Pure rows first,
then the app on the fake facade (tests/tui/fakes/user_jobs.py: FAKE jobs in states a real
queue does not hold still; the real listing is tested on the Slurm test cluster in
tests/integration/test_user_jobs_slurm.py)."""

from __future__ import annotations

from dataclasses import replace

from ddp_tui.remote.backends.states import JobState
from ddp_tui.tui.foreign_rows import (
    FOREIGN_MARK,
    array_group,
    foreign_lines,
    job_row_key,
    job_values,
)
from ddp_tui.tui.job_groups import group_row_key
from ddp_tui.tui.job_sorting import sort_lines
from ddp_tui.tui.modals import ConfirmModal
from ddp_tui.tui.screens.job import JobScreen
from ddp_tui.tui.screens.jobs import JobsScreen, JobsTable
from tests.tui.conftest import SIZE, fake_app, settle, wait_until
from tests.tui.fakes import FakeCluster, sample_runs, sample_user_jobs


def _with_array() -> list:
    """The sample jobs with a second task of the array 1203 (two tasks: one row)."""
    jobs = sample_user_jobs()
    task = next(j for j in jobs if j.array_job_id == "1203")
    return [*jobs, replace(task, job_id="1203_2", array_task_id=2, state=JobState.RUNNING)]


def test_a_jobs_row_is_marked_and_an_arrays_tasks_fold() -> None:
    jobs = _with_array()
    lines = foreign_lines(jobs)
    keys = [line.key for line in lines]
    fold = group_row_key(array_group("1203"))
    assert keys == [job_row_key("1204"), fold, job_row_key("1202"), job_row_key("1150")]
    values = job_values(jobs[2])  # big-train: 2 nodes, 4 GPUs, 754 s
    assert values[0] == FOREIGN_MARK + "big-train" and values[3] == "2x2"
    assert values[9] == f"{4 * 754 / 3600:.3g}"
    held = job_values(jobs[0])
    assert held[-1] == "held by you (release it to run)"
    opened = foreign_lines(jobs, expanded={array_group("1203")})
    assert [line.key for line in opened if line.member] == ["job:1203_1", "job:1203_2"]
    # The filter keeps only what matches, and opens an array to show a matching task.
    kept = foreign_lines(jobs, keep=lambda j: j.job_id == "1203_2", reveal=True)
    assert [line.key for line in kept] == [fold, "job:1203_2"]


def test_jobs_sort_with_the_runs() -> None:
    from ddp_tui.tui.job_groups import job_lines

    lines = job_lines(sample_runs()) + foreign_lines(sample_user_jobs())
    by_name = [line.key for line in sort_lines(lines, "name")]
    assert by_name.index("job:1202") < by_name.index("job:1204")  # big-train < prep-data
    # By elapsed time, largest first: the notebook job (90 min) before every run.
    assert sort_lines(lines, "elapsed", descending=True)[0].key == "job:1150"


async def test_a_lists_every_job_enter_opens_one_and_c_cancels_it() -> None:
    fake = FakeCluster(
        runs=sample_runs(), job_logs={"1202": ["step 1 of big-train", "step 2 of big-train"]}
    )
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        table = screen.query_one(JobsTable)
        assert not any(key.startswith("job:") for key in table.order)
        assert not any(call == "user_jobs" for call, _ in fake.calls)
        await pilot.press("a")
        await wait_until(pilot, lambda: "job:1202" in table.order, "the other jobs")
        assert table.get_cell("job:1202", "name") == FOREIGN_MARK + "big-train"
        status = str(screen.query_one("#jobs-status").render())
        assert "4 other jobs" in status

        # Enter on a running job: its log, followed.
        table.move_cursor(table.order.index("job:1202"))
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, JobScreen), "the job")
        job_screen = app.screen
        assert isinstance(job_screen, JobScreen)
        log = job_screen.query_one("#log-out")
        await wait_until(pilot, lambda: len(log.lines) >= 3, "its log")  # type: ignore[attr-defined]
        assert "step 2 of big-train" in "\n".join(
            strip.text
            for strip in log.lines  # type: ignore[attr-defined]
        )
        # Its batch script, asked once on opening (FAKE: the fake's own).
        await wait_until(pilot, lambda: job_screen.script is not None, "the script")
        await pilot.press("3")
        await pilot.pause()
        shown = str(job_screen.query_one("#job-script").render())
        assert "#SBATCH --job-name=big-train" in shown
        assert [c for c in fake.calls if c[0] == "job_script"] == [("job_script", "1202")]
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal), "the question")
        await pilot.press("y")
        await wait_until(pilot, lambda: ("cancel_job", "1202") in fake.calls, "the cancel")
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "Jobs")

        # A pending job's screen asks why it waits, on opening.
        table.move_cursor(table.order.index("job:1204"))
        await pilot.press("enter")
        await wait_until(pilot, lambda: ("why_waiting", "1204") in fake.calls, "why it waits")
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "Jobs")

        await pilot.press("a")  # back to ddp-tui's runs only
        await wait_until(pilot, lambda: "job:1202" not in table.order, "runs only")


async def test_an_ended_jobs_logs_are_read_once_more_then_no_longer_followed() -> None:
    fake = FakeCluster(runs=sample_runs(), job_logs={"1150": ["last words"]})
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        (ended,) = [j for j in sample_user_jobs() if j.job_id == "1150"]
        assert ended.state is JobState.COMPLETED
        screen = JobScreen(ended)
        await app.push_screen(screen)
        await wait_until(pilot, lambda: not screen.following, "the follow to stop")
        reads = [c for c in fake.calls if c[0] == "job_log"]
        assert len(reads) == 2  # .out and .err once, on opening
        screen._read_logs()  # what the interval would do: nothing more is asked
        await pilot.pause()
        assert [c for c in fake.calls if c[0] == "job_log"] == reads
