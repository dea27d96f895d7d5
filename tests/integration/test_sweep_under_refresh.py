"""A sweep submitted while two other processes refresh: every member gets its one task.

A job array writes every member's intent, asks the scheduler once, then writes every
member's attempt line. Meanwhile any ``ddp-tui ls`` may list the runs, see intents without
answers, and resolve them as a dead submitter's: void them (the scheduler has no job yet) or
adopt the tasks (the array is queued, no attempt line yet). Neither may ever happen to a
submit in flight: the array holds every member's run lock from its intents to its attempt
lines, and a refresh leaves a locked run alone (docs/job-arrays.md).

Two real ``ddp-tui ls`` processes (the CLI, on the same runs root and the same local
scheduler) run in a loop while a six-member sweep is submitted as one job array on the real
local scheduler. The submit is held, by construction and without a sleep, at one of the two
moments a refresh could do harm, until each loop has made a whole pass there:

- ``before-sbatch``: the intents are written, the scheduler not asked yet;
- ``after-sbatch``: the scheduler queued the array, no member's attempt line is written yet.

The rounds take the moments in turn (each pass of ``ls`` is a fresh Python, about a second
on a busy machine: both moments in every round would double the file's time). Then every
member has one intent, one attempt line that answers it (its own task, not adopted), and no
void. Without the locks (the array path before the one submit transaction) a refresh at the
first moment voids all six intents, and one at the second adopts all six tasks a second time.

No trainer runs: the local scheduler's one slot is held by a sleeping blocker job for the
whole module, so the array's tasks stay PENDING, and each round cancels them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.spec import sweep_from_options
from tests.integration.story import tiny_spec

MEMBERS = 6
ROUNDS = 20
MOMENTS = ("before-sbatch", "after-sbatch")
#: Longest a hold waits for both loops' passes (each a fresh Python: about a second).
HOLD_SEC = 45.0


@dataclass(frozen=True)
class Rig:
    base: Path
    state: Path
    config: Path
    blocker: str


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    """A local scheduler with one slot, which a sleeping blocker holds for the module, and
    a profile for the CLI that uses that scheduler."""
    base = tmp_path_factory.mktemp("sweep-under-refresh")
    state = base / "state"
    config = base / "config.toml"
    config.write_text(
        f'[profiles.local]\nscheduler = "local"\nlocal_state_dir = "{state}"\n'
        "local_max_concurrent = 1\n"
    )
    scheduler = LocalScheduler(state, max_running=1)
    blocker_dir = base / "blocker"
    blocker_dir.mkdir()
    (blocker_dir / "job.sbatch").write_text("#!/bin/bash\nexec sleep 600\n")
    blocker = scheduler.submit(str(blocker_dir / "job.sbatch"), str(blocker_dir))
    deadline = time.monotonic() + 60
    while scheduler.poll([blocker])[blocker].state is not JobState.RUNNING:
        assert time.monotonic() < deadline, "the blocker never started"
        time.sleep(0.1)
    yield Rig(base, state, config, blocker)
    for job in scheduler.list_jobs():
        if job.state.is_active:
            scheduler.cancel(job.job_id)


@dataclass
class Refreshers:
    """Two loops, each running ``ddp-tui ls`` again and again, held to the windows the
    submit opens: each pass starts and ends inside one window, and :meth:`hold` returns
    once every loop has made a whole pass inside the window it opened."""

    argv: list[str]
    env: dict[str, str]
    loops: int = 2
    cond: threading.Condition = field(default_factory=threading.Condition)
    window: int = 0  # the window now open (0: none yet)
    open: bool = False
    stop: bool = False
    done: list[int] = field(default_factory=list)  # the last window each loop passed in
    outputs: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Refreshers:
        self.done = [0] * self.loops
        self.threads = [threading.Thread(target=self._loop, args=(i,)) for i in range(self.loops)]
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.cond:
            self.stop = True
            self.cond.notify_all()
        for t in self.threads:
            t.join(timeout=HOLD_SEC)

    def _loop(self, i: int) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.stop or (self.open and self.done[i] < self.window))
                if self.stop:
                    return
                window = self.window
            res = subprocess.run(
                self.argv, capture_output=True, text=True, env=self.env, timeout=HOLD_SEC
            )
            with self.cond:
                if res.returncode != 0 or "Traceback" in res.stderr:
                    self.failures.append(f"ls exited {res.returncode}: {res.stderr}")
                self.outputs.append(res.stdout)
                self.done[i] = window
                self.cond.notify_all()

    def hold(self) -> list[str]:
        """Open a window; return each loop's listing once each has passed inside it."""
        with self.cond:
            self.window += 1
            self.open = True
            self.outputs = []
            self.cond.notify_all()
            passed = self.cond.wait_for(
                lambda: self.failures or all(d >= self.window for d in self.done),
                timeout=HOLD_SEC,
            )
            self.open = False
            assert not self.failures, self.failures
            assert passed, f"the refresh loops made no pass in {HOLD_SEC:.0f} s"
            return list(self.outputs)


