"""The argv of every Slurm command the app runs, as pure functions.

Output is always requested in an explicit format: fields are separated by :data:`SEP`
(``\\x1f``, ASCII unit separator), the free-text job name comes last so it may contain
anything, and every command runs under ``env -u ...`` so that a user's
``SQUEUE_FORMAT``, ``SLURM_TIME_FORMAT``, ``SQUEUE_STATES`` and friends cannot change
what is printed. Being pure, several of them can go out in one SSH round trip.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ddp_tui.remote.backends.job_ids import array_index, array_master
from ddp_tui.remote.backends.scheduler import SchedulerError

#: Separates fields in squeue/sacct/sinfo output; Slurm never prints it itself.
SEP = "\x1f"

# Environment variables that change what the tools print or which jobs they touch.
_COMMON_ENV = ("SLURM_CLUSTERS", "SLURM_DEBUG_FLAGS", "SLURM_TIME_FORMAT")
_TOOL_ENV: dict[str, tuple[str, ...]] = {
    "squeue": (
        "SQUEUE_ACCOUNT", "SQUEUE_ALL", "SQUEUE_ARRAY", "SQUEUE_ARRAY_UNIQUE", "SQUEUE_NAMES",
        "SQUEUE_FEDERATION", "SQUEUE_FORMAT", "SQUEUE_FORMAT2", "SQUEUE_LICENSES",
        "SQUEUE_LOCAL", "SQUEUE_PARTITION", "SQUEUE_PRIORITY", "SQUEUE_QOS", "SQUEUE_SIBLING",
        "SQUEUE_SORT", "SQUEUE_STATES", "SQUEUE_USERS", "SQUEUE_CLUSTERS",
    ),
    "sacct": ("SACCT_FORMAT", "SACCT_FEDERATION", "SACCT_LOCAL"),
    "sinfo": (
        "SINFO_ALL", "SINFO_FEDERATION", "SINFO_FORMAT", "SINFO_LOCAL", "SINFO_PARTITION",
        "SINFO_SORT", "SINFO_CLUSTERS",
    ),
    "scontrol": (
        "SCONTROL_ALL", "SCONTROL_FEDERATION", "SCONTROL_FUTURE", "SCONTROL_LOCAL",
        "SCONTROL_SIBLING", "SLURM_CONF_OUT", "SLURM_TOPO_LEN",
    ),
    # Options srun reads from the environment that would change where the task runs.
    "srun": (
        "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_NPROCS",
        "SLURM_NODELIST", "SLURM_EXCLUSIVE", "SLURM_DISTRIBUTION", "SLURM_CPU_BIND",
        "SLURM_OVERLAP", "SLURM_EXACT", "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_NODE",
        "SLURM_MEM_PER_GPU", "SLURM_GPUS", "SLURM_TRES_PER_TASK", "SLURM_CPUS_PER_TASK",
    ),
    # Some of these widen what scancel kills (USER, NAME, STATE...) or make it prompt.
    "scancel": (
        "SCANCEL_ACCOUNT", "SCANCEL_BATCH", "SCANCEL_CTLD", "SCANCEL_FULL", "SCANCEL_HURRY",
        "SCANCEL_INTERACTIVE", "SCANCEL_NAME", "SCANCEL_PARTITION", "SCANCEL_QOS",
        "SCANCEL_STATE", "SCANCEL_USER", "SCANCEL_VERBOSE", "SCANCEL_WCKEY", "SCANCEL_SIGNAL",
        "SCANCEL_NODELIST",
    ),
    "sbatch": (),
    # Asked only by `ddp-tui why` (remote/backends/slurm/waiting.py).
    "sprio": ("SPRIO_FEDERATION", "SPRIO_FORMAT", "SPRIO_LOCAL", "SPRIO_SIBLING"),
    "sshare": (),
}  # fmt: skip

#: States squeue is asked for: everything not final. Final jobs are read from sacct,
#: which also has the exit code.
QUEUED_STATES = (
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "RESIZING",
    "SIGNALING", "STAGE_OUT", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD",
)  # fmt: skip

SQUEUE_FIELDS = (
    ("job_id", "%i"),
    ("state", "%T"),
    ("reason", "%r"),
    ("nodes", "%D"),
    ("node_list", "%N"),
    ("elapsed", "%M"),
    ("start", "%S"),
    ("end", "%e"),
    ("partition", "%P"),
    ("name", "%j"),  # last: a name may hold anything, even the separator
)
SACCT_FIELDS = (
    "JobID", "State", "ExitCode", "ElapsedRaw", "NNodes", "NodeList", "Start", "End",
    "Partition", "Reason", "JobName",
)  # fmt: skip
SINFO_FIELDS = (
    ("node", "%N"),
    ("partition", "%P"),
    ("available", "%a"),
    ("state", "%T"),
    ("cpus", "%c"),
    ("memory_mb", "%m"),
    ("gres", "%G"),
    ("time_limit", "%l"),
    ("job_size", "%s"),
    # The node's features, where a cluster may name its GPU types (``gpu_a100``).
    ("features", "%f"),
)
#: The human-readable accounting summary saved as ``sacct.txt``.
ACCOUNTING_FORMAT = (
    "JobID%-14,JobName%-16,Partition%-10,State%-14,ExitCode%8,Elapsed%11,NNodes%6,"
    "NodeList%-16,Start%19,End%19,AllocTRES%-44,MaxRSS%10"
)


def tool_prefix(tool: str) -> list[str]:
    """``env -u ... <tool>``: the tool, with none of the user's variables that change what it
    prints or which jobs it touches (every argv here starts with it)."""
    argv = ["env"]
    for name in (*_COMMON_ENV, *_TOOL_ENV[tool]):
        argv += ["-u", name]
    # A job array's pending tasks print as one id, 1234_[2-5%2], whose index list Slurm
    # cuts to SLURM_BITSTR_LEN bytes (64 by default) ending in "..."; 0 prints it whole
    # (squeue(1), sacct(1): ENVIRONMENT VARIABLES), so no task of it goes unseen.
    argv.append("SLURM_BITSTR_LEN=0")
    # Timestamps as ISO 8601 whatever the user's SLURM_TIME_FORMAT says.
    argv.append("SLURM_TIME_FORMAT=standard")
    argv.append(tool)
    return argv


def tool_argv(tool: str, *args: str) -> list[str]:
    """``tool`` with ``args``, under the environment every command here runs in (above)."""
    return [*tool_prefix(tool), *args]


_JOB_ID = re.compile(r"\d+(?:_\d+)?(?:\+\d+)?(?:\.\w+)?")


def _check_job_id(job_id: str) -> str:
    # Ids go into argv, never a shell, but a stray "-" or "," would change the meaning.
    if not _JOB_ID.fullmatch(job_id):
        raise SchedulerError(f"not a Slurm job id: {job_id!r}")
    return job_id


#: Ids per sacct call. A very long ``--jobs=`` list is a known way to break Slurm tools
#: (argument limits, slurmdbd query size); history keeps steady polls far below this.
SACCT_CHUNK = 200


def sacct_chunks(ids: Sequence[str], size: int = SACCT_CHUNK) -> list[Sequence[str]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def slurm_ids(job_ids: Iterable[str]) -> list[str]:
    """The ids that can be Slurm's, once each (another scheduler's ids are just unknown)."""
    return [j for j in dict.fromkeys(job_ids) if _JOB_ID.fullmatch(j)]


def accounting_ids(job_ids: Iterable[str]) -> list[str]:
    """What sacct is asked for so that it answers for each of ``job_ids``: an array task
    (``1234_5``) by its array (``1234``), once per array; other ids as they are.

    ``--jobs=1234_5`` matches only a task that has its own record (slurmdbd selects
    ``(id_array_job, id_array_task) in ((1234, 5))``), and a task that never started,
    pending or cancelled with its array, has none: it lives in the array's record,
    printed ``1234_[5-9]``. ``--jobs=1234`` lists the array's every record, that one
    included, so no such task is taken for LOST. It also keeps a poll of a 1,000-task
    array one short ``--jobs=`` (the answer is one line per task asked or not; the
    caller keeps the ids it asked for).
    """
    return list(
        dict.fromkeys(array_master(j) if array_index(j) is not None else j for j in job_ids)
    )


def sbatch_argv(script_path: str, run_dir: str) -> list[str]:
    """Submit ``script_path`` with ``run_dir`` as the job's working directory."""
    return [*tool_prefix("sbatch"), "--parsable", f"--chdir={run_dir}", "--", script_path]


