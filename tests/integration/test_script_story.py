"""A user's own training script through ddp-tui, on the embedded local scheduler (2 processes).

The scripts (tests/helpers/user_scripts) are plain torch DDP scripts: one prints the tutorials'
epoch lines among noise, one reports through ``ddp_tui_report``, one checkpoints and prints
``epoch=E loss=L acc=A``. Each runs to the end: ``ddp-tui ls`` shows its epochs and loss,
``metrics.csv`` has a row per epoch, verify is green. A crashing script fails with its
traceback in the ``.err`` log and its run directory intact; a sweep over processes compares;
a retry runs the same snapshot of the project again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import RunView
from ddp_tui.spec import sweep_from_options
from tests.integration.story import (
    epochs_in_metrics,
    run_json,
    tiny_script_spec,
    wait_for,
    wait_state,
)
from tests.integration.test_cli import cli

pytestmark = pytest.mark.torch

ENDED = (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED)


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    profile = Profile(scheduler="local", runs_root=str(tmp_path / "runs"))
    # The local scheduler's state where `ddp-tui ls` (test_cli.cli: XDG_STATE_HOME under
    # tmp_path) looks for it, so the CLI sees the jobs this facade started.
    c = Cluster.open(profile, local_state_dir=str(tmp_path / "state" / "ddp-tui" / "local"))
    assert c.location == "local scheduler"
    return c


def ls_row(tmp_path: Path, run_id: str) -> dict[str, str]:
    """The run's row of ``ddp-tui ls``, by column name."""
    header, *lines = cli(tmp_path, "ls").stdout.splitlines()
    names = header.split("\t")
    rows = [dict(zip(names, line.split("\t"), strict=True)) for line in lines if "\t" in line]
    mine = [r for r in rows if r["RUN"] == run_id]
    assert len(mine) == 1, rows
    return mine[0]


def logs(run_dir: Path, job_id: str | None) -> tuple[str, str]:
    """An attempt's .out and .err."""
    return (
        (run_dir / f"slurm-{job_id}.out").read_text(),
        (run_dir / f"slurm-{job_id}.err").read_text(),
    )


def assert_green(cluster: Cluster, run_id: str) -> None:
    checks = cluster.verify(run_id)
    assert checks and all(c.ok for c in checks), [(c.name, c.detail) for c in checks if not c.ok]


def finish(cluster: Cluster, view: RunView, timeout: float = 240) -> RunView:
    """Wait for the run's latest attempt to end; it must have completed."""
    done = wait_state(cluster, view.run_id, *ENDED, timeout=timeout)
    assert done.state is JobState.COMPLETED, cluster.follow(view.run_id).err_lines[-30:]
    return done


SCRIPTS = [
    # The tutorials' "Epoch 3 - Avg Loss: ..., Accuracy: 92.3%" among noise, its preset named.
    pytest.param("tutorial_ddp.py", "epoch-line", "Training finished.", id="tutorial"),
    # The same under auto: every preset is tried, and none may take the noise for an epoch.
    pytest.param("tutorial_ddp.py", "auto", "[batch 5/8] loss", id="tutorial-auto"),
    # ddp_tui_report's lines; auto: they win over every preset.
    pytest.param("helper_ddp.py", "auto", "@ddp-tui ", id="helper"),
    # "epoch=1 loss=... acc=...", found by auto among the presets.
    pytest.param("checkpoint_ddp.py", "auto", "epoch=2 loss=", id="checkpoint"),
]


@pytest.mark.parametrize(("script", "metrics", "printed"), SCRIPTS)
def test_a_users_script_runs_to_the_end_lists_and_verifies(
    cluster: Cluster, tmp_path: Path, script: str, metrics: str, printed: str
) -> None:
    spec = tiny_script_spec(script, name=f"own-{Path(script).stem}", metrics=metrics)
    view = cluster.submit(cluster.plan(spec))
    run_dir = Path(view.run_dir)
    for name in ("spec.json", "job.sbatch", "jobs.jsonl", f"project/{script}"):
        assert (run_dir / name).exists(), name
    assert (run_dir / "project" / "toy_task.py").exists()  # the whole project, not the script

    done = finish(cluster, view)
    assert done.epochs_done == 2 and done.epoch_label == "2/2"
    detail = cluster.follow(view.run_id)
    assert [r["epoch"] for r in detail.metrics] == [1.0, 2.0]
    assert all(r["world_size"] == 2.0 for r in detail.metrics), detail.metrics
    loss = detail.metrics[-1]["train_loss"]
    assert loss is not None and done.last_train_loss == pytest.approx(loss)
    if script == "helper_ddp.py":  # it reports its samples, so throughput is the script's own
        assert done.throughput is not None and done.throughput > 0

    row = ls_row(tmp_path, view.run_id)
    assert row["STATE"].startswith("COMPLETED") and row["SIZE"] == "1x2"
    assert row["EPOCH"] == "2/2" and row["LOSS"] == format(loss, ".4g"), row

    out, _err = logs(run_dir, view.job_id)
    assert printed in out  # the script's stdout reaches the log unchanged
    info = run_json(run_dir)
    assert info["entry"] == "script" and info["state"] == "completed"
    assert info["world_size"] == 2 and info["epochs_completed"] == 2
    assert_green(cluster, view.run_id)


