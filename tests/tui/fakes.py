"""A fake cluster facade, used ONLY by the snapshot tests.

Snapshot tests need screens in fixed, deterministic states (a run at exactly epoch
3/10, a failed run, a finished sweep) that a real scheduler cannot produce on demand
and to the same pixel every time. Every story test (submit, follow, cancel, retry)
uses the real ``Cluster`` against the real local scheduler or real Slurm instead.

``FakeCluster`` offers the facade's calls (:class:`ddp_tui.remote.api.ClusterAPI`, checked
by mypy below) and returns fixed data; the spec checks and the submit plans are the real
ones (``ddp_tui.remote.submit.plan``, ``ddp_tui.spec``, ``sbatch_templates``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pandas as pd

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
from ddp_tui.remote.api import ClusterAPI
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.groups.group_control import GroupRetry, retry_group
from ddp_tui.remote.live.shells import ShellPlan
from ddp_tui.remote.live.stacks import StacksTaken
from ddp_tui.remote.model.views import Attempt, Check, Progress, RunDetail, RunView, Snapshot
from ddp_tui.remote.submit import sweep_plan
from ddp_tui.remote.submit.plan import (
    SubmitPlan,
    ValidationFailed,
    make_plan,
    plan_spec,
    require_ok,
    spec_errors,
)
from ddp_tui.reports.outcomes import Member, Outcomes, RunDiff, outcome_table, run_diff
from ddp_tui.spec import ExperimentSpec, PartitionInfo, Sweep

if TYPE_CHECKING:
    from ddp_tui.resources import ResourceSummary, ResourceView

NOW = 1_700_000_000.0
#: The runs root of the fake's plans (each plan's run directory is under it).
RUNS_ROOT = "/home/user/ddp-tui-runs"

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


def _attempt(job_id: str, attempt: int = 1, retry_of: str | None = None) -> Attempt:
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
            attempts=(_attempt("1042"),),
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
            attempts=(_attempt("1041"),),
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
            attempts=(_attempt("1039"), _attempt("1040", 2, "1039")),
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
        ),
    ]
    for index, (nodes, gpus, thru) in enumerate(((2, 2, 3300.0), (1, 2, 1800.0), (1, 1, 1000.0))):
        runs.append(
            RunView(
                run_id=f"20231114-2200{index}0-sweep-000{index}",
                name=f"sweep-{nodes}x{gpus}",
                run_dir=f"/runs/sweep{index}",
                group="9f2c4e1a7b3d5f60",
                created_at=f"2023-11-14T22:00:{index}0+00:00",
                spec=sweep.replace(name=f"sweep-{nodes}x{gpus}", nodes=nodes, gpus_per_node=gpus),
                attempts=(_attempt(f"103{index}"),),
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
            attempts=(_attempt("1001"),),
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
        out.append(Member(RunData(run_id, spec, rows, group=group), 600.0 + 60 * i, "COMPLETED"))
    return out


class FakeCluster:
    """Fixed data in the facade's shape (see the module docstring: snapshot tests only)."""

    location = "Slurm on this host"

    def __init__(
        self,
        runs: Sequence[RunView] | None = None,
        *,
        connection: str = "ok",
        error: str | None = None,
        diagnosis: Diagnosis | None = None,
        estimate: str = "",
        err_lines: Sequence[str] = ("[W] gloo: using loopback",),
        heartbeats: Sequence[Heartbeat] = (),
        stall: Stall | None = None,
        telemetry: ResourceView | None = None,
        comparison: pd.DataFrame | None = None,
        advice: Advice | Exception | None = None,
    ) -> None:
        self.runs = list(sample_runs() if runs is None else runs)
        self.connection = connection
        self.error = error
        self.diagnosis = diagnosis  # what diagnose() answers for every run
        self.estimate = estimate
        self.err_lines = list(err_lines)
        self.heartbeats = list(heartbeats)
        self.stall = stall  # what follow() says of every run
        self.telemetry = telemetry  # what follow() says of every run's telemetry
        self.comparison = comparison  # what compare() answers (None: a fixed sweep)
        self.advice = advice  # what advise() answers or raises (None: the fixed sweep's)
        self.calls: list[tuple[str, Any]] = []
        self._followed: set[str] = set()

    def partitions(self) -> list[PartitionInfo]:
        return list(PARTITIONS)

    def default_spec(self) -> ExperimentSpec:
        return BASE

    @property
    def scheduler_name(self) -> str:
        return "slurm"

    def plan(
        self, spec: ExperimentSpec, *, kind: str = "train", group: str | None = None
    ) -> SubmitPlan:
        spec, group = plan_spec(spec, kind, group)
        errors = spec_errors(spec, "slurm", PARTITIONS)
        run_id = f"RUN_ID-{spec.name}"  # fixed, so that the preview is the same every time
        run_dir = f"/home/user/ddp-tui-runs/{run_id}"
        return make_plan(spec, kind, group, errors, run_id=run_id, run_dir=run_dir)

    def plan_sweep(
        self, spec: ExperimentSpec, sweep: Sweep, *, max_concurrent: int | None = None
    ) -> sweep_plan.SweepPlan:
        self.calls.append(("sweep", (spec, sweep, max_concurrent)))
        return sweep_plan.plan_sweep(
            lambda member, group: self.plan(member, group=group),
            spec,
            sweep,
            scheduler="slurm",
            runs_root=RUNS_ROOT,
            max_concurrent=max_concurrent,
        )

    def refresh(self, follow: str | None = None) -> Snapshot:
        return Snapshot(
            taken_at=NOW,
            runs=tuple(self.runs),
            location=self.location,
            scheduler_version="slurm 22.05.8",
            connection=self.connection,
            error=self.error,
        )

    def restart_follow(self, run_id: str) -> None:
        self.calls.append(("restart_follow", run_id))
        self._followed.discard(run_id)

    def follow(self, run_id: str) -> RunDetail:
        if run_id in self._followed:
            return RunDetail(
                run_id, metrics=sample_metrics(), stall=self.stall, resources=self.telemetry
            )
        self._followed.add(run_id)
        out = [f"epoch 1 step {i * 50}/400 loss {1.5 - i * 0.1:.3f}" for i in range(1, 9)]
        out += ["epoch 1 done: train_loss 1.5 val_acc 0.67", "\x1b[32mcheckpoint saved\x1b[0m"]
        return RunDetail(
            run_id,
            out_lines=out,
            err_lines=list(self.err_lines),
            metrics=sample_metrics(),
            progress=Progress(
                epoch=4, step=120, steps_per_epoch=400, loss=0.31, samples_per_sec=12000.0
            ),
            run_json={"hosts": ["n1", "n2"], "world_size": 4, "backend": "gloo"},
            heartbeats=list(self.heartbeats),
            stall=self.stall,
            resources=self.telemetry,
        )

    def submit(self, plan: SubmitPlan) -> RunView:
        if not plan.ok:
            raise ValidationFailed(plan.errors)
        self.calls.append(("preflight" if plan.kind == "preflight" else "submit", plan.spec))
        run = replace(
            self.runs[0],
            run_id="20231114-223000-new-ffff",
            name=plan.spec.name,
            spec=plan.spec,
            state=JobState.PENDING,
            attempts=(_attempt("1050"),),
        )
        self.runs.insert(0, run)
        return run

    def submit_sweep(self, plan: sweep_plan.SweepPlan) -> list[RunView]:
        require_ok(plan.plans)
        # One row for the whole sweep, as the screens need no more.
        return [self.submit(plan.plans[0])] if plan.plans else []

    def cancel(self, run_id: str) -> list[str]:
        self.calls.append(("cancel", run_id))
        self.runs = [
            replace(r, state=JobState.CANCELLED) if r.run_id == run_id else r for r in self.runs
        ]
        return [next(r.job_id or "" for r in self.runs if r.run_id == run_id)]

    def retry(self, run_id: str, *, seen: int | None = None) -> RunView:
        self.calls.append(("retry", run_id))
        return next(r for r in self.runs if r.run_id == run_id)

    def cancel_group(self, group: str) -> list[str]:
        self.calls.append(("cancel_group", group))
        live = [r for r in self.runs if r.group == group and r.state.is_active]
        self.runs = [replace(r, state=JobState.CANCELLED) if r in live else r for r in self.runs]
        return [r.job_id or "" for r in live]

    def retry_group(self, group: str) -> GroupRetry:
        self.calls.append(("retry_group", group))
        members = [(r.run_id, r.state) for r in self.runs if r.group == group]
        return retry_group(members, self.retry)  # the real choice of which runs to retry

    def verify(self, run_id: str) -> list[Check]:
        return [
            Check("nodes", True, "2 hosts: n1, n2 (asked 2)"),
            Check("world size", True, "4 ranks (2 nodes x 2)"),
            Check("backend", True, "gloo"),
            Check("every epoch", None, "3 of 10 so far"),
        ]

    def diagnose(self, run_id: str) -> Diagnosis | None:
        self.calls.append(("diagnose", run_id))
        return self.diagnosis

    def estimated_start(self, run_id: str) -> str:
        self.calls.append(("estimated_start", run_id))
        return self.estimate

    def resources(self, run_id: str) -> ResourceSummary:
        from ddp_tui.resources import summarize_samples

        self.calls.append(("resources", run_id))
        return self.telemetry.summary if self.telemetry else summarize_samples([])

    def stacks(self, run_id: str, *, timeout: float = 8.0, py_spy: str = "auto") -> StacksTaken:
        """Two ranks' stacks as faulthandler writes them (a fake: no job runs here)."""
        from ddp_tui.diagnosis.stacks import parse_process
        from ddp_tui.diagnosis.stuck import RankProgress, stuck_ranks

        self.calls.append(("stacks", run_id))
        dump = 'Current thread 0x1 (most recent call first):\n  File "{}", line {} in {}\n'
        ranks = [
            parse_process(
                {"rank": 0, "host": "n1", "pid": 11},
                "ok",
                "faulthandler",
                dump.format(
                    "/site-packages/torch/distributed/distributed_c10d.py", 2501, "all_reduce"
                ),
            ),
            parse_process(
                {"rank": 1, "host": "n2", "pid": 12},
                "ok",
                "faulthandler",
                dump.format("/home/u/train.py", 12, "slow_step"),
            ),
        ]
        progress = [RankProgress(0, "n1", 1, 4, 1000.0), RankProgress(1, "n2", 1, 3, 990.0)]
        stuck = stuck_ranks(progress, ranks, now=1045.0)
        return StacksTaken(
            run_id,
            "1234",
            "2026-01-02T03:04:05.000Z",
            0.4,
            tuple(ranks),
            tuple(stuck),
            ("stacks/20260102T030405.000Z.json",),
        )

    def shell_command(self, run_id: str, node: str | None = None) -> ShellPlan:
        self.calls.append(("shell_command", (run_id, node)))
        view = next(v for v in self.runs if v.run_id == run_id)
        nodes = view.hosts or ("n1",)
        host = node or nodes[0]
        where = f"node {host} of job {view.job_id}"
        argv = ("true",)
        return ShellPlan(run_id, view.job_id or "", argv, None, where, host, nodes, view.run_dir)

    def open_shell(self, plan: ShellPlan) -> int:
        self.calls.append(("open_shell", plan))
        return 0

    def compare(self, group: str) -> pd.DataFrame:
        if self.comparison is not None:
            return self.comparison
        frame = pd.DataFrame(
            {
                "run_id": ["a", "b", "c"],
                "nodes": [1, 1, 2],
                "gpus_per_node": [1, 2, 2],
                "world_size": [1, 2, 4],
                "global_batch": [128, 256, 512],
                "throughput": [1000.0, 1800.0, 3300.0],
                "epoch_time": [50.0, 27.8, 15.2],
                "speedup": [1.0, 1.8, 3.3],
                "ideal_speedup": [1.0, 2.0, 4.0],
                "efficiency": [1.0, 0.9, 0.825],
                "final_val_metric": [0.93, 0.931, 0.929],
                "peak_mem_mib": [None, None, None],
            }
        ).set_index("run_id")
        frame["peak_mem_mib"] = frame["peak_mem_mib"].astype("float64")
        frame.attrs["val_metric"] = "val_acc"
        frame.attrs["baseline"] = "a"
        return frame

    def advise(
        self, group: str, *, threshold: float | None = None, deadline_sec: float | None = None
    ) -> Advice:
        self.calls.append(("advise", group))
        if isinstance(self.advice, Exception):
            raise self.advice
        return self.advice or sample_advice(group)

    def outcomes(self, group: str) -> Outcomes:
        self.calls.append(("outcomes", group))
        return outcome_table(group, sample_members(group))

    def diff(self, run_a: str, run_b: str) -> RunDiff:
        self.calls.append(("diff", (run_a, run_b)))
        members = {m.run.run_id: m for m in sample_members()}
        return run_diff(members[run_a], members[run_b])

    def export_comparison(self, group: str) -> list[str]:
        return [
            f"/runs/comparisons/{group}/comparison.md",
            f"/runs/comparisons/{group}/comparison.csv",
        ]

    def close(self) -> None:
        self.calls.append(("close", None))


def _conforms(fake: FakeCluster) -> ClusterAPI:
    return fake  # mypy checks here that FakeCluster offers every call the app makes
