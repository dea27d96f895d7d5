"""The installed `ddp-tui` in a real terminal (tmux): submit a run, see it, cancel it by keys."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ddp_tui.remote.backends.local import LocalScheduler
from tests.helpers.hold import Hold

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

DDP_TUI = Path(sys.executable).parent / "ddp-tui"


class Terminal:
    """One tmux server of our own, with one 120x40 session running a command."""

    def __init__(self, command: str) -> None:
        self.server = f"ddp-tui-test-{uuid.uuid4().hex[:8]}"
        # Size the window first, then start the app in it: a detached session can be
        # resized after its command starts, and the app would draw at the old size.
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "app", "-x", "120", "-y", "40")
        self.tmux("set-option", "-t", "app", "window-size", "manual")
        self.tmux("resize-window", "-t", "app", "-x", "120", "-y", "40")
        # COLUMNS/LINES leak in from the test process and would override the real size.
        self.tmux(
            "respawn-pane", "-k", "-t", "app",
            f"env -u COLUMNS -u LINES TERM=xterm-256color {command}",
        )  # fmt: skip

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.server, *args], capture_output=True, text=True, timeout=30
        )
        if done.returncode != 0:
            raise AssertionError(f"tmux {args[0]} failed: {done.stderr.strip()}")
        return done.stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "app", *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "app", "-l", text)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "app")

    def wait_for(self, predicate: Callable[[str], bool], what: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                size = self.tmux("display", "-p", "-t", "app", "#{pane_width}x#{pane_height}")
                raise AssertionError(
                    f"timed out waiting for {what}; the {size.strip()} screen:\n{text}"
                )
            time.sleep(0.25)

    def wait_text(self, needle: str, timeout: float = 60) -> str:
        return self.wait_for(lambda text: needle in text, repr(needle), timeout)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.server, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def terminal(tmp_path: Path, hold: Hold) -> Iterator[Terminal]:
    # The profile's setup line (the form starts with it) keeps every job of this test
    # RUNNING until it is cancelled (or the hold is released at the end).
    config = tmp_path / "config.toml"
    config.write_text(
        f'[profiles.t]\nruns_root = "{tmp_path / "runs"}"\nscheduler = "local"\n'
        f"poll_interval_sec = 2\nenv_setup = [{json.dumps(hold.wait_line())}]\n"
    )
    env = f"DDP_TUI_CONFIG={config} XDG_STATE_HOME={tmp_path / 'state'}"
    term = Terminal(f"env {env} {DDP_TUI} --profile t")
    try:
        yield term
    finally:
        term.kill()  # ends the app; local jobs outlive it by design, so cancel any left
        state = tmp_path / "state" / "ddp-tui" / "local"
        if state.exists():
            scheduler = LocalScheduler.from_state_dir(state)
            for job in scheduler.list_jobs():
                if job.state.is_active:
                    scheduler.cancel(job.job_id)


def row_of(screen: str, name: str) -> str:
    return next((line for line in screen.splitlines() if line.lstrip().startswith(name)), "")


def test_submit_see_and_cancel_by_keys(terminal: Terminal) -> None:
    terminal.wait_text("local scheduler", 30)
    terminal.wait_text("No runs yet")
    terminal.keys("n")
    terminal.wait_text("job.sbatch", 30)
    terminal.wait_text("Ready to submit", 30)
    terminal.keys("C-u")  # the name field has focus: clear it and type ours
    # ctrl+u runs as a binding action, which may land after keys sent right behind it.
    terminal.wait_for(lambda s: "letters, digits, _ . -" in row_of(s, "Name"), "a clear name")
    terminal.type("tmux-run")
    terminal.wait_text("--job-name=tmux-run", 15)  # the live preview follows the form
    terminal.keys("C-s")
    screen = terminal.wait_for(lambda s: "RUNNING" in row_of(s, "tmux-run"), "RUNNING", 60)
    assert "1x1" in row_of(screen, "tmux-run")
    terminal.keys("c")
    terminal.wait_text("Cancel tmux-run", 15)
    terminal.keys("y")
    screen = terminal.wait_for(lambda s: "CANCELLED" in row_of(s, "tmux-run"), "CANCELLED", 60)
    assert "Traceback" not in screen
    terminal.keys("q")
    terminal.wait_for(lambda s: "ddp-tui" not in s, "the app to exit", 15)