def test_a_crashing_script_fails_with_its_traceback_and_keeps_its_run_dir(
    cluster: Cluster, tmp_path: Path
) -> None:
    spec = tiny_script_spec(
        "tutorial_ddp.py", name="crash", epochs=3, script_args="--epochs 3 --crash-at-epoch 2"
    )
    view = cluster.submit(cluster.plan(spec))
    done = wait_state(cluster, view.run_id, *ENDED, timeout=240)
    assert done.state is JobState.FAILED
    assert done.epochs_done == 1 and done.epoch_label == "1/3"
    assert ls_row(tmp_path, view.run_id)["EPOCH"] == "1/3"

    run_dir = Path(view.run_dir)
    _out, err = logs(run_dir, view.job_id)
    assert "RuntimeError: tutorial_ddp: deliberate crash at epoch 2 (--crash-at-epoch)" in err
    for name in ("spec.json", "job.sbatch", "project/tutorial_ddp.py", "project/toy_task.py"):
        assert (run_dir / name).is_file(), name
    assert epochs_in_metrics(cluster, view.run_id) == [1]
    info = run_json(run_dir)
    assert info["state"] == "failed" and info["epochs_completed"] == 1
    assert not all(c.ok for c in cluster.verify(view.run_id))


def test_a_sweep_of_a_script_over_processes_compares(cluster: Cluster) -> None:
    spec = tiny_script_spec("tutorial_ddp.py", name="own-sweep")
    runs = cluster.submit_sweep(cluster.plan_sweep(spec, sweep_from_options(["1,2"])))
    assert len({r.group for r in runs}) == 1 and runs[0].group
    for r in runs:
        finish(cluster, r)
        assert epochs_in_metrics(cluster, r.run_id) == [1, 2]
    table = cluster.compare(runs[0].group or "")
    assert len(table) == 2 and list(table["world_size"]) == [1, 2]
    # The script reports no samples: the speedup comes from the epoch times.
    assert table["speedup"].notna().all(), table.to_dict("records")
    assert table["speedup"].iloc[0] == pytest.approx(1.0)


def project_files(project: Path) -> dict[str, tuple[int, int]]:
    """Each file of a run's project snapshot: (inode, mtime in ns). Python's bytecode cache is
    left out: the interpreter writes it there as the script runs, it is not the snapshot."""
    return {
        str(p.relative_to(project)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in sorted(project.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_retry_of_an_ended_script_run_reuses_its_snapshot(cluster: Cluster) -> None:
    view = cluster.submit(cluster.plan(tiny_script_spec("tutorial_ddp.py", name="own-retry")))
    finish(cluster, view)
    run_dir = Path(view.run_dir)
    before = project_files(run_dir / "project")
    assert {"tutorial_ddp.py", "toy_task.py"} <= set(before)

    retried = cluster.retry(view.run_id)
    assert retried.job_id not in (None, view.job_id)
    assert len(retried.attempts) == 2 and retried.attempts[-1].retry_of == view.job_id
    final = wait_for(
        cluster,
        view.run_id,
        lambda v: v.job_id == retried.job_id and v.state in ENDED,
        "the retry's end",
        240,
    )
    assert final.state is JobState.COMPLETED, cluster.follow(view.run_id).err_lines[-30:]
    assert project_files(run_dir / "project") == before
    # The retry trained both epochs again: each one's row replaced, none repeated.
    assert epochs_in_metrics(cluster, view.run_id) == [1, 2]
    out, _err = logs(run_dir, retried.job_id)
    assert "Epoch 2 - Avg Loss:" in out
    attempts = [
        json.loads(line).get("attempt")
        for line in (run_dir / "jobs.jsonl").read_text().splitlines()
        if line.strip() and json.loads(line).get("event") is None  # attempt lines only
    ]
    assert attempts == [1, 2]
    assert run_json(run_dir)["attempts"] == 2
