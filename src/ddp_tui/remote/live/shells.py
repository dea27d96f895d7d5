"""A shell where a run's job runs: on which node, with which command, or why none opens.

- **Slurm**: a RUNNING job only. The shell is a step of the job itself, ``srun --jobid=J
  --overlap --nodelist=HOST --pty``
  (:meth:`~ddp_tui.remote.backends.scheduler.Scheduler.node_argv`),
  on the job's first node unless one is named; it sees the job's GPUs and its processes. A
  pending job has no node yet, an ended one no allocation: both are refused, saying so.
- **The local scheduler**: the job runs on this machine, so the shell is a plain one here,
  in the run directory, whatever the job's state (an ended run's files are still there).

Either way the shell is the user's login shell (``$SHELL``, else ``/bin/sh``) started in the
run directory, through ``sh -c`` with the directory as an argument, never pasted into the
script. The facade's executor runs the command on the user's terminal (over SSH: on a pty
of the same connection). See docs/shell.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddp_tui.errors import DdpTuiError
from ddp_tui.remote.backends.hostlist import expand_hostlist
from ddp_tui.remote.backends.scheduler import JobStatus, Scheduler
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.view_building import latest_job_id
from ddp_tui.remote.observe.attempt_states import AttemptStates
from ddp_tui.remote.store.runs import RunInfo

#: Enters the run directory ($1) and becomes the login shell. A directory that cannot be
#: entered there (a node without the shared filesystem) is said, and the shell opens anyway.
SHELL_SCRIPT = (
    'cd -- "$1" 2>/dev/null || printf "ddp-tui: cannot enter %s here; the shell starts in %s\\n"'
    ' "$1" "$PWD" >&2; exec "${SHELL:-/bin/sh}"'
)

#: States in which a Slurm job has an allocation that a step can join.
_JOINABLE = frozenset({JobState.RUNNING})


class ShellUnavailable(DdpTuiError):
    """No shell can open where the run's job runs (not started, ended, no such node)."""

    title = "Shell"


@dataclass(frozen=True)
class ShellPlan:
    """What opening a shell for a run will do: ``argv`` in ``cwd`` on the user's terminal."""

    run_id: str
    job_id: str
    argv: tuple[str, ...]
    cwd: str | None
    #: Where it opens, in words: "node n1 (1 of 2) of job 12", "this machine (host)".
    where: str
    #: The node it opens on, and every node of the job (a chooser offers them).
    node: str
    nodes: tuple[str, ...]
    run_dir: str

    @property
    def banner(self) -> str:
        """The one line printed before the shell starts."""
        return (
            f"ddp-tui: a shell on {self.where}, in {self.run_dir}. Type exit to return to ddp-tui."
        )


def shell_argv(run_dir: str) -> list[str]:
    """The login shell started in ``run_dir`` (quoted by being an argument, whatever it holds)."""
    return ["sh", "-c", SHELL_SCRIPT, "sh", run_dir]


def job_status(info: RunInfo, states: AttemptStates, scheduler: Scheduler) -> JobStatus | None:
    """The latest attempt's status: its recorded end, else the scheduler's word now (one
    poll: the node list of a running job is only ever the scheduler's)."""
    ended = states.end_of(info)
    if ended is not None:
        return ended
    job_id = latest_job_id(info)
    return scheduler.poll([job_id]).get(job_id) if job_id else None


def plan_shell(
    info: RunInfo,
    status: JobStatus | None,
    scheduler: Scheduler,
    *,
    node: str | None = None,
    via: str | None = None,
) -> ShellPlan:
    """Where a shell for run ``info`` opens, on ``node`` (default: the job's first), with
    ``status`` its latest job's; ``via`` names the SSH destination in remote mode. Raises
    :class:`ShellUnavailable` saying why none can open."""
    run_id, run_dir = info.run_id, info.ref.path
    job_id = latest_job_id(info)
    if job_id is None:
        raise ShellUnavailable(f"run {run_id} has no job (it was never submitted)")
    if scheduler.name == "local":
        return _local_plan(info, job_id, status, scheduler, node)
    state = status.state if status is not None else JobState.UNKNOWN
    if state not in _JOINABLE:
        raise ShellUnavailable(_refusal(job_id, status, run_dir))
    assert status is not None
    nodes = _nodes(status)
    if not nodes:
        raise ShellUnavailable(f"job {job_id} runs, but Slurm names none of its nodes yet")
    host = _chosen(node, nodes, job_id)
    argv = scheduler.node_argv(job_id, host, shell_argv(run_dir), pty=True)
    where = f"node {host} ({nodes.index(host) + 1} of {len(nodes)}) of job {job_id}"
    if via:
        where += f", through {via}"
    return ShellPlan(run_id, job_id, tuple(argv), run_dir, where, host, nodes, run_dir)


def _local_plan(
    info: RunInfo, job_id: str, status: JobStatus | None, scheduler: Scheduler, node: str | None
) -> ShellPlan:
    """The local scheduler's jobs run here: a shell here, in the run directory."""
    nodes = _nodes(status) if status is not None else ()
    host = _chosen(node, nodes, job_id) if node is not None else (nodes[0] if nodes else "")
    argv = scheduler.node_argv(job_id, host, shell_argv(info.ref.path), pty=True)
    where = f"this machine ({host})" if host else "this machine"
    if status is not None and status.state.is_terminal:
        where += f"; job {job_id} has ended ({status.state.value})"
    path = info.ref.path
    return ShellPlan(info.run_id, job_id, tuple(argv), path, where, host, nodes, path)


def _nodes(status: JobStatus) -> tuple[str, ...]:
    try:
        return tuple(expand_hostlist(status.node_list))
    except ValueError as exc:
        raise ShellUnavailable(f"job {status.job_id}'s node list: {exc}") from None


def _chosen(node: str | None, nodes: tuple[str, ...], job_id: str) -> str:
    if node is None:
        return nodes[0]
    if node not in nodes:
        names = ", ".join(nodes) or "none known"
        raise ShellUnavailable(f"{node} is not a node of job {job_id}; its nodes: {names}")
    return node


def _refusal(job_id: str, status: JobStatus | None, run_dir: str) -> str:
    """Why no shell opens beside a Slurm job that is not running, in words."""
    if status is None or status.state in (JobState.UNKNOWN, JobState.LOST):
        return f"Slurm does not know job {job_id} (any more): there is no allocation to join"
    state = status.state
    reason = f", {status.reason}" if status.reason else ""
    if state in (JobState.PENDING, JobState.REQUEUED):
        return (
            f"job {job_id} has not started yet ({state.value}{reason}): it has no node to open "
            "a shell on until it runs"
        )
    if state.is_terminal:
        return (
            f"job {job_id} has ended ({state.value}): its allocation is gone, so nothing runs "
            f"there any more; its files are in {run_dir}"
        )
    return f"job {job_id} is {state.value}{reason}: a shell joins a RUNNING job only"
