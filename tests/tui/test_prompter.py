"""SSH questions asked from the connecting worker thread become modals, answered by keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import Static

from ddp_tui.config import Profile
from ddp_tui.remote.cluster import Cluster
from ddp_tui.tui.app import DdpTuiApp
from ddp_tui.tui.modals import HostKeyModal, PromptModal
from tests.tui.conftest import SIZE, wait_until

FINGERPRINT = "SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8"


def local_cluster(tmp_path: Path) -> Cluster:
    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))
    return Cluster.open(profile, local_state_dir=str(tmp_path / "state"))


async def test_host_key_two_factor_and_passphrase_prompts(tmp_path: Path) -> None:
    answers: dict[str, Any] = {}

    def factory(prompter: Any) -> Cluster:
        # What the SSH layer asks while it connects, in its order.
        answers["trusted"] = prompter.confirm_host_key(
            "login.example.org", 2222, "ssh-ed25519", FINGERPRINT
        )
        answers["codes"] = prompter.keyboard_interactive(
            "Duo two-factor", "Enter a passcode", [("Passcode: ", False), ("Remember? ", True)]
        )
        answers["secret"] = prompter.ask_secret("Key passphrase", "Passphrase for id_ed25519:")
        return local_cluster(tmp_path)

    app = DdpTuiApp(factory)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, HostKeyModal), "the host key")
        shown = str(app.screen.query_one("#fingerprint", Static).render())
        assert shown == FINGERPRINT
        assert "[login.example.org]:2222" in str(app.screen.query_one(Static).render())
        await pilot.press("shift+tab", "enter")  # Reject has focus; Trust is before it
        await wait_until(pilot, lambda: isinstance(app.screen, PromptModal), "the 2FA prompt")
        await pilot.press(*"123456", "enter", *"yes", "enter")
        await wait_until(
            pilot,
            lambda: (
                isinstance(app.screen, PromptModal) and app.screen.title_text == "Key passphrase"
            ),
            "the passphrase prompt",
        )
        await pilot.press(*"s3cret", "enter")
        await wait_until(pilot, lambda: app.snapshot is not None, "connected")
        assert app.status.connection == "ok"
    assert answers == {"trusted": True, "codes": ["123456", "yes"], "secret": "s3cret"}


async def test_rejected_host_key_shows_in_header_and_is_not_retried(tmp_path: Path) -> None:
    asked: list[bool] = []

    def factory(prompter: Any) -> Cluster:
        trusted = prompter.confirm_host_key("login.example.org", 22, "ssh-ed25519", FINGERPRINT)
        asked.append(trusted)
        if not trusted:
            raise ConnectionError("Host key for login.example.org was not accepted")
        return local_cluster(tmp_path)

    app = DdpTuiApp(factory)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, HostKeyModal), "the host key")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.status.error is not None, "the error in the header")
        assert app.status.connection == "not connected"
        assert "not accepted" in (app.status.error or "")
        await pilot.pause(2.5)
        assert asked == [False]  # declined: no prompt loop
        assert app.cluster is None
        await pilot.press("n")  # compose without a connection: a warning, not a crash
        await pilot.press("f5")  # reconnect asks again
        await wait_until(pilot, lambda: isinstance(app.screen, HostKeyModal), "asked again")
        await pilot.press("shift+tab", "enter")
        await wait_until(pilot, lambda: app.snapshot is not None, "connected")
    assert asked == [False, True]
