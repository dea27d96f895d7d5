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
            slurm_cluster.run(["scancel", str(json.loads(line)["job_id"])])


async def test_story_on_slurm_with_two_nodes(runs_root: Path) -> None:
    profile = Profile(scheduler="slurm", runs_root=str(runs_root), partition="debug")

    def factory(prompter: object) -> Cluster:
        return Cluster.open(profile, prompter=prompter)

    app = DdpTuiApp(factory, profile=profile, refresh_interval=2)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.snapshot is not None, "the first refresh", 30)
        assert app.status.location == "Slurm on this host"
        assert app.status.version  # the header names the Slurm version
        assert [p.name for p in app.partitions] == ["debug", "small"]
        await run_story(pilot, app, name="slurm-story", nodes=2)
