"""A small tmpfs mounted by a test: a disk that fills, for the full-disk stories.

``mount -t tmpfs -o size=N`` needs root; where that is refused the test skips and says why.
The fixture always unmounts (lazily, so a process that still holds a file cannot keep it).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def mount_tmpfs(directory: Path, size_kib: int) -> None:
    """Mount a ``size_kib`` KiB tmpfs on ``directory``, or skip the test with the reason."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs (a disk that fills) needs root")
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs on {directory}: {done.stderr.strip()}")


def unmount(directory: Path) -> None:
    subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)


def free_bytes(directory: Path) -> int:
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def fill(directory: Path, leave: int = 0, name: str = "filler") -> Path:
    """Write a file that leaves about ``leave`` bytes free on ``directory``'s filesystem."""
    path = directory / name
    with path.open("ab") as fh:
        chunk = b"\0" * 65536
        while free_bytes(directory) > leave:
            want = min(len(chunk), free_bytes(directory) - leave)
            try:
                fh.write(chunk[: max(want, 1)])
                fh.flush()
            except OSError:
                break
    return path


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 8 MiB tmpfs at ``tmp_path/disk``, unmounted at the end in any case."""
    directory = tmp_path / "disk"
    mount_tmpfs(directory, 8 * 1024)
    try:
        yield directory
    finally:
        unmount(directory)
