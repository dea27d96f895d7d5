"""A finished sweep at 1 and 2 processes, made of real files the way a submit and the trainer
write them (no job runs): what the scaling advisor reads, for Compare's Advice panel.

Each run directory comes from :meth:`RunStore.create_run` with the sweep's member spec and
group key; ``jobs.jsonl`` holds one local attempt and its recorded end (so no scheduler is
asked); ``metrics.csv`` has the trainer's columns with the step breakdown
(``data_load_time_sec``, ``compute_time_sec``, ``comm_time_sec``, ``other_time_sec``);
``run.json`` the gradient bytes, the DDP buckets and the all-reduce probe; and
``step_times.jsonl`` every rank's step times per epoch. The numbers are of the order a
ResNet-18 on 32x32 synthetic data takes with gloo on this 2-core machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ddp_tui.jobfiles import METRICS_COLUMNS, STEP_TIMES_FILE, csv_cell
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.store.history import attempt_record, end_record
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.spec import ExperimentSpec, expand_sweep, sweep_from_options

SAMPLES = 2048
BATCH = 32
SPEC = ExperimentSpec(
    name="resnet-sweep",
    model="resnet18",
    dataset="synthetic",
    synthetic_samples=SAMPLES,
    num_classes=10,
    device="cpu",
    backend="gloo",
    cpus_per_task=1,
    epochs=3,
    batch_per_gpu=BATCH,
    workers=0,
)
#: How much longer rank 1 of the 2-process run is busy than rank 0: 13% over the median of the
#: two, past the 10% that names a straggler.
STRAGGLER_SLOWER = 0.3
#: ResNet-18's gradients: 11.2 M float32 parameters.
GRAD_BYTES = 44_700_000


@dataclass(frozen=True)
class Epoch:
    """One size's steady epoch, per rank (the mean over ranks), in seconds."""

    compute: float
    data: float
    comm: float
    other: float

    @property
    def total(self) -> float:
        return self.compute + self.data + self.comm + self.other


#: The measured epochs by world size: at 2 the compute halves and the all-reduce appears.
EPOCHS = {
    1: Epoch(compute=17.6, data=0.8, comm=0.0, other=1.6),
    2: Epoch(compute=8.9, data=0.45, comm=2.3, other=0.85),
}


def _metrics(world: int, epoch: Epoch, epochs: int) -> str:
    lines = [",".join(METRICS_COLUMNS)]
    for n in range(1, epochs + 1):
        warm = 1.15 if n == 1 else 1.0  # the first epoch pays for warm-up
        total = epoch.total * warm
        row: dict[str, float | None] = {
            "epoch": float(n),
            "train_loss": 2.3 / n,
            "train_acc": 0.1 * n,
            "val_loss": 2.4 / n,
            "val_acc": 0.09 * n,
            "lr": 0.1,
            "epoch_time_sec": total,
            "throughput_samples_per_sec": SAMPLES / total,
            "data_load_time_sec": epoch.data,
            "compute_time_sec": epoch.compute * warm,
            "comm_time_sec": epoch.comm,
            "other_time_sec": epoch.other,
            "world_size": float(world),
        }
        lines.append(",".join(csv_cell(row.get(c)) for c in METRICS_COLUMNS))
    return "\n".join(lines) + "\n"


def _step_times(world: int, epoch: Epoch, epochs: int, steps: int) -> str:
    step = epoch.total / steps
    busy = (epoch.total - epoch.comm) / steps
    # The last rank is the straggler: busy that much longer, its peers wait in the all-reduce.
    ranks = [
        {"rank": r, "host": "localhost", "step_median_sec": step,
         "busy_median_sec": busy * (1 + STRAGGLER_SLOWER if r == world - 1 > 0 else 1)}
        for r in range(world)
    ]  # fmt: skip
    return "".join(json.dumps({"epoch": n, "ranks": ranks}) + "\n" for n in range(1, epochs + 1))


def finished_sweep(root: Path, sizes: tuple[int, ...] = (1, 2), *, metrics: bool = True) -> str:
    """The sweep's completed runs under ``root`` (``metrics``: False, runs that ended before
    their first epoch's row); its group key."""
    store = RunStore(LocalExecutor(), str(root))
    group = SPEC.group_key()
    members = expand_sweep(SPEC, sweep_from_options([",".join(map(str, sizes))]))
    for n, (world, spec) in enumerate(((m.spec.gpus_per_node, m.spec) for m in members), 1):
        ref = store.create_run(spec.to_dict(), spec.name, "#!/bin/bash\n", group)
        run_dir = Path(ref.path)
        job_id = str(4200 + n)
        end = JobStatus(job_id, JobState.COMPLETED, "COMPLETED", node_list="localhost",
                        elapsed_sec=80.0, exit_code=0, start="2026-11-21T10:00:01Z",
                        end="2026-11-21T10:01:21Z")  # fmt: skip
        lines = [attempt_record(job_id, "local", None, 1), end_record(end)]
        (run_dir / "jobs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        steps = SAMPLES // (BATCH * world)
        epoch = EPOCHS[world]
        run_json = {
            "state": "completed", "world_size": world, "backend": "gloo",
            "hosts": ["localhost"], "epochs": SPEC.epochs, "job_id": job_id,
            "epochs_completed": SPEC.epochs if metrics else 0,
            "steps_per_epoch": steps, "train_samples": SAMPLES,
            "loader_workers": 0, "grad_bytes": GRAD_BYTES,
            "ddp": {"bucket_cap_mb": 25.0, "buckets": 2} if world > 1 else None,
            # The trainer's own all-reduce of the gradients' size at this world size.
            "allreduce_probe": {"bytes": GRAD_BYTES, "time_sec": 0.031} if world > 1 else None,
        }  # fmt: skip
        (run_dir / "run.json").write_text(json.dumps(run_json))
        if metrics:
            (run_dir / "metrics.csv").write_text(_metrics(world, epoch, SPEC.epochs))
            (run_dir / STEP_TIMES_FILE).write_text(_step_times(world, epoch, SPEC.epochs, steps))
    return group
