"""The one owner of cluster I/O: every facade call on one thread, answers to the asker.

These run the real app on the snapshot tests' fake facade (its fixed data is enough here:
what is checked is who calls the facade and where the answers go, not what they hold).
"""

from __future__ import annotations

import threading
from typing import Any

from ddp_tui.tui.cluster_io import FOLLOW_IDLE_INTERVAL, FOLLOW_MAX_BACKOFF, follow_delay
from ddp_tui.tui.messages import PreviewReady
from tests.tui.conftest import SIZE, fake_app, settle, wait_until
from tests.tui.fakes import BASE, FakeCluster


class _ThreadRecorder:
    """The fake facade, recording the thread of every call and any two calls that overlap."""

    def __init__(self, fake: FakeCluster) -> None:
        self._fake = fake
        self._lock = threading.Lock()
        self._in_call = 0
        self.calls: list[tuple[str, int]] = []  # (method, thread)
        self.overlaps = 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._fake, name)
        if not callable(value) or name in ("default_spec",):  # pure: any thread may ask
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self._in_call += 1
                self.overlaps += self._in_call > 1
                self.calls.append((name, threading.get_ident()))
            try:
                return value(*args, **kwargs)
            finally:
                with self._lock:
                    self._in_call -= 1

        return call


async def test_every_facade_call_runs_on_one_thread_and_answers_its_asker() -> None:
    from ddp_tui.tui.modals import ChecksModal
    from ddp_tui.tui.screens.compare import CompareScreen
    from ddp_tui.tui.screens.compose import ComposeScreen
    from ddp_tui.tui.screens.detail import DetailScreen
    from ddp_tui.tui.screens.jobs import JobsScreen

    recorder = _ThreadRecorder(FakeCluster())
    app = fake_app(recorder)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # Jobs asks for a checklist: it comes back to Jobs, which opens the modal.
        await pilot.press("v")
        await wait_until(pilot, lambda: isinstance(app.screen, ChecksModal), "the checklist")
        await pilot.press("escape")
        # Run detail follows its run: the owner posts the detail to that screen.
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail")
        detail = app.screen
        assert isinstance(detail, DetailScreen)
        await wait_until(pilot, lambda: bool(detail.metrics), "the followed run's metrics")
        assert app.io is not None and app.io.followed == detail.run_id
        await pilot.press("3")
        await wait_until(pilot, lambda: bool(detail.checks), "the detail's checklist")
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, JobsScreen), "back to Jobs")
        assert app.io.followed is None  # unregistered when the screen closed
        # Compose plans its preview; Compare computes its table.
        await pilot.press("n")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, ComposeScreen) and app.screen.script is not None,
            "the preview",
        )
        await pilot.press("escape", "s")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, CompareScreen) and bool(app.screen.rows),
            "the comparison",
        )
    # partitions() is the connecting thread's, before it hands the facade over.
    owned = [(name, thread) for name, thread in recorder.calls if name != "partitions"]
    assert {"refresh", "follow", "verify", "plan", "compare"} <= {name for name, _ in owned}
    assert len({thread for _, thread in owned}) == 1, "facade calls came from several threads"
    assert recorder.overlaps == 0


async def test_a_stale_preview_never_replaces_a_newer_one() -> None:
    from ddp_tui.tui.screens.compose import ComposeScreen

    fake = FakeCluster()
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("n")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, ComposeScreen) and not app.screen.preview_pending,
            "the first preview",
        )
        screen = app.screen
        assert isinstance(screen, ComposeScreen)
        form = screen.form_values()
        older = fake.plan(BASE.replace(name="older"))
        newer = fake.plan(BASE.replace(name="newer"))
        seq = screen._preview_seq
        # Answers can come back out of order: the newer form's plan first.
        screen._preview_ready(PreviewReady(seq + 2, newer, newer.errors, form))
        screen._preview_ready(PreviewReady(seq + 1, older, older.errors, form))
        assert screen.script == newer.script


def test_follow_pace_backs_off_and_slows_once_the_run_ended() -> None:
    assert follow_delay(1.0, 0, False) == 1.0
    assert follow_delay(1.0, 0, True) == FOLLOW_IDLE_INTERVAL
    assert follow_delay(1.0, 2, False) == 4.0
    assert follow_delay(1.0, 20, False) == FOLLOW_MAX_BACKOFF
