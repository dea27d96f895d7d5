"""A user's script through ``ddp-tui submit`` as a new user types it: ``--script`` alone, a
``--script-args`` value that looks like ddp-tui's own options, and torchrun's form
``-- train.py [args...]``. The installed console script, the local scheduler."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.job_script_words import script_words
from tests.integration.test_cli import cli

#: Words a script may take that a shell, argparse or a naive join would change.
AWKWARD = ["--dataset=x", "two words", "it's", "$HOME", "--", "--dry-run", ""]

#: A script that prints the words it was given, as one JSON line.
ECHO_ARGV = 'import json, sys\nprint("argv " + json.dumps(sys.argv[1:]), flush=True)\n'

#: One process on this machine: the shape any laptop can run.
ONE_RANK = ["--gpus-per-node", "1", "--cpus-per-task", "1", "--python", sys.executable]


def project(tmp_path: Path) -> Path:
    """A project directory holding ``train.py``, which echoes its arguments."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(ECHO_ARGV)
    return proj / "train.py"


def test_script_alone_previews_the_script_not_the_builtin_trainer(tmp_path: Path) -> None:
    train = project(tmp_path)
    res = cli(
        tmp_path, "submit", "--dry-run", *ONE_RANK,
        "--script", str(train), "--script-args", "--dataset=x --device=cpu",
    )  # fmt: skip
    assert "-m ddp_tui.trainer" not in res.stdout
    assert "-m ddp_tui.scriptrun" in res.stdout
    assert script_words(res.stdout) == ["train.py", "--dataset=x", "--device=cpu"]
    assert not (tmp_path / "runs").exists()


def test_entry_trainer_with_a_script_is_refused_naming_both(tmp_path: Path) -> None:
    train = project(tmp_path)
    res = cli(
        tmp_path, "submit", "--dry-run", "--entry", "trainer", "--script", str(train), check=False
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--entry trainer" in res.stderr and "--script" in res.stderr
    assert res.stdout == ""


@pytest.mark.parametrize(
    "shape",
    [
        ONE_RANK,
        # The Slurm script of two nodes, rendered where no Slurm is needed.
        ["--scheduler", "slurm", "--nodes", "2", "--launcher", "srun", "--skip-python-check"],
    ],
    ids=["local", "slurm-srun"],
)
def test_torchrun_form_previews_the_scripts_words_exactly(tmp_path: Path, shape: list[str]) -> None:
    train = project(tmp_path)
    res = cli(tmp_path, "submit", "--dry-run", *shape, "--", str(train), *AWKWARD)
    assert script_words(res.stdout) == ["train.py", *AWKWARD]
    assert "-m ddp_tui.trainer" not in res.stdout


@pytest.mark.torch
def test_torchrun_form_submit_runs_the_script_with_its_words(tmp_path: Path) -> None:
    train = project(tmp_path)
    run_id, _ = cli(
        tmp_path, "submit", "--name", "argv", *ONE_RANK, "--", str(train), *AWKWARD
    ).stdout.split()
    deadline = time.monotonic() + 120
    while True:
        row = json.loads(cli(tmp_path, "ls", "--json").stdout)[0]
        if row["state"] not in ("PENDING", "RUNNING", "COMPLETING"):
            break
        assert time.monotonic() < deadline, row
        time.sleep(0.5)  # polling a state the job reaches by itself, not a synchronisation
    assert row["run_id"] == run_id
    assert row["state"] == "COMPLETED", cli(tmp_path, "logs", run_id, "--err").stdout
    printed = cli(tmp_path, "logs", run_id).stdout.splitlines()
    assert f"argv {json.dumps(AWKWARD)}" in printed
    spec = json.loads((tmp_path / "runs" / run_id / "spec.json").read_text())
    spec = spec.get("spec", spec)
    assert spec["entry"] == "script" and shlex.split(spec["script_args"]) == AWKWARD
