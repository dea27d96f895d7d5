"""A shell where the job runs, on a real terminal (a pty the test drives like a user):
over SSH against the real OpenSSH server (the pty bridge), and `ddp-tui shell` on the real
local scheduler. Each checks what the user sees, the exit status that comes back, and that
the terminal's mode is as it was."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.live.shells import shell_argv
from tests.fixtures.sshd import SshEnv
from tests.helpers.hold import Hold
from tests.helpers.pty_session import PtySession
from tests.integration.story import tiny_spec

REPO = Path(__file__).resolve().parents[2]
DDP_TUI = Path(sys.executable).parent / "ddp-tui"


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A run directory with an odd name that the sshd test user may enter."""
    path = Path(tempfile.mkdtemp(prefix="ddp-tui shell's run ", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.ssh
def test_a_shell_over_ssh_is_a_pty_of_the_users_terminal(
    sshd_env: SshEnv, shared_dir: Path
) -> None:
    env = sshd_env
    client = env.workdir()
    config = client / "config"
    config.write_text(env.host_block("target", env.target))
    known = env.known_hosts(client / "known_hosts", (env.target, "main"))
    argv = [sys.executable, "-m", "tests.helpers.interactive_driver", "target"]
    argv += [str(config), str(known), "~", *shell_argv(str(shared_dir))]
    session = PtySession(
        argv, env={**os.environ, "TERM": "xterm-256color"}, cwd=str(REPO), columns=100, rows=30
    )
    try:
        session.expect("driver: connected")
        at, started = len(session.output), time.monotonic()
        # $((...)): the answer differs from the echo of the typed line.
        session.send('echo "A$((6*7))"; pwd; stty size; tty; echo "$TERM"\n')
        seen = session.expect(
            r"A42\r\n([^\r\n]*)\r\n(\d+ \d+)\r\n([^\r\n]*)\r\n(\S+)\r\n", after=at
        )
        print(f"\n[shell over ssh] first answer {time.monotonic() - started:.2f} s after the keys")
        assert seen[1] == str(shared_dir)  # started in the run directory, odd name and all
        assert seen[2] == "30 100"  # the remote pty has the local terminal's size
        assert seen[3].startswith("/dev/pts/")
        assert seen[4] == "xterm-256color"
        # While the bridge runs, the local terminal is raw: keys go through unread.
        assert not session.mode()[3] & (termios.ICANON | termios.ECHO)

        session.resize(120, 40)  # the driver hears SIGWINCH and sends a window-change
        deadline = time.monotonic() + 30
        while True:
            at = len(session.output)
            session.send('echo "S$((2*2))"; stty size\n')
            size = session.expect(r"S4\r\n(\d+ \d+)\r\n", after=at)[1]
            if size == "40 120" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert size == "40 120"

        session.send("exit 5\n")
        assert session.wait() == 5  # the remote exit status is the command's
        assert "driver: exit status 5" in session.text
        assert session.mode() == session.mode_before  # cooked again, as it was
    finally:
        session.close()


@pytest.mark.torch
def test_the_local_scheduler_shell_opens_in_the_run_directory(tmp_path: Path, hold: Hold) -> None:
    """`ddp-tui shell RUN` on the local scheduler: a shell here, in the run directory."""
    runs = tmp_path / "runs"  # run directories are plain names (they go on #SBATCH lines)
    cluster = Cluster.open(Profile(scheduler="local", runs_root=str(runs)))
    view = cluster.submit(cluster.plan(hold.running(tiny_spec(name="shell"))))
    argv = [str(DDP_TUI), "--scheduler", "local", "--runs-root", str(runs), "shell", view.run_id]
    session = PtySession(argv, env={**os.environ, "SHELL": "/bin/sh", "TERM": "xterm"})
    try:
        session.expect("Type exit to return to ddp-tui")
        at = len(session.output)
        session.send('echo "P$((1+1))"; pwd\n')
        assert session.expect(r"P2\r\n([^\r\n]*)\r\n", after=at)[1] == view.run_dir
        session.send("exit 3\n")
        assert session.wait() == 3  # `ddp-tui shell` exits as the shell did
        assert session.mode() == session.mode_before
    finally:
        session.close()
        cluster.cancel(view.run_id)
        cluster.close()
