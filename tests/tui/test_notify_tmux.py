"""Exactly one notification per run end, with two apps, `ddp-tui watch` and CLI commands all
refreshing the same runs at once (the installed `ddp-tui`, real terminals in tmux, the
local scheduler, real jobs)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.remote.backends.local import LocalScheduler
from tests.helpers.hold import Hold
from tests.tui.test_tmux import DDP_TUI, Terminal

pytestmark = [
    pytest.mark.torch,  # a script's run starts under torchrun
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

#: notify_command: appends its stdin (one event) to a file, in one write.
APPEND = """\
import os, sys
data = sys.stdin.buffer.read()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, data)
"""
#: The user's script: sleeps, then exits with the code it is given.
SCRIPT = "import sys, time\ntime.sleep(float(sys.argv[1]))\nsys.exit(int(sys.argv[2]))\n"


class Setup:
    def __init__(self, tmp_path: Path, hold: Hold) -> None:
        self.tmp = tmp_path
        self.events = tmp_path / "events.jsonl"
        (tmp_path / "append.py").write_text(APPEND)
        (tmp_path / "proj").mkdir()
        (tmp_path / "proj" / "job.py").write_text(SCRIPT)
        command = shlex.join([sys.executable, str(tmp_path / "append.py"), str(self.events)])
        self.config = tmp_path / "config.toml"
        # Every job waits on the hold (its setup line) until every process is watching.
        self.config.write_text(
            f"[profiles.t]\nruns_root = {json.dumps(str(tmp_path / 'runs'))}\n"
            'scheduler = "local"\npoll_interval_sec = 2\nlocal_max_concurrent = 4\n'
            f"env_setup = [{json.dumps(hold.wait_line())}]\n"
            f'notify_command = {json.dumps(command)}\ndesktop_notify = "osc9"\n'
        )
        self.env = f"DDP_TUI_CONFIG={self.config} XDG_STATE_HOME={tmp_path / 'state'}"

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        env["DDP_TUI_CONFIG"] = str(self.config)
        env["XDG_STATE_HOME"] = str(self.tmp / "state")
        res = subprocess.run(
            [str(DDP_TUI), "--profile", "t", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=self.tmp,
            timeout=120,
        )
        assert not check or res.returncode == 0, res.stderr
        return res

    def submit(self, *args: str) -> list[tuple[str, str]]:
        out = self.cli(
            "submit", "--entry", "script", "--script", "job.py", "--project-dir", "proj",
            "--observe", "off", "--cpus-per-task", "1", "--skip-python-check", *args,
        ).stdout  # fmt: skip
        return [(line.split("\t")[0], line.split("\t")[1]) for line in out.splitlines()]

    def lines(self) -> list[dict[str, Any]]:
        if not self.events.exists():
            return []
        return [json.loads(x) for x in self.events.read_text().splitlines() if x.strip()]


@pytest.fixture
def setup(tmp_path: Path, hold: Hold) -> Iterator[Setup]:
    s = Setup(tmp_path, hold)
    yield s
    hold.release()
    state = tmp_path / "state" / "ddp-tui" / "local"
    if state.exists():
        scheduler = LocalScheduler.from_state_dir(state)
        for job in scheduler.list_jobs():
            if job.state.is_active:
                scheduler.cancel(job.job_id)


def test_each_end_is_notified_exactly_once_by_two_apps_watch_and_the_cli(
    setup: Setup, hold: Hold
) -> None:
    swept = setup.submit("--name", "grp", "--script-args", "0 0", "--sweep", "seed=1,2")
    failing = setup.submit("--name", "bad", "--script-args", "0 3")
    runs = swept + failing
    assert len(runs) == 3
    terminals = [Terminal(f"env {setup.env} {DDP_TUI} --profile t") for _ in range(2)]
    terminals.append(
        Terminal(
            f"sh -c 'env {setup.env} {DDP_TUI} --profile t watch; echo WATCH-EXIT=$?; sleep 600'"
        )
    )
    try:
        apps, watcher = terminals[:2], terminals[2]
        for app in apps:
            app.wait_text("3 runs · 3 active", 90)  # the sweep's two are folded in one row
        watcher.wait_for(lambda s: s.count("RUNNING") >= 3, "watch following three runs", 60)
        hold.release()  # all three jobs end at once, while every process refreshes
        deadline = time.monotonic() + 60
        while len(setup.lines()) < 4:
            setup.cli("ls")  # and the CLI refreshes too, all along
            assert time.monotonic() < deadline, setup.lines()
        screen = watcher.wait_text("WATCH-EXIT=", 60)
        assert "WATCH-EXIT=1" in screen, screen  # one run failed
        for app in apps:
            app.wait_text("3 runs · 0 active", 30)
        # Every process has seen every end: whatever any of them would still send, it
        # would have sent within a few refreshes (2 s each).
        for _ in range(4):
            setup.cli("ls")
            time.sleep(1)
    finally:
        for t in terminals:
            t.kill()
    events = setup.lines()
    ends = sorted((e["run_id"], e["job_id"], e["state"]) for e in events if e["event"] == "run_end")
    expected = [(run, job, "COMPLETED") for run, job in swept]
    expected += [(run, job, "FAILED") for run, job in failing]
    assert ends == sorted(expected), events
    groups = [e for e in events if e["event"] == "group_finished"]
    assert len(groups) == 1, events
    assert sorted(groups[0]["runs"]) == sorted(r for r, _ in swept)
    assert len(events) == 4, events
    bad = next(e for e in events if e["state"] == "FAILED")
    assert bad["exit_code"] != 0 and bad["name"] == "bad" and bad["elapsed_sec"] is not None
    # watch on runs already ended: at once, with their worst end.
    assert setup.cli("watch", swept[0][0]).returncode == 0
    assert setup.cli("watch", failing[0][0], check=False).returncode == 1
