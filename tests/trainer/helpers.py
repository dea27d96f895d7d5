"""Helpers for the trainer tests: real torchrun, real gloo, tiny CPU workloads."""

from __future__ import annotations

import csv
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"

# Launcher variables a test must not inherit (the suite may itself run inside a Slurm job).
_LAUNCH_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "GROUP_RANK",
)

# A tiny but real workload: 480 samples of 1x12x12 in 10 classes, 30 steps per rank and epoch;
# the easy synthetic task (noise 1.5), which two short epochs learn.
STEPS_PER_EPOCH = 30
TINY_NOISE = 1.5
TINY = (
    "--model", "simple_cnn",
    "--synthetic-samples", "480",
    "--synthetic-val-samples", "101",
    "--synthetic-shape", "1,12,12",
    "--synthetic-noise", str(TINY_NOISE),
    "--num-classes", "10",
    "--batch-size", "8",
    "--epochs", "2",
    "--workers", "0",
    "--seed", "7",
    "--progress-every", "1",
    "--ckpt-every-steps", "7",
    "--deterministic",
    "--timeout-sec", "60",
)  # fmt: skip


def main_in_process(argv: Sequence[str]) -> int:
    """The trainer's ``main`` run in this process, its signal handlers (SIGUSR2 requeue,
    SIGTERM) put back after: the test process must not keep them."""
    import signal

    from ddp_tui.trainer.__main__ import main

    handlers = {s: signal.getsignal(s) for s in (signal.SIGUSR2, signal.SIGTERM)}
    try:
        return main(list(argv))
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


def trainer_env(**extra: str) -> dict[str, str]:
    """The environment for a trainer process: src on the path, one thread, no launcher vars."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k not in _LAUNCH_VARS
    }
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def torchrun_argv(module: str, args: Sequence[str], nproc: int = 2) -> list[str]:
    """``python -m torch.distributed.run --standalone --nproc-per-node N -m MODULE ARGS``."""
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc-per-node", str(nproc), "-m", module, *args,
    ]  # fmt: skip


def run(argv: Sequence[str], timeout: float = 240, **env: str) -> subprocess.CompletedProcess[str]:
    """Run to completion, capturing text output."""
    return subprocess.run(
        list(argv),
        env=trainer_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def torchrun_train(run_dir: Path, *args: str, nproc: int = 2) -> subprocess.CompletedProcess[str]:
    """Train with 2 gloo ranks under torchrun."""
    return run(torchrun_argv("ddp_tui.trainer", ["--run-dir", str(run_dir), *args], nproc))


def metrics_rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def run_json(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "run.json").read_text())
    return data


def free_port(low: int = 0, high: int = 0) -> int:
    """A TCP port nobody listens on; within [low, high) when given."""
    import random

    candidates = random.sample(range(low, high), min(200, high - low)) if high else [0]
    for candidate in candidates:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            port: int = s.getsockname()[1]
            return port
    raise RuntimeError(f"no free port in [{low}, {high})")


def worker_pids(parent: int) -> dict[int, int]:
    """rank -> pid of the workers torchrun (``parent``) started, read from /proc."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            match = re.search(r"^PPid:\s+(\d+)", status, re.MULTILINE)
            if not match or int(match.group(1)) != parent:
                continue
            for item in (entry / "environ").read_bytes().split(b"\0"):
                if item.startswith(b"RANK="):
                    found[int(item[5:])] = int(entry.name)
        except OSError:
            continue
    return found


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    """The tail of a process's output, for assertion messages."""
    return f"rc={proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