def jobs_in_dir_argv() -> list[list[str]]:
    """squeue and sacct listing the user's recent jobs with their working directories."""
    return [
        [*tool_prefix("squeue"), "--me", "--array", "--noheader", f"--format=%i{SEP}%Z"],
        [
            *tool_prefix("sacct"),
            "--allocations",
            "--noheader",
            "--parsable2",
            f"--delimiter={SEP}",
            "--starttime=now-2days",
            "--format=JobID,WorkDir",
        ],
    ]


def squeue_argv() -> list[str]:
    """The user's queued and running jobs, one record per line, name last.

    ``--array``: one line per array task, pending ones included (without it squeue
    combines an array's pending tasks into one ``1234_[2-5%2]`` line; squeue(1) ``-r``).
    Still one squeue, whatever the number of tasks.
    """
    fmt = SEP.join(code for _, code in SQUEUE_FIELDS)
    return [
        *tool_prefix("squeue"),
        "--me",
        "--array",
        "--noheader",
        f"--states={','.join(QUEUED_STATES)}",
        f"--format={fmt}",
    ]


def sacct_argv(job_ids: Iterable[str], *, steps: bool = False) -> list[str]:
    """One batched accounting query; allocations only unless ``steps``."""
    ids = [_check_job_id(j) for j in job_ids]
    argv = [*tool_prefix("sacct")]
    if not steps:
        argv.append("--allocations")
    return [
        *argv,
        "--parsable2",
        "--noheader",
        f"--delimiter={SEP}",
        f"--format={','.join(SACCT_FIELDS)}",
        f"--jobs={','.join(ids)}",
    ]


