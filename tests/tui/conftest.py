"""Helpers for the app's tests: waiting on a running app, and apps on the fake or real facade."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot

from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.tui.app import DdpTuiApp
from tests.tui.fakes import NOW, FakeCluster

SIZE = (120, 40)


async def wait_until(
    pilot: Pilot[None], predicate: Callable[[], bool], what: str, timeout: float = 10.0
) -> None:
    """Let the app run until ``predicate()`` holds; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await pilot.pause(0.05)
    await pilot.pause()


def fake_app(fake: FakeCluster | None = None) -> DdpTuiApp:
    """The app on the fake facade with a frozen clock (snapshot tests only)."""
    cluster = fake or FakeCluster()
    return DdpTuiApp(lambda prompter: cluster, clock=lambda: NOW, refresh_interval=60)


async def settle(pilot: Pilot[None]) -> None:
    """Wait for the first snapshot and for pending work (timers, workers) to land."""
    app = pilot.app
    assert isinstance(app, DdpTuiApp)
    await wait_until(pilot, lambda: app.snapshot is not None, "the first snapshot")
    await asyncio.sleep(0.3)
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()


@pytest.fixture
def cancel_leftover_jobs(tmp_path: Path) -> Iterator[None]:
    """Cancel what the local scheduler under ``tmp_path/state`` still runs after the test:
    local jobs outlive the app by design, and a failed test must not leave one running."""
    yield
    state = tmp_path / "state"
    if state.exists():
        scheduler = LocalScheduler.from_state_dir(state)
        for job in scheduler.list_jobs():
            if job.state.is_active:
                scheduler.cancel(job.job_id)
