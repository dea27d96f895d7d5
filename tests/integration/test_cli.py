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


#: The profile every run of :func:`cli` has: the embedded scheduler, whatever this machine
#: has installed.
LOCAL_PROFILE = '[profiles.local]\nscheduler = "local"\n'


def cli_env(tmp_path: Path, config: str = LOCAL_PROFILE) -> dict[str, str]:
    env = dict(os.environ)
    env["DDP_TUI_CONFIG"] = str(tmp_path / "config.toml")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    (tmp_path / "config.toml").write_text(config)
    return env


def cli(
    tmp_path: Path,
    *args: str,
    check: bool = True,
    path: str | None = None,
    config: str = LOCAL_PROFILE,
) -> subprocess.CompletedProcess[str]:
    """Run ddp-tui; ``path`` replaces $PATH (an empty directory: a machine without Slurm);
    ``config`` is the config file's text."""
    env = cli_env(tmp_path, config)
    if path is not None:
        env["PATH"] = path
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


def cli_into_closed_pipe(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ddp-tui with stdout a pipe whose reader has already gone (as after ``| head -1``
    has read its line), so that its first write to stdout fails, whatever the timing."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [EXE, "--runs-root", str(tmp_path / "runs"), *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(tmp_path),
            timeout=300,
        )
    finally:
        os.close(write_end)


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


def test_scheduler_slurm_dry_run_renders_a_two_node_script_without_slurm(tmp_path: Path) -> None:
    no_slurm = tmp_path / "bin"  # PATH holds no sbatch, sinfo or squeue
    no_slurm.mkdir()
    res = cli(
        tmp_path, "submit", "--dry-run", "--scheduler", "slurm", "--nodes", "2",
        "--gpus-per-node", "4", *SMALL[:2], path=str(no_slurm),
    )  # fmt: skip
    assert res.stdout.startswith("#!/bin/bash\n")
    assert "#SBATCH --nodes=2\n" in res.stdout
    assert "#SBATCH --gres=gpu:4\n" in res.stdout  # the Slurm defaults: GPUs, not the CPU
    assert res.stderr == ""
    assert not (tmp_path / "runs").exists()


def test_local_refusal_of_two_nodes_names_the_preview_option(tmp_path: Path) -> None:
    res = cli(tmp_path, "submit", "--dry-run", "--nodes", "2", check=False)
    assert res.returncode == 2
    assert "ddp-tui: nodes: the local scheduler runs one-node" in res.stderr
    assert "--scheduler slurm --dry-run" in res.stderr
    assert "Traceback" not in res.stderr


def test_submit_with_scheduler_slurm_where_there_is_none_is_a_clear_error(tmp_path: Path) -> None:
    no_slurm = tmp_path / "bin"
    no_slurm.mkdir()
    res = cli(tmp_path, "submit", "--scheduler", "slurm", *SMALL, check=False, path=str(no_slurm))
    assert res.returncode == 2
    assert res.stderr.startswith("ddp-tui: --scheduler slurm: Slurm does not answer here")
    assert "submit --dry-run previews the script" in res.stderr
    assert not (tmp_path / "runs").exists() or not os.listdir(tmp_path / "runs")


def test_a_reader_that_goes_away_ends_output_quietly(tmp_path: Path) -> None:
    # A run to list, follow and compare: `python` is `true`, so the job ends at once without
    # torch and still writes its .out.
    run_id, _ = cli(
        tmp_path, "submit", *SMALL, "--python", "true", "--device", "cpu", "--backend", "gloo"
    ).stdout.split()
    deadline = time.monotonic() + 240
    while json.loads(cli(tmp_path, "ls", "--json").stdout)[0]["state"] != "COMPLETED":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    for args in (
        ["ls"],
        ["ls", "--json"],
        ["logs", "-f", run_id],
        ["compare", run_id],
        ["submit", "--dry-run", *SMALL],
    ):
        res = cli_into_closed_pipe(tmp_path, *args)
        assert (res.returncode, res.stderr) == (141, ""), args
    res = cli_into_closed_pipe(tmp_path, "submit", "--help")
    assert res.stderr == "", res.stderr


def test_a_runs_root_that_cannot_be_made_is_a_clear_error_not_a_traceback(
    tmp_path: Path,
) -> None:
    """A runs root under a regular file: the OS refuses the directory. The CLI says which
    root and why (the error root's one handler), exits 1, and leaves nothing behind."""
    (tmp_path / "runs").write_text("a file where the runs root should be\n")
    res = cli(tmp_path, "submit", "--name", "x", "--epochs", "1", check=False)
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert f"cannot create the runs root {tmp_path / 'runs'}" in res.stderr
    assert (tmp_path / "runs").read_text() == "a file where the runs root should be\n"
