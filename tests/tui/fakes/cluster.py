"""``FakeCluster``: the four service fakes on one object (:class:`ddp_tui.remote.api.ClusterAPI`,
checked by mypy below), as :class:`ddp_tui.remote.cluster.Cluster` holds the real services."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from ddp_tui.remote.api import ClusterAPI
from tests.tui.fakes.adoption import FakeAdoption
from tests.tui.fakes.services import (
    FakeGroups,
    FakeLive,
    FakeRuns,
    FakeState,
    FakeSubmits,
    FakeUsage,
)
from tests.tui.fakes.user_jobs import FakeUserJobs
from tests.tui.fakes.waiting import FakeWaiting

if TYPE_CHECKING:
    import pandas as pd

    from ddp_tui.advisor import Advice
    from ddp_tui.diagnosis import Diagnosis
    from ddp_tui.diagnosis.stall import Heartbeat, Stall
    from ddp_tui.diagnosis.waiting import WaitExplanation
    from ddp_tui.remote.backends.user_jobs import UserJob
    from ddp_tui.remote.model.views import RunView
    from ddp_tui.resources import ResourceView

S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")


class _On(Generic[S, P, R]):
    """One call of :class:`FakeCluster`, bound to the same call of the fake service held in its
    attribute ``service``, as ``Cluster._bind`` binds the facade's calls: with that call's own
    signature. It is bound on the class, not the instance, so that a test's subclass of
    ``FakeCluster`` can still override a call and reach this one through ``super()``."""

    def __init__(self, service: str, call: Callable[Concatenate[S, P], R]) -> None:
        self.service = service
        self.name = call.__name__

    @overload
    def __get__(self, fake: None, owner: type) -> _On[S, P, R]: ...
    @overload
    def __get__(self, fake: object, owner: type | None = None) -> Callable[P, R]: ...
    def __get__(self, fake: object, owner: type | None = None) -> _On[S, P, R] | Callable[P, R]:
        if fake is None:
            return self
        bound: Callable[P, R] = getattr(getattr(fake, self.service), self.name)
        return bound


class FakeCluster:
    """Fixed data in the facade's shape (see the package docstring: fakes, for the app's tests):
    each call is its fake service's, over one :class:`FakeState`."""

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
        foreign: Sequence[UserJob] | None = None,
        job_logs: Mapping[str, Sequence[str]] | None = None,
        waits: Mapping[str, WaitExplanation] | None = None,
    ) -> None:
        self.state = FakeState() if runs is None else FakeState(list(runs))
        self.submits = FakeSubmits(self.state)
        self.runs_service = FakeRuns(
            self.state,
            connection,
            error,
            diagnosis,
            estimate,
            list(err_lines),
            list(heartbeats),
            stall,
            telemetry,
        )
        self.live = FakeLive(self.state)
        self.groups_service = FakeGroups(self.state, self.submits.retry, comparison, advice)
        #: The user's other jobs (default: ``sample_user_jobs()``), beside the same runs.
        self.user_jobs_service = FakeUserJobs(
            self.state, self.runs_service.refresh, foreign, logs=job_logs
        )
        self.usage_service = FakeUsage(self.state)
        self.waiting_service = FakeWaiting(self.state, waits)
        #: A foreign row brought in as a run (FAKE: a row, not a directory).
        self.adoption_service = FakeAdoption(self.state, self.user_jobs_service)

    # compose and submit
    default_spec = _On("submits", FakeSubmits.default_spec)
    partitions = _On("submits", FakeSubmits.partitions)
    plan = _On("submits", FakeSubmits.plan)
    plan_sweep = _On("submits", FakeSubmits.plan_sweep)
    submit = _On("submits", FakeSubmits.submit)
    submit_sweep = _On("submits", FakeSubmits.submit_sweep)
    retry = _On("submits", FakeSubmits.retry)
    detect_environment = _On("submits", FakeSubmits.detect_environment)
    recheck_environment = _On("submits", FakeSubmits.recheck_environment)
    # every run, and one run
    refresh = _On("runs_service", FakeRuns.refresh)
    follow = _On("runs_service", FakeRuns.follow)
    restart_follow = _On("runs_service", FakeRuns.restart_follow)
    cancel = _On("runs_service", FakeRuns.cancel)
    verify = _On("runs_service", FakeRuns.verify)
    diagnose = _On("runs_service", FakeRuns.diagnose)
    estimated_start = _On("runs_service", FakeRuns.estimated_start)
    resources = _On("runs_service", FakeRuns.resources)
    # hands on a live job
    stacks = _On("live", FakeLive.stacks)
    shell_command = _On("live", FakeLive.shell_command)
    open_shell = _On("live", FakeLive.open_shell)
    # groups
    cancel_group = _On("groups_service", FakeGroups.cancel_group)
    retry_group = _On("groups_service", FakeGroups.retry_group)
    compare = _On("groups_service", FakeGroups.compare)
    advise = _On("groups_service", FakeGroups.advise)
    export_comparison = _On("groups_service", FakeGroups.export_comparison)
    outcomes = _On("groups_service", FakeGroups.outcomes)
    diff = _On("groups_service", FakeGroups.diff)
    # every job of the user
    user_jobs = _On("user_jobs_service", FakeUserJobs.user_jobs)
    cancel_job = _On("user_jobs_service", FakeUserJobs.cancel_job)
    job_state = _On("user_jobs_service", FakeUserJobs.job_state)
    job_script = _On("user_jobs_service", FakeUserJobs.job_script)
    job_log = _On("user_jobs_service", FakeUserJobs.job_log)
    adopt_job = _On("adoption_service", FakeAdoption.adopt_job)
    # what a run or any job used
    usage = _On("usage_service", FakeUsage.usage)
    # why a pending job waits
    why_waiting = _On("waiting_service", FakeWaiting.why_waiting)

    @property
    def runs(self) -> list[RunView]:
        """The runs every fake shows (a submit adds one, a cancel changes one)."""
        return self.state.runs

    @runs.setter
    def runs(self, runs: list[RunView]) -> None:
        self.state.runs = runs

    @property
    def calls(self) -> list[tuple[str, Any]]:
        """Every call the tests look for, in order, whichever fake took it."""
        return self.state.calls

    @property
    def location(self) -> str:
        return self.state.location

    @property
    def scheduler_name(self) -> str:
        return "slurm"

    def close(self) -> None:
        self.state.calls.append(("close", None))


def _conforms(fake: FakeCluster) -> ClusterAPI:
    return fake  # mypy checks here that FakeCluster offers every call the app makes
