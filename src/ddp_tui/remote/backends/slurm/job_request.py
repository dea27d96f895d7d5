"""What one job asked for and was given, read from ``scontrol show job`` (pure): the
:class:`~ddp_tui.remote.backends.job_request.JobRequest` that a run made of a job ddp-tui did
not submit is built from (:mod:`ddp_tui.remote.runs.adoption`).

scontrol, not sacct: only the controller has the job's batch script, so a job it has forgotten
(MinJobAge after its end, 300 s by default) cannot be brought in anyway; and its record names
the job's request as sbatch took it (``TresPerNode``, ``CPUs/Task``, ``MinMemoryNode``...), so
the sbatch options that ask for it again follow from it one for one. Once the job runs,
``NumNodes`` is its own count rather than the range it asked for.
"""

from __future__ import annotations

from collections.abc import Mapping

from ddp_tui.remote.backends.job_request import JobRequest
from ddp_tui.remote.backends.slurm.parsers import field_text, parse_duration, to_int, tres_gpus
from ddp_tui.remote.backends.slurm.user_jobs import show_job_paths
from ddp_tui.remote.backends.states import from_slurm

#: scontrol's GPU request fields and the sbatch option each comes from (``--gpus-per-node``
#: and ``--gres=gpu:N`` both land in ``TresPerNode``, which ``--gres`` asks for again).
_GPU_FIELDS = (
    ("TresPerJob", "gpus"),
    ("TresPerSocket", "gpus-per-socket"),
    ("TresPerTask", "gpus-per-task"),
)
#: What scontrol writes for no limit (sbatch then takes the partition's).
_NO_LIMIT = {"UNLIMITED", "INFINITE", "Partition_Limit", "NONE"}


def _gres_items(text: str) -> list[str]:
    """A TRES-per list (``gres:gpu:1``, ``gres/gpu:a100:2``, ``gres/gpu=2``, ``cpu=4``) as the
    ``gres`` items sbatch's ``--gres`` takes (``gpu:1``, ``gpu:a100:2``, ``gpu:2``); the
    others (``cpu=4``, Slurm 23's ``--cpus-per-task`` in ``TresPerTask``) are left out."""
    items = []
    for item in field_text(text).split(","):
        item = item.strip()
        for prefix in ("gres:", "gres/"):
            if item.startswith(prefix):
                name, eq, count = item[len(prefix) :].partition("=")
                items.append(f"{name}:{count}" if eq else name)
    return items


def _gpu_count(item: str) -> str:
    """``gpu:3`` as ``--gpus`` takes it (``3``; ``a100:3`` for a typed one)."""
    return item.partition(":")[2]


def _nodes(text: str) -> tuple[int, str]:
    """``NumNodes`` (``2``, ``2-2``, ``2-4``) as the least count and as ``--nodes`` takes it."""
    low, dash, high = field_text(text).partition("-")
    if not low.isdigit():
        return 1, ""
    if not dash or high == low or not high.isdigit():
        return int(low), low
    return int(low), f"{low}-{high}"


def array_task_of(job: Mapping[str, str]) -> str | None:
    """The ``<array>_<index>`` a record of one array task is listed as (an array task
    named by its own job number is the same task); None for a plain job's record, and for a
    record of several tasks (``ArrayTaskId=0-2``: the ones that have not started)."""
    master = field_text(job.get("ArrayJobId", ""))
    index = field_text(job.get("ArrayTaskId", ""))
    return f"{master}_{index}" if master.isdigit() and index.isdigit() else None


def parse_job_request(job: Mapping[str, str], job_id: str) -> JobRequest:
    """One record of ``scontrol --oneliner show job`` (:func:`parse_show_job`) as a
    :class:`JobRequest` (an array task's id as the listing has it, ``1234_5``), its
    ``options`` in sbatch's long names."""
    options: list[tuple[str, str]] = []

    def put(option: str, value: str) -> None:
        if value:
            options.append((option, value))

    def text(key: str) -> str:
        return field_text(job.get(key, ""))

    nodes, nodes_option = _nodes(job.get("NumNodes", ""))
    put("nodes", nodes_option)
    tasks = text("NumTasks")
    put("ntasks", tasks if tasks.isdigit() else "")
    per_node = text("NtasksPerN:B:S:C").partition(":")[0]
    put("ntasks-per-node", per_node if per_node.isdigit() and per_node != "0" else "")
    cpus = to_int(text("CPUs/Task"))
    put("cpus-per-task", str(cpus) if cpus > 0 else "")
    # 0: none asked for, the partition's default applies (a retry gets it again).
    mem_node = text("MinMemoryNode")
    mem_node = "" if mem_node in ("", "0") else mem_node
    put("mem", mem_node)
    mem_cpu = text("MinMemoryCPU")
    put("mem-per-cpu", "" if mem_cpu in ("", "0") else mem_cpu)
    limit = text("TimeLimit")
    limited = bool(limit) and limit not in _NO_LIMIT
    put("time", limit if limited else "")
    gres = _gres_items(job.get("TresPerNode", ""))
    put("gres", ",".join(gres))
    for key, option in _GPU_FIELDS:
        gpus = [_gpu_count(i) for i in _gres_items(job.get(key, "")) if i.startswith("gpu:")]
        put(option, gpus[0] if gpus else "")
    for key, option in (
        ("Partition", "partition"),
        ("Account", "account"),
        ("QOS", "qos"),
        ("Features", "constraint"),
        ("Reservation", "reservation"),
    ):
        put(option, text(key))
    if text("OverSubscribe") == "NO":  # --exclusive: no other job on its nodes
        options.append(("exclusive", ""))
    stdout, stderr = show_job_paths(dict(job))
    seconds = parse_duration(limit) if limited else None
    return JobRequest(
        job_id=array_task_of(job) or job_id,
        name=job.get("JobName", ""),
        state=from_slurm(job.get("JobState", "")),
        batch=text("BatchFlag") not in ("", "0"),
        work_dir=text("WorkDir"),
        stdout=stdout,
        stderr=stderr,
        user=text("UserId").partition("(")[0],
        partition=text("Partition"),
        nodes=nodes,
        gpus=tres_gpus(job.get("TRES", "")),
        cpus_per_task=cpus or None,
        mem_per_node=mem_node,
        time_limit_sec=seconds or None,
        account=text("Account"),
        qos=text("QOS"),
        constraint=text("Features"),
        options=tuple(options),
        source=f"scontrol show job {job_id}",
    )
