"""A local scheduler state directory that cannot be used is a clear error naming it and the
setting that moves it, never a traceback; ``local_state_dir`` moves it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_tui.cli import main
from ddp_tui.remote.backends.local import LocalScheduler
from ddp_tui.remote.backends.local.store import StateDirUnusable

EXE = shutil.which("ddp-tui", path=os.path.dirname(sys.executable)) or "ddp-tui"
NOBODY = 65534


def test_a_state_directory_beneath_a_file_names_the_path_and_the_setting(tmp_path: Path) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(StateDirUnusable) as err:
        LocalScheduler(blocker / "local")
    assert str(blocker / "local") in str(err.value)
    assert "local_state_dir" in str(err.value)


@pytest.mark.parametrize("command", [["ls"], ["submit", "--dry-run"]])
def test_ls_and_submit_say_which_state_directory_is_unusable(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    blocker = tmp_path / "xdg-state"
    blocker.write_text("")  # XDG_STATE_HOME is a file: nothing can be made beneath it
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    runs = tmp_path / "runs"
    rc = main(["--scheduler", "local", "--runs-root", str(runs), *command])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"ddp-tui: the local scheduler's state directory {blocker}/ddp-tui/local" in err
    assert "set local_state_dir in the profile" in err and "Traceback" not in err


def _nobody_can_run() -> str | None:
    if os.geteuid() != 0:
        return "needs root, to make a HOME that a user cannot write"
    if shutil.which("setpriv") is None:
        return "needs setpriv (util-linux), to run ddp-tui as nobody"
    return None


@pytest.fixture
def unwritable_home() -> Iterator[Path]:
    """A base directory nobody can read: ``home`` (root's, so unwritable to nobody), and
    ``runs`` and ``state`` that nobody owns."""
    base = Path(tempfile.mkdtemp(prefix="ddp-tui-home-"))
    try:
        os.chmod(base, 0o755)
        (base / "home").mkdir(mode=0o755)
        for d in ("runs", "state"):
            (base / d).mkdir()
            os.chown(base / d, NOBODY, NOBODY)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _as_nobody(base: Path, config: str, *args: str) -> subprocess.CompletedProcess[str]:
    (base / "config.toml").write_text(config)
    os.chmod(base / "config.toml", 0o644)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(base / "home"),
        "DDP_TUI_CONFIG": str(base / "config.toml"),
    }
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", EXE]
    res = subprocess.run(
        [*cmd, "--runs-root", str(base / "runs"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if res.returncode != 0 and "Permission denied" in res.stderr and "python" in res.stderr:
        pytest.skip(f"nobody cannot run this checkout's interpreter: {res.stderr[:200]}")
    return res


@pytest.mark.skipif(_nobody_can_run() is not None, reason=str(_nobody_can_run()))
def test_an_unwritable_home_is_named_and_local_state_dir_works_around_it(
    unwritable_home: Path,
) -> None:
    base = unwritable_home
    local = "[profiles.local]\nscheduler = 'local'\n"
    for args in (["ls"], ["submit", "--dry-run"]):
        res = _as_nobody(base, local, *args)
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr, res.stderr
        want = f"state directory {base}/home/.local/state/ddp-tui/local cannot be used"
        assert want in res.stderr and "set local_state_dir" in res.stderr, res.stderr
    moved = local + f"local_state_dir = '{base}/state/local'\n"
    res = _as_nobody(base, moved, "ls")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert (base / "state" / "local" / "jobs").is_dir()
