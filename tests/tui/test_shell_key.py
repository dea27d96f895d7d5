"""The shell key's flow in the app, with the snapshot tests' fake cluster: the chooser of a
2-node job's nodes, the plan for the chosen one, and what the user hears when the terminal
cannot be handed over (the headless driver cannot suspend). The real terminal, Slurm and
shell are tests/tui/test_shell_tmux.py's."""

from __future__ import annotations

from ddp_tui.tui.screens.detail import DetailScreen
from ddp_tui.tui.shell_launch import NodeChooser
from tests.tui.conftest import SIZE, fake_app, wait_until
from tests.tui.drive import open_named
from tests.tui.fakes import FakeCluster


async def test_fake_shell_key_offers_the_nodes_and_says_why_no_shell_opened() -> None:
    fake = FakeCluster()
    app = fake_app(fake)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_named(pilot, "mnist-cnn")  # RUNNING on n1 and n2
        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, NodeChooser), "the node chooser")
        await pilot.press("down", "enter")
        chosen = ("shell_command", (screen.run_id, "n2"))
        await wait_until(pilot, lambda: chosen in fake.calls, "the plan for n2")
        await wait_until(
            pilot,
            lambda: any("cannot hand itself" in n.message for n in app._notifications),
            "the toast",
        )
        assert not [c for c in fake.calls if c[0] == "open_shell"]
        assert app.screen is screen and isinstance(screen, DetailScreen)

        await pilot.press("s")  # escape in the chooser: no shell, no toast
        await wait_until(pilot, lambda: isinstance(app.screen, NodeChooser), "the chooser again")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen, "Run detail again")
        assert [c for c in fake.calls if c[0] == "shell_command"][-1][1] == (screen.run_id, None)
