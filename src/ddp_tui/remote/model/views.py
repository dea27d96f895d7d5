"""The read model: what the screens and the CLI show of runs, built by the facade.

Frozen snapshots of the run directories and the scheduler's answers; nothing here does
I/O. :mod:`ddp_tui.remote.model.view_building` builds them, :class:`~ddp_tui.remote.cluster.Cluster`
hands them out (see docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ddp_tui.diagnosis import Diagnosis
from ddp_tui.diagnosis.pending import pending_reason
from ddp_tui.diagnosis.stall import Heartbeat, Stall, duration_label
from ddp_tui.preflight_report import PreflightSummary
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.events import NotifyEvent
from ddp_tui.remote.model.verification import Check
from ddp_tui.remote.store.run_damage import DAMAGED, Damage
from ddp_tui.remote.store.tail import PlotSeries, plot_sample
from ddp_tui.reports.efficiency_cells import efficiency_text
from ddp_tui.spec import ExperimentSpec

if TYPE_CHECKING:
    from ddp_tui.resources import ResourceView

__all__ = ["Attempt", "Check", "Efficiency", "Progress", "RunDetail", "RunView", "Snapshot"]


@dataclass(frozen=True)
class Attempt:
    job_id: str
    scheduler: str
    submitted_at: str
    retry_of: str | None
    attempt: int
    #: How long the attempt ran, once its end is recorded (None: running, or not known).
    elapsed_sec: float | None = None


@dataclass(frozen=True)
class Progress:
    epoch: int | None  # None: a script with no epochs, whose progress is by steps
    step: int
    steps_per_epoch: int
    loss: float | None
    samples_per_sec: float | None
    max_steps: int | None = None  # a script's step budget, where known


@dataclass(frozen=True)
class Efficiency:
    """What the run's latest ended attempt used of what it held, as its ``usage.json``
    records it: fractions (0.45: 45 %), None where not measured (never 0)."""

    job_id: str
    cpu: float | None  # its CPUs busy on average
    mem: float | None  # its largest node's peak memory of the memory per node
    #: Where the figures came from ("sacct"), or "unavailable": the accounting had no
    #: record of the job in time, and is not asked again.
    source: str = ""


@dataclass(frozen=True)
class RunView:
    """One run as the jobs table and the detail summary show it."""

    run_id: str
    name: str
    run_dir: str
    group: str | None
    created_at: str
    spec: ExperimentSpec
    attempts: tuple[Attempt, ...]
    state: JobState
    reason: str = ""
    elapsed_sec: float = 0.0
    epochs_done: int = 0
    epochs_total: int = 0
    #: A script with no epochs (an iteration loop): optimizer steps done, and its budget.
    steps_done: int | None = None
    steps_total: int | None = None
    last_train_loss: float | None = None
    last_val_metric: float | None = None
    val_metric_name: str = "val_acc"
    throughput: float | None = None
    progress: Progress | None = None
    hosts: tuple[str, ...] = ()
    world_size: int | None = None
    backend: str | None = None
    rendezvous: str | None = None
    exit_code: int | None = None
    #: Where the trainer's own record and the job's state disagree, said plainly: e.g.
    #: run.json says completed while the job ended FAILED (the launcher's exit).
    note: str = ""
    kind: str = "train"  # or "preflight", or "adopted" (a job brought in)
    preflight: PreflightSummary | None = None  # preflight runs only
    #: Why the latest attempt ended as it did (ended runs; None: not diagnosed, or no
    #: rule recognised its logs).
    diagnosis: Diagnosis | None = None
    #: Set while a running job has produced no output, progress or heartbeat for the
    #: profile's ``stall_after_min``.
    stall: Stall | None = None
    #: What is wrong with the run directory, file by file (empty: nothing found). A damaged
    #: run shows as DAMAGED; :attr:`state` stays its job's, for cancel and retry.
    damage: tuple[Damage, ...] = ()
    #: The sweep the run was submitted in (its id), or None: what folds into one Jobs row.
    #: :attr:`group` is wider: every run of an equal spec, compared together.
    sweep: str | None = None
    #: What the latest attempt used, once it has ended and its usage is recorded (None:
    #: running, not recorded yet, or a scheduler that keeps no accounting).
    efficiency: Efficiency | None = None

    @property
    def job_id(self) -> str | None:
        return self.attempts[-1].job_id if self.attempts else None

    @property
    def used_sec(self) -> float:
        """Every attempt's run time: the earlier attempts' recorded ends, and the latest's
        elapsed time (live while it runs). What GPU-hours are charged for."""
        earlier = sum(a.elapsed_sec or 0.0 for a in self.attempts[:-1])
        return earlier + self.elapsed_sec

    @property
    def state_label(self) -> str:
        """The state, marked "*" where :attr:`note` has something to say about it; DAMAGED
        where the run directory is."""
        if self.damage:
            return DAMAGED
        return self.state.value + (" *" if self.note else "")

    @property
    def efficiency_label(self) -> str:
        """What the latest ended attempt used, as Jobs and ``ls`` show it: ``cpu 45% mem
        30%``, or "—" where nothing was measured (running, or no accounting)."""
        eff = self.efficiency
        return efficiency_text(eff.cpu, eff.mem) if eff is not None else efficiency_text(None, None)

    @property
    def damage_label(self) -> str:
        """The run's damage in one line: the first problem, and how many more."""
        if not self.damage:
            return ""
        more = len(self.damage) - 1
        return str(self.damage[0]) + (f" (and {more} more)" if more else "")

    @property
    def reason_label(self) -> str:
        """The Jobs table's reason: what is damaged, why it waits, that it stalled, or why
        it ended."""
        if self.damage:
            return self.damage_label
        if self.state is JobState.PENDING:
            return pending_reason(self.reason) if self.reason else ""
        if self.stall is not None:
            return f"stalled {round(self.stall.quiet_sec / 60)} min"
        if self.diagnosis is not None and self.diagnosis.severity != "ok":
            return self.diagnosis.short
        return ""

    @property
    def epoch_label(self) -> str:
        """Epochs done of the total, steps of a loop with no epochs (``450/600 it``), or a
        preflight's result (it has no epochs)."""
        if self.preflight is not None:
            return self.preflight.label
        if self.by_steps:
            total = f"/{self.steps_total}" if self.steps_total else ""
            eta = self.eta_sec if self.state.is_active else None
            left = f", {duration_label(eta)} left" if eta is not None else ""
            return f"{self.steps_done or 0}{total} it{left}"
        return f"{self.epochs_done}/{self.epochs_total}" if self.epochs_total else "-"

    @property
    def by_steps(self) -> bool:
        """Progress is by steps: the run has no epoch rows, and its wrapper counts its steps (a
        script's budget alone says nothing of an epoch loop before its first epoch)."""
        return self.epochs_done == 0 and self.steps_done is not None

    @property
    def eta_sec(self) -> float | None:
        """Seconds left at the pace so far, for a run by steps with a known budget."""
        done, total = self.steps_done, self.steps_total
        if not self.by_steps or not done or not total or self.elapsed_sec <= 0:
            return None
        return max(total - done, 0) * self.elapsed_sec / done


