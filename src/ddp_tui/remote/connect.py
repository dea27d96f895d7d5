"""Choosing the executor, scheduler and run store a profile asks for.

SSH with a host, else this machine; Slurm where it answers (or where the profile says
so), else the embedded local scheduler. :meth:`Cluster.open` builds its facade on what
:func:`connect` returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ddp_tui.remote.backends.executor import Executor, ExecutorError, LocalExecutor
from ddp_tui.remote.backends.scheduler import Scheduler, SchedulerError
from ddp_tui.remote.store.runs import RunStore

if TYPE_CHECKING:
    from ddp_tui.config import Profile

# sbatch alone is not enough: a workstation may have the client without a cluster. A
# configless cluster has no slurm.conf, so then ask the controller once.
SLURM_PROBE = (
    'command -v sbatch >/dev/null 2>&1 && { [ -n "${SLURM_CONF:-}" ] '
    "|| [ -e /etc/slurm/slurm.conf ] || scontrol ping >/dev/null 2>&1; }"
)


def has_slurm(executor: Executor) -> bool:
    """Whether Slurm is usable on the executor's machine."""
    try:
        return executor.run(["sh", "-c", SLURM_PROBE], timeout=15).ok
    except ExecutorError:
        return False


@dataclass(frozen=True)
class Connection:
    """What a facade runs on, and where that is in words (for the header)."""

    executor: Executor
    scheduler: Scheduler
    store: RunStore
    location: str


def connect(
    profile: Profile,
    *,
    host: str | None = None,
    runs_root: str | None = None,
    local_state_dir: str | None = None,
    prompter: Any = None,
    state_callback: Callable[[str], None] | None = None,
) -> Connection:
    """Connect as the profile says: SSH with a host, Slurm when sbatch is on PATH, else
    the embedded local scheduler."""
    host = host or profile.host
    executor: Executor
    if host:
        from ddp_tui.remote.backends.ssh import SSHExecutor

        ssh = SSHExecutor(host, prompter=prompter, state_callback=state_callback)
        try:
            # Now, so that a wrong alias, port or key says so (the Slurm probe below
            # would swallow it and report "no Slurm" instead).
            ssh.connect()
        except BaseException:
            ssh.close()
            raise
        executor = ssh
    else:
        executor = LocalExecutor()
    kind = profile.scheduler
    if kind == "auto":
        kind = "slurm" if has_slurm(executor) else "local"
    scheduler: Scheduler
    if kind == "slurm":
        from ddp_tui.remote.backends.slurm import SlurmScheduler

        scheduler = SlurmScheduler(executor)
        location = executor.description if host else "Slurm on this host"
    else:
        if host:
            executor.close()
            raise SchedulerError(
                f"{host} has no Slurm (sbatch is not on its PATH); "
                "the local scheduler runs on this machine only"
            )
        from ddp_tui.remote.backends.local import LocalScheduler

        scheduler = LocalScheduler(
            local_state_dir or profile.local_state_dir, max_running=profile.local_max_concurrent
        )
        location = "local scheduler"
    root = runs_root or profile.runs_root
    return Connection(executor, scheduler, RunStore(executor, executor.expand_home(root)), location)
