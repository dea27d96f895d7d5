"""The app's delivery of the events its refresh claimed: a toast, the bell, the desktop
notification's escape sequence, and notify_command with the event on stdin.

The facade here is the FAKE one of the snapshot tests, made to hand out claimed events: what
the real facade claims, and that it claims each event once, is tested over real run
directories (tests/unit/test_notify.py) and with two real apps at once
(tests/tui/test_notify_tmux.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets._toast import Toast

from ddp_tui.config import Profile
from ddp_tui.notify_delivery import osc777
from ddp_tui.remote.model.events import RUN_END, NotifyEvent
from ddp_tui.remote.model.views import Snapshot
from ddp_tui.tui.app import DdpTuiApp
from tests.tui.conftest import SIZE, wait_until
from tests.tui.fakes import FakeCluster

EVENT = NotifyEvent(
    kind=RUN_END,
    claim="/runs/r/notified/12.end",
    name="bert;large",
    state="FAILED",
    time="2026-01-01T00:00:00+00:00",
    run_id="20260101-000000-bert-abcd",
    job_id="12",
    exit_code=1,
    diagnosis="CUDA out of memory",
    elapsed_sec=75.0,
)


class FakeClaimingCluster(FakeCluster):
    """FAKE: its first refresh hands out one claimed event, as the real facade's does."""

    def __init__(self) -> None:
        super().__init__()
        self.handed = False

    def refresh(self, follow: str | None = None) -> Snapshot:
        snap = super().refresh(follow)
        if self.handed:
            return snap
        self.handed = True
        return Snapshot(
            taken_at=snap.taken_at,
            runs=snap.runs,
            location=snap.location,
            scheduler_version=snap.scheduler_version,
            connection=snap.connection,
            events=(EVENT,),
        )


@pytest.mark.asyncio
async def test_a_claimed_event_is_toasted_rung_and_sent(tmp_path: Path) -> None:
    got = tmp_path / "got.jsonl"
    profile = Profile(notify_command=f"cat >> {got}", desktop_notify="osc777")
    cluster = FakeClaimingCluster()
    app = DdpTuiApp(lambda prompter: cluster, profile=profile, refresh_interval=60)
    app.notifications.env = {}  # not under tmux, whatever runs the test
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_until(pilot, lambda: got.exists() and got.read_text().endswith("\n"), "send")
        await wait_until(pilot, lambda: bool(app.screen.query(Toast)), "the toast")
        toast = app.screen.query(Toast).first()
        assert "bert;large FAILED" in str(toast.render())
        assert app.notifications.written == [
            osc777("ddp-tui: bert;large FAILED", EVENT.body)
        ]  # ';' in the name cannot split the sequence's fields
        assert ";large" not in app.notifications.written[0]
    doc = json.loads(got.read_text())
    assert (doc["event"], doc["name"], doc["exit_code"]) == ("run_end", "bert;large", 1)
