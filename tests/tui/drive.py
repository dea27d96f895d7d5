"""Driving the app by keys, as a user would: type into fields, pick options, wait for states."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.pilot import Pilot
from textual.widgets import Input, Select, TextArea

from ddp_tui.remote.cluster import RunView
from ddp_tui.remote.states import JobState
from ddp_tui.tui.app import DdpTuiApp
from tests.tui.conftest import wait_until


async def type_into(pilot: Pilot[None], field: str, text: str) -> None:
    """Focus a Compose field, clear it with keys, and type ``text``."""
    screen = pilot.app.screen
    widget = screen.query_one(f"#f-{field}")
    if isinstance(widget, Select) and widget.value == "__custom__":
        widget = screen.query_one(f"#c-{field}")
    widget.focus()
    await pilot.pause()
    if isinstance(widget, Input):
        await pilot.press("end", "ctrl+u")
    elif isinstance(widget, TextArea):
        widget.clear()
    else:
        raise AssertionError(f"{field} is not a text field")
    if text:
        await pilot.press(*text)


async def pick(pilot: Pilot[None], field: str, label: str, value: str | None = None) -> None:
    """Choose an option of a Compose picker with keys: open it, type its label, enter."""
    value = label if value is None else value
    select = pilot.app.screen.query_one(f"#f-{field}", Select)
    select.focus()
    await pilot.pause()
    await pilot.press("enter")
    await pilot.pause(0.1)
    await pilot.press(*label)
    await pilot.press("enter")
    await wait_until(pilot, lambda: select.value == value, f"{field} = {value}", timeout=5)


def run_named(app: DdpTuiApp, name: str) -> RunView | None:
    snapshot = app.snapshot
    if snapshot is None:
        return None
    return next((run for run in snapshot.runs if run.name == name), None)


async def wait_run(
    pilot: Pilot[None],
    name: str,
    predicate: Callable[[RunView], bool],
    what: str,
    timeout: float = 120.0,
) -> RunView:
    app = pilot.app
    assert isinstance(app, DdpTuiApp)
    deadline = time.monotonic() + timeout
    while True:
        run = run_named(app, name)
        if run is not None and predicate(run):
            return run
        if time.monotonic() > deadline:
            state = f"{run.state.value} epochs {run.epochs_done}" if run else "not listed"
            raise AssertionError(f"timed out waiting for {name}: {what} (last: {state})")
        await pilot.pause(0.2)


def in_states(*states: JobState) -> Callable[[RunView], bool]:
    return lambda run: run.state in states
