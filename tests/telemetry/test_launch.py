"""The launch shim the job script puts in front of its launcher (``ddp_tui.telemetry.launch``):
the node's first task starts the sampler, then every task becomes its command, keeping its pid;
the sampler stops when that command has ended. Real processes throughout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ddp_tui.jobfiles import telemetry_file
from ddp_tui.telemetry.launch import sampler_command

DEADLINE_SEC = 60.0  # bounds a hang only


def _wait(predicate: object, what: str) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + DEADLINE_SEC
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_only_the_nodes_first_task_starts_a_sampler_and_never_at_interval_zero() -> None:
    argv = ["--interval", "5", "--ranks-per-node", "4"]
    env = {"DDP_TUI_RUN_DIR": "/runs/r1", "SLURM_LOCALID": "0"}
    assert sampler_command(argv, env) == [
        sys.executable,
        "-m",
        "ddp_tui.telemetry",
        "--run-dir",
        "/runs/r1",
        "--interval",
        "5",
        "--ranks-per-node",
        "4",
    ]
    assert sampler_command(argv, {**env, "SLURM_LOCALID": "1"}) is None
    assert sampler_command(["--interval", "0", "--ranks-per-node", "4"], env) is None


SHIM = (sys.executable, "-m", "ddp_tui.telemetry.launch")


def _env(run_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    src = Path(__file__).resolve().parents[2] / "src"
    env.update(PYTHONPATH=str(src), DDP_TUI_RUN_DIR=str(run_dir), SLURM_JOB_ID="77", **extra)
    return env


def test_the_shim_becomes_its_command_and_the_sampler_ends_with_it(tmp_path: Path) -> None:
    go = tmp_path / "go"
    pid_file = tmp_path / "pid"
    # The command writes its pid, then waits for the test's go: held by construction.
    command = (
        "import os, pathlib, time\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
        f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.05)\n"
    )
    shim = subprocess.Popen(
        [*SHIM, "--interval", "0.2", "--ranks-per-node", "1", "--", sys.executable, "-c", command],
        env=_env(tmp_path),
    )
    try:
        _wait(pid_file.exists, "the command's pid")
        assert int(pid_file.read_text()) == shim.pid  # exec'd: the launcher kept its pid
        samples = tmp_path / telemetry_file(0)

        def host_lines() -> list[dict[str, object]]:
            if not samples.exists():
                return []
            lines = [json.loads(x) for x in samples.read_text().splitlines()]
            return [x for x in lines if x["kind"] == "host" and x["procs"] == 1]

        _wait(lambda: len(host_lines()) >= 2, "two samples of the command")
        start = json.loads(samples.read_text().splitlines()[0])
        assert start["kind"] == "start" and start["job"] == "77" and start["node"] == 0
        sampler = int(start["pid"])
        assert _alive(sampler)
        # The sampler is the command's child, so it leaves itself out of the job's processes.
        ppid = int(Path(f"/proc/{sampler}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert ppid == shim.pid
        go.touch()
        assert shim.wait(timeout=DEADLINE_SEC) == 0
        _wait(lambda: not _alive(sampler), "the sampler to end after its launcher")
    finally:
        go.touch()
        shim.wait(timeout=DEADLINE_SEC)


RANK_1 = "print('rank 1 ran')"


def test_a_later_task_only_runs_its_command(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SHIM, "--interval", "0.2", "--ranks-per-node", "2", "--", sys.executable, "-c", RANK_1],
        env=_env(tmp_path, SLURM_LOCALID="1"),
        capture_output=True,
        text=True,
        timeout=DEADLINE_SEC,
        check=False,
    )
    assert done.returncode == 0 and done.stdout == "rank 1 ran\n"
    assert not (tmp_path / "telemetry").exists()


def test_a_missing_command_fails_as_a_shell_would_say(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SHIM, "--interval", "0", "--ranks-per-node", "1", "--", str(tmp_path / "no-such-python")],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=DEADLINE_SEC,
        check=False,
    )
    assert done.returncode == 127
    assert done.stderr == f"{tmp_path / 'no-such-python'}: No such file or directory\n"
