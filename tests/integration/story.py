"""Shared steps of the facade-level stories (local scheduler and Slurm)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddp_tui.diagnosis import Diagnosis
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.remote.model.views import RunView
from ddp_tui.spec import ExperimentSpec


def tiny_spec(**changes: object) -> ExperimentSpec:
    """A CPU/gloo run of the real trainer that takes seconds, not minutes."""
    base = ExperimentSpec(
        name="story",
        model="mlp",
        dataset="synthetic",
        synthetic_samples=512,
        synthetic_val_samples=128,
        synthetic_shape="1,8,8",
        num_classes=4,
        device="cpu",
        backend="gloo",
        nodes=1,
        gpus_per_node=1,
        cpus_per_task=1,
        epochs=2,
        batch_per_gpu=32,
        lr=0.05,
        schedule="none",
        workers=0,
        time_limit="00:10:00",
        python=sys.executable,
    )
    return base.replace(**changes)


#: The user scripts of the script stories: plain torch DDP scripts (see their docstrings).
USER_SCRIPTS = Path(__file__).resolve().parents[1] / "helpers" / "user_scripts"


def tiny_script_spec(script: str | Path, **changes: object) -> ExperimentSpec:
    """A 2-process CPU/gloo run of a user's own script (a name in :data:`USER_SCRIPTS`, or
    a path), its project snapshotted into the run; seconds of training."""
    base = ExperimentSpec(
        name="script",
        entry="script",
        script=str(USER_SCRIPTS / script),
        script_args="--epochs 2",
        metrics="epoch-line",
        epochs=2,
        nodes=1,
        gpus_per_node=2,
        device="cpu",
        backend="gloo",
        cpus_per_task=2,
        time_limit="00:10:00",
        python=sys.executable,
    )
    return base.replace(**changes)


def run_json(run_dir: str | Path) -> dict[str, Any]:
    """The run's ``run.json``, as its rank 0 last wrote it."""
    data: dict[str, Any] = json.loads((Path(run_dir) / "run.json").read_text())
    return data


def view(cluster: Cluster, run_id: str) -> RunView:
    for v in cluster.refresh().runs:
        if v.run_id == run_id:
            return v
    raise AssertionError(f"run {run_id} is not listed")


def wait_for(
    cluster: Cluster,
    run_id: str,
    pred: Callable[[RunView], bool],
    what: str,
    timeout: float = 180.0,
) -> RunView:
    """Refresh until ``pred`` holds; the assertion names what never happened."""
    deadline = time.monotonic() + timeout
    v = view(cluster, run_id)
    while not pred(v):
        if time.monotonic() > deadline:
            detail = cluster.follow(run_id)
            raise AssertionError(
                f"timed out waiting for {what}; last state {v.state.value} "
                f"epochs {v.epochs_done}/{v.epochs_total}\n.out tail: {detail.out_lines[-15:]}"
                f"\n.err tail: {detail.err_lines[-25:]}"
            )
        time.sleep(0.5)
        v = view(cluster, run_id)
    return v


def wait_state(cluster: Cluster, run_id: str, *states: JobState, timeout: float = 180.0) -> RunView:
    return wait_for(cluster, run_id, lambda v: v.state in states, f"state in {states}", timeout)


def epochs_in_metrics(cluster: Cluster, run_id: str) -> list[int]:
    info = next(i for i in cluster.store.list_runs() if i.run_id == run_id)
    return [
        int(e) for r in cluster.store.read_metrics(info.ref) if (e := r.get("epoch")) is not None
    ]


def logs(run: RunView) -> tuple[str, str]:
    """The latest attempt's .out and .err, as the job left them."""
    run_dir = Path(run.run_dir)
    return (
        (run_dir / f"slurm-{run.job_id}.out").read_text(errors="replace"),
        (run_dir / f"slurm-{run.job_id}.err").read_text(errors="replace"),
    )


def diagnosed(cluster: Cluster, run: RunView, code: str) -> Diagnosis:
    """The run's diagnosis, read fresh, with ``code``; the view's, set at refresh, agrees."""
    found = cluster.diagnose(run.run_id)
    out, err = logs(run)
    assert found is not None, f"no diagnosis\n.out:\n{out[-3000:]}\n.err:\n{err[-3000:]}"
    assert found.code == code, (found, err[-3000:])
    assert found.evidence, found
    assert len(found.short) <= 32, found.short
    assert view(cluster, run.run_id).diagnosis == found
    return found
