"""Sweeps over any field, as one job array on the local scheduler: the real trainer, the
real scheduler, the installed ``ddp-tui`` where a user would type it.

Jobs that must still be running at some moment wait on a hold file (tests/helpers/hold.py),
so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ddp_tui.remote.submit.array_submit as array_submit
from ddp_tui.config import Profile
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.spec import sweep_from_options
from tests.helpers.hold import Hold
from tests.integration.story import tiny_spec, wait_state
from tests.integration.test_cli import LOCAL_PROFILE, SMALL, cli

GRID = ["--sweep", "lr=0.1,0.05,0.01", "--sweep", "batch_per_gpu=16,32"]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """ddp-tui as :func:`cli` runs it, with four local slots: then an array's ``%2`` is what
    holds the grid to two at once."""
    return cli(tmp_path, *args, config=LOCAL_PROFILE + "local_max_concurrent = 4\n")


def _ls(tmp_path: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = json.loads(_cli(tmp_path, "ls", "--json").stdout)
    return rows


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end before a start at the same time)."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_a_local_grid_runs_as_one_group_two_at_a_time_and_compares(tmp_path: Path) -> None:
    small = [a if a != "2" else "1" for a in SMALL]  # one epoch each
    res = _cli(tmp_path, "submit", *small, *GRID, "--max-concurrent", "2")
    lines = [ln.split("\t") for ln in res.stdout.splitlines()]
    assert len(lines) == 6, res.stdout
    assert "one job array of 6, at most 2 at once" in res.stderr
    master = lines[0][1].partition("_")[0]
    assert [ln[1] for ln in lines] == [f"{master}_{i}" for i in range(6)]
    assert lines[1][3] == "lr=0.1 batch_per_gpu=32"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        rows = _ls(tmp_path)
        if len(rows) == 6 and all(r["state"] in ("COMPLETED", "FAILED") for r in rows):
            break
        time.sleep(1.0)
    assert sorted(str(r["state"]) for r in rows) == ["COMPLETED"] * 6, rows
    assert len({r["group"] for r in rows}) == 1
    # The scheduler's own record of when each task started and ended.
    jobs = [
        json.loads(p.read_text())
        for p in (tmp_path / "state" / "ddp-tui" / "local" / "jobs").glob(f"{master}_*.json")
    ]
    assert len(jobs) == 6
    assert _max_overlap([(j["started_at"], j["ended_at"]) for j in jobs]) == 2
    out = _cli(tmp_path, "compare", lines[0][0], "--sort", "lr").stdout
    table = [ln for ln in out.split("# Scaling")[0].splitlines() if ln.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert "lr" in header and "batch_per_gpu" in header, out
    rows_md = [[c.strip() for c in ln.strip("|").split("|")] for ln in table[2:]]
    lrs = [float(r[header.index("lr")]) for r in rows_md]
    assert len(lrs) == 6 and lrs == sorted(lrs), out
    assert sum("best" in " ".join(r) for r in rows_md) == 1, out


def test_a_bad_sweep_value_is_refused_naming_its_field_and_writes_nothing(tmp_path: Path) -> None:
    res = cli(tmp_path, "submit", *SMALL, "--sweep", "lr=0.1,abc", check=False)
    assert res.returncode == 2
    assert "sweep[1] lr" in res.stderr and "abc" in res.stderr
    res = cli(tmp_path, "submit", *SMALL, *GRID, "--max-concurrent", "0", check=False)
    assert res.returncode == 2 and "max_concurrent: must be an integer of at least 1" in res.stderr
    assert not (tmp_path / "runs").exists()


def test_a_slurm_dry_run_of_the_grid_prints_one_array_script(tmp_path: Path) -> None:
    empty = tmp_path / "no-slurm"
    empty.mkdir()
    res = cli(
        tmp_path,
        "submit",
        "--dry-run",
        "--scheduler",
        "slurm",
        *SMALL,
        *GRID,
        "--max-concurrent",
        "2",
        path=str(empty),
    )
    assert res.stdout.count("#!/bin/bash") == 1
    assert "#SBATCH --array=0-5%2\n" in res.stdout
    assert res.stdout.count("/runs/") >= 6  # each member's run directory, one per task
    assert not (tmp_path / "runs").exists()


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Cluster]:
    ex = LocalExecutor()
    c = Cluster(
        ex,
        LocalScheduler(tmp_path / "state", max_running=4, cancel_grace_sec=5.0),
        RunStore(ex, str(tmp_path / "runs")),
        profile=Profile(scheduler="local"),
        location="local scheduler",
    )
    yield c
    for v in c.refresh().runs:
        if v.state.is_active:
            c.cancel(v.run_id)
    c.close()


def test_cancel_and_retry_act_on_one_member_of_the_array(local: Cluster, hold: Hold) -> None:
    spec = hold.running(tiny_spec(name="arr", epochs=1))
    plan = local.plan_sweep(spec, sweep_from_options(["lr=0.1,0.05,0.01"]), max_concurrent=2)
    views = local.submit_sweep(plan)
    first, second, third = (v.run_id for v in views)
    master = str(views[0].job_id).partition("_")[0]
    wait_state(local, first, JobState.RUNNING)
    wait_state(local, second, JobState.RUNNING)
    held = wait_state(local, third, JobState.PENDING)
    assert held.reason == "JobArrayTaskLimit"
    assert local.cancel(second) == [f"{master}_1"]
    wait_state(local, second, JobState.CANCELLED)
    # The freed slot goes to the third task; the first runs on.
    wait_state(local, third, JobState.RUNNING)
    assert wait_state(local, first, JobState.RUNNING).job_id == f"{master}_0"
    hold.release()
    for run_id in (first, third):
        assert wait_state(local, run_id, JobState.COMPLETED, JobState.FAILED).state is (
            JobState.COMPLETED
        )
    again = local.retry(second)
    assert again.job_id is not None and "_" not in again.job_id  # that member's own job
    assert wait_state(local, second, JobState.COMPLETED, JobState.FAILED).state is (
        JobState.COMPLETED
    )
    jobs = [a.job_id for a in wait_state(local, second, JobState.COMPLETED).attempts]
    assert jobs == [f"{master}_1", again.job_id]
    for run_id in (first, third):  # the others ran once, as their tasks
        assert [a.job_id for a in wait_state(local, run_id, JobState.COMPLETED).attempts] == [
            f"{master}_{0 if run_id == first else 2}"
        ]


def test_a_group_cancel_ends_the_whole_array_with_one_call(local: Cluster, hold: Hold) -> None:
    spec = hold.running(tiny_spec(name="grp", epochs=1))
    plan = local.plan_sweep(spec, sweep_from_options(["seed=1,2,3"]), max_concurrent=1)
    views = local.submit_sweep(plan)
    wait_state(local, views[0].run_id, JobState.RUNNING)
    # What the user submitted as one: its members share the sweep's id (the first member's
    # run id), which the Jobs row folds on and a group's cancel and retry accept.
    group = views[0].sweep
    assert group == views[0].run_id and {v.sweep for v in views} == {group}
    assert len({v.group for v in views}) == 1  # and compare as one group
    master = str(views[0].job_id).partition("_")[0]
    assert local.cancel_group(group) == [master]
    for v in views:
        assert wait_state(local, v.run_id, JobState.CANCELLED).state is JobState.CANCELLED
    hold.release()
    result = local.retry_group(group)
    assert sorted(result.retried) == sorted(v.run_id for v in views)
    for v in views:
        done = wait_state(local, v.run_id, JobState.COMPLETED, JobState.FAILED, timeout=300)
        assert done.state is JobState.COMPLETED
        # GPU-hours pay for both attempts: the cancelled task's recorded time (none for the
        # tasks cancelled while they waited), and this one.
        first = done.attempts[0].elapsed_sec
        assert first is not None and (first > 0) == (v is views[0])
        assert done.used_sec == pytest.approx(first + done.elapsed_sec)


def test_a_submit_killed_after_the_array_was_queued_is_adopted_not_doubled(
    local: Cluster, hold: Hold, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = hold.running(tiny_spec(name="kill", epochs=1))
    plan = local.plan_sweep(spec, sweep_from_options(["lr=0.1,0.05"]))

    def killed(*args: object, **kwargs: object) -> None:
        # A fake: the submitting process dies the instant the scheduler has answered,
        # before any member records its task (a kill -9 cannot be aimed that precisely).
        raise KeyboardInterrupt

    monkeypatch.setattr(array_submit, "attempt_record", killed)
    with pytest.raises(KeyboardInterrupt):
        local.submit_sweep(plan)
    monkeypatch.undo()
    run_ids = [p.run_id for p in plan.plans]
    for i, run_id in enumerate(run_ids):
        wait = time.monotonic() + 60
        while time.monotonic() < wait:
            v = next(v for v in local.refresh().runs if v.run_id == run_id)
            if v.attempts:
                break
            time.sleep(0.5)
        assert [a.job_id for a in v.attempts] == [f"1_{i}"]  # adopted: the one array's task
    scheduler = local.scheduler
    assert isinstance(scheduler, LocalScheduler)
    assert sorted(j.job_id for j in scheduler.store.all_jobs()) == ["1_0", "1_1"]
    hold.release()
    for run_id in run_ids:
        assert wait_state(local, run_id, JobState.COMPLETED, JobState.FAILED).state is (
            JobState.COMPLETED
        )


def test_cancel_and_retry_of_a_group_from_the_command_line(tmp_path: Path, hold: Hold) -> None:
    small = [a if a != "2" else "1" for a in SMALL]
    res = _cli(
        tmp_path, "submit", *small, "--env-setup", hold.wait_line(), "--sweep", "seed=1,2",
        "--max-concurrent", "1",
    )  # fmt: skip
    first, job = res.stdout.splitlines()[0].split("\t")[:2]
    master = job.partition("_")[0]
    deadline = time.monotonic() + 120
    while {str(r["state"]) for r in _ls(tmp_path)} != {"RUNNING", "PENDING"}:
        assert time.monotonic() < deadline, _ls(tmp_path)
        time.sleep(0.5)
    out = _cli(tmp_path, "cancel", "--group", first).stdout
    assert out.startswith("cancelled group ") and out.rstrip().endswith(f"(job {master})"), out
    while {str(r["state"]) for r in _ls(tmp_path)} != {"CANCELLED"}:
        assert time.monotonic() < deadline + 60, _ls(tmp_path)
        time.sleep(0.5)
    hold.release()
    retried = _cli(tmp_path, "retry", "--group", first).stdout.splitlines()
    assert len(retried) == 2 and all(line.endswith("\tretried") for line in retried), retried
    while {str(r["state"]) for r in _ls(tmp_path)} != {"COMPLETED"}:
        assert time.monotonic() < deadline + 300, _ls(tmp_path)
        time.sleep(1.0)
