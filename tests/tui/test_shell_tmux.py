"""The shell key in a real terminal (tmux) on the real Slurm test cluster: a running 2-node
job, Run detail, `s`, the node chooser, a shell on the chosen node (its own hostname says
which), `exit`, and the app is back as it was."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import RunView
from tests.helpers.hold import Hold
from tests.integration.story import tiny_spec
from tests.tui.test_tmux import DDP_TUI, Terminal, row_of

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.torch,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

#: A prompt the test sets, so that "the shell is there" is one plain string on the screen.
PROMPT = "shell-test> "


@pytest.fixture
def held_run(slurm_cluster: Any, tmp_path: Path, hold: Hold) -> Iterator[tuple[Profile, RunView]]:
    """A 2-node job RUNNING by construction (its script waits on the hold file); cancelled
    at the end."""
    profile = Profile(scheduler="slurm", runs_root=str(tmp_path / "runs"), partition="debug")
    cluster = Cluster.open(profile)
    view = cluster.submit(cluster.plan(hold.running(tiny_spec(name="shelled", nodes=2))))
    try:
        deadline = time.monotonic() + 90
        while True:
            run = next(v for v in cluster.refresh().runs if v.run_id == view.run_id)
            if run.state is JobState.RUNNING:
                break
            assert time.monotonic() < deadline, f"the job did not start: {run.state}"
            time.sleep(0.5)
        yield profile, run
    finally:
        cluster.cancel(view.run_id)
        cluster.close()


@pytest.fixture
def app_terminal(
    slurm_cluster: Any, tmp_path: Path, held_run: tuple[Profile, RunView]
) -> Iterator[Terminal]:
    profile, _ = held_run
    config = tmp_path / "config.toml"
    config.write_text(
        f'[profiles.t]\nruns_root = {json.dumps(profile.runs_root)}\nscheduler = "slurm"\n'
        'partition = "debug"\npoll_interval_sec = 2\n'
    )
    env = " ".join(
        [
            f"DDP_TUI_CONFIG={config}",
            f"XDG_STATE_HOME={tmp_path / 'state'}",
            f"SLURM_CONF={slurm_cluster.conf}",
            # The login shell the node runs, and a prompt the test can wait for.
            "SHELL=/bin/sh",
            f"PS1='{PROMPT}'",
        ]
    )
    term = Terminal(f"env {env} {DDP_TUI} --profile t")
    try:
        yield term
    finally:
        term.kill()


def _prompt(terminal: Terminal, timeout: float) -> str:
    """The screen once the shell's prompt is its last line (polled finely: it is timed)."""
    deadline = time.monotonic() + timeout
    while True:
        screen = terminal.screen()
        if screen.rstrip().endswith(PROMPT.rstrip()):
            return screen
        assert time.monotonic() < deadline, f"no prompt; the screen:\n{screen}"
        time.sleep(0.01)


def test_the_shell_key_opens_a_shell_on_the_jobs_node_and_exit_returns(
    app_terminal: Terminal, held_run: tuple[Profile, RunView]
) -> None:
    terminal, (_, run) = app_terminal, held_run
    job = run.job_id
    terminal.wait_for(lambda s: "RUNNING" in row_of(s, "shelled"), "the running job", 60)
    terminal.keys("Enter")
    detail = terminal.wait_text("Resources", 30)  # Run detail's tab bar
    assert "shelled" in detail
    terminal.keys("3")  # the Checks tab: the app must come back to it
    terminal.wait_text("Accounting", 30)

    terminal.keys("s")  # two nodes: which one?
    terminal.wait_text(f"A shell on which node of job {job}?", 30)
    terminal.keys("Down")  # n2 (keys are taken in order: Enter picks it)
    started = time.monotonic()
    terminal.keys("Enter")
    # The app gives the terminal to the shell: one line says where, then the node's prompt.
    screen = _prompt(terminal, 30)
    print(f"\n[shell key] the node's prompt {time.monotonic() - started:.2f} s after the choice")
    said = re.sub(r"\s", "", screen)  # the line wraps at the pane's width
    assert f"ddp-tui:ashellonnoden2(2of2)ofjob{job},in{run.run_dir}." in said
    assert "Typeexittoreturntoddp-tui." in said
    terminal.type('hostname; echo "at $(basename "$PWD")"\n')
    screen = terminal.wait_for(lambda s: re.search(r"^at ", s, re.M) is not None, "hostname", 30)
    lines = screen.splitlines()
    answer = lines.index(f"at {Path(run.run_dir).name}")  # in the run directory
    assert lines[answer - 1] == "n2"  # the node's own hostname: the shell runs there

    terminal.type("exit\n")
    back = terminal.wait_text("Resources", 30)  # Run detail again, as it was
    assert "shelled" in back and PROMPT not in back
    assert "Accounting" in back  # on the tab it showed
    assert "Traceback" not in back
    terminal.keys("escape")
    terminal.wait_for(lambda s: "RUNNING" in row_of(s, "shelled"), "the jobs table", 30)
