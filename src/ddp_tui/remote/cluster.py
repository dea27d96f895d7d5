"""The one facade the UI and the CLI use: submit, follow, compare, cancel, retry, verify.

NOTE (lead): signatures are the contract; bodies are being filled in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ddp_tui.remote.states import JobState

if TYPE_CHECKING:
    import pandas as pd

    from ddp_tui.config import Profile
    from ddp_tui.spec import ExperimentSpec, FieldError


class ValidationFailed(Exception):
    """The spec has errors; ``errors`` name each field and what is allowed."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in self.errors))


@dataclass(frozen=True)
class Attempt:
    job_id: str
    scheduler: str
    submitted_at: str
    retry_of: str | None
    attempt: int


@dataclass(frozen=True)
class Progress:
    epoch: int
    step: int
    steps_per_epoch: int
    loss: float | None
    samples_per_sec: float | None


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
    last_train_loss: float | None = None
    last_val_metric: float | None = None
    val_metric_name: str = "val_acc"
    throughput: float | None = None
    progress: Progress | None = None
    hosts: tuple[str, ...] = ()
    world_size: int | None = None
    backend: str | None = None
    rendezvous: str | None = None

    @property
    def job_id(self) -> str | None:
        return self.attempts[-1].job_id if self.attempts else None


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


@dataclass
class RunDetail:
    """New data for the open run since the last call (incremental)."""

    run_id: str
    out_lines: list[str] = field(default_factory=list)
    err_lines: list[str] = field(default_factory=list)
    out_reset: bool = False  # the log was truncated/rotated: clear the pane first
    err_reset: bool = False
    metrics: list[dict[str, float | None]] = field(default_factory=list)  # all rows so far
    progress: Progress | None = None
    run_json: dict[str, Any] | None = None
    accounting: str | None = None


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: not applicable yet
    detail: str


class Cluster:
    """Facade over an Executor, a Scheduler and a RunStore."""

    @classmethod
    def open(cls, profile: Profile | None = None, *, host: str | None = None) -> Cluster:
        """Connect as the profile says: local scheduler without Slurm, Slurm if on PATH, SSH with host."""
        raise NotImplementedError

    location: str

    def validate(self, spec: ExperimentSpec) -> list[FieldError]:
        """Self-consistency plus the cluster-aware pass (partitions from sinfo, cached)."""
        raise NotImplementedError

    def render_script(self, spec: ExperimentSpec, run_dir: str | None = None) -> str:
        """The exact sbatch script (dry run)."""
        raise NotImplementedError

    def submit(self, spec: ExperimentSpec, *, group: str | None = None) -> RunView:
        """Validate, create the run directory, submit; raises ValidationFailed."""
        raise NotImplementedError

    def submit_sweep(
        self, spec: ExperimentSpec, sizes: Sequence[int], *, dimension: str = "gpus"
    ) -> list[RunView]:
        """The same experiment at several sizes (gpus per node, or nodes), as one group."""
        raise NotImplementedError

    def preflight(self, spec: ExperimentSpec) -> RunView:
        """Submit a preflight (collective test) job of the same shape."""
        raise NotImplementedError

    def refresh(self) -> Snapshot:
        """At most one squeue + one sacct call; never raises for scheduler outages."""
        raise NotImplementedError

    def follow(self, run_id: str) -> RunDetail:
        """New log lines, metrics and progress of one run since the last follow() of it."""
        raise NotImplementedError

    def cancel(self, run_id: str) -> None:
        raise NotImplementedError

    def retry(self, run_id: str) -> RunView:
        """Resubmit the same script as a new attempt; the trainer resumes from its checkpoint."""
        raise NotImplementedError

    def verify(self, run_id: str) -> list[Check]:
        raise NotImplementedError

    def compare(self, group: str) -> pd.DataFrame:
        raise NotImplementedError

    def export_comparison(self, group: str) -> list[str]:
        """Write Markdown and CSV next to the runs; returns the paths."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError
