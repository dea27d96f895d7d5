"""Driving the app by keys, as a user would: type into fields, pick options, wait for states."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from textual.pilot import Pilot
from textual.widgets import Input, Select, TextArea

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.views import RunView
from ddp_tui.tui.app import DdpTuiApp
from tests.helpers.hold import Hold
from tests.tui.conftest import wait_until

if TYPE_CHECKING:
    from ddp_tui.tui.screens.compose import ComposeScreen
    from ddp_tui.tui.screens.detail import DetailScreen


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


async def preview_script(
    pilot: Pilot[None], screen: ComposeScreen, fields: Sequence[tuple[str, str]]
) -> None:
    """Type a script's fields (``name`` first) with this Python as the job's, and wait for
    Compose's preview of that plan."""
    for field, value in (*fields, ("python", sys.executable)):
        await type_into(pilot, field, value)
    name = f"-{fields[0][1]}-"
    await wait_until(
        pilot,
        lambda: name in (screen.script or "") and not screen.preview_pending,
        f"the preview of {name}",
        30,
    )


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


async def open_compose(pilot: Pilot[None]) -> ComposeScreen:
    """``n`` from Jobs: Compose, once it is on screen."""
    from ddp_tui.tui.screens.compose import ComposeScreen

    await pilot.press("n")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ComposeScreen), "Compose")
    screen = pilot.app.screen
    assert isinstance(screen, ComposeScreen)
    return screen


async def open_run(pilot: Pilot[None], run: RunView) -> DetailScreen:
    """From Jobs, with ``run`` just listed: wait for the cursor on it, ``enter`` its detail."""
    from ddp_tui.tui.screens.detail import DetailScreen
    from ddp_tui.tui.screens.jobs import JobsTable

    table = pilot.app.screen.query_one(JobsTable)
    await wait_until(pilot, lambda: table.selected_run_id == run.run_id, "the cursor on it")
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, DetailScreen), "the detail")
    detail = pilot.app.screen
    assert isinstance(detail, DetailScreen)
    return detail


async def open_named(pilot: Pilot[None], name: str) -> DetailScreen:
    """From Jobs (of a fake cluster): put the cursor on the run called ``name`` and open its
    detail."""
    from ddp_tui.tui.screens.detail import DetailScreen
    from ddp_tui.tui.screens.jobs import JobsTable
    from tests.tui.conftest import settle

    await settle(pilot)
    table = pilot.app.screen.query_one(JobsTable)
    table.move_cursor(next(i for i, r in enumerate(table.order) if name in r))
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, DetailScreen), "Run detail")
    screen = pilot.app.screen
    assert isinstance(screen, DetailScreen)
    return screen


def inline_error_problems(screen: ComposeScreen, cases: Sequence[tuple[str, str, str]]) -> str:
    """What is wrong with Compose's inline errors for ``cases`` (field, what was typed,
    words its error must show); empty when each shows and says what it must."""
    from textual.widgets import Static

    problems = []
    for field, text, words in cases:
        label = screen.query_one(f"#e-{field}", Static)
        shown = str(label.render())
        if not label.display or words.lower() not in shown.lower():
            problems.append(f"{field}={text!r}: shown {shown!r}, want {words!r}")
    return "\n".join(problems)


async def run_story(
    pilot: Pilot[None], app: DdpTuiApp, *, name: str, nodes: int, hold: Hold
) -> None:
    """compose -> submit -> see it in Jobs -> open it -> epochs arrive -> cancel (confirmed)
    -> retry -> it resumes and completes -> the checklist is green. All by keys.

    The first attempt waits after epoch 1 on ``hold`` (a setup line and the held model,
    typed like the rest), so the cancel lands mid-run however fast the machine trains."""
    from ddp_tui.tui.logview import LogPane
    from ddp_tui.tui.modals import ConfirmModal
    from ddp_tui.tui.screens.compose import ComposeScreen
    from ddp_tui.tui.screens.jobs import JobsScreen

    # Compose: a tiny CPU run of the real trainer, typed field by field.
    await pilot.press("n")
    await wait_until(pilot, lambda: isinstance(app.screen, ComposeScreen), "Compose")
    for field, value in (
        ("name", name),
        ("nodes", str(nodes)),
        ("synthetic_samples", "1024"),
        ("synthetic_val_samples", "128"),
        ("synthetic_shape", "1,8,8"),
        ("num_classes", "4"),
        ("cpus_per_task", "1"),
        ("epochs", "3"),
        ("batch_per_gpu", "8"),
        ("workers", "0"),
        ("python", sys.executable),
        ("env_setup", hold.after_epochs_line(1)),
    ):
        await type_into(pilot, field, value)
    await pick(pilot, "model", "custom", "__custom__")
    await type_into(pilot, "model", hold.model("mlp"))
    await pick(pilot, "schedule", "none")
    await pick(pilot, "device", "cpu")
    await pick(pilot, "backend", "gloo")
    await pilot.press("ctrl+s")
    await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "back to Jobs", 30)

    # Jobs: the new run is listed and selected; open it.
    run = await wait_run(pilot, name, lambda r: r.job_id is not None, "a job id", 30)
    detail = await open_run(pilot, run)

    # Epochs arrive in the metrics table while it runs.
    await wait_until(pilot, lambda: len(detail.metrics) >= 1, "the first epoch", 240)
    pane = detail.query_one(LogPane)
    await wait_until(pilot, lambda: len(pane.view("out").lines) > 0, "the .out log", 30)
    if nodes > 1:
        await wait_until(pilot, lambda: len(detail.run.hosts) == nodes, f"{nodes} hosts", 30)

    # Cancel, confirmed in the modal.
    await pilot.press("c")
    await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal), "the confirmation")
    await pilot.press("y")
    run = await wait_run(pilot, name, in_states(JobState.CANCELLED), "cancelled", 90)
    assert 1 <= run.epochs_done < 3, f"cancelled after {run.epochs_done} epochs"

    # Retry resumes from the checkpoint and completes.
    await pilot.press("r")
    run = await wait_run(pilot, name, lambda r: len(r.attempts) == 2, "a 2nd attempt", 30)
    run = await wait_run(
        pilot, name, in_states(JobState.COMPLETED, JobState.FAILED), "the end", 300
    )
    assert run.state is JobState.COMPLETED
    assert run.epochs_done == 3
    assert run.world_size == nodes
    await wait_until(pilot, lambda: len(detail.metrics) == 3, "3 epochs in the table", 30)

    def completed_checklist() -> bool:
        return any(c.name == "job completed" and c.ok for c in detail.checks)

    await wait_until(pilot, completed_checklist, "the checklist of the retry", 60)
    assert all(check.ok is not False for check in detail.checks), detail.checks
