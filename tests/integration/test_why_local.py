"""Why a job waits on the local scheduler: it answers simply, from its own reasons. Real
scheduler, real processes: with one slot, a job held running by a file keeps the second job
pending ("Resources") until the test cancels both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_tui.cli.entry import main
from ddp_tui.diagnosis.pending import WaitCategory
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.backends.states import JobState
from tests.remote.local_env import wait_for

HELD = """#!/bin/bash
while [ -e hold ]; do sleep 0.05; done
"""


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[LocalScheduler]:
    s = LocalScheduler(str(tmp_path / "state"), max_running=1, cancel_grace_sec=5.0)
    yield s
    for job in s.list_jobs():
        if not job.state.is_terminal:
            s.cancel(job.job_id)


def test_a_local_job_waiting_for_the_one_slot_waits_for_resources(
    scheduler: LocalScheduler,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "job.sh").write_text(HELD)
    (tmp_path / "hold").touch()
    first = scheduler.submit(str(tmp_path / "job.sh"), str(tmp_path))
    wait_for(lambda: scheduler.poll([first])[first].state is JobState.RUNNING)
    second = scheduler.submit(str(tmp_path / "job.sh"), str(tmp_path))

    w = scheduler.why_waiting(second)
    assert (w.state, w.reason, w.category) == ("PENDING", "Resources", WaitCategory.RESOURCES)
    assert "local_max_concurrent" in w.advice and not w.needs_action
    assert w.scheduler == "local" and w.unavailable == () and w.priority == ()
    running = scheduler.why_waiting(first)
    assert (running.state, running.category) == ("RUNNING", None)
    unknown = scheduler.why_waiting("999")
    assert unknown.state == "UNKNOWN" and unknown.unavailable[0].part == "job"

    # The CLI on the same state directory, with the same one slot (a second slot would let
    # its poll start the job).
    config = tmp_path / "config.toml"
    config.write_text(
        f'[profiles.local]\nscheduler = "local"\nlocal_max_concurrent = 1\n'
        f'local_state_dir = "{tmp_path / "state"}"\n'
    )
    monkeypatch.setenv("DDP_TUI_CONFIG", str(config))
    assert main(["--runs-root", str(tmp_path / "runs"), "why", second]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        f"job {second}: PENDING",
        "waits for: resources",
        "reason: waiting for free nodes [Resources]",
    ]
    assert scheduler.poll([second])[second].state is JobState.PENDING