def _lines(run_dir: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in Path(run_dir, "jobs.jsonl").read_text().splitlines() if x]


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_a_sweep_submitted_under_two_refresh_loops_gets_one_task_per_member(
    rig: Rig, round_: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = rig.base / f"runs-{round_}"
    ex = LocalExecutor()
    scheduler = LocalScheduler(rig.state, max_running=1)
    cluster = Cluster(
        ex,
        scheduler,
        RunStore(ex, str(runs)),
        profile=Profile(scheduler="local"),
        location="local scheduler",
    )
    seeds = ",".join(str(s) for s in range(1, MEMBERS + 1))
    plan = cluster.plan_sweep(tiny_spec(name=f"r{round_}"), sweep_from_options([f"seed={seeds}"]))
    assert [len(a.members) for a in plan.arrays] == [MEMBERS], "one array of every member"
    run_ids = [p.run_id for p in plan.plans]
    argv = [sys.executable, "-m", "ddp_tui.cli", "--profile", "local", "--runs-root", str(runs)]
    env = {**os.environ, "DDP_TUI_CONFIG": str(rig.config), "XDG_STATE_HOME": str(rig.base)}
    moment = MOMENTS[round_ % len(MOMENTS)]
    held: list[list[str]] = []
    real_submit = scheduler.submit

    with Refreshers([*argv, "ls"], env) as loops:

        def submit_while_refreshed(script_path: str, work_dir: str) -> str:
            if moment == "before-sbatch":
                held.append(loops.hold())  # every intent written, nothing queued yet
            answer = real_submit(script_path, work_dir)
            if moment == "after-sbatch":
                held.append(loops.hold())  # the array queued, no attempt line yet
            return answer

        monkeypatch.setattr(scheduler, "submit", submit_while_refreshed)
        views = cluster.submit_sweep(plan)

    try:
        assert len(held) == 1, f"the submit was not held {moment}"
        for outputs in held:  # each pass listed every member, so it saw their intents
            assert len(outputs) == loops.loops
            assert all(r in out for out in outputs for r in run_ids), outputs
        master = str(views[0].job_id).partition("_")[0]
        for index, view in enumerate(views):
            lines = _lines(view.run_dir)
            intents = [r for r in lines if r.get("event") == "intent"]
            attempts = [r for r in lines if r.get("event") is None]
            voids = [r for r in lines if r.get("event") == "intent_void"]
            assert len(intents) == 1, lines
            assert [(a["job_id"], a["intent"]) for a in attempts] == [
                (f"{master}_{index}", intents[0]["token"])
            ], lines
            assert not any(a.get("adopted") for a in attempts), lines
            assert voids == [], lines
        tasks = scheduler.jobs_in_dir(plan.arrays[0].array_dir)
        assert sorted(tasks) == sorted(f"{master}_{i}" for i in range(MEMBERS))
    finally:
        for job in scheduler.list_jobs():
            if job.state.is_active and job.job_id != rig.blocker:
                scheduler.cancel(job.job_id)
