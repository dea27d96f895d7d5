"""One fake per service of :mod:`ddp_tui.remote.api`, each checked by mypy against its protocol
(the ``_conforms_*`` functions below), over one :class:`FakeState` they share: the runs they show
and change, and the calls the tests look for."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pandas as pd

from ddp_tui.advisor import Advice
from ddp_tui.diagnosis import Diagnosis
from ddp_tui.diagnosis.stall import Heartbeat, Stall
from ddp_tui.remote.api import GroupsAPI, LiveAPI, RunsAPI, SubmitAPI, UsageAPI
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.groups.group_control import GroupRetry, retry_group
from ddp_tui.remote.live.shells import ShellPlan
from ddp_tui.remote.live.stacks import StacksTaken
from ddp_tui.remote.model.views import Check, Progress, RunDetail, RunView, Snapshot
from ddp_tui.remote.submit import sweep_plan
from ddp_tui.remote.submit.env_detect import DETECT_WAIT_SEC, Detection
from ddp_tui.remote.submit.plan import (
    SubmitPlan,
    ValidationFailed,
    make_plan,
    plan_spec,
    require_ok,
    spec_errors,
)
from ddp_tui.reports.outcomes import Outcomes, RunDiff, outcome_table, run_diff
from ddp_tui.spec import ExperimentSpec, PartitionInfo, Sweep
from tests.tui.fakes.data import (
    BASE,
    NOW,
    PARTITIONS,
    RUNS_ROOT,
    fixed_attempt,
    sample_accounting,
    sample_advice,
    sample_members,
    sample_metrics,
    sample_runs,
)

if TYPE_CHECKING:
    from ddp_tui.reports.efficiency import UsageReport
    from ddp_tui.resources import ResourceSummary, ResourceView


@dataclass
class FakeState:
    """What the fake services share: the runs (a submit adds one, a cancel changes one), where
    they are, and every call the tests look for, in order."""

    runs: list[RunView] = field(default_factory=sample_runs)
    location: str = "Slurm on this host"
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def run(self, run_id: str) -> RunView:
        return next(r for r in self.runs if r.run_id == run_id)

    def cancelled(self, chosen: Callable[[RunView], bool]) -> list[RunView]:
        """Mark the chosen runs cancelled; return them as they were."""
        hit = [r for r in self.runs if chosen(r)]
        self.runs = [replace(r, state=JobState.CANCELLED) if chosen(r) else r for r in self.runs]
        return hit


class FakeSubmits:
    """Compose and submit (:class:`ddp_tui.remote.api.SubmitAPI`): the real spec checks and plans,
    with a fixed run id so that the preview is the same every time; a submit adds a pending run."""

    def __init__(self, state: FakeState) -> None:
        self.state = state

    def default_spec(self) -> ExperimentSpec:
        return BASE

    def partitions(self) -> list[PartitionInfo]:
        return list(PARTITIONS)

    def plan(
        self,
        spec: ExperimentSpec,
        *,
        kind: str = "train",
        group: str | None = None,
        dry_run: bool = False,
    ) -> SubmitPlan:
        spec, group = plan_spec(spec, kind, group)
        errors = spec_errors(spec, "slurm", PARTITIONS)
        run_id = f"RUN_ID-{spec.name}"  # fixed, so that the preview is the same every time
        run_dir = f"{RUNS_ROOT}/{run_id}"
        return make_plan(spec, kind, group, errors, run_id=run_id, run_dir=run_dir)

    def plan_sweep(
        self,
        spec: ExperimentSpec,
        sweep: Sweep,
        *,
        max_concurrent: int | None = None,
        dry_run: bool = False,
    ) -> sweep_plan.SweepPlan:
        self.state.calls.append(("sweep", (spec, sweep, max_concurrent)))
        return sweep_plan.plan_sweep(
            lambda member, group: self.plan(member, group=group),
            spec,
            sweep,
            scheduler="slurm",
            runs_root=RUNS_ROOT,
            max_concurrent=max_concurrent,
        )

    def submit(self, plan: SubmitPlan) -> RunView:
        if not plan.ok:
            raise ValidationFailed(plan.errors)
        self.state.calls.append(("preflight" if plan.kind == "preflight" else "submit", plan.spec))
        run = replace(
            self.state.runs[0],
            run_id="20231114-223000-new-ffff",
            name=plan.spec.name,
            spec=plan.spec,
            state=JobState.PENDING,
            attempts=(fixed_attempt("1050"),),
        )
        self.state.runs.insert(0, run)
        return run

    def submit_sweep(self, plan: sweep_plan.SweepPlan) -> list[RunView]:
        require_ok(plan.plans)
        # One row for the whole sweep, as the screens need no more.
        return [self.submit(plan.plans[0])] if plan.plans else []

    def retry(self, run_id: str, *, seen: int | None = None) -> RunView:
        self.state.calls.append(("retry", run_id))
        return self.state.run(run_id)

    def detect_environment(
        self, partition: str, *, recheck: bool = False, wait_sec: float = DETECT_WAIT_SEC
    ) -> Detection:
        # FAKE: no probe job runs here (tests/remote/test_env_detect.py runs real ones).
        self.state.calls.append(("detect_environment", partition))
        return Detection(partition, problem="FAKE: not detected in the snapshot tests")

    def recheck_environment(self, spec: ExperimentSpec) -> None:
        self.state.calls.append(("recheck_environment", spec))


@dataclass(eq=False)
class FakeRuns:
    """Every run, and one run looked into (:class:`ddp_tui.remote.api.RunsAPI`): the shared runs
    in a fixed snapshot; a run's first follow has its logs, later ones only what changes."""

    state: FakeState
    connection: str
    error: str | None
    diagnosis: Diagnosis | None  # what diagnose() answers for every run
    estimate: str
    err_lines: list[str]
    heartbeats: list[Heartbeat]
    stall: Stall | None  # what follow() says of every run
    telemetry: ResourceView | None  # what follow() says of every run's telemetry
    followed: set[str] = field(default_factory=set, init=False)  # since their last restart

    def refresh(self, follow: str | None = None) -> Snapshot:
        return Snapshot(
            taken_at=NOW,
            runs=tuple(self.state.runs),
            location=self.state.location,
            scheduler_version="slurm 22.05.8",
            connection=self.connection,
            error=self.error,
        )

    def restart_follow(self, run_id: str) -> None:
        self.state.calls.append(("restart_follow", run_id))
        self.followed.discard(run_id)

    def follow(self, run_id: str) -> RunDetail:
        if run_id in self.followed:
            return RunDetail(
                run_id, metrics=sample_metrics(), stall=self.stall, resources=self.telemetry
            )
        self.followed.add(run_id)
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

    def cancel(self, run_id: str) -> list[str]:
        self.state.calls.append(("cancel", run_id))
        self.state.cancelled(lambda r: r.run_id == run_id)
        return [self.state.run(run_id).job_id or ""]

    def verify(self, run_id: str) -> list[Check]:
        return [
            Check("nodes", True, "2 hosts: n1, n2 (asked 2)"),
            Check("world size", True, "4 ranks (2 nodes x 2)"),
            Check("backend", True, "gloo"),
            Check("every epoch", None, "3 of 10 so far"),
        ]

    def diagnose(self, run_id: str) -> Diagnosis | None:
        self.state.calls.append(("diagnose", run_id))
        return self.diagnosis

    def estimated_start(self, run_id: str) -> str:
        self.state.calls.append(("estimated_start", run_id))
        return self.estimate

    def resources(self, run_id: str) -> ResourceSummary:
        from ddp_tui.resources import summarize_samples

        self.state.calls.append(("resources", run_id))
        return self.telemetry.summary if self.telemetry else summarize_samples([])


