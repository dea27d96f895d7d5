"""`ddp-tui` subcommands, run as a user would: the installed console script, the local scheduler."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXE = shutil.which("ddp-tui", path=os.path.dirname(sys.executable)) or "ddp-tui"


def cli(tmp_path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["DDP_TUI_CONFIG"] = str(tmp_path / "config.toml")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    # The embedded scheduler, whatever this machine has installed.
    (tmp_path / "config.toml").write_text('[profiles.local]\nscheduler = "local"\n')
    res = subprocess.run(
        [EXE, "--runs-root", str(tmp_path / "runs"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if check:
        assert res.returncode == 0, res.stderr
    return res


SMALL = [
    "--name", "cli", "--model", "mlp", "--synthetic-samples", "256",
    "--synthetic-val-samples", "64", "--synthetic-shape", "1,8,8", "--num-classes", "4",
    "--epochs", "2", "--batch-per-gpu", "32", "--workers", "0", "--cpus-per-task", "1",
]  # fmt: skip


def test_dry_run_prints_the_script_and_writes_nothing(tmp_path: Path) -> None:
    res = cli(tmp_path, "submit", "--dry-run", *SMALL)
    assert res.stdout.startswith("#!/bin/bash\n")
    assert "#SBATCH --job-name=cli" in res.stdout
    assert "--model mlp" in res.stdout
    assert not (tmp_path / "runs").exists()


def test_bad_input_names_every_field_and_exits_2(tmp_path: Path) -> None:
    res = cli(
        tmp_path, "submit", "--nodes", "zero", "--epochs", "0", "--backend", "mpi", check=False
    )
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    for field in ("nodes", "epochs", "backend"):
        assert f"ddp-tui: {field}:" in res.stderr
    assert not (tmp_path / "runs").exists() or not os.listdir(tmp_path / "runs")


def test_unknown_run_is_a_clear_error(tmp_path: Path) -> None:
    res = cli(tmp_path, "verify", "nope", check=False)
    assert res.returncode == 2 and "no run matches 'nope'" in res.stderr


@pytest.mark.torch
def test_submit_ls_logs_verify_compare(tmp_path: Path) -> None:
    run_id, job_id = cli(tmp_path, "submit", *SMALL).stdout.split()
    deadline = time.monotonic() + 240
    while True:
        rows = json.loads(cli(tmp_path, "ls", "--json").stdout)
        assert rows[0]["run_id"] == run_id and rows[0]["job_id"] == job_id
        if rows[0]["state"] not in ("PENDING", "RUNNING", "COMPLETING"):
            break
        assert time.monotonic() < deadline, rows
        time.sleep(1)
    assert rows[0]["state"] == "COMPLETED", cli(tmp_path, "logs", run_id, "--err").stdout
    assert rows[0]["epochs_done"] == 2
    logs = cli(tmp_path, "logs", job_id).stdout  # a job id finds its run too
    assert "rank 0/1" in logs
    verify = cli(tmp_path, "verify", run_id[:20])
    assert verify.stdout.count("[ok  ]") == 6, verify.stdout
    table = cli(tmp_path, "compare", run_id, "--export").stdout
    assert "speedup" in table and "wrote " in table