def accounting_argv(job_id: str) -> list[str]:
    """sacct's table for one job, its steps and every requeued attempt (``--duplicates``)."""
    return [
        *tool_prefix("sacct"),
        "--duplicates",
        f"--format={ACCOUNTING_FORMAT}",
        f"--jobs={_check_job_id(job_id)}",
    ]


def sinfo_argv() -> list[str]:
    """One line per node and partition."""
    fmt = SEP.join(code for _, code in SINFO_FIELDS)
    return [*tool_prefix("sinfo"), "--noheader", "--Node", f"--format={fmt}"]


def version_argv() -> list[str]:
    return [*tool_prefix("sinfo"), "--version"]


def config_argv() -> list[str]:
    return [*tool_prefix("scontrol"), "show", "config"]


def scancel_argv(job_id: str) -> list[str]:
    return [*tool_prefix("scancel"), _check_job_id(job_id)]


def requeue_argv(job_id: str) -> list[str]:
    return [*tool_prefix("scontrol"), "requeue", _check_job_id(job_id)]


def start_argv(job_id: str) -> list[str]:
    """squeue's estimated start of one pending job: ``--start`` makes the controller run
    a backfill simulation, so it is asked for one job, on demand only."""
    return [
        *tool_prefix("squeue"),
        "--start",
        "--noheader",
        "--jobs",
        _check_job_id(job_id),
        "--format=%S|%r",
    ]


def srun_on_node_argv(
    job_id: str, host: str, argv: Sequence[str], *, pty: bool = False
) -> list[str]:
    """One task on ``host`` inside running job ``job_id`` (a plain job id, not an array
    task's): ``--overlap`` shares the job's CPUs and memory instead of waiting for free ones,
    so it works while the job's own steps hold them all; ``--pty`` for an interactive shell."""
    if not host or host.startswith("-") or "," in host:
        raise SchedulerError(f"not one node name: {host!r}")
    srun = [
        *tool_prefix("srun"),
        f"--jobid={_check_job_id(job_id)}",
        "--overlap",
        f"--nodelist={host}",
        "--nodes=1",
        "--ntasks=1",
        "--quiet",
    ]
    if pty:
        srun.append("--pty")
    return [*srun, *argv]


def batch_script_argv(job_id: str) -> list[str]:
    """The job's batch script, as slurmctld keeps it while it knows the job, on stdout
    (``-``): the user's own jobs only, as for scancel."""
    return [*tool_prefix("scontrol"), "write", "batch_script", _check_job_id(job_id), "-"]


def show_job_argv(job_id: str) -> list[str]:
    return [*tool_prefix("scontrol"), "--oneliner", "show", "job", _check_job_id(job_id)]
