"""A finished run with a very long ``metrics.csv`` (issue 21: 100,000 rows), made of real
files the way the app and the trainer write them, without running a job.

The run directory comes from :meth:`RunStore.create_run` (as a submit makes it); the job
history holds one local attempt and its recorded end, so no scheduler is asked about it;
``metrics.csv`` has the trainer's columns, one row per epoch, with one loss spike that a
plot sample must keep.
"""

from __future__ import annotations

import json
from pathlib import Path

from ddp_tui.jobfiles import METRICS_COLUMNS, csv_cell
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.spec import ExperimentSpec

HEADER = ",".join(METRICS_COLUMNS) + "\n"
#: The epoch whose train loss is the run's highest (a spike in a falling curve).
SPIKE_EPOCH = 77_777
SPIKE_LOSS = 50.0


def metrics_row(epoch: int) -> str:
    """Epoch ``epoch``'s line: a falling loss (but the spike), a rising accuracy."""
    loss = SPIKE_LOSS if epoch == SPIKE_EPOCH else 2.0 / epoch
    values: dict[str, float | None] = {
        "epoch": float(epoch),
        "train_loss": loss,
        "train_acc": 1.0 - 1.0 / (epoch + 1),
        "val_loss": 2.1 / epoch,
        "val_acc": 1.0 - 1.1 / (epoch + 1),
        "lr": 0.1,
        "epoch_time_sec": 12.5,
        "throughput_samples_per_sec": 5000.0 + epoch % 7,
        "gpu_mem_peak_mib": 2048.0,
        "world_size": 1.0,
    }
    return ",".join(csv_cell(values.get(c)) for c in METRICS_COLUMNS) + "\n"


def metrics_text(rows: int, first: int = 1) -> str:
    """Rows ``first`` .. ``first + rows - 1`` (no header)."""
    return "".join(metrics_row(e) for e in range(first, first + rows))


def finished_run(root: Path, name: str, rows: int, group: str | None = None) -> str:
    """A completed local run called ``name`` with ``rows`` epochs in ``metrics.csv``, in
    comparison group ``group``; its id."""
    store = RunStore(LocalExecutor(), str(root))
    spec = ExperimentSpec(name=name, epochs=max(1, min(rows, 100_000)))
    ref = store.create_run(spec.to_dict(), name, "#!/bin/bash\n", group)
    run_dir = Path(ref.path)
    job_id = "4242"
    attempt = {"job_id": job_id, "scheduler": "local", "submitted_at": "2026-11-21T10:00:00Z",
               "retry_of": None, "attempt": 1}  # fmt: skip
    end = {"event": "end", "job_id": job_id, "state": "COMPLETED", "raw_state": "COMPLETED",
           "exit_code": 0, "elapsed_sec": 60.0, "node_list": "localhost",
           "start": "2026-11-21T10:00:01Z", "end": "2026-11-21T10:01:01Z", "reason": "",
           "recorded_at": "2026-11-21T10:01:02Z"}  # fmt: skip
    (run_dir / "jobs.jsonl").write_text(json.dumps(attempt) + "\n" + json.dumps(end) + "\n")
    run_json = {"state": "completed", "world_size": 1, "backend": "gloo",
                "hosts": ["localhost"], "epochs": spec.epochs,
                "epochs_completed": spec.epochs, "job_id": job_id}  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(run_json))
    with open(run_dir / "metrics.csv", "w", encoding="utf-8") as fh:
        fh.write(HEADER)
        fh.write(metrics_text(rows))
    return ref.run_id
