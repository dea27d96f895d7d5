"""How a trainer process ends (``ddp_tui.trainer.exit``): flushed, with the right exit code,
through ``os._exit`` (gloo's teardown at interpreter exit can abort a finished rank)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.helpers import REPO, SRC

# A process entry point in miniature: it writes a file and both standard streams, then ends as
# argv[2] says. The non-daemon thread never finishes, so a normal interpreter exit would wait for
# it forever: only os._exit ends this process.
SCRIPT = """
import atexit, sys, threading
from pathlib import Path
from ddp_tui.trainer.exit import ending_process, run_process

threading.Thread(target=threading.Event().wait, daemon=False).start()
atexit.register(lambda: print("atexit handler ran", end=";"))

def main():
    assert ending_process()
    with Path(sys.argv[1]).open("w") as fh:
        fh.write("all written\\n")
    print("stdout line", end=";")  # a pipe is block-buffered: lost unless flushed
    sys.stderr.write("stderr line;")
    outcome = sys.argv[2]
    if outcome == "raise":
        raise RuntimeError("a real failure")
    if outcome == "sys.exit":
        sys.exit(2)
    return int(outcome)

run_process(main)
print("run_process returned")
"""


def _run_script(tmp_path: Path, outcome: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(SRC)
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "out.txt"), outcome],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )


@pytest.mark.parametrize(
    ("outcome", "code"), [("0", 0), ("3", 3), ("2", 2), ("sys.exit", 2), ("raise", 1)]
)
def test_run_process_flushes_everything_and_exits_with_mains_code(
    tmp_path: Path, outcome: str, code: int
) -> None:
    proc = _run_script(tmp_path, outcome)
    assert proc.returncode == code, proc
    assert (tmp_path / "out.txt").read_text() == "all written\n"
    # Flushed before os._exit, after the atexit handlers; nothing runs after run_process.
    assert proc.stdout == "stdout line;atexit handler ran;", proc
    assert proc.stderr.startswith("stderr line;"), proc
    if outcome == "raise":
        assert "Traceback (most recent call last)" in proc.stderr
        assert proc.stderr.rstrip().endswith("RuntimeError: a real failure"), proc.stderr
    else:
        assert proc.stderr == "stderr line;", proc


def test_the_console_script_entry_ends_the_process_itself(tmp_path: Path) -> None:
    """``ddp-train`` calls ``main()`` without arguments: that is the process entry path."""
    script = (
        "import sys\n"
        "from ddp_tui.trainer.__main__ import main\n"
        f"sys.argv = ['ddp-train', '--run-dir', {str(tmp_path)!r}, '--batch-size', '0']\n"
        "main()\n"
        "print('main returned')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 2, proc
    assert "argument --batch-size:" in proc.stderr and "main returned" not in proc.stdout


def test_in_process_callers_get_the_code_back_and_keep_teardown() -> None:
    from ddp_tui.trainer.exit import ending_process
    from ddp_tui.trainer.preflight import main

    assert main(["--run-dir", "x", "--min-bytes", "2"]) == 2  # returned, not exited
    assert not ending_process()  # so close_world still destroys the group in-process