@dataclass(frozen=True)
class Snapshot:
    """Everything the screens render, from one refresh."""

    taken_at: float
    runs: tuple[RunView, ...]  # newest first
    location: str  # "local scheduler", "Slurm on this host", "user@host"
    scheduler_version: str
    connection: str  # "ok", "reconnecting", "controller unreachable", ...
    error: str | None = None
    scheduler_calls: int = 0
    detail: RunDetail | None = None  # the followed run's news, when refresh(follow=...)
    unread: int = 0  # older runs not read yet: refresh again soon to see them
    #: The events this process claimed in this refresh, to deliver
    #: (remote/runs/reactions/notify.py).
    events: tuple[NotifyEvent, ...] = ()

    @property
    def stalled(self) -> int:
        """How many running jobs have stalled (the header shows the count)."""
        return sum(1 for r in self.runs if r.stall is not None)


#: The newest metrics rows a :class:`RunDetail` carries: Run detail's table shows these.
DETAIL_METRICS_ROWS = 200


@dataclass
class RunDetail:
    """New data for the open run since the last call (incremental)."""

    run_id: str
    out_lines: list[str] = field(default_factory=list)
    err_lines: list[str] = field(default_factory=list)
    out_reset: bool = False  # the log was truncated/rotated: clear the pane first
    err_reset: bool = False
    #: The newest metrics rows (at most :data:`DETAIL_METRICS_ROWS`: a screen never
    #: handles every row of a 100,000-row file).
    metrics: list[dict[str, float | None]] = field(default_factory=list)
    #: Rows read so far, of which ``metrics`` are the last.
    metrics_total: int = 0
    #: A bounded sample of every row so far, per plotted column (:class:`tail.PlotSample`).
    metrics_plot: dict[str, PlotSeries] = field(default_factory=dict)
    progress: Progress | None = None
    run_json: dict[str, Any] | None = None
    accounting: str | None = None
    #: The followed run's ranks' latest heartbeats (trainer runs), newest read.
    heartbeats: list[Heartbeat] = field(default_factory=list)
    #: The run's stall (while it is stalled), with the silent ranks named from
    #: :attr:`heartbeats`.
    stall: Stall | None = None
    #: The run's resource telemetry (summary and plot series), when it changed.
    resources: ResourceView | None = None

    def __post_init__(self) -> None:
        # Built from rows alone (a short run, the fake facade): count and plot those.
        if self.metrics and not self.metrics_total:
            self.metrics_total = len(self.metrics)
        if self.metrics and not self.metrics_plot:
            self.metrics_plot = plot_sample(self.metrics)
