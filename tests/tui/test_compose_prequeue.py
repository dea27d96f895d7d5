"""Compose's pre-queue checks on the real local scheduler: a python without torch (a real
fresh venv) shows inline on the Python field, the skip box overrides it, ctrl+r checks
again, and the chosen partition's idle nodes show under its field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import Checkbox, Static

from ddp_tui.config import Profile
from ddp_tui.tui.app import DdpTuiApp
from tests.tui.conftest import SIZE, wait_until
from tests.tui.drive import inline_error_problems, open_compose, type_into

#: Local jobs outlive the app by design; a failed test must not leave one running.
pytestmark = pytest.mark.usefixtures("cancel_leftover_jobs")


@pytest.fixture(scope="module")
def no_torch(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real python without torch: a fresh venv without the test venv's packages."""
    venv = tmp_path_factory.mktemp("no-torch") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def local_app(tmp_path: Path) -> DdpTuiApp:
    from ddp_tui.remote.cluster import Cluster

    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))

    def factory(prompter: object) -> Cluster:
        return Cluster.open(profile, local_state_dir=str(tmp_path / "state"), prompter=prompter)

    return DdpTuiApp(factory, profile=profile, refresh_interval=2)


def note(screen: object) -> str:
    label = screen.query_one("#python-check", Static)  # type: ignore[attr-defined]
    return str(label.render())


async def test_a_python_without_torch_shows_inline_and_can_be_overridden_and_rechecked(
    tmp_path: Path, no_torch: str
) -> None:
    app = local_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.snapshot is not None, "the first refresh")
        screen = await open_compose(pilot)
        # The idle nodes of the chosen partition (the local scheduler's one node is free).
        info = screen.query_one("#partition-info", Static)
        assert info.display and "local: 1 of 1 nodes idle" in str(info.render())

        await type_into(pilot, "python", no_torch)
        await wait_until(
            pilot,
            lambda: "python" in screen.errors and not screen.preview_pending,
            "the python check's error",
            60,
        )
        case = [("python", no_torch, "No module named 'torch'")]
        assert not (problems := inline_error_problems(screen, case)), problems
        assert "ctrl+r checks again" in note(screen)
        box = screen.query_one("#skip-python-check", Checkbox)
        assert box.display and not box.value
        await pilot.press("ctrl+s")  # refused: nothing is submitted
        assert not any((tmp_path / "runs").glob("*/spec.json"))

        # The user knows better: the box overrides the check for this python.
        box.focus()
        await pilot.press("space")
        await wait_until(
            pilot,
            lambda: "python" not in screen.errors and not screen.preview_pending,
            "the override",
            60,
        )
        assert box.value and "skipped" in note(screen)

        # ctrl+r drops the override and checks again: the error is back.
        await pilot.press("ctrl+r")
        await wait_until(
            pilot,
            lambda: "python" in screen.errors and not screen.preview_pending,
            "the re-check",
            60,
        )
        assert not box.value

        # An interpreter with torch passes, and Compose says what it found.
        await type_into(pilot, "python", sys.executable)
        await wait_until(
            pilot,
            lambda: (
                "python" not in screen.errors
                and not screen.preview_pending
                and "found" in note(screen)
            ),
            "the passed check",
            120,
        )
        assert not box.display
