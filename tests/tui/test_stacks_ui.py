"""The stacks key of Run detail (docs/stacks.md), on the fake facade: its stacks are two
ranks' dumps written in faulthandler's format (tests/tui/fakes.py), since a hung job's real
stacks cannot be held still for a screen test; the real taking is in
tests/integration/test_stacks_local.py."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from ddp_tui.tui.diagnosis_panel import DiagnosisPanel
from ddp_tui.tui.stacks_view import StacksScreen
from tests.tui.conftest import SIZE, fake_app, wait_until
from tests.tui.drive import open_named
from tests.tui.fakes import HEARTBEATS, STALL, FakeCluster, diagnosed_runs
from tests.tui.test_diagnosis_ui import _run


async def test_fake_k_on_a_stalled_run_shows_every_ranks_stack_and_who_is_behind() -> None:
    from ddp_tui.remote.backends.states import JobState

    fake = FakeCluster(runs=diagnosed_runs(), heartbeats=HEARTBEATS, stall=STALL)
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_named(pilot, "mnist-cnn")
        panel = screen.query_one(DiagnosisPanel)
        await wait_until(pilot, lambda: "Stalled" in str(panel.render()), "the stall")
        assert "k shows where each rank waits" in str(panel.render())
        await pilot.press("k")
        await wait_until(pilot, lambda: isinstance(app.screen, StacksScreen), "the stacks")
        assert ("stacks", _run(JobState.RUNNING).run_id) in fake.calls
        modal = app.screen
        groups = str(modal.query_one("#stack-groups", Static).render())
        assert "rank 0: in all_reduce at distributed_c10d.py:2501" in groups
        assert "rank 1: in slow_step at train.py:12" in groups
        table = modal.query_one(DataTable)
        first = table.get_row_at(0)
        assert (first[0], first[2], first[3]) == ("1", "yes", "epoch 1 step 3")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen, "back in Run detail")
