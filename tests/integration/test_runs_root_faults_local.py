"""A full or read-only runs root refuses a submit or a retry before anything is queued, with
the path and the reason, and leaves nothing half-made (real tmpfs mounts, real local
scheduler, the real CLI)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_tui.errors import DdpTuiError
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.store.space import MARGIN_BYTES
from tests.helpers.small_disk import fill, mount_tmpfs, unmount
from tests.integration.story import tiny_spec
from tests.integration.test_submit_races_local import attempt_ids, make_run, open_cluster


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs a little larger than a submit's margin, mounted as ``tmp_path/runs``."""
    runs = tmp_path / "runs"
    mount_tmpfs(runs, (MARGIN_BYTES * 2) // 1024)
    try:
        yield runs
    finally:
        unmount(runs)


def remount_read_only(directory: Path) -> None:
    """``mount -o remount,ro``; the kernel refuses it (EBUSY) while the cancelled job's
    processes still hold its log open for writing, so it is tried until they have gone."""
    deadline = time.monotonic() + 60
    while True:
        done = subprocess.run(
            ["mount", "-o", "remount,ro", str(directory)], capture_output=True, check=False
        )
        if done.returncode == 0:
            return
        assert time.monotonic() < deadline, done.stderr
        time.sleep(0.2)


def _jobs(cluster: Cluster) -> list[str]:
    return [j.job_id for j in cluster.scheduler.list_jobs()]


def test_a_submit_to_a_full_runs_root_is_refused_before_anything_is_made(
    tmp_path: Path, disk: Path
) -> None:
    fill(disk, leave=150 * 1024)  # the case: 150 KB free
    cluster = open_cluster(tmp_path)
    with pytest.raises(DdpTuiError, match=f"{disk} has 0.1 MiB free; a new run needs about"):
        cluster.submit(cluster.plan(tiny_spec(name="full")))
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]  # no .tmp, no run
    assert _jobs(cluster) == []


def test_a_retry_on_a_full_runs_root_is_refused_before_the_scheduler(
    tmp_path: Path, disk: Path
) -> None:
    cluster = open_cluster(tmp_path)
    ref = make_run(cluster)
    cluster.refresh()
    first = cluster.retry(ref.run_id, seen=0).job_id
    cluster.cancel(ref.run_id)
    fill(disk, leave=1024 * 1024)
    with pytest.raises(DdpTuiError, match="another attempt needs about"):
        cluster.retry(ref.run_id, seen=1)
    assert _jobs(cluster) == [first] and attempt_ids(ref.path) == [first]


def test_a_read_only_runs_root_refuses_submit_and_retry_naming_it(
    tmp_path: Path, disk: Path
) -> None:
    cluster = open_cluster(tmp_path)
    ref = make_run(cluster)
    cluster.store.create_run({"name": "g"}, "g", "#!/bin/bash\n", "g")  # a group to compare
    cluster.refresh()
    first = cluster.retry(ref.run_id, seen=0).job_id
    cluster.cancel(ref.run_id)
    remount_read_only(disk)
    with pytest.raises(DdpTuiError, match="Read-only file system; nothing was submitted"):
        cluster.retry(ref.run_id, seen=1)
    with pytest.raises(DdpTuiError, match=f"under {disk}: Read-only file system"):
        cluster.submit(cluster.plan(tiny_spec(name="ro")))
    assert _jobs(cluster) == [first] and attempt_ids(ref.path) == [first]
    with pytest.raises(DdpTuiError, match=f"comparison to {disk}/comparisons/g: Read-only"):
        cluster.export_comparison("g")
    # The CLI: one clear line and exit status 1, never a traceback.
    config = tmp_path / "config.toml"
    config.write_text(f'[profiles.ro]\nscheduler = "local"\nlocal_state_dir = "{tmp_path}/state"\n')
    argv = ["--profile", "ro", "--runs-root", str(disk), "submit", "--name", "ro-cli"]
    cli = subprocess.run(
        [sys.executable, "-m", "ddp_tui.cli", *argv, "--epochs", "1"],
        capture_output=True,
        text=True,
        env={**os.environ, "DDP_TUI_CONFIG": str(config)},
        check=False,
    )
    assert "Traceback" not in cli.stderr, cli.stderr
    assert cli.returncode == 1 and "Read-only file system" in cli.stderr, cli.stderr