class FakeLive:
    """Hands on a live job (:class:`ddp_tui.remote.api.LiveAPI`): two ranks' stacks as
    faulthandler writes them, and a shell that runs ``true`` (no job runs here)."""

    def __init__(self, state: FakeState) -> None:
        self.state = state

    def stacks(self, run_id: str, *, timeout: float = 8.0, py_spy: str = "auto") -> StacksTaken:
        """Two ranks' stacks as faulthandler writes them (a fake: no job runs here)."""
        from ddp_tui.diagnosis.stacks import parse_process
        from ddp_tui.diagnosis.stuck import RankProgress, stuck_ranks

        self.state.calls.append(("stacks", run_id))
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
        self.state.calls.append(("shell_command", (run_id, node)))
        view = self.state.run(run_id)
        nodes = view.hosts or ("n1",)
        host = node or nodes[0]
        where = f"node {host} of job {view.job_id}"
        argv = ("true",)
        return ShellPlan(run_id, view.job_id or "", argv, None, where, host, nodes, view.run_dir)

    def open_shell(self, plan: ShellPlan) -> int:
        self.state.calls.append(("open_shell", plan))
        return 0


@dataclass(eq=False)
class FakeGroups:
    """Runs of one experiment together (:class:`ddp_tui.remote.api.GroupsAPI`): a fixed sweep's
    comparison and advice, the fixed outcome grid, and the real choice of what to retry."""

    state: FakeState
    retry: Callable[[str], RunView]  # the submits' retry, as the real service is given
    comparison: pd.DataFrame | None  # what compare() answers (None: a fixed sweep)
    advice: Advice | Exception | None  # what advise() answers or raises (None: the sweep's)

    def cancel_group(self, group: str) -> list[str]:
        self.state.calls.append(("cancel_group", group))
        live = self.state.cancelled(lambda r: group in (r.group, r.sweep) and r.state.is_active)
        return [r.job_id or "" for r in live]

    def retry_group(self, group: str) -> GroupRetry:
        self.state.calls.append(("retry_group", group))
        members = [(r.run_id, r.state) for r in self.state.runs if group in (r.group, r.sweep)]
        return retry_group(members, self.retry)  # the real choice of which runs to retry

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
        self.state.calls.append(("advise", group))
        if isinstance(self.advice, Exception):
            raise self.advice
        return self.advice or sample_advice(group)

    def outcomes(self, group: str) -> Outcomes:
        self.state.calls.append(("outcomes", group))
        return outcome_table(group, sample_members(group))

    def diff(self, run_a: str, run_b: str) -> RunDiff:
        self.state.calls.append(("diff", (run_a, run_b)))
        members = {m.run.run_id: m for m in sample_members()}
        return run_diff(members[run_a], members[run_b])

    def export_comparison(self, group: str) -> list[str]:
        return [
            f"/runs/comparisons/{group}/comparison.md",
            f"/runs/comparisons/{group}/comparison.csv",
        ]


