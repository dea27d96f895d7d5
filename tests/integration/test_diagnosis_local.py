"""Real failures on the embedded local scheduler, and what the diagnosis says of them.

Each test makes the failure happen with real parts (the real trainer or a user's script under
torchrun, a real interpreter) and then asks the facade (``Cluster.diagnose``, the view's
``diagnosis``, ``stall`` and ``reason_label``) and the CLI (``ddp-tui why``, ``ddp-tui ls``):

- the job's Python has no torch (a venv made without it): the pre-queue check refuses it;
  overridden, the job fails: ``missing-module`` naming torch, ``why`` exits 1;
- a user's script imports a package the job's Python lacks: ``missing-module`` naming it;
- the data root disappears between the plan (whose pre-queue check saw it) and the job's
  start (held by a hold file until the test has removed it): ``missing-dataset``;
- a cancel: ``cancelled``, nothing to fix, ``why`` exits 0;
- a trainer held after its first epoch, with a stall time of 3 seconds: stalled in Jobs, its
  silent ranks named in Run detail from their heartbeats, never cancelled; released, it
  completes; a held user script is stalled too, by its log and progress alone (no ranks).

Jobs are kept where a test needs them by construction (tests/helpers/hold.py); the timeouts
only bound a hang.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from tests.helpers.hold import Hold
from tests.integration.story import (
    diagnosed,
    logs,
    tiny_script_spec,
    tiny_spec,
    wait_for,
    wait_state,
)
from tests.integration.test_cli import cli

pytestmark = pytest.mark.torch

ENDED = (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT)
#: A user's script that imports a package no environment has (tests/helpers/failing_scripts).
ABSENT_MODULE_SCRIPT = (
    Path(__file__).resolve().parents[1] / "helpers" / "failing_scripts" / "needs_absent_module.py"
)
#: The stall time of these tests: 3 seconds of quiet.
STALL_AFTER_MIN = 0.05


def open_cluster(tmp_path: Path, **profile: Any) -> Cluster:
    """The facade on the local scheduler, its state where ``ddp-tui`` (test_cli.cli, with
    XDG_STATE_HOME under ``tmp_path``) finds it, so the CLI sees the jobs it started."""
    c = Cluster.open(
        Profile(scheduler="local", runs_root=str(tmp_path / "runs"), **profile),
        local_state_dir=str(tmp_path / "state" / "ddp-tui" / "local"),
    )
    assert c.location == "local scheduler"
    return c


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    return open_cluster(tmp_path)


@pytest.fixture
def held_cluster(tmp_path: Path) -> Cluster:
    """The facade for held specs: the pre-queue Python check runs the spec's set-up lines as
    the job does, so it would wait on a hold line too; it is off (the data root check stays).
    """
    return open_cluster(tmp_path, check_python=False)


def why(tmp_path: Path, run_id: str) -> subprocess.CompletedProcess[str]:
    return cli(tmp_path, "why", run_id, check=False)


def ls_row(tmp_path: Path, run_id: str) -> dict[str, str]:
    """The run's row of ``ddp-tui ls``, by column name."""
    header, *lines = cli(tmp_path, "ls").stdout.splitlines()
    names = header.split("\t")
    rows = [dict(zip(names, line.split("\t"), strict=True)) for line in lines if "\t" in line]
    mine = [r for r in rows if r["RUN"] == run_id]
    assert len(mine) == 1, rows
    return mine[0]


def python_without_torch(tmp_path: Path) -> Path:
    """A real interpreter that lacks torch: a venv of this Python without its packages."""
    venv = tmp_path / "venv-without-torch"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import torch"], capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr
    return python


# -- the job's Python ----------------------------------------------------------------------


