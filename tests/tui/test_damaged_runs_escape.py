"""The app stays responsive among damaged runs (issue 21: with 21 damaged runs among 4
healthy ones, Escape from a damaged run's detail took 10.5 s).

One finished trainer run, made once per suite run on the local scheduler; the runs root
holds four intact copies of it and a copy per damage of tests/helpers/damage.py. The real
app opens the Run detail of every damaged run in turn and presses Escape: each time Jobs
comes back, with every healthy run still in it. No timing is asserted (the escapes are timed
and printed).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.cluster import Cluster
from ddp_tui.tui.app import DdpTuiApp
from ddp_tui.tui.screens.detail import DetailScreen
from ddp_tui.tui.screens.jobs import JobsScreen, JobsTable
from tests.helpers.damage import CASES, copy_run
from tests.tui.conftest import SIZE, settle, wait_until

pytestmark = pytest.mark.torch

HEALTHY = 4


@pytest.mark.slow(
    reason="the real app opens, and leaves, the Run detail of every damaged run in turn "
    "(twenty and more), each waiting for its first follow"
)
async def test_escape_from_every_damaged_runs_detail_goes_back_to_jobs(
    tmp_path: Path, finished_trainer_run: Path
) -> None:
    made = finished_trainer_run  # made once per suite run (tests/fixtures/shared_runs.py)
    root = tmp_path / "runs"
    healthy = {copy_run(made, root, f"healthy{k}").name for k in range(HEALTHY)}
    damaged: dict[str, str] = {}
    for case in CASES:
        run_dir = copy_run(made, root, case.name)
        case.apply(run_dir)
        damaged[run_dir.name] = case.name
    profile = Profile(scheduler="local", runs_root=str(root))
    app = DdpTuiApp(
        lambda prompter: Cluster.open(
            profile, local_state_dir=str(tmp_path / "state"), prompter=prompter
        ),
        profile=profile,
        refresh_interval=2,
    )
    escapes: list[tuple[float, str]] = []
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        table = jobs.query_one(JobsTable)

        def opened() -> set[str]:
            # Copies of one run are one group, folded into a row: open it to see each.
            for group in {r.group for r in app.snapshot.runs if r.group} if app.snapshot else ():
                jobs.toggle_group(group, True)
            return set(table.order)

        await wait_until(pilot, lambda: healthy <= opened(), "the healthy runs", 60)
        for run_id, name in damaged.items():
            if run_id not in table.order:
                continue  # a directory the listing cannot take as a run (the CLI tests say so)
            table.move_cursor(row=table.order.index(run_id))
            await pilot.press("enter")
            await wait_until(
                pilot, lambda: isinstance(app.screen, DetailScreen), f"{name}'s detail", 30
            )
            await pilot.pause(0.3)  # its first follow lands (or fails) meanwhile
            start = time.monotonic()
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), name, 60)
            escapes.append((time.monotonic() - start, name))
            table = app.screen.query_one(JobsTable)
            assert healthy <= set(table.order), f"a healthy run left Jobs after {name}"
    assert len(escapes) >= len(CASES) - 5, "most damaged runs must be listed and openable"
    slowest = sorted(escapes, reverse=True)[:3]
    print("slowest escapes:", ", ".join(f"{name} {sec:.2f} s" for sec, name in slowest))
