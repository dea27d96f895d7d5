"""The fixed data the fakes answer with, and that the tests check the screens against: runs in
every main state, a diagnosis, a stall, metrics, telemetry, a sweep's advice and an outcome grid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ddp_tui.advisor import (
    Advice,
    Breakdown,
    Change,
    Measured,
    ModelFacts,
    Predicted,
    Recommendation,
    SizeAdvice,
    Straggler,
)
from ddp_tui.diagnosis import Diagnosis, Evidence
from ddp_tui.diagnosis.stall import Heartbeat, SilentRank, Stall
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.views import Attempt, Efficiency, Progress, RunView
from ddp_tui.reports.outcomes import Member
from ddp_tui.spec import ExperimentSpec, PartitionInfo

if TYPE_CHECKING:
    from ddp_tui.reports.accounting import JobAccounting
    from ddp_tui.resources import ResourceView

NOW = 1_700_000_000.0
#: The runs root of the fake's plans (each plan's run directory is under it).
RUNS_ROOT = "/home/user/ddp-tui-runs"
#: The sample sweep's id (its first member's run id): what folds its runs into one Jobs row.
SAMPLE_SWEEP = "20231114-220000-sweep-0000"

PARTITIONS = [
    PartitionInfo(
        "debug",
        nodes=3,
        gpus_per_node=2,
        cpus_per_node=8,
        max_time_min=60,
        max_nodes=None,
        is_default=True,
    ),
    PartitionInfo("small", nodes=1, gpus_per_node=2, cpus_per_node=8, max_time_min=10, max_nodes=1),
]

BASE = ExperimentSpec(
    name="cifar-resnet",
    model="resnet18",
    dataset="cifar10",
    data_root="/scratch/datasets/cifar10",
    partition="debug",
    time_limit="00:30:00",
    epochs=10,
    batch_per_gpu=128,
    cpus_per_task=4,
)


def sample_accounting(job_id: str = "4242", state: str = "COMPLETED") -> JobAccounting:
    """FAKE accounting with the numbers sacct recorded on the test cluster for a 2-node
    ``srun`` job holding 200 MiB per task (one task per node), its batch step unsampled."""
    from ddp_tui.reports.accounting import JobAccounting, MemoryRequest, StepUsage

    mem = {"mem": 209.96}
    start, end = "2026-11-28T04:20:22", "2026-11-28T04:20:26"
    return JobAccounting(
        job_id=job_id,
        state=state,
        source="sacct",
        name="hold-200m",
        elapsed_sec=4.0,
        time_limit_sec=300.0,
        node_count=2,
        nodes=("n1", "n2"),
        cpus=2,
        gpus=4,
        memory=MemoryRequest(8000.0, "job", "ReqTRES"),
        cpu_sec=2.234,
        steps=(
            StepUsage("batch", state, start, end, 4.0, ("n1",), 1, 1, 0.009),
            StepUsage(
                "0", state, start, end, 4.0, ("n1", "n2"), 2, 2, 2.225,
                usage_max=mem, usage_max_node={"mem": "n2"},
                usage_min={"mem": 209.62}, usage_min_node={"mem": "n1"},
                usage_tot={"mem": 419.58}, usage_ave={"mem": 209.79},
            ),
        ),
    )  # fmt: skip


def fixed_attempt(job_id: str, attempt: int = 1, retry_of: str | None = None) -> Attempt:
    """Attempt ``attempt`` of a run, as job ``job_id`` (the retry of ``retry_of``)."""
    return Attempt(job_id, "slurm", "2023-11-14T22:00:00+00:00", retry_of, attempt)


def sample_runs() -> list[RunView]:
    """Runs in every main state, newest first."""
    sweep = BASE.replace(name="sweep")
    runs = [
        RunView(
            run_id="20231114-221500-mnist-cnn-a1b2",
            name="mnist-cnn",
            run_dir="/runs/20231114-221500-mnist-cnn-a1b2",
            group=None,
            created_at="2023-11-14T22:15:00+00:00",
            spec=BASE.replace(
                name="mnist-cnn", model="simple_cnn", dataset="mnist", nodes=2, gpus_per_node=2
            ),
            attempts=(fixed_attempt("1042"),),
            state=JobState.RUNNING,
            elapsed_sec=754.0,
            epochs_done=3,
            epochs_total=10,
            last_train_loss=0.3456,
            last_val_metric=0.9123,
            throughput=12345.6,
            progress=Progress(
                epoch=4, step=120, steps_per_epoch=400, loss=0.31, samples_per_sec=12000.0
            ),
            hosts=("n1", "n2"),
            world_size=4,
            backend="gloo",
            rendezvous="n1:21042",
        ),
        RunView(
            run_id="20231114-221000-queued-c3d4",
            name="queued",
            run_dir="/runs/q",
            group=None,
            created_at="2023-11-14T22:10:00+00:00",
            spec=BASE.replace(name="queued", nodes=3),
            attempts=(fixed_attempt("1041"),),
            state=JobState.PENDING,
            reason="Resources",
            epochs_total=10,
        ),
        RunView(
            run_id="20231114-220500-broken-e5f6",
            name="broken",
            run_dir="/runs/b",
            group=None,
            created_at="2023-11-14T22:05:00+00:00",
            spec=BASE.replace(name="broken"),
            attempts=(fixed_attempt("1039"), fixed_attempt("1040", 2, "1039")),
            state=JobState.FAILED,
            elapsed_sec=61.0,
            epochs_done=1,
            epochs_total=10,
            last_train_loss=2.302,
            last_val_metric=0.1,
            throughput=950.0,
            hosts=("n1",),
            world_size=1,
            backend="nccl",
            rendezvous="n1:21040",
            efficiency=Efficiency("1040", cpu=0.08, mem=0.61, source="sacct"),
        ),
    ]
    #: What each sweep member's job used (the last: accounting had no record in time).
    used = ((0.72, 0.45), (0.55, 0.3), (None, None))
    for index, (nodes, gpus, thru) in enumerate(((2, 2, 3300.0), (1, 2, 1800.0), (1, 1, 1000.0))):
        cpu, mem = used[index]
        source = "sacct" if cpu is not None else "unavailable"
        runs.append(
            RunView(
                run_id=f"20231114-2200{index}0-sweep-000{index}",
                name=f"sweep-{nodes}x{gpus}",
                run_dir=f"/runs/sweep{index}",
                group="9f2c4e1a7b3d5f60",
                sweep=SAMPLE_SWEEP,
                created_at=f"2023-11-14T22:00:{index}0+00:00",
                spec=sweep.replace(name=f"sweep-{nodes}x{gpus}", nodes=nodes, gpus_per_node=gpus),
                attempts=(fixed_attempt(f"103{index}"),),
                state=JobState.COMPLETED,
                elapsed_sec=300.0 + 60 * index,
                epochs_done=10,
                epochs_total=10,
                last_train_loss=0.05,
                last_val_metric=0.93,
                throughput=thru,
                hosts=("n1", "n2")[:nodes],
                world_size=nodes * gpus,
                backend="gloo",
                rendezvous="n1:21030",
                efficiency=Efficiency(f"103{index}", cpu=cpu, mem=mem, source=source),
            )
        )
    runs.append(
        RunView(
            run_id="20231114-215000-old-cancel-0a0b",
            name="old-cancel",
            run_dir="/runs/o",
            group=None,
            created_at="2023-11-14T21:50:00+00:00",
            spec=BASE.replace(name="old"),
            attempts=(fixed_attempt("1001"),),
            state=JobState.CANCELLED,
            elapsed_sec=12.0,
            epochs_total=10,
        )
    )
    return runs


#: A failed run's ``.err`` as the trainer leaves it when the job's Python lacks torch.
MISSING_TORCH_ERR = [
    "Traceback (most recent call last):",
    '  File "<frozen runpy>", line 198, in _run_module_as_main',
    '  File "/opt/ddp-tui/src/ddp_tui/trainer/__main__.py", line 3, in <module>',
    "ModuleNotFoundError: No module named 'torch'",
    "srun: error: n1: task 0: Exited with exit code 1",
]

#: Its diagnosis (fixed text, in the classifier's shape: the snapshot must not depend on
#: the rules' wording, which has tests of its own).
MISSING_TORCH = Diagnosis(
    code="missing-module",
    short="no module torch",
    cause="The job's python3 has no module 'torch': it is not the Python that has torch.",
    advice="Set python or env_setup in the profile to the environment with torch, or "
    "install torch there.",
    evidence=(
        Evidence("slurm-1040.err", 4, "ModuleNotFoundError: No module named 'torch'"),
        Evidence("slurm-1040.err", 5, "srun: error: n1: task 0: Exited with exit code 1"),
    ),
)

#: A 2-node run whose rank 3 went silent 12 minutes ago at epoch 2 step 40.
STALL = Stall(
    quiet_sec=720.0,
    last_activity=NOW - 720.0,
    silent_ranks=(
        SilentRank(rank=3, host="n2", quiet_sec=725.0, epoch=2, step=40),
        SilentRank(rank=2, host="", quiet_sec=None, epoch=None, step=None),
    ),
)
HEARTBEATS = [
    Heartbeat(rank=0, host="n1", pid=101, t=NOW - 730.0, epoch=2, step=41, phase="train"),
    Heartbeat(rank=3, host="n2", pid=202, t=NOW - 725.0, epoch=2, step=40, phase="train"),
]


def diagnosed_runs() -> list[RunView]:
    """:func:`sample_runs` with the states issue 12 adds: the running run stalled, the
    failed one diagnosed (the pending one already has a reason). As in the real read
    model, the table's stall names no ranks: Run detail's (``FakeCluster(stall=)``) does."""
    runs = sample_runs()
    for index, run in enumerate(runs):
        if run.state is JobState.RUNNING:
            runs[index] = replace(run, stall=replace(STALL, silent_ranks=()))
        elif run.state is JobState.FAILED:
            runs[index] = replace(run, diagnosis=MISSING_TORCH)
    return runs


def sample_metrics(epochs: int = 3) -> list[dict[str, float | None]]:
    rows: list[dict[str, float | None]] = []
    for epoch in range(1, epochs + 1):
        rows.append(
            {
                "epoch": float(epoch),
                "train_loss": 1.5 / epoch,
                "train_acc": 0.6 + 0.1 * epoch,
                "val_loss": 1.6 / epoch,
                "val_acc": 0.55 + 0.12 * epoch,
                "val_mae": None,
                "val_rmse": None,
                "lr": 0.1,
                "epoch_time_sec": 40.0 - epoch,
                "throughput_samples_per_sec": 12000.0 + 100 * epoch,
                "gpu_mem_peak_mib": None,
                "world_size": 4.0,
            }
        )
    return rows


def telemetry_lines(*, gpus: bool = True, samples: int = 11) -> list[dict[str, Any]]:
    """Hand-written sampler lines (the telemetry files of docs/architecture.md) of a 2-node
    job sampled every 30 s up to :data:`NOW`: n1 (ranks 0-1) with gpu0 and gpu1 busy, n2
    (ranks 2-3) whose gpu0 sat at 0% throughout. ``gpus=False``: a CPU run, host lines only."""
    every = 30.0
    t0 = NOW - every * (samples - 1)
    lines: list[dict[str, Any]] = []
    for node, host, ranks in ((0, "n1", "0-1"), (1, "n2", "2-3")):
        attempt = {"host": host, "node": node, "ranks": ranks, "job": "1042", "restart": 0}
        source = "nvml" if gpus else "none"
        lines.append(
            {"t": t0 - 1, "kind": "start", **attempt, "interval": every, "gpu_source": source,
             "pid": 900 + node}
        )  # fmt: skip
        for i in range(samples):
            t = t0 + i * every
            host_line: dict[str, Any] = {
                "t": t, "kind": "host", **attempt, "rss_mib": 2000.0 + 100 * node + 10 * i,
                "procs": 3, "load1": 2.0, "mem_total_mib": 64000.0, "cpus": 8,
            }  # fmt: skip
            if i:  # the first sample has no CPU share yet
                host_line["cpu_pct"] = 180.0
            lines.append(host_line)
            for index in (0, 1) if gpus and node == 0 else (0,) if gpus else ():
                idle = node == 1
                lines.append(
                    {"t": t, "kind": "gpu", **attempt, "index": index, "uuid": f"GPU-{node}{index}",
                     "name": "NVIDIA A100",
                     "mem_used_mib": 3.0 if idle else 5000.0 + 20 * i + 1000 * index,
                     "mem_total_mib": 40960.0, "util_pct": 0.0 if idle else 90.0 - 10 * index,
                     "power_w": 60.0 if idle else 250.0}
                )  # fmt: skip
    return lines


def resource_view(lines: Sequence[dict[str, Any]], *, state: str = "RUNNING") -> ResourceView:
    """The view the facade builds of ``lines`` for a run in ``state`` (the real accumulator;
    a 30 s interval, as :func:`telemetry_lines` samples)."""
    from ddp_tui.resources import ResourceAccumulator

    acc = ResourceAccumulator()
    acc.add_all(lines)
    return acc.view(telemetry_sec=30, state=state)


def _predicted(epoch: float, world: int, efficiency: float, spread: float) -> Predicted:
    speedup = efficiency * world
    return Predicted(
        epoch_time_sec=epoch,
        epoch_time_low_sec=epoch * (1 - spread),
        epoch_time_high_sec=epoch * (1 + spread),
        throughput=1000.0 * speedup,
        speedup=speedup,
        speedup_low=speedup * (1 - spread),
        speedup_high=speedup * (1 + spread),
        efficiency=efficiency,
        efficiency_low=efficiency * (1 - spread),
        efficiency_high=min(1.0, efficiency * (1 + spread)),
        gpu_hours_per_epoch=epoch * world / 3600,
        comm_sec=epoch * (1 - efficiency),
        link="inter-node" if world > 2 else "intra-node",
    )


def sample_advice(group: str = "g") -> Advice:
    """The fake comparison's advice (sizes 1, 2, 4 measured; 8 and 16 predicted)."""

    def measured(run_id: str, epoch: float, speedup: float, world: int) -> Measured:
        comm = 0.0 if world == 1 else epoch * (1 - speedup / world)
        rest = epoch - comm
        return Measured(
            run_id, epoch, 1000.0 * speedup, speedup, speedup / world,
            Breakdown(rest * 0.8, rest * 0.12, comm, rest * 0.08),
        )  # fmt: skip

    sizes = (
        SizeAdvice(1, 1, 1, measured("a", 50.0, 1.0, 1), _predicted(50.0, 1, 1.0, 0.0)),
        SizeAdvice(2, 1, 2, measured("b", 27.8, 1.8, 2), _predicted(26.9, 2, 0.93, 0.05), -0.032),
        SizeAdvice(4, 2, 2, measured("c", 15.2, 3.3, 4), _predicted(16.1, 4, 0.78, 0.08), 0.059),
        SizeAdvice(8, 4, 2, None, _predicted(9.1, 8, 0.69, 0.12)),
        SizeAdvice(16, 8, 2, None, _predicted(5.6, 16, 0.56, 0.15)),
    )
    return Advice(
        group=group,
        threshold=0.8,
        deadline_sec=None,
        sizes=sizes,
        recommendation=Recommendation(
            4, 2, 2, "the largest size measured at 80% efficiency or more (82% at 4)", "threshold"
        ),
        changes=(
            Change("accumulation", "gradient accumulation 2: comm 17% of the epoch at 4 -> 9%"),
            Change("workers", "workers 4 -> 8: the data wait is 12% of the epoch at 4"),
        ),
        stragglers=(Straggler("c", 4, 3, "n2", 0.14, 0.114, 0.1),),
        model=ModelFacts(1.6, 1.2, 2.4, 1.0, True, 44_700_000, 2, {}, "throughput"),
        notes=("bus bandwidth from the preflight of 2 nodes (debug)",),
    )


