"""The room check names the real cause: a runs root this user cannot write is refused as
such, whatever its free space (freeing space would not help), and a full one by its free
space. Real directories, a real read-only mount, a real unprivileged user.

Who may write where is the kernel's answer for the user that asks, so the tests ask as the
right user. Root passes ``test -w`` on a mode 0555 directory, and may really write there: the
check must not refuse it. To see a directory this user may not write, a root test asks as
``nobody`` (``setpriv``), the way a user who is not root meets it. A read-only filesystem
refuses everyone, root too; only root can mount one, so that test skips elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from ddp_tui.remote.backends.executor import CommandResult, LocalExecutor
from ddp_tui.remote.store.space import MARGIN_BYTES, NoRoom, NotWritable, require_room

NOBODY = 65534


class AsNobody(LocalExecutor):
    """Runs every command as the unprivileged user ``nobody``: a real other user, whose
    writes the kernel checks against the directory's mode."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        return super().run([*drop, *argv], timeout=timeout, env=env, cwd=cwd, stdin=stdin)


def _unprivileged() -> LocalExecutor:
    """An executor whose commands run as a user the directory's mode binds."""
    if os.geteuid() != 0:
        return LocalExecutor()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root, and no setpriv to ask as an unprivileged user")
    return AsNobody()


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user can reach (pytest's own are root's alone: mode 0700)."""
    top = Path(tempfile.mkdtemp(prefix="ddp-tui-space-"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        for d in (top, *top.rglob("*")):
            if d.is_dir():
                d.chmod(0o755)
        shutil.rmtree(top)


def test_a_directory_this_user_may_not_write_is_refused_as_such(shared_dir: Path) -> None:
    root = shared_dir / "runs"
    root.mkdir()
    root.chmod(0o555)
    executor = _unprivileged()
    for path in (root, root / "not-made-yet"):  # the root, or the nearest directory above it
        with pytest.raises(NotWritable) as err:
            require_room(executor, str(path), MARGIN_BYTES, what="a new run")
        message = str(err.value)
        assert f"cannot write under {root}: Permission denied" in message
        assert "Set runs_root to a directory this user can write" in message
        assert "Free some space" not in message and "nothing was submitted" in message
    assert list(root.iterdir()) == []  # the probe left nothing behind


@pytest.mark.skipif(os.geteuid() != 0, reason="only root writes into a mode 0555 directory")
def test_root_may_write_a_mode_0555_directory_and_is_not_refused(shared_dir: Path) -> None:
    shared_dir.chmod(0o555)
    require_room(LocalExecutor(), str(shared_dir / "runs"), MARGIN_BYTES, what="a new run")


def test_a_writable_root_short_of_space_still_says_free_some_space(tmp_path: Path) -> None:
    with pytest.raises(NoRoom) as err:
        require_room(LocalExecutor(), str(tmp_path), 1 << 62, what="a new run")
    assert type(err.value) is NoRoom
    assert "MiB free; a new run needs about" in str(err.value)
    assert "Free some space or set runs_root elsewhere" in str(err.value)


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[Path]:
    """A read-only tmpfs of 58.5 MiB (less than a run's margin), as a user met it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only filesystem needs root")
    disk = tmp_path / "ro"
    disk.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=59904k", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs on {disk}: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, check=False)


def test_a_read_only_runs_root_short_of_space_is_named_read_only(read_only_disk: Path) -> None:
    # The case: 58.5 MiB free, and not writable. Freeing space would not help.
    for path in (read_only_disk, read_only_disk / "runs"):
        with pytest.raises(NotWritable) as err:
            require_room(LocalExecutor(), str(path), MARGIN_BYTES, what="a new run")
        message = str(err.value)
        assert f"cannot write under {read_only_disk}: Read-only file system" in message
        assert "Free some space" not in message and "MiB free" not in message
        assert err.value.title == "Runs root not writable"
