"""A podman run's containers stopped on its nodes before its Slurm job is cancelled.

podman moves a container out of the job that started it: its processes and conmon live in
podman's own cgroup, not the step's. So ``scancel`` (or the time limit) ends the podman
client but not the container (measured on the test cluster: both nodes' containers, and the
ranks in them, still ran after the job was CANCELLED). ddp-tui's own cancel therefore stops
them first: on each node of each running job, beside the job (``Scheduler.node_argv``: ``srun
--jobid --overlap``), ``podman stop`` of the containers named for that job. SIGTERM reaches
each container's torchrun, which passes it to the ranks (the trainer checkpoints), then
podman removes the container (``--rm``). A cancel from outside ddp-tui (scancel, the time
limit) still leaves them: the plan warns of that.

The local scheduler needs none of this: it ends every process of the job, the container's
too (``--pid host``), and the podman client removes the container.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ddp_tui.remote.backends.executor import Executor, ExecutorError
from ddp_tui.remote.backends.hostlist import expand_hostlist
from ddp_tui.remote.backends.scheduler import JobStatus, Scheduler, SchedulerError
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.store.run_jobs import all_job_ids, live_jobs
from ddp_tui.remote.store.runs import RunInfo, RunStore
from ddp_tui.sbatch_templates.podman import PODMAN_GLOBAL_OPTIONS, container_name_prefix

__all__ = ["STOP_GRACE_SEC", "stop_containers", "stop_run_containers", "uses_podman"]

#: How long each container has between SIGTERM and SIGKILL (podman's own default).
STOP_GRACE_SEC: Final = 10

#: Runs on each node: ``$1`` is the job's name prefix, ``$2`` the grace. First the job's podman
#: clients (its own processes, found by their command line; this script's own does not
#: begin with podman) are stopped (SIGSTOP): a
#: container's end would otherwise end its client, then the job, before the scancel that
#: follows, and the job would end FAILED, not CANCELLED (measured). scancel's SIGCONT and
#: SIGTERM then end them. A node without podman has nothing to stop.
_STOP_SCRIPT: Final = (
    "command -v podman >/dev/null 2>&1 || exit 0\n"
    'pkill -STOP -f "^podman .* run --name $1" || true\n'
    f"P='podman {' '.join(shlex.quote(o) for o in PODMAN_GLOBAL_OPTIONS)}'\n"
    '$P ps --quiet --filter "name=^$1" | xargs -r $P stop --time "$2" >/dev/null\n'
)


def uses_podman(spec: Mapping[str, Any]) -> bool:
    """Whether a run's spec (``spec.json``'s ``spec``) runs its launcher in podman."""
    return spec.get("environment") == "container" and spec.get("container_runtime") == "podman"


def stop_run_containers(
    executor: Executor, scheduler: Scheduler, store: RunStore, info: RunInfo
) -> list[str]:
    """Before a cancel: stop the containers of a podman run's running Slurm jobs (nothing
    for other runs, or on the local scheduler); what failed, as notes. One squeue more."""
    if scheduler.name != "slurm" or not uses_podman(info.spec):
        return []
    try:
        jobs = live_jobs(scheduler, all_job_ids(scheduler, store, info.ref))
    except (ExecutorError, SchedulerError) as exc:
        return [f"cannot list the run's jobs: {exc}"]
    return stop_containers(executor, scheduler, jobs)


def stop_containers(
    executor: Executor, scheduler: Scheduler, jobs: Sequence[JobStatus]
) -> list[str]:
    """Stop the podman containers of each running job in ``jobs`` on each of its nodes, one
    node at a time; what failed, as notes (a cancel goes on regardless)."""
    notes: list[str] = []
    for job in jobs:
        if job.state is not JobState.RUNNING or not job.node_list:
            continue
        try:
            hosts = expand_hostlist(job.node_list)
        except ValueError:
            notes.append(f"job {job.job_id}: cannot read its node list {job.node_list!r}")
            continue
        argv = ["sh", "-c", _STOP_SCRIPT, "ddp-tui-stop"]
        argv += [container_name_prefix(job.job_id), str(STOP_GRACE_SEC)]
        for host in hosts:
            try:
                res = executor.run(
                    scheduler.node_argv(job.job_id, host, argv), timeout=STOP_GRACE_SEC + 20.0
                )
            except (ExecutorError, SchedulerError) as exc:
                notes.append(f"job {job.job_id} on {host}: {exc}")
                continue
            if not res.ok:
                why = res.stderr.strip()[-300:]
                notes.append(f"job {job.job_id} on {host}: exit {res.returncode}: {why}")
    return notes
