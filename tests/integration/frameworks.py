"""Users' scripts in the idioms of the frameworks (tests/helpers/framework_scripts), run with
only the defaults: what each must show once it has run through ddp-tui."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.spec import ExperimentSpec
from tests.integration.story import run_json, tiny_script_spec, wait_state

SCRIPTS = Path(__file__).resolve().parents[1] / "helpers" / "framework_scripts"
EPOCHS = 3


@dataclass(frozen=True)
class Case:
    script: str
    columns: tuple[str, ...]  # the metrics the script reports, which every row must hold
    framework: str | None  # the framework the observer must have seen


CASES = [
    # The tutorials' DDP: "[GPU0] Epoch 0 | Batchsize: 32 | Steps: 8" as epochs start; no loss.
    pytest.param(Case("plain_ddp.py", (), None), id="plain-ddp"),
    # fit then test, the default (rich) progress bar: test adds no row.
    pytest.param(
        Case("lightning_fit_then_test.py", ("train_loss", "val_loss", "val_acc"), "lightning"),
        id="lightning",
    ),
    # Without its CPU switch: the job's ACCELERATE_USE_CPU=1 makes it form the group.
    pytest.param(Case("accelerate_loop.py", ("train_acc",), "accelerate"), id="accelerate"),
    pytest.param(
        Case("hf_trainer.py", ("train_loss", "val_loss", "val_acc"), "transformers"), id="hf"
    ),
    pytest.param(Case("tqdm_loop.py", ("train_loss",), None), id="tqdm"),
]


def framework_spec(script: str, **changes: object) -> ExperimentSpec:
    """Only the script, its arguments, the epochs and the size: every other field default."""
    defaults: dict[str, object] = {
        "name": f"fw-{Path(script).stem.replace('_', '-')}",
        "metrics": "auto",
        "script_args": f"--epochs {EPOCHS}",
        "epochs": EPOCHS,
    }
    return tiny_script_spec(SCRIPTS / script, **{**defaults, **changes})


def journals(run_dir: str | Path) -> list[list[dict[str, Any]]]:
    """Every process's observation journal, as records."""
    return [
        [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
        for p in sorted((Path(run_dir) / "observe").glob("*.jsonl"))
    ]


def ended(cluster: Cluster, run_id: str) -> None:
    done = wait_state(
        cluster, run_id, JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, timeout=300
    )
    assert done.state is JobState.COMPLETED, cluster.follow(run_id).err_lines[-40:]


def check_framework_run(
    cluster: Cluster, run_id: str, run_dir: str, case: Case, nodes: int
) -> None:
    """One row per training epoch with its own time, throughput and the script's metrics; the
    group the ranks formed; verify green."""
    ended(cluster, run_id)
    detail = cluster.follow(run_id)
    rows = detail.metrics
    assert [r["epoch"] for r in rows] == [1.0, 2.0, 3.0], rows  # no test phase among them
    for row in rows:
        assert row["throughput_samples_per_sec"] and row["throughput_samples_per_sec"] > 0, row
        assert row["epoch_time_sec"] and row["epoch_time_sec"] > 0, row
        assert row["data_load_time_sec"] is not None and row["compute_time_sec"], row
        for column in case.columns:
            assert row[column] is not None, (column, row)

    info = run_json(run_dir)
    observed = info["observed"]
    assert observed["group"] == "formed", observed
    assert observed["world_size"] == 2 and observed["backend"] == "gloo", observed
    assert len(observed["hosts"]) == nodes and observed["notes"] == [], observed
    if case.framework:
        assert case.framework in observed["frameworks"], observed
    # Every rank's step time (its records end before the scripts' closing barrier, so they are
    # written before rank 0's wrapper sums up).
    assert [r["rank"] for r in observed["ranks"]] == [0, 1], observed
    assert all(r["epoch_sec"] > 0 and r["data_wait_sec"] >= 0 for r in observed["ranks"])

    # Epoch 1 is timed from its own start: after the imports and the group's forming, which
    # the process's first record (written once the group formed) follows.
    main = next(j for j in journals(run_dir) if any(r.get("rank") == 0 for r in j))
    epochs = [r for r in main if r["kind"] == "epoch"]
    # The last record of the first epoch: a loader one batch ahead (Accelerate's) writes it
    # again with its last step.
    first = [r for r in epochs if r["epoch"] == epochs[0]["epoch"]][-1]
    assert first["start"] >= main[0]["t"], (first, main[0])
    assert first["seconds"] == pytest.approx(first["end"] - first["start"])
    assert rows[0]["epoch_time_sec"] == pytest.approx(first["seconds"], rel=1e-6)
    # The loss each framework trains on is seen from inside backward(), and the step totals
    # end with the record written at exit.
    steps = [r for r in main if r["kind"] == "step"]
    assert [r["loss"] for r in steps if r["loss"] is not None], steps[-2:]
    assert steps[-1].get("final") is True and steps[-1]["steps_total"] > 0, steps[-1]

    checks = cluster.verify(run_id)
    assert checks and all(c.ok for c in checks), [(c.name, c.detail) for c in checks if not c.ok]
    names = [c.name for c in checks]
    assert "the ranks trained in one process group" in names
