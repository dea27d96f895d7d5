"""Fakes of the cluster's services, used ONLY by the app's tests that need screens in fixed states
(the snapshot tests first).

Snapshot tests need screens in fixed, deterministic states (a run at exactly epoch
3/10, a failed run, a finished sweep) that a real scheduler cannot produce on demand
and to the same pixel every time. Every story test (submit, follow, cancel, retry)
uses the real ``Cluster`` against the real local scheduler or real Slurm instead.

One fake per service of :mod:`ddp_tui.remote.api` (``services.py``: ``FakeSubmits``,
``FakeRuns``, ``FakeLive``, ``FakeGroups``; ``user_jobs.py``: ``FakeUserJobs``, the user's
jobs that ddp-tui did not submit; ``waiting.py``: ``FakeWaiting``, why a pending job waits;
``adoption.py``: ``FakeAdoption``, such a job brought in as a run; each checked by mypy
against its protocol), over one shared ``FakeState``; ``FakeCluster`` (``cluster.py``) is
them all on one object, as the app holds ``Cluster``
(:class:`ddp_tui.remote.api.ClusterAPI`, checked by mypy too). They return fixed data
(``data.py``); the spec checks and the submit plans are the real ones
(``ddp_tui.remote.submit.plan``, ``ddp_tui.spec``, ``sbatch_templates``).
"""

from tests.tui.fakes.cluster import FakeCluster
from tests.tui.fakes.data import (
    BASE,
    HEARTBEATS,
    MISSING_TORCH,
    MISSING_TORCH_ERR,
    NOW,
    OUTCOME_GRID,
    PARTITIONS,
    RUNS_ROOT,
    SAMPLE_SWEEP,
    STALL,
    diagnosed_runs,
    resource_view,
    sample_accounting,
    sample_advice,
    sample_members,
    sample_metrics,
    sample_runs,
    telemetry_lines,
)
from tests.tui.fakes.services import (
    FakeGroups,
    FakeLive,
    FakeRuns,
    FakeState,
    FakeSubmits,
    FakeUsage,
)
from tests.tui.fakes.user_jobs import FakeUserJobs, sample_user_jobs
from tests.tui.fakes.waiting import FakeWaiting, sample_wait

__all__ = [
    "BASE",
    "HEARTBEATS",
    "MISSING_TORCH",
    "MISSING_TORCH_ERR",
    "NOW",
    "OUTCOME_GRID",
    "PARTITIONS",
    "RUNS_ROOT",
    "SAMPLE_SWEEP",
    "STALL",
    "FakeCluster",
    "FakeGroups",
    "FakeLive",
    "FakeRuns",
    "FakeState",
    "FakeSubmits",
    "FakeUsage",
    "FakeUserJobs",
    "FakeWaiting",
    "diagnosed_runs",
    "resource_view",
    "sample_accounting",
    "sample_advice",
    "sample_members",
    "sample_metrics",
    "sample_runs",
    "sample_user_jobs",
    "sample_wait",
    "telemetry_lines",
]
