"""A runs root that fills while a job runs: the job ends FAILED with a diagnosis, not a hang.

The runs root is a small tmpfs the test mounts (root only; the test skips with the reason
otherwise) and always unmounts. The real trainer runs 2 gloo ranks with data-loader workers
under torchrun on the local scheduler; held after its first epoch (tests/helpers/hold.py),
it waits while the test fills the disk to within 64 KiB, so by construction the next
checkpoint (about 400 KB) cannot be written while the log lines still can. Before the fix
the failed rank waited forever in its exit for its data-loader workers (they ignore SIGTERM),
and the job stayed RUNNING.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from tests.helpers.hold import Hold
from tests.helpers.small_disk import fill, free_bytes, mount_tmpfs, unmount
from tests.integration.story import diagnosed, logs, tiny_spec, wait_state
from tests.integration.test_diagnosis_local import open_cluster, why

pytestmark = pytest.mark.torch

#: Left free: room for the failure's log lines, none for a checkpoint of the run's model.
LEAVE = 64 * 1024
#: The disk: big enough for submit's own free-space check (a 64 MiB margin), filled later.
SIZE_KIB = 80 * 1024


@pytest.fixture
def full_root(tmp_path: Path) -> Iterator[Path]:
    """An 80 MiB tmpfs at ``tmp_path/runs`` (the runs root ``open_cluster`` uses)."""
    root = tmp_path / "runs"
    mount_tmpfs(root, SIZE_KIB)
    try:
        yield root
    finally:
        unmount(root)


def job_processes(run_dir: Path) -> list[int]:
    """Pids whose environment names this run (the job script exports DDP_TUI_RUN_DIR)."""
    marker = f"DDP_TUI_RUN_DIR={run_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


#: torchrun SIGKILLs a worker that outstays its SIGTERM by 30 s: an end before this shows
#: that no rank waited to be killed (a prompt end takes about a second after the release).
PROMPT_END_SEC = 25


def start_held_run(tmp_path: Path, full_root: Path, hold: Hold, leave: int) -> tuple[Cluster, str]:
    """Submit the held run, fill its disk to ``leave`` bytes free, let it go on."""
    cluster = open_cluster(tmp_path, check_python=False)
    spec = hold.after_epochs(
        tiny_spec(name="full-disk", epochs=3, gpus_per_node=2, cpus_per_task=2, workers=2), 1
    )
    view = cluster.submit(cluster.plan(spec))
    deadline = time.monotonic() + 240
    while not (hold.waiting(0) and hold.waiting(1)):
        assert time.monotonic() < deadline, "the ranks never reached the hold"
        time.sleep(0.2)
    fill(full_root, leave=leave)
    assert free_bytes(full_root) <= leave
    hold.release()
    return cluster, view.run_id


def test_a_disk_filled_to_the_last_byte_ends_the_job_promptly_and_wholly(
    tmp_path: Path, full_root: Path, hold: Hold
) -> None:
    """Not even the log can be written: the job still ends, and none of its processes stays
    (before the fix a rank's exit waited on its data-loader workers until torchrun killed it,
    or forever)."""
    cluster, run_id = start_held_run(tmp_path, full_root, hold, leave=0)
    released = time.monotonic()
    ended = wait_state(cluster, run_id, JobState.FAILED, JobState.COMPLETED, timeout=120)
    assert ended.state is JobState.FAILED
    assert time.monotonic() - released < PROMPT_END_SEC
    deadline = time.monotonic() + 30
    while job_processes(Path(ended.run_dir)):
        assert time.monotonic() < deadline, f"survivors: {job_processes(Path(ended.run_dir))}"
        time.sleep(0.2)
    # The full disk may keep the job's own "cannot write" line out of its logs; the runs
    # root's free space, read with the logs' tails, still tells (rules_disk.disk_full_by_space).
    found = diagnosed(cluster, ended, "disk-full")
    assert "runs_root" in found.advice, found
    answer = why(tmp_path, run_id)
    assert answer.returncode == 1 and "filesystem" in answer.stdout, answer.stdout


def test_a_disk_that_fills_mid_run_ends_the_job_with_a_disk_full_diagnosis(
    tmp_path: Path, full_root: Path, hold: Hold
) -> None:
    cluster, run_id = start_held_run(tmp_path, full_root, hold, leave=LEAVE)
    view = next(v for v in cluster.refresh().runs if v.run_id == run_id)
    run_dir = Path(view.run_dir)
    ended = wait_state(
        cluster, view.run_id, JobState.FAILED, JobState.COMPLETED, JobState.CANCELLED, timeout=120
    )
    assert ended.state is JobState.FAILED

    # No process of the job outlives it (poll: the last ones are being reaped).
    deadline = time.monotonic() + 30
    while job_processes(run_dir):
        assert time.monotonic() < deadline, f"survivors: {job_processes(run_dir)}"
        time.sleep(0.2)

    _, err = logs(ended)
    line = next(x for x in err.splitlines() if x.startswith("[ddp-tui] cannot write "))
    assert f"{run_dir}/checkpoints/latest.pt: [Errno 28] No space left on device" in line
    assert "free of 80.0 MiB on its filesystem" in line

    found = diagnosed(cluster, ended, "disk-full")
    assert str(run_dir / "checkpoints" / "latest.pt") in found.cause
    assert "free of 80.0 MiB" in found.cause
    assert "runs_root" in found.advice
    answer = why(tmp_path, view.run_id)
    assert answer.returncode == 1, answer
    for words in ("No space left on device", "free of 80.0 MiB", "runs_root"):
        assert words in answer.stdout, answer.stdout

    # The epoch-1 checkpoint is still there, whole: a failed write never replaces it.
    assert (run_dir / "checkpoints" / "latest.pt").stat().st_size > LEAVE
    assert not [p for p in os.listdir(run_dir / "checkpoints") if ".tmp" in p]
