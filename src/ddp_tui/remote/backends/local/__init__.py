"""The embedded default scheduler: one-node jobs as detached local process groups.

Without Slurm (a workstation, a laptop, a fresh CI machine) this runs the same
``job.sbatch`` as ``bash job.sbatch`` (its ``#SBATCH`` lines are comments to bash),
with numeric job ids, Slurm-like states and exit codes. The package holds the
client (:mod:`.client`, :class:`LocalScheduler`), the ``#SBATCH`` reader
(:mod:`.directives`), the state directory of job files under one lock (:mod:`.store`),
pid and process-group helpers (:mod:`.processes`) and the detached process that
supervises one job (:mod:`.supervisor`, run as ``python -m``, so a job survives the
app). A supervisor or job that died without a word (a reboot, ``kill -9``) is
noticed from ``/proc`` by whoever polls next.
"""

from ddp_tui.remote.backends.local.client import LocalScheduler
from ddp_tui.remote.backends.local.directives import (
    expand_log_pattern,
    refuse_multi_node,
    requested_nodes,
    sbatch_options,
)
from ddp_tui.remote.backends.local.processes import group_alive, pid_alive, process_start
from ddp_tui.remote.backends.local.store import (
    DEFAULT_CANCEL_GRACE_SEC,
    DEFAULT_MAX_RUNNING,
    LocalJob,
    default_state_dir,
)

__all__ = [
    "DEFAULT_CANCEL_GRACE_SEC",
    "DEFAULT_MAX_RUNNING",
    "LocalJob",
    "LocalScheduler",
    "default_state_dir",
    "expand_log_pattern",
    "group_alive",
    "pid_alive",
    "process_start",
    "refuse_multi_node",
    "requested_nodes",
    "sbatch_options",
]
