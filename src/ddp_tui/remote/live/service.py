"""The live service: hands on a running job, a shell beside it and every rank's stack."""

from __future__ import annotations

from collections.abc import Callable

from ddp_tui.remote.backends.executor import Executor
from ddp_tui.remote.backends.scheduler import Scheduler
from ddp_tui.remote.live.shells import ShellPlan, job_status, plan_shell
from ddp_tui.remote.live.stacks import (
    DEFAULT_TIMEOUT_SEC,
    SavedStacks,
    StacksTaken,
    last_saved,
    take_stacks,
)
from ddp_tui.remote.model.view_building import latest_job_id
from ddp_tui.remote.observe.attempt_states import AttemptStates
from ddp_tui.remote.store.runs import RunInfo


class LiveService:
    """Shells and stacks of a run's job. ``info`` gives a run as listed."""

    def __init__(
        self,
        executor: Executor,
        scheduler: Scheduler,
        states: AttemptStates,
        info: Callable[[str], RunInfo],
    ) -> None:
        self.executor = executor
        self.scheduler = scheduler
        self.states = states
        self._info = info

    def shell_command(self, run_id: str, node: str | None = None) -> ShellPlan:
        """Where a shell beside the run's job opens (its first node, or ``node``) and with
        which command; :class:`ShellUnavailable` says why none can (see
        :mod:`ddp_tui.remote.live.shells`). One poll of the job."""
        info = self._info(run_id)
        status = job_status(info, self.states, self.scheduler)
        via = self.executor.description if self.executor.description != "local" else None
        return plan_shell(info, status, self.scheduler, node=node, via=via)

    def open_shell(self, plan: ShellPlan) -> int:
        """Run ``plan``'s shell on the user's terminal until it exits; its exit status. The
        caller frees the terminal first (the app suspends) and calls from the main thread."""
        return self.executor.interactive(plan.argv, cwd=plan.cwd)

    def stacks(
        self, run_id: str, *, timeout: float = DEFAULT_TIMEOUT_SEC, py_spy: str = "auto"
    ) -> StacksTaken:
        """Every rank's Python stack of the run's running job, grouped, with which ranks
        are behind; saved under the run's ``stacks/`` (:mod:`ddp_tui.remote.live.stacks`)."""
        info = self._info(run_id)
        return take_stacks(
            self.executor,
            self.scheduler,
            info.ref,
            latest_job_id(info),
            timeout=timeout,
            py_spy=py_spy,
        )

    def last_stacks(self, run_id: str) -> SavedStacks | None:
        """The newest stacks saved in the run, if any were taken."""
        return last_saved(self.executor, self._info(run_id).ref)
