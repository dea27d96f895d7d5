"""The facade as the app sees it: :class:`ClusterAPI`, every call the TUI makes.

The app and its screens are typed against this protocol, not against
:class:`~ddp_tui.remote.cluster.Cluster`, so that the snapshot tests' fake
(``tests/tui/fakes.py``) is checked by mypy to offer the same calls (see
docs/architecture.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ddp_tui.diagnosis import Diagnosis
from ddp_tui.remote.backends.scheduler import PartitionInfo
from ddp_tui.remote.groups.group_control import GroupRetry
from ddp_tui.remote.live.shells import ShellPlan
from ddp_tui.remote.live.stacks import StacksTaken
from ddp_tui.remote.model.views import Check, RunDetail, RunView, Snapshot
from ddp_tui.remote.submit.plan import SubmitPlan
from ddp_tui.remote.submit.sweep_plan import SweepPlan
from ddp_tui.resources import ResourceSummary
from ddp_tui.spec import ExperimentSpec, Sweep

if TYPE_CHECKING:
    import pandas as pd

    from ddp_tui.advisor import Advice
    from ddp_tui.outcomes import Outcomes, RunDiff


class ClusterAPI(Protocol):
    """Submit, follow, compare, cancel, retry and verify runs on one cluster."""

    @property
    def location(self) -> str:
        """Where the runs are: "local scheduler", "Slurm on this host", "user@host"."""

    @property
    def scheduler_name(self) -> str:
        """``"slurm"`` or ``"local"``."""

    # -- compose --
    def default_spec(self) -> ExperimentSpec: ...
    def partitions(self) -> list[PartitionInfo]: ...
    def plan(
        self, spec: ExperimentSpec, *, kind: str = "train", group: str | None = None
    ) -> SubmitPlan: ...
    def plan_sweep(
        self, spec: ExperimentSpec, sweep: Sweep, *, max_concurrent: int | None = None
    ) -> SweepPlan: ...

    # -- submit and control --
    def submit(self, plan: SubmitPlan) -> RunView: ...
    def submit_sweep(self, plan: SweepPlan) -> list[RunView]: ...
    def cancel(self, run_id: str) -> list[str]: ...
    def retry(self, run_id: str, *, seen: int | None = None) -> RunView: ...
    def cancel_group(self, group: str) -> list[str]: ...
    def retry_group(self, group: str) -> GroupRetry: ...
    def verify(self, run_id: str) -> list[Check]: ...

    # -- diagnose --
    def diagnose(self, run_id: str) -> Diagnosis | None: ...
    def estimated_start(self, run_id: str) -> str: ...
    def resources(self, run_id: str) -> ResourceSummary: ...
    def stacks(self, run_id: str, *, timeout: float = 8.0, py_spy: str = "auto") -> StacksTaken: ...

    # -- a shell where the job runs --
    def shell_command(self, run_id: str, node: str | None = None) -> ShellPlan: ...
    def open_shell(self, plan: ShellPlan) -> int:
        """Called on the main thread with the app suspended (the terminal is the shell's)."""

    # -- follow --
    def refresh(self, follow: str | None = None) -> Snapshot: ...
    def follow(self, run_id: str) -> RunDetail: ...
    def restart_follow(self, run_id: str) -> None: ...

    # -- compare --
    def compare(self, group: str) -> pd.DataFrame: ...
    def advise(
        self, group: str, *, threshold: float | None = None, deadline_sec: float | None = None
    ) -> Advice: ...
    def export_comparison(self, group: str) -> list[str]: ...
    def outcomes(self, group: str) -> Outcomes: ...
    def diff(self, run_a: str, run_b: str) -> RunDiff: ...

    def close(self) -> None: ...
