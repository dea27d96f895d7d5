"""The trainer's writes on a disk that is full: a clear failure, never a half checkpoint.

The disk is a real tmpfs of a few hundred KiB that the test mounts (root only; the test skips
with the reason otherwise) and always unmounts. The last test runs the real trainer (2 gloo
ranks and data-loader workers under torchrun), held after its first epoch while the test
fills its run directory's disk (tests/helpers/hold.py).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_tui.jobfiles import EXIT_WRITE_FAILED, RunWriteError, write_json_atomic
from tests.helpers.hold import Hold
from tests.helpers.small_disk import fill, free_bytes, mount_tmpfs, unmount
from tests.trainer.helpers import REPO, TINY, torchrun_argv, trainer_env

torch = pytest.importorskip("torch")

from ddp_tui.trainer.checkpoint import load, save_atomic  # noqa: E402
from ddp_tui.trainer.metrics import MetricsCsv, ProgressLog  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs, unmounted at the end in any case."""
    directory = tmp_path / "disk"
    mount_tmpfs(directory, 256)
    try:
        yield directory
    finally:
        unmount(directory)


def test_a_checkpoint_that_does_not_fit_leaves_the_good_one_and_no_temporary_file(
    disk: Path,
) -> None:
    path = disk / "checkpoints" / "latest.pt"
    save_atomic({"version": 1, "weights": torch.ones(16)}, path)
    good = path.read_bytes()

    with pytest.raises(RunWriteError) as failed:
        save_atomic({"version": 1, "weights": torch.ones(200_000)}, path)  # 800 KB

    assert failed.value.errno == 28 and failed.value.path == str(path)
    message = failed.value.message()
    assert message.startswith(f"[ddp-tui] cannot write {path}: [Errno 28] No space left")
    assert "free of 256.0 KiB on its filesystem" in message
    assert path.read_bytes() == good
    assert torch.equal(load(path)["weights"], torch.ones(16))  # type: ignore[index]
    assert os.listdir(path.parent) == ["latest.pt"]


def test_metrics_progress_and_run_json_writes_on_a_full_disk_name_their_file(
    disk: Path,
) -> None:
    metrics = MetricsCsv(disk / "metrics.csv")
    metrics.prepare(0)
    progress = ProgressLog(disk / "progress.jsonl")
    fill(disk)
    assert free_bytes(disk) == 0

    with pytest.raises(RunWriteError, match=r"metrics\.csv") as failed:
        for epoch in range(1, 2000):  # the file's last page fills first
            metrics.append({"epoch": epoch, "train_loss": 0.5})
    assert "0 B free of 256.0 KiB" in failed.value.message()
    with pytest.raises(RunWriteError, match=r"progress\.jsonl"):
        for step in range(2000):  # the file's last page fills first
            progress.write(1, step, 2000, 0.5, 100.0)
    with pytest.raises(RunWriteError, match=r"run\.json"):
        write_json_atomic(disk / "run.json", {"state": "running", "pad": "x" * 8192})
    assert not [p for p in os.listdir(disk) if ".tmp" in p]


def test_a_full_disk_mid_run_ends_every_rank_promptly_with_one_clear_line(
    disk: Path, tmp_path: Path
) -> None:
    """Before the fix the failed rank's exit waited forever for its data-loader workers."""
    run_dir = disk / "run"
    with Hold.create(tmp_path / "hold") as hold:
        env = trainer_env(**hold.process_env(run_dir, 1))
        env["PYTHONPATH"] = f"{hold.directory}{os.pathsep}{env['PYTHONPATH']}"
        args = list(TINY)
        args[args.index("simple_cnn")] = hold.model("simple_cnn")
        args[args.index("--workers") + 1] = "2"
        args[args.index("--epochs") + 1] = "3"
        args[args.index("--ckpt-every-steps") + 1] = "0"
        # The run's files must fit before the fill: a bigger disk for this one.
        unmount(disk)
        mount_tmpfs(disk, 4096)
        proc = subprocess.Popen(
            torchrun_argv("ddp_tui.trainer", ["--run-dir", str(run_dir), *args]),
            env=env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 240
            while not (hold.waiting(0) and hold.waiting(1)):
                assert proc.poll() is None, proc.communicate()[1][-3000:]
                assert time.monotonic() < deadline, "the ranks never reached the hold"
                time.sleep(0.2)
            fill(disk)
            hold.release()
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
    assert proc.returncode != 0, err[-3000:]
    lines = [x for x in err.splitlines() if x.startswith("[ddp-tui] cannot write ")]
    assert len(lines) == 1, err[-3000:]
    assert f"{run_dir}/" in lines[0] and "[Errno 28] No space left on device" in lines[0]
    assert "free of 4.0 MiB on its filesystem" in lines[0]
    assert f"exitcode  : {EXIT_WRITE_FAILED}" in err, err[-3000:]
    # Nothing of the run is left: torchrun's session has no member.
    survivors = subprocess.run(
        ["pgrep", "-s", str(proc.pid)], capture_output=True, text=True, check=False
    ).stdout.split()
    assert survivors == []
    # The epoch-1 checkpoint is whole.
    state = load(run_dir / "checkpoints" / "latest.pt")
    assert state is not None and state["epochs_completed"] == 1
