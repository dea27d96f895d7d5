"""The app beside damaged runs (issue 21): Jobs lists every healthy run beside every
damaged one, a damaged run shows DAMAGED with its file named, and its Run detail says what
is wrong. The real facade and local scheduler, and real damaged copies of a finished run
(tests/helpers/damage.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.tui.app import DdpTuiApp
from ddp_tui.tui.screens.detail import DetailScreen
from ddp_tui.tui.screens.jobs import JobsScreen, JobsTable
from tests.helpers.damage import CASES, copy_run
from tests.tui.conftest import SIZE, wait_until
from tests.tui.drive import open_run

pytestmark = pytest.mark.torch


@pytest.fixture
def made_run(finished_trainer_run: Path) -> Path:
    return finished_trainer_run  # made once per suite run (tests/fixtures/shared_runs.py)


async def test_jobs_lists_every_healthy_run_beside_the_damaged_ones(
    made_run: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    healthy = [copy_run(made_run, runs, f"healthy{i}").name for i in range(4)]
    damaged = {}
    for case in CASES:  # every damage at once, as in the report: 21 among 4 and more
        run = copy_run(made_run, runs, case.name)
        case.apply(run)
        damaged[run.name] = case
    profile = Profile(scheduler="local", runs_root=str(runs))

    def factory(prompter: object) -> Cluster:
        return Cluster.open(profile, local_state_dir=str(tmp_path / "state"), prompter=prompter)

    app = DdpTuiApp(factory, profile=profile, refresh_interval=2)
    async with app.run_test(size=SIZE) as pilot:
        every = {*healthy, *damaged}

        def listed() -> set[str]:
            snap = app.snapshot
            return {r.run_id for r in snap.runs} if snap is not None else set()

        await wait_until(pilot, lambda: every <= listed(), "every run listed", timeout=60)
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        table = screen.query_one(JobsTable)
        # Copies of one run are one group, folded into a row: open it to see each.
        for group in {r.group for r in app.snapshot.runs if r.group} if app.snapshot else ():
            screen.toggle_group(group, True)
        await wait_until(pilot, lambda: every <= set(table.order), "every row drawn", timeout=30)
        views = {r.run_id: r for r in app.snapshot.runs} if app.snapshot else {}
        for run_id in healthy:
            assert views[run_id].state is JobState.COMPLETED and not views[run_id].damage
            assert views[run_id].epochs_done == 2
        for run_id, case in damaged.items():
            if case.file is not None:
                view = views[run_id]
                assert view.state_label == "DAMAGED", (case.name, view)
                assert case.file in view.reason_label or any(
                    d.file == case.file for d in view.damage
                ), (case.name, view.damage)

        # Run detail of a damaged run names what is wrong, and Escape goes back to Jobs.
        target = next(v for v in views.values() if v.damage and v.state_label == "DAMAGED")
        table.move_cursor(row=table.order.index(target.run_id))
        detail = await open_run(pilot, target)
        assert isinstance(detail, DetailScreen)
        summary = detail.query_one("#summary", Static)
        await wait_until(
            pilot, lambda: "DAMAGED" in str(summary.render()), "the damage in Run detail"
        )
        assert str(target.damage[0]) in str(summary.render())
        # How fast is for benchmarks/bench_tui.py; here, only that it comes back at all.
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "Jobs again")
