"""Compose's container runtime select on the real local scheduler: once the plan has detected
what this machine offers (the real probe), the runtimes found come first and the others are
marked "not found", and choosing one that is not here is refused on its field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import Input, Select

from ddp_tui.config import Profile
from ddp_tui.tui.app import DdpTuiApp
from tests.tui.conftest import SIZE, wait_until
from tests.tui.drive import open_compose

pytestmark = pytest.mark.usefixtures("cancel_leftover_jobs")


def local_app(tmp_path: Path) -> DdpTuiApp:
    from ddp_tui.remote.cluster import Cluster

    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))

    def factory(prompter: object) -> Cluster:
        return Cluster.open(profile, local_state_dir=str(tmp_path / "state"), prompter=prompter)

    return DdpTuiApp(factory, profile=profile, refresh_interval=2)


@pytest.mark.skipif(shutil.which("apptainer") is not None, reason="apptainer is installed here")
async def test_runtimes_found_come_first_and_an_absent_one_is_refused(tmp_path: Path) -> None:
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.snapshot is not None, "the first refresh")
        screen = await open_compose(pilot)
        select = screen.query_one("#f-container_runtime", Select)
        # Set as a user's keys would (each change plans again), without typing every key.
        screen.query_one("#f-python", Input).value = "python3"
        screen.query_one("#f-container_image", Input).value = "/images/torch.sif"
        screen.query_one("#f-environment", Select).value = "container"
        select.value = "apptainer"
        await wait_until(
            pilot,
            lambda: "container_runtime" in screen.errors and not screen.preview_pending,
            "the refusal of apptainer",
            30,
        )
        (message,) = screen.errors["container_runtime"]
        assert message.startswith("apptainer: not found on the default partition (detected ")
        labels = [str(label) for label, _ in select._options]
        found = ["podman"] if shutil.which("podman") else []
        assert labels[: 1 + len(found)] == ["", *found]
        assert "apptainer (not found on the default partition)" in labels
        assert select.value == "apptainer"  # what the user chose stays chosen
