"""Fork safety of what ddp-tui puts into a rank (issue 32: a DataLoader worker once hung before
its first frame). The observation layer starts no thread and holds no lock, and a forked child
runs none of it: a worker forked while another thread of the rank is stuck in a stderr write
(a full pipe to rank 0's wrapper, its locks held) still starts and delivers its batches."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.scriptrun.observe import BOOT_DIR

SRC = Path(__file__).resolve().parents[2] / "src"
SCRIPT = Path(__file__).resolve().parent / "scripts" / "fork_with_stderr_blocked.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def journal_records(run_dir: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted((run_dir / "observe").glob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return out


@pytest.mark.torch
def test_a_worker_forked_while_a_thread_is_stuck_in_a_stderr_write_starts_under_observation(
    tmp_path: Path,
) -> None:
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "DDP_TUI_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(BOOT_DIR), str(SRC)]),  # as the wrapper sets it
        DDP_TUI_OBSERVE="1",
        DDP_TUI_RUN_DIR=str(tmp_path),
        RANK="0",
        LOCAL_RANK="0",
        WORLD_SIZE="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
    )
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,  # never read until the script has answered: it stays full
        start_new_session=True,  # its own process group, which holds the stuck worker too
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        code: int | None = proc.wait(timeout=240)  # it answers on stdout, a line, then exits
    except subprocess.TimeoutExpired:
        code = None  # its main thread blocked: on the held stderr, or on a worker that hung
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the worker, left waiting on the stderr lock
    answer = proc.stdout.read().decode(errors="replace")
    err = proc.stderr.read(1 << 16).decode(errors="replace")
    proc.stdout.close()
    proc.stderr.close()
    assert code == 0, f"exit {code}: {answer[-2000:]} {err[-2000:]}"
    result = json.loads(answer)
    assert result["writer_blocked"]  # the dangerous state held to the end
    assert (result["batches"], result["steps"]) == (4, 4)  # the forked worker ran
    ours = [name for name, module in result["threads"] if str(module).startswith("ddp_tui")]
    assert not ours  # observation starts no thread in a rank
    found = journal_records(tmp_path)
    assert {r["pid"] for r in found if r["kind"] == "process"} == {proc.pid}  # no worker's
    assert not [r for r in found if r["kind"] == "note"]  # every hook stayed on
    assert any(r["kind"] == "group" for r in found)
    assert len(list((tmp_path / "stacks" / "live").glob("*.txt"))) == 1  # the rank's dump
