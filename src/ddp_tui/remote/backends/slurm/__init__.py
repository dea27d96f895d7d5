"""Slurm through its command-line tools: argv builders, output parsers, and the client.

:mod:`.commands` builds every argv (pure: a caller can send several commands in one
SSH round trip), :mod:`.parsers` reads what the tools print (pure as well), and
:mod:`.client` holds :class:`SlurmScheduler`, which only composes the two over an
:class:`~ddp_tui.remote.backends.executor.Executor`.
"""

from ddp_tui.remote.backends.scheduler import (
    AccountingUnavailable,  # what SlurmScheduler.poll raises
)
from ddp_tui.remote.backends.slurm.client import SlurmScheduler
from ddp_tui.remote.backends.slurm.commands import (
    ACCOUNTING_FORMAT,
    QUEUED_STATES,
    SACCT_CHUNK,
    SACCT_FIELDS,
    SEP,
    SINFO_FIELDS,
    SQUEUE_FIELDS,
    accounting_argv,
    config_argv,
    jobs_in_dir_argv,
    requeue_argv,
    sacct_argv,
    sbatch_argv,
    scancel_argv,
    show_job_argv,
    sinfo_argv,
    squeue_argv,
    version_argv,
)
from ddp_tui.remote.backends.slurm.parsers import (
    NodeInfo,
    PollResult,
    error_of,
    merge_poll,
    parse_cluster_name,
    parse_duration,
    parse_exit_code,
    parse_gpus,
    parse_jobs_in_dir,
    parse_sacct,
    parse_sbatch,
    parse_show_job,
    parse_sinfo,
    parse_squeue,
    parse_start,
    parse_version,
    partitions_from_nodes,
    poll_from_results,
)

__all__ = [
    "ACCOUNTING_FORMAT",
    "QUEUED_STATES",
    "SACCT_CHUNK",
    "SACCT_FIELDS",
    "SEP",
    "SINFO_FIELDS",
    "SQUEUE_FIELDS",
    "AccountingUnavailable",
    "NodeInfo",
    "PollResult",
    "SlurmScheduler",
    "accounting_argv",
    "config_argv",
    "error_of",
    "jobs_in_dir_argv",
    "merge_poll",
    "parse_cluster_name",
    "parse_duration",
    "parse_exit_code",
    "parse_gpus",
    "parse_jobs_in_dir",
    "parse_sacct",
    "parse_sbatch",
    "parse_show_job",
    "parse_sinfo",
    "parse_squeue",
    "parse_start",
    "parse_version",
    "partitions_from_nodes",
    "poll_from_results",
    "requeue_argv",
    "sacct_argv",
    "sbatch_argv",
    "scancel_argv",
    "show_job_argv",
    "sinfo_argv",
    "squeue_argv",
    "version_argv",
]