class FakeUsage:
    """What a job used (:class:`ddp_tui.remote.api.UsageAPI`): FAKE accounting with the test
    cluster's numbers (:func:`~tests.tui.fakes.data.sample_accounting`), read by the real
    report, for a run (its latest job and state) or any job id."""

    def __init__(self, state: FakeState) -> None:
        self.state = state

    def usage(self, run_or_job: str) -> UsageReport:
        from ddp_tui.reports.efficiency import usage_report

        self.state.calls.append(("usage", run_or_job))
        run = next((r for r in self.state.runs if r.run_id == run_or_job), None)
        if run is None:
            return usage_report(sample_accounting(run_or_job), ended=True)
        acct = sample_accounting(run.job_id or "4242", run.state.value)
        return usage_report(acct, ended=run.state.is_terminal, run_id=run.run_id)


# mypy checks here that each fake offers every call of its service that the app makes.
def _conforms_submits(fake: FakeSubmits) -> SubmitAPI:
    return fake


def _conforms_runs(fake: FakeRuns) -> RunsAPI:
    return fake


def _conforms_live(fake: FakeLive) -> LiveAPI:
    return fake


def _conforms_groups(fake: FakeGroups) -> GroupsAPI:
    return fake


def _conforms_usage(fake: FakeUsage) -> UsageAPI:
    return fake