def test_a_python_without_torch_is_a_missing_module_naming_torch(tmp_path: Path) -> None:
    python = python_without_torch(tmp_path)
    spec = tiny_spec(name="no-torch", python=str(python))
    # The pre-queue check stops it...
    refused = open_cluster(tmp_path).plan(spec)
    assert [e.field for e in refused.errors] == ["python"], refused.errors
    assert "torch" in refused.errors[0].message
    # ...unless the user knows better: then the job itself fails, at once.
    cluster = open_cluster(tmp_path, check_python=False)
    plan = cluster.plan(spec)
    assert plan.ok, plan.errors
    run = cluster.submit(plan)
    done = wait_state(cluster, run.run_id, *ENDED)
    assert done.state is JobState.FAILED
    _out, err = logs(done)
    assert "No module named 'torch'" in err, err

    diagnosis = diagnosed(cluster, done, "missing-module")
    assert diagnosis.needs_fix
    assert "torch" in diagnosis.short and "torch" in diagnosis.cause, diagnosis
    assert str(python) in diagnosis.cause, diagnosis.cause  # which python lacks it
    assert any("No module named 'torch'" in e.text for e in diagnosis.evidence)
    assert done.reason_label == diagnosis.short

    res = why(tmp_path, run.run_id)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "torch" in res.stdout
    assert ls_row(tmp_path, run.run_id)["REASON"] == diagnosis.short


def test_a_scripts_missing_import_is_a_missing_module_naming_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    spec = tiny_script_spec(ABSENT_MODULE_SCRIPT, name="absent-import")
    run = cluster.submit(cluster.plan(spec))
    done = wait_state(cluster, run.run_id, *ENDED, timeout=240)
    assert done.state is JobState.FAILED
    _out, err = logs(done)
    assert "ModuleNotFoundError: No module named 'absent_augment_lib'" in err, err

    diagnosis = diagnosed(cluster, done, "missing-module")
    assert diagnosis.needs_fix
    assert "absent_augment_lib" in diagnosis.cause, diagnosis.cause
    assert any("absent_augment_lib" in e.text for e in diagnosis.evidence)
    assert why(tmp_path, run.run_id).returncode == 1


# -- the data ------------------------------------------------------------------------------


def test_a_data_root_gone_before_the_job_starts_is_a_missing_dataset(
    held_cluster: Cluster, hold: Hold, tmp_path: Path
) -> None:
    cluster = held_cluster
    root = tmp_path / "images"
    for split in ("train", "val"):
        (root / split / "cat").mkdir(parents=True)
    spec = tiny_spec(
        name="data-gone",
        model="simple_cnn",
        dataset="imagefolder",
        data_root=str(root),
        synthetic_samples=None,
        synthetic_val_samples=None,
        synthetic_shape="",
        num_classes=None,
    )
    # The plan's pre-queue check finds the data root; the job waits until it is gone.
    plan = cluster.plan(hold.running(spec))
    assert plan.ok, plan.errors
    run = cluster.submit(plan)
    wait_state(cluster, run.run_id, JobState.RUNNING, timeout=120)
    shutil.rmtree(root)
    hold.release()
    done = wait_state(cluster, run.run_id, *ENDED, timeout=240)
    assert done.state is JobState.FAILED
    _out, err = logs(done)
    assert f"argument --data-root: {root} does not exist" in err, err

    diagnosis = diagnosed(cluster, done, "missing-dataset")
    assert diagnosis.needs_fix
    assert str(root) in diagnosis.cause, diagnosis.cause  # where it looked
    assert any(str(root) in e.text for e in diagnosis.evidence)


# -- cancel --------------------------------------------------------------------------------


def test_a_cancel_is_cancelled_info_and_why_exits_0(
    held_cluster: Cluster, hold: Hold, tmp_path: Path
) -> None:
    cluster = held_cluster
    run = cluster.submit(cluster.plan(hold.running(tiny_spec(name="cancel-me"))))
    wait_state(cluster, run.run_id, JobState.RUNNING, timeout=120)
    cluster.cancel(run.run_id)
    done = wait_state(cluster, run.run_id, JobState.CANCELLED, timeout=90)

    diagnosis = diagnosed(cluster, done, "cancelled")
    assert diagnosis.severity == "info" and not diagnosis.needs_fix
    res = why(tmp_path, run.run_id)
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert res.stdout.strip()


