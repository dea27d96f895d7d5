"""Run detail says what an ended run's job used and what to ask for next time (the Checks
tab), and ``z`` edits a copy right-sized: Compose with the suggestion filled in. On the fake
facade, whose accounting is FAKE with the test cluster's own numbers
(tests/tui/fakes/data.py: ``sample_accounting``); the real report is computed from it."""

from __future__ import annotations

from dataclasses import replace

from ddp_tui.remote.backends.states import JobState
from ddp_tui.tui.screens.compose import ComposeScreen
from ddp_tui.tui.screens.detail import DetailScreen
from tests.tui.conftest import SIZE, fake_app, wait_until
from tests.tui.drive import open_named
from tests.tui.fakes import FakeCluster, sample_runs


async def test_an_ended_run_shows_its_usage_and_z_composes_it_right_sized() -> None:
    # A completed run: one that was cancelled gets no suggestion (its peak says little).
    runs = [
        replace(r, state=JobState.COMPLETED) if r.state is JobState.CANCELLED else r
        for r in sample_runs()
    ]
    ended = next(r for r in runs if r.name == "old-cancel")
    fake = FakeCluster(runs=runs)
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_named(pilot, ended.name)
        assert isinstance(screen, DetailScreen)
        await wait_until(pilot, lambda: screen.usage is not None, "the usage report")
        assert ("usage", ended.run_id) in fake.calls
        report = screen.usage
        assert report is not None
        text = str(screen.query_one("#usage").render())
        assert "CPU efficiency" in text and "next time:" in text
        assert "z edits a copy right-sized" in text
        changes = report.suggestion.spec_changes()
        assert "mem" in changes  # 210 MiB used of 4,000 MiB asked per node
        await pilot.press("z")
        await wait_until(pilot, lambda: isinstance(app.screen, ComposeScreen), "Compose")
        compose = app.screen
        assert isinstance(compose, ComposeScreen)
        assert compose.initial.mem == changes["mem"]
        assert compose.initial.nodes == ended.spec.nodes  # the rest is the run's own
        assert compose.title_text.startswith(f"Right-size {ended.name}")


async def test_a_running_run_asks_nothing_and_offers_no_right_sizing() -> None:
    runs = sample_runs()
    running = next(r for r in runs if r.state is JobState.RUNNING)
    fake = FakeCluster(runs=runs)
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_named(pilot, running.name)
        await pilot.press("z")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and screen.usage is None
        assert not any(call == "usage" for call, _ in fake.calls)
