"""``b`` on a job's screen brings the job in: the call goes to the I/O worker, the job screen
gives way to the new run's Run detail, and the job leaves the other jobs for the runs; a job
that cannot be brought in stays on its screen with a notification naming why. The app on the
fake facade (tests/tui/fakes/adoption.py, FAKE: the run is a row, not a directory); the real
adoption runs on the real schedulers (tests/integration/test_adoption_local.py,
tests/integration/test_user_jobs_slurm.py)."""

from __future__ import annotations

from dataclasses import replace

from ddp_tui.tui.screens.detail import DetailScreen
from ddp_tui.tui.screens.job import JobScreen
from ddp_tui.tui.screens.jobs import JobsScreen, JobsTable
from tests.tui.conftest import SIZE, fake_app, settle, wait_until
from tests.tui.fakes import FakeCluster, sample_runs
from tests.tui.fakes.data import fixed_attempt


async def test_b_brings_a_job_in_and_opens_its_run() -> None:
    fake = FakeCluster(runs=sample_runs(), job_logs={"1202": ["step 1 of big-train"]})
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        table = screen.query_one(JobsTable)
        await pilot.press("a")
        await wait_until(pilot, lambda: "job:1202" in table.order, "the other jobs")
        table.move_cursor(table.order.index("job:1202"))
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, JobScreen), "the job")

        await pilot.press("b")
        await wait_until(pilot, lambda: isinstance(app.screen, DetailScreen), "the run")
        detail = app.screen
        assert isinstance(detail, DetailScreen)
        run_id = "20231114-223000-big-train-ad01"
        assert detail.run_id == run_id
        assert ("adopt_job", "1202") in fake.calls
        await wait_until(pilot, lambda: detail.run is not None, "the run in a refresh")
        assert detail.run is not None and detail.run.kind == "adopted"
        assert detail.run.job_id == "1202"
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "Jobs")
        # A run now, not one of the other jobs.
        await wait_until(pilot, lambda: "job:1202" not in table.order, "the job gone")
        assert run_id in table.order


async def test_a_job_that_cannot_be_brought_in_says_why() -> None:
    fake = FakeCluster(runs=sample_runs())
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("a")
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        table = screen.query_one(JobsTable)
        await wait_until(pilot, lambda: "job:1204" in table.order, "the other jobs")
        job = next(j for j in fake.user_jobs_service.foreign if j.job_id == "1204")
        # FAKE: the job's id is an attempt of a run already (another instance brought it in).
        last = fake.runs[-1]
        fake.runs = [
            *fake.runs[:-1],
            replace(last, attempts=(*last.attempts, fixed_attempt("1204", 2))),
        ]
        app.open_job(job)
        await wait_until(pilot, lambda: isinstance(app.screen, JobScreen), "the job")
        await pilot.press("b")
        await wait_until(pilot, lambda: ("adopt_job", "1204") in fake.calls, "the call")

        def told() -> bool:
            return any("attempt of run" in str(n.message) for n in app._notifications)

        await wait_until(pilot, told, "the refusal")
        note = next(n for n in app._notifications if "attempt of run" in str(n.message))
        assert note.title == "Bring it in failed: Bring it in" and note.severity == "error"
        assert isinstance(app.screen, JobScreen)  # it stays where it was