# -- stall ---------------------------------------------------------------------------------


def test_a_held_trainer_is_stalled_with_its_silent_ranks_named_and_not_cancelled(
    tmp_path: Path, hold: Hold
) -> None:
    cluster = open_cluster(tmp_path, check_python=False, stall_after_min=STALL_AFTER_MIN)
    spec = hold.after_epochs(tiny_spec(name="stalls", gpus_per_node=2, epochs=3), 1)
    run = cluster.submit(cluster.plan(spec))
    # Both ranks parked after epoch 1 (the job module says so): nothing more comes from them.
    wait_for(
        cluster,
        run.run_id,
        lambda v: (hold.waiting(0) and hold.waiting(1)) or v.state in ENDED,
        "both ranks at the hold",
        240,
    )
    stalled = wait_for(
        cluster, run.run_id, lambda v: v.stall is not None or v.state in ENDED, "a stall", 120
    )
    assert stalled.state is JobState.RUNNING  # marked, not cancelled (cancel_stalled is off)
    stall = stalled.stall
    assert stall is not None
    assert stall.quiet_sec >= STALL_AFTER_MIN * 60
    assert stalled.reason_label.startswith("stalled"), stalled.reason_label
    assert cluster.refresh().stalled >= 1
    # The table names no ranks (it reads no heartbeats); Run detail does, from theirs.
    detail = cluster.follow(run.run_id)
    assert sorted(b.rank for b in detail.heartbeats) == [0, 1], detail.heartbeats
    assert detail.stall is not None
    silent = {r.rank: r for r in detail.stall.silent_ranks}
    assert set(silent) == {0, 1}, detail.stall
    assert all(r.host and r.quiet_sec is not None for r in silent.values()), detail.stall
    assert "rank" in detail.stall.summary, detail.stall.summary
    assert cluster.diagnose(run.run_id) is None  # running: nothing has ended to diagnose
    # A fresh process (`ddp-tui why`) finds the stall too, and offers every rank's stack.
    stall_profile = f'[profiles.local]\nscheduler = "local"\nstall_after_min = {STALL_AFTER_MIN}\n'
    res = cli(tmp_path, "why", run.run_id, check=False, config=stall_profile)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "stalled:" in res.stdout and f"ddp-tui stacks {run.run_id}" in res.stdout, res.stdout

    hold.release()
    done = wait_state(cluster, run.run_id, *ENDED, timeout=240)
    assert done.state is JobState.COMPLETED
    assert done.stall is None


def test_a_held_script_is_stalled_by_its_log_and_progress_alone(tmp_path: Path, hold: Hold) -> None:
    cluster = open_cluster(tmp_path, stall_after_min=STALL_AFTER_MIN)
    # The script's own hold: after epoch 1 it waits while the file exists.
    spec = tiny_script_spec(
        "checkpoint_ddp.py",
        name="script-stalls",
        epochs=3,
        metrics="key-value",
        script_args=f"--epochs 3 --hold-file {hold.file} --hold-after 1",
    )
    run = cluster.submit(cluster.plan(spec))
    wait_for(cluster, run.run_id, lambda v: v.epochs_done >= 1, "the first epoch", 240)
    stalled = wait_for(
        cluster, run.run_id, lambda v: v.stall is not None or v.state in ENDED, "a stall", 120
    )
    assert stalled.state is JobState.RUNNING and stalled.stall is not None
    assert stalled.reason_label.startswith("stalled"), stalled.reason_label
    # A user's script writes no heartbeats: no rank can be named, none is made up.
    detail = cluster.follow(run.run_id)
    assert detail.heartbeats == []
    assert detail.stall is not None and detail.stall.silent_ranks == ()

    hold.release()
    done = wait_state(cluster, run.run_id, *ENDED, timeout=240)
    assert done.state is JobState.COMPLETED, cluster.follow(run.run_id).err_lines[-30:]
    assert done.stall is None
