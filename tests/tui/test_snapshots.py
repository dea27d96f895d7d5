"""Snapshot tests of every screen in its main states (deterministic: the fake facade).

Regenerate after an intended change: pytest tests/tui/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input

from ddp_tui.remote.backends.states import JobState
from tests.tui.conftest import SIZE, fake_app, settle, wait_until
from tests.tui.fakes import (
    HEARTBEATS,
    MISSING_TORCH_ERR,
    STALL,
    FakeCluster,
    diagnosed_runs,
    resource_view,
    sample_runs,
    sample_wait,
    telemetry_lines,
)


def steady(run_before: Any) -> Any:
    """``run_before``, then what would make a photo depend on timing: toasts (they expire
    after seconds) and blinking cursors."""

    async def wrapped(pilot: Pilot[None]) -> None:
        await run_before(pilot)
        pilot.app.clear_notifications()
        for screen in pilot.app.screen_stack:  # a blinking cursor is on or off by chance
            for widget in screen.query("Input, TextArea"):
                widget.cursor_blink = False  # type: ignore[attr-defined]
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()

    return wrapped


def test_jobs(snap_compare: Any) -> None:
    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(settle))


def test_jobs_empty(snap_compare: Any) -> None:
    assert snap_compare(
        fake_app(FakeCluster(runs=[])), terminal_size=SIZE, run_before=steady(settle)
    )


def test_jobs_filtered_and_finished_hidden(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("slash", *"sweep", "enter")
        await pilot.press("f")
        await pilot.pause(0.2)

    # Only unfinished runs matching "sweep": none; then the status line says why.
    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(run_before))


def test_jobs_controller_unreachable(snap_compare: Any) -> None:
    fake = FakeCluster(
        connection="controller unreachable",
        error="Unable to contact slurm controller (connect failure)",
    )
    assert snap_compare(fake_app(fake), terminal_size=SIZE, run_before=steady(settle))


def test_cancel_confirmation(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("c")
        await pilot.pause(0.2)

    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(run_before))


def test_verify_checklist(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("v")
        await wait_until(pilot, lambda: len(pilot.app.screen_stack) == 2, "the checklist")

    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(run_before))


def test_help(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.2)

    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(run_before))


async def _open_compose(pilot: Pilot[None]) -> None:
    from ddp_tui.tui.screens.compose import ComposeScreen

    await settle(pilot)
    await pilot.press("n")
    await wait_until(
        pilot,
        lambda: isinstance(pilot.app.screen, ComposeScreen) and pilot.app.screen.script is not None,
        "the script preview",
    )


def test_compose(snap_compare: Any) -> None:
    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(_open_compose))


def test_compose_inline_errors(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await _open_compose(pilot)
        screen = pilot.app.screen
        # The partition "debug" has 2 GPUs per node and 3 nodes: ask for more.
        screen.query_one("#f-gpus_per_node", Input).value = "8"
        screen.query_one("#f-nodes", Input).value = "zero"
        screen.query_one("#f-time_limit", Input).value = "2 hours"
        await pilot.press("ctrl+s")
        # The partition's limit comes from the cluster-aware pass of the preview worker.
        await wait_until(pilot, lambda: "gpus_per_node" in screen.errors, "the partition limit")
        await wait_until(pilot, lambda: not screen.preview_pending, "the previews to finish")
        await asyncio.sleep(0.3)
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()  # focusing the field scrolls the form

    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(run_before))


def test_compose_for_a_users_script(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        from textual.widgets import Select

        await _open_compose(pilot)
        screen = pilot.app.screen
        # Entry: script shows the script's fields and hides the trainer's.
        screen.query_one("#f-entry", Select).value = "script"
        screen.query_one("#f-script", Input).value = "/home/user/proj/train.py"
        screen.query_one("#f-script_args", Input).value = "--epochs 3 --lr 0.1 --out 'runs/a b'"
        await pilot.pause()
        await wait_until(
            pilot, lambda: "ddp_tui.scriptrun" in (screen.script or ""), "the script's preview"
        )
        await wait_until(pilot, lambda: not screen.preview_pending, "the previews to finish")
        await pilot.pause()

    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(run_before))


def test_sweep_modal(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await _open_compose(pilot)
        await pilot.press("ctrl+g")
        await pilot.pause(0.2)

    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(run_before))


async def _open_detail(pilot: Pilot[None]) -> None:
    from ddp_tui.tui.logview import LogPane
    from ddp_tui.tui.screens.detail import DetailScreen

    await settle(pilot)
    await pilot.press("enter")
    await wait_until(
        pilot,
        lambda: isinstance(pilot.app.screen, DetailScreen) and bool(pilot.app.screen.metrics),
        "the run's metrics",
    )
    pane = pilot.app.screen.query_one(LogPane)
    await wait_until(pilot, lambda: len(pane.view("out").lines) == 10, "the log lines")


def test_detail_logs(snap_compare: Any) -> None:
    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(_open_detail))


def test_detail_metrics_and_plots(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await _open_detail(pilot)
        await pilot.press("2")
        await pilot.pause(0.2)

    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(run_before))


def test_detail_checks(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await _open_detail(pilot)
        await pilot.press("3")
        await wait_until(pilot, lambda: bool(pilot.app.screen.checks), "the checklist")

    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(run_before))


def test_detail_resources(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await _open_detail(pilot)
        await pilot.press("4")
        await pilot.pause(0.2)

    # Two nodes, three GPUs, n2's idle for five minutes: flagged (the run is running).
    fake = FakeCluster(telemetry=resource_view(telemetry_lines(), state="RUNNING"))
    assert snap_compare(fake_app(fake), terminal_size=SIZE, run_before=steady(run_before))


def test_detail_of_a_failed_run(snap_compare: Any) -> None:
    runs = sample_runs()
    failed = next(r for r in runs if r.state is JobState.FAILED)
    runs = [failed] + [r for r in runs if r is not failed]

    async def run_before(pilot: Pilot[None]) -> None:
        await _open_detail(pilot)

    fake = FakeCluster(runs=[replace(r, progress=None) for r in runs])
    assert snap_compare(fake_app(fake), terminal_size=SIZE, run_before=steady(run_before))


def test_jobs_with_reasons(snap_compare: Any) -> None:
    # Pending in words, a stalled run marked (and counted in the header), a diagnosed failure.
    fake = FakeCluster(runs=diagnosed_runs())
    assert snap_compare(fake_app(fake), terminal_size=SIZE, run_before=steady(settle))


def _first(state: JobState, runs: list[Any]) -> list[Any]:
    """``runs`` with the first run in ``state`` moved to the top (Jobs opens the top row)."""
    first = next(r for r in runs if r.state is state)
    return [first] + [r for r in runs if r is not first]


def test_detail_with_a_diagnosis(snap_compare: Any) -> None:
    runs = [replace(r, progress=None) for r in _first(JobState.FAILED, diagnosed_runs())]

    async def run_before(pilot: Pilot[None]) -> None:
        from ddp_tui.tui.logview import LogPane

        await _open_detail(pilot)
        pane = pilot.app.screen.query_one(LogPane)
        await wait_until(pilot, lambda: len(pane.view("err").lines) == 5, "the .err lines")
        await pilot.press("g")  # the evidence line, highlighted in the .err tab
        await pilot.pause(0.2)

    fake = FakeCluster(runs=runs, err_lines=MISSING_TORCH_ERR)
    assert snap_compare(fake_app(fake), terminal_size=SIZE, run_before=steady(run_before))


def test_detail_of_a_stalled_run(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await _open_detail(pilot)
        await wait_until(pilot, lambda: bool(pilot.app.screen.panel.heartbeats), "heartbeats")

    fake = FakeCluster(
        runs=_first(JobState.RUNNING, diagnosed_runs()), heartbeats=HEARTBEATS, stall=STALL
    )
    assert snap_compare(fake_app(fake), terminal_size=SIZE, run_before=steady(run_before))


def test_detail_of_a_pending_run_with_why_it_waits(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await _open_detail(pilot)
        await pilot.press("t")
        await wait_until(pilot, lambda: pilot.app.screen.panel.wait is not None, "why it waits")

    runs = _first(JobState.PENDING, diagnosed_runs())
    pending = next(r for r in runs if r.state is JobState.PENDING)
    # FAKE: the scheduler's account (a real one: tests/integration/test_why_slurm.py).
    wait = replace(
        sample_wait(pending.job_id or "", pending.run_id),
        estimated_start="2023-11-15T01:00:00",
        unavailable=(),
    )
    fake = FakeCluster(runs=runs, waits={pending.run_id: wait})
    assert snap_compare(fake_app(fake), terminal_size=SIZE, run_before=steady(run_before))


def test_compare(snap_compare: Any) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        from ddp_tui.tui.screens.compare import CompareScreen

        await settle(pilot)
        await pilot.press("s")
        await wait_until(
            pilot,
            lambda: isinstance(pilot.app.screen, CompareScreen) and bool(pilot.app.screen.rows),
            "the comparison",
        )
        screen = pilot.app.screen
        await wait_until(pilot, lambda: screen.advice is not None, "the Advice panel")

    assert snap_compare(fake_app(), terminal_size=SIZE, run_before=steady(run_before))


def test_host_key_prompt(snap_compare: Any) -> None:
    from ddp_tui.tui.app import DdpTuiApp
    from ddp_tui.tui.modals import HostKeyModal

    def factory(prompter: Any) -> FakeCluster:
        prompter.confirm_host_key(
            "login.example.org",
            22,
            "ssh-ed25519",
            "SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8",
        )
        return FakeCluster()

    async def run_before(pilot: Pilot[None]) -> None:
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, HostKeyModal), "the prompt")

    app = DdpTuiApp(factory, clock=lambda: 1_700_000_000.0)
    assert snap_compare(app, terminal_size=SIZE, run_before=steady(run_before))
