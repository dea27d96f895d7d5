"""Every rank's stack of a hung run, on the embedded local scheduler (docs/stacks.md).

A 2-rank torchrun/gloo script (tests/helpers/user_scripts/hang_ddp.py) holds rank 1 in
``slow_step`` until the test creates a file, while rank 0 waits in the next all_reduce: held
by construction, never by being slow. ``ddp-tui stacks RUN`` then shows both ranks' frames,
grouped per rank, with rank 1 behind; the stacks are saved in the run directory; the run
completes once released.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.live.stacks import StacksTaken
from ddp_tui.remote.model.views import RunView
from tests.integration.story import tiny_script_spec, wait_state
from tests.integration.test_cli import cli

pytestmark = pytest.mark.torch


def wait_file(path: Path, cluster: Cluster, run_id: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            err = cluster.follow(run_id).err_lines[-30:]
            raise AssertionError(f"{path} never appeared; stderr: {err}")
        time.sleep(0.2)


def submit_hang(tmp_path: Path, **profile: Any) -> tuple[Cluster, RunView, Path]:
    """The hung 2-rank script on the local scheduler (the CLI's state dir, so `ddp-tui`
    sees it); returns the facade, the run, and the file that releases rank 1."""
    cluster = Cluster.open(
        Profile(scheduler="local", runs_root=str(tmp_path / "runs"), **profile),
        local_state_dir=str(tmp_path / "state" / "ddp-tui" / "local"),
    )
    release = tmp_path / "release"
    spec = tiny_script_spec(
        "hang_ddp.py", name="hang", script_args=f"--release {release}", epochs=1, metrics="auto"
    )
    return cluster, cluster.submit(cluster.plan(spec)), release


def stacks_when_rank0_waits(cluster: Cluster, run_id: str, timeout: float = 60.0) -> StacksTaken:
    """Rank 1 is in slow_step already; rank 0 reaches its all_reduce a second later: take the
    stacks until it is there (each taking is saved, so a few files may be left)."""
    deadline = time.monotonic() + timeout
    while True:
        taken = cluster.stacks(run_id)
        where = {p.rank: p.summary for p in taken.processes}
        if "all_reduce" in where.get(0, "") or time.monotonic() > deadline:
            return taken
        time.sleep(0.5)


def test_stacks_of_a_hung_two_rank_script_show_both_ranks_and_who_is_behind(
    tmp_path: Path,
) -> None:
    cluster, view, release = submit_hang(tmp_path)
    run_dir = Path(view.run_dir)
    try:
        wait_file(Path(f"{release}.entered"), cluster, view.run_id)
        taken = stacks_when_rank0_waits(cluster, view.run_id)
        by_rank = {p.rank: p for p in taken.processes}
        assert set(by_rank) == {0, 1}, [p.summary for p in taken.processes]
        assert by_rank[0].top is not None and by_rank[0].top.function == "all_reduce", by_rank[
            0
        ].text
        assert by_rank[1].top is not None and by_rank[1].top.function == "slow_step", by_rank[
            1
        ].text
        assert [g.ranks_label for g in taken.groups] == ["rank 0", "rank 1"]
        # rank 0 stands past rank 1 by one optimizer step (the script's construction)
        behind = [r.rank for r in taken.stuck if r.behind]
        assert behind == [1], [r.summary for r in taken.stuck]
        assert "slow_step" in taken.stuck[0].where

        # the CLI, as a user types it: both frames, grouped per rank, saved with the time
        t0 = time.monotonic()
        res = cli(tmp_path, "stacks", view.run_id)
        took = time.monotonic() - t0
        print(f"ddp-tui stacks took {took:.2f} s (the taking itself: {taken.seconds:.2f} s)")
        assert "rank 0: in all_reduce at distributed_c10d.py:" in res.stdout, res.stdout
        assert "rank 1: in slow_step at hang_ddp.py:" in res.stdout, res.stdout
        assert "rank 1 on " in res.stdout and "behind at epoch" in res.stdout
        saved = sorted((run_dir / "stacks").glob("*.json"))
        assert len(saved) >= 2 and saved[-1].with_suffix(".txt").exists()
        doc = json.loads(saved[-1].read_text())
        assert doc["run_id"] == view.run_id and doc["taken_at"].endswith("Z")
        assert {p["rank"] for p in doc["processes"]} == {0, 1}
        as_json = json.loads(cli(tmp_path, "stacks", view.run_id, "--json").stdout)
        assert [g["ranks"] for g in as_json["groups"]] == ["rank 0", "rank 1"]
        # what a stalled run's `why` recalls of the last taking
        last = cluster.last_stacks(view.run_id)
        assert last is not None and last.job_id == view.job_id, last
        assert last.stuck_summary.startswith("rank 1 on "), last
        # ranks in a collective and a slow step are no fork hang (diagnosis/fork_hang.py)
        assert taken.cause == "" and doc["cause"] == "" and last.cause == "", taken.cause

    finally:
        release.write_text("")
    done = wait_state(cluster, view.run_id, JobState.COMPLETED, JobState.FAILED, timeout=180)
    assert done.state is JobState.COMPLETED, cluster.follow(view.run_id).err_lines[-30:]
    # a finished run has no stacks to take, and says why
    res = cli(tmp_path, "stacks", view.run_id, check=False)
    assert res.returncode != 0 and "stacks are taken from a running job" in res.stderr


def test_a_stall_that_ddp_tui_cancels_keeps_where_each_rank_was(tmp_path: Path) -> None:
    """cancel_stalled takes the stacks before the cancel ends the processes that hold them:
    the stall note, the saved stacks and the diagnosis name rank 1 in slow_step."""
    cluster, view, release = submit_hang(
        tmp_path,
        stall_after_min=0.05,
        cancel_stalled=True,  # 3 s of quiet, then cancel
    )
    run_dir = Path(view.run_dir)
    try:
        wait_file(Path(f"{release}.entered"), cluster, view.run_id)
        done = wait_state(
            cluster,
            view.run_id,
            JobState.CANCELLED,
            JobState.COMPLETED,
            JobState.FAILED,
            timeout=180,
        )
    finally:
        release.write_text("")
    assert done.state is JobState.CANCELLED, cluster.follow(view.run_id).err_lines[-30:]
    note = json.loads((run_dir / "stall.json").read_text())
    assert "rank 1 on " in note.get("stuck", "") and "slow_step" in note["stuck"], note
    assert sorted((run_dir / "stacks").glob("*.json")), "no stacks saved before the cancel"
    diagnosis = cluster.diagnose(view.run_id)
    assert diagnosis is not None and diagnosis.code == "stalled", diagnosis
    assert "stacks taken before the cancel" in diagnosis.cause and "slow_step" in diagnosis.cause
