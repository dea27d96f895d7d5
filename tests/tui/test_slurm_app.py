"""The app on the real Slurm test cluster: the whole story with a 2-node run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.cluster import Cluster
from ddp_tui.tui.app import DdpTuiApp
from tests.helpers.hold import Hold
from tests.tui.conftest import SIZE, wait_until
from tests.tui.drive import run_story

pytestmark = [pytest.mark.slurm, pytest.mark.torch]


@pytest.fixture
def runs_root(slurm_cluster: Any, tmp_path: Path) -> Iterator[Path]:
    """A runs root whose jobs are cancelled afterwards (only ours: the cluster is shared)."""
    root = tmp_path / "runs"
    yield root
    for jobs in root.glob("*/jobs.jsonl"):
        for line in jobs.read_text().splitlines():
            if job_id := json.loads(line).get("job_id"):  # intent lines name no job
                slurm_cluster.run(["scancel", str(job_id)])


@pytest.mark.slow(
    reason="the story by keys on two real Slurm nodes: two trainer jobs of two ranks each "
    "(cancelled mid-run, then retried to the end), each rank importing torch"
)
async def test_story_on_slurm_with_two_nodes(runs_root: Path, hold: Hold) -> None:
    profile = Profile(scheduler="slurm", runs_root=str(runs_root), partition="debug")

    def factory(prompter: object) -> Cluster:
        return Cluster.open(profile, prompter=prompter)

    app = DdpTuiApp(factory, profile=profile, refresh_interval=2)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.snapshot is not None, "the first refresh", 30)
        assert app.status.location == "Slurm on this host"
        assert app.status.version  # the header names the Slurm version
        assert [p.name for p in app.partitions] == ["debug", "small"]
        await run_story(pilot, app, name="slurm-story", nodes=2, hold=hold)


async def test_controller_outage_shows_in_header_and_recovers(
    slurm_cluster: Any, runs_root: Path
) -> None:
    from ddp_tui.remote.backends.states import JobState
    from ddp_tui.tui.modals import ConfirmModal
    from ddp_tui.tui.screens.compose import ComposeScreen
    from ddp_tui.tui.screens.jobs import JobsScreen
    from tests.tui.drive import in_states, type_into, wait_run

    # The job waits an hour and is cancelled: its python (the profile's python3) never runs.
    profile = Profile(
        scheduler="slurm", runs_root=str(runs_root), partition="debug", check_python=False
    )

    def factory(prompter: object) -> Cluster:
        return Cluster.open(profile, prompter=prompter)

    app = DdpTuiApp(factory, profile=profile, refresh_interval=2)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.snapshot is not None, "the first refresh", 30)
        # A job that waits in the queue for an hour, so every refresh polls squeue.
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, ComposeScreen), "Compose")
        await type_into(pilot, "name", "queued")
        await type_into(pilot, "extra_sbatch", "--begin=now+3600")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "Jobs", 30)
        await wait_run(pilot, "queued", in_states(JobState.PENDING), "pending", 60)

        slurm_cluster.stop_controller()
        try:
            await wait_until(
                pilot,
                lambda: app.status.connection == "controller unreachable",
                "the outage in the header",
                90,
            )
            assert app.status.error
            assert isinstance(app.screen, JobsScreen)  # no crash, the table stays
            assert app.snapshot is not None and app.snapshot.runs
        finally:
            slurm_cluster.start_controller()
        await wait_until(
            pilot, lambda: app.status.connection == "ok" and not app.status.error, "recovery", 120
        )
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal), "the confirmation")
        await pilot.press("y")
        await wait_run(pilot, "queued", in_states(JobState.CANCELLED), "cancelled", 60)