#: The fixed grid the fake's outcomes() answers: (run id, lr, batch per GPU, val_acc per epoch).
OUTCOME_GRID = (
    ("20231114-210000-grid-0001", 0.1, 64, (0.62, 0.80, 0.86)),
    ("20231114-210000-grid-0002", 0.1, 128, (0.60, 0.78, 0.88)),
    ("20231114-210000-grid-0003", 0.01, 64, (0.41, 0.55, 0.63)),
    ("20231114-210000-grid-0004", 0.01, 128, (0.38, 0.50, 0.59)),
)


def sample_members(group: str = "g") -> list[Member]:
    """The fake's outcome grid (lr x batch per GPU, 3 epochs each) as the pure
    :func:`ddp_tui.reports.outcomes.outcome_table` takes it."""
    from ddp_tui.reports.results import RunData

    out = []
    for i, (run_id, lr, batch, accs) in enumerate(OUTCOME_GRID):
        rows: list[dict[str, float | None]] = [
            {
                "epoch": float(e + 1),
                "train_loss": round(1.5 / (e + 1) + 0.05 * i, 4),
                "val_acc": acc,
                "throughput_samples_per_sec": 1000.0 + 100 * batch / 64 + e,
            }
            for e, acc in enumerate(accs)
        ]
        spec = BASE.replace(name=f"grid-{i}", lr=lr, batch_per_gpu=batch).to_dict()
        used = (0.5 + 0.05 * i, None if i == 1 else 0.2 + 0.1 * i)  # run 1: memory not measured
        out.append(
            Member(RunData(run_id, spec, rows, group=group), 600.0 + 60 * i, "COMPLETED", *used)
        )
    return out
