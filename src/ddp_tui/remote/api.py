"""The services as the app sees them: one protocol per service, and :class:`ClusterAPI`, all
of them on the one object the app holds.

The app and its screens are typed against these protocols, not against
:class:`~ddp_tui.remote.cluster.Cluster`, so that the snapshot tests' fakes
(``tests/tui/fakes/``) are checked by mypy to offer the same calls (see
docs/architecture.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ddp_tui.diagnosis import Diagnosis
from ddp_tui.diagnosis.waiting import WaitExplanation
from ddp_tui.remote.backends.scheduler import PartitionInfo
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.backends.user_jobs import Since
from ddp_tui.remote.groups.group_control import GroupRetry
from ddp_tui.remote.live.shells import ShellPlan
from ddp_tui.remote.live.stacks import StacksTaken
from ddp_tui.remote.model.views import Check, RunDetail, RunView, Snapshot
from ddp_tui.remote.runs.user_jobs import LOG_BYTES, AllJobs, JobLog
from ddp_tui.remote.submit.env_detect import DETECT_WAIT_SEC, Detection
from ddp_tui.remote.submit.plan import SubmitPlan
from ddp_tui.remote.submit.sweep_plan import SweepPlan
from ddp_tui.resources import ResourceSummary
from ddp_tui.spec import ExperimentSpec, Sweep

if TYPE_CHECKING:
    import pandas as pd

    from ddp_tui.advisor import Advice
    from ddp_tui.reports.efficiency import UsageReport
    from ddp_tui.reports.outcomes import Outcomes, RunDiff


class SubmitAPI(Protocol):
    """Compose and submit (:class:`~ddp_tui.remote.submit.service.SubmitService`)."""

    def default_spec(self) -> ExperimentSpec: ...
    def partitions(self) -> list[PartitionInfo]: ...
    def plan(
        self,
        spec: ExperimentSpec,
        *,
        kind: str = "train",
        group: str | None = None,
        dry_run: bool = False,
    ) -> SubmitPlan: ...
    def plan_sweep(
        self,
        spec: ExperimentSpec,
        sweep: Sweep,
        *,
        max_concurrent: int | None = None,
        dry_run: bool = False,
    ) -> SweepPlan: ...
    def submit(self, plan: SubmitPlan) -> RunView: ...
    def submit_sweep(self, plan: SweepPlan) -> list[RunView]: ...
    def retry(self, run_id: str, *, seen: int | None = None) -> RunView: ...
    def detect_environment(
        self, partition: str, *, recheck: bool = False, wait_sec: float = DETECT_WAIT_SEC
    ) -> Detection: ...
    def recheck_environment(self, spec: ExperimentSpec) -> None: ...


class RunsAPI(Protocol):
    """Every run, and one run looked into (:class:`~ddp_tui.remote.runs.service.RunsService`)."""

    def refresh(self, follow: str | None = None) -> Snapshot: ...
    def follow(self, run_id: str) -> RunDetail: ...
    def restart_follow(self, run_id: str) -> None: ...
    def cancel(self, run_id: str) -> list[str]: ...
    def verify(self, run_id: str) -> list[Check]: ...
    def diagnose(self, run_id: str) -> Diagnosis | None: ...
    def estimated_start(self, run_id: str) -> str: ...
    def resources(self, run_id: str) -> ResourceSummary: ...


class LiveAPI(Protocol):
    """Hands on a live job (:class:`~ddp_tui.remote.live.service.LiveService`)."""

    def stacks(self, run_id: str, *, timeout: float = 8.0, py_spy: str = "auto") -> StacksTaken: ...
    def shell_command(self, run_id: str, node: str | None = None) -> ShellPlan: ...
    def open_shell(self, plan: ShellPlan) -> int:
        """Called on the main thread with the app suspended (the terminal is the shell's)."""


class GroupsAPI(Protocol):
    """Runs of one experiment together (:class:`~ddp_tui.remote.groups.service.GroupsService`)."""

    def cancel_group(self, group: str) -> list[str]: ...
    def retry_group(self, group: str) -> GroupRetry: ...
    def compare(self, group: str) -> pd.DataFrame: ...
    def advise(
        self, group: str, *, threshold: float | None = None, deadline_sec: float | None = None
    ) -> Advice: ...
    def export_comparison(self, group: str) -> list[str]: ...
    def outcomes(self, group: str) -> Outcomes: ...
    def diff(self, run_a: str, run_b: str) -> RunDiff: ...


class UserJobsAPI(Protocol):
    """Every job of the user, ddp-tui's runs beside the rest
    (:class:`~ddp_tui.remote.runs.user_jobs.UserJobsService`)."""

    def user_jobs(self, since: Since | None = None, *, follow: str | None = None) -> AllJobs: ...
    def cancel_job(self, job_id: str) -> None: ...
    def job_state(self, job_id: str) -> JobState: ...
    def job_script(self, job_id: str) -> str: ...
    def job_log(
        self,
        job_id: str,
        *,
        err: bool = False,
        offset: int | None = None,
        max_bytes: int = LOG_BYTES,
    ) -> JobLog: ...


class WaitingAPI(Protocol):
    """Why a pending job waits, asked on demand
    (:class:`~ddp_tui.remote.runs.waiting.WaitingService`)."""

    def why_waiting(self, run_or_job: str) -> WaitExplanation: ...


class UsageAPI(Protocol):
    """What a run or any job used (:class:`~ddp_tui.remote.runs.job_usage.UsageService`)."""

    def usage(self, run_or_job: str) -> UsageReport: ...


class AdoptionAPI(Protocol):
    """A job ddp-tui did not submit, brought in as a run
    (:class:`~ddp_tui.remote.runs.adoption.AdoptionService`)."""

    def adopt_job(self, job_id: str) -> RunView: ...


class ClusterAPI(
    SubmitAPI,
    RunsAPI,
    LiveAPI,
    GroupsAPI,
    UserJobsAPI,
    UsageAPI,
    WaitingAPI,
    AdoptionAPI,
    Protocol,
):
    """Submit, follow, compare, cancel, retry and verify runs on one cluster: every service's
    calls, on the one object the app holds."""

    @property
    def location(self) -> str:
        """Where the runs are: "local scheduler", "Slurm on this host", "user@host"."""

    @property
    def scheduler_name(self) -> str:
        """``"slurm"`` or ``"local"``."""

    def close(self) -> None: ...
