"""Every job of the user on Slurm: the one squeue and the one sacct that list them, and their
parsers (pure functions of the text).

squeue is asked with ``--Format`` (``-O``) rather than the refresh's ``--format``: only the
long form has the allocated TRES (the job's GPUs, whichever way it asked for them) and the
``.out``/``.err`` patterns. Each field but the name (last, free text) ends with the
separator and has width 0 (printed whole, unpadded). sacct covers the jobs that left the
queue within the window (``--starttime``), each with its steps and the fields of what it used
(:data:`~ddp_tui.remote.backends.slurm.usage_query.USAGE_FIELDS`): an ended job's CPU and
memory efficiency come with the listing, read by the same reader as ``ddp-tui usage``'s
(:func:`~ddp_tui.remote.backends.slurm.usage_query.accounting_of`), never by a sacct per job.
From Slurm 24.05 it also keeps the ``.out`` and ``.err`` patterns (``StdOut``, ``StdErr``),
which older versions do not know (they refuse the field, so it is asked for only from 24.05).

Both tools print the patterns as given to sbatch (squeue 22.05 prints
``<WorkDir>/slurm-<JobID>.out`` where none was given, a wrong name for an array task: its
default is ``slurm-%A_%a.out``); :mod:`ddp_tui.remote.backends.stdio_paths` works them out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ddp_tui.remote.backends.hostlist import expand_hostlist
from ddp_tui.remote.backends.job_ids import expand_array_id
from ddp_tui.remote.backends.slurm.commands import QUEUED_STATES, SEP, tool_prefix
from ddp_tui.remote.backends.slurm.parsers import (
    field_text,
    parse_duration,
    parse_exit_code,
    split_records,
    to_int,
    tres_gpus,
)
from ddp_tui.remote.backends.slurm.usage_query import USAGE_FIELDS, accounting_of, job_key
from ddp_tui.remote.backends.states import JobState, from_slurm
from ddp_tui.remote.backends.stdio_paths import PatternValues, expand_stdio_path
from ddp_tui.remote.backends.user_jobs import Since, UserJob
from ddp_tui.reports.efficiency import efficiency_figures

#: squeue ``--Format`` fields, the name last (it may hold anything, the separator too).
USER_SQUEUE_FIELDS = (
    ("job_id", "JobID"),
    ("array_job_id", "ArrayJobID"),
    ("array_task_id", "ArrayTaskID"),
    ("state", "State"),
    ("reason", "Reason"),
    ("nodes", "NumNodes"),
    ("node_list", "NodeList"),
    ("elapsed", "TimeUsed"),
    ("time_limit", "TimeLimit"),
    ("submit", "SubmitTime"),
    ("start", "StartTime"),
    ("end", "EndTime"),
    ("partition", "Partition"),
    ("tres", "tres-alloc"),
    ("work_dir", "WorkDir"),
    ("batch", "BatchFlag"),
    ("stdout", "STDOUT"),
    ("stderr", "STDERR"),
    ("user", "UserName"),
    ("name", "Name"),
)
#: sacct fields of each job of the window, the name last (:func:`sacct_fields` adds what it
#: used, and :data:`SACCT_STDIO` from 24.05, before the name).
USER_SACCT_FIELDS = (
    "JobID", "JobIDRaw", "State", "ExitCode", "ElapsedRaw", "TimelimitRaw", "NNodes",
    "NodeList", "Partition", "Reason", "AllocTRES", "ReqTRES", "WorkDir", "Submit", "Start",
    "End", "User", "JobName",
)  # fmt: skip
SACCT_STDIO = ("StdOut", "StdErr")
#: The first Slurm whose sacct has :data:`SACCT_STDIO` (commit 3a41e424b7, 24.05.0).
SACCT_STDIO_SINCE = (24, 5)


def sacct_has_stdio(version: str) -> bool:
    """Whether the Slurm of ``version`` (``Slurm 24.05.1``, as the header has it) keeps the
    ``.out``/``.err`` patterns in accounting."""
    m = re.search(r"(\d+)\.(\d+)", version)
    return m is not None and (int(m.group(1)), int(m.group(2))) >= SACCT_STDIO_SINCE


def user_squeue_argv() -> list[str]:
    """Every queued or running job of the user, one line per array task (``--array``)."""
    *head, last = (code for _, code in USER_SQUEUE_FIELDS)
    fmt = ",".join([*(f"{code}:0{SEP}" for code in head), f"{last}:0"])
    return [
        *tool_prefix("squeue"),
        "--me",
        "--array",
        "--noheader",
        f"--states={','.join(QUEUED_STATES)}",
        f"--Format={fmt}",
    ]


def sacct_fields(*, stdio: bool) -> tuple[str, ...]:
    """The listing's sacct fields: each job's (:data:`USER_SACCT_FIELDS`) and those of
    what it used (:data:`USAGE_FIELDS`), then :data:`SACCT_STDIO` where ``stdio``, the
    name last (free text)."""
    head = [*USER_SACCT_FIELDS[:-1]]
    head += [f for f in USAGE_FIELDS[:-1] if f not in head]
    return (*head, *(SACCT_STDIO if stdio else ()), USER_SACCT_FIELDS[-1])


def user_sacct_argv(since: Since, *, stdio: bool = False) -> list[str]:
    """The user's jobs in any state since ``since``, each with its steps: sacct selects a
    job that was eligible or running at any time in the window, so a job still running that
    started before it is listed too."""
    return [
        *tool_prefix("sacct"),
        "--noheader",
        "--parsable2",
        f"--delimiter={SEP}",
        f"--starttime={since.sacct_starttime()}",
        f"--format={','.join(sacct_fields(stdio=stdio))}",
    ]


def _limit(seconds: int | None) -> int | None:
    # parse_duration gives 0 for what it cannot read (NOT_SET, INVALID): no limit known.
    return seconds or None


def _pattern_path(
    pattern: str, values: PatternValues, *, default: str | None, batch: bool
) -> str | None:
    pattern = field_text(pattern)
    if not batch or not pattern:
        return None
    if default is not None and pattern == default:
        # squeue 22.05's own name for "none given", wrong for an array task
        # (slurm-<JobID>.out): slurmstepd names it slurm-%A_%a.out then.
        pattern = "slurm-%A_%a.out" if values.array_task_id is not None else "slurm-%j.out"
    return expand_stdio_path(pattern, values)


def parse_user_squeue(text: str) -> list[UserJob]:
    """Rows of :func:`user_squeue_argv`, in squeue's order; an array's tasks one each."""
    names = [name for name, _ in USER_SQUEUE_FIELDS]
    jobs: list[UserJob] = []
    for rec in split_records(text, len(names)):
        f = dict(zip(names, rec, strict=True))
        raw_id = f["job_id"].strip()
        if not raw_id:
            continue
        master = field_text(f["array_job_id"])
        task = field_text(f["array_task_id"])
        ids = [raw_id] if not task else expand_array_id(f"{master}_[{task}]")
        state = from_slurm(f["state"])
        work_dir = field_text(f["work_dir"])
        nodes = field_text(f["node_list"])
        for job_id in ids:
            index = int(job_id.rpartition("_")[2]) if task else None
            # A pending task has no number of its own yet (it gets one when it starts).
            own = None if index is not None and state is JobState.PENDING else raw_id
            values = _with_first_node(
                PatternValues(
                    job_id=own,
                    array_job_id=master if index is not None else None,
                    array_task_id=index,
                    name=f["name"],
                    user=field_text(f["user"]) or None,
                    work_dir=work_dir,
                ),
                nodes,
            )
            default = f"{work_dir}/slurm-{raw_id}.out" if work_dir else None
            batch = f["batch"].strip() != "0"
            jobs.append(
                UserJob(
                    job_id=job_id,
                    name=f["name"],
                    state=state,
                    raw_state=f["state"].strip(),
                    array_job_id=values.array_job_id,
                    array_task_id=index,
                    partition=f["partition"].strip(),
                    nodes=to_int(f["nodes"]),
                    node_list=nodes,
                    gpus=tres_gpus(f["tres"]),
                    elapsed_sec=parse_duration(f["elapsed"]) or 0,
                    time_limit_sec=_limit(parse_duration(f["time_limit"])),
                    reason=field_text(f["reason"]),
                    work_dir=work_dir,
                    submit_time=field_text(f["submit"]),
                    start_time=field_text(f["start"]) if state is not JobState.PENDING else "",
                    end_time=field_text(f["end"]) if state.is_terminal else "",
                    stdout=_pattern_path(f["stdout"], values, default=default, batch=batch),
                    stderr=_pattern_path(f["stderr"], values, default=default, batch=batch),
                    user=field_text(f["user"]),
                    source="squeue",
                )
            )
    return jobs


def _with_first_node(values: PatternValues, node_list: str) -> PatternValues:
    """``values`` with ``%N``: the first node of the allocation (the batch host); unknown
    (None) before the job has nodes."""
    try:
        first = expand_hostlist(node_list)[:1] if node_list else []
    except ValueError:
        first = []
    return replace(values, node=first[0] if first else None)


def parse_user_sacct(text: str, fields: Sequence[str] | None = None) -> list[UserJob]:
    """Rows of :func:`user_sacct_argv`, one per job: its steps go into its efficiency (an
    ended job's), never rows of their own. A record of array tasks that never started
    (``1234_[2-5]``) gives a row per task, a task's own record (``1234_3``) wins over it.

    ``fields``: the ``--format`` the answer was asked with (:func:`sacct_fields`'s by
    default); one without the fields of what jobs used gives no efficiency."""
    names = tuple(fields) if fields is not None else sacct_fields(stdio=False)
    stdio = "StdOut" in names
    usage = set(USAGE_FIELDS) <= set(names)
    jobs: list[list[str]] = []
    steps: dict[str, list[list[str]]] = {}
    for rec in split_records(text, len(names)):
        shown = rec[0].strip()  # JobID
        if "." in shown:
            steps.setdefault(job_key(shown), []).append(rec)
        elif shown:
            jobs.append(rec)
    own: dict[str, UserJob] = {}
    grouped: dict[str, UserJob] = {}
    for rec in jobs:
        f = dict(zip(names, rec, strict=True))
        shown = f["JobID"].strip()
        try:
            ids = expand_array_id(shown)
        except ValueError:
            ids = [shown]
        collapsed = "[" in shown
        for job_id in ids:
            job = _sacct_job(f, job_id, collapsed=collapsed, stdio=stdio)
            if usage and not collapsed and job.state.is_terminal:
                job_steps = [dict(zip(names, r, strict=True)) for r in steps.get(shown, ())]
                cpu, mem = _efficiency(f, job_steps)
                job = replace(job, cpu_efficiency=cpu, mem_efficiency=mem)
            if collapsed:
                grouped.setdefault(job_id, job)
            else:
                own[job_id] = job
    return [*own.values(), *(j for k, j in grouped.items() if k not in own)]


def _efficiency(
    allocation: Mapping[str, str], steps: Sequence[Mapping[str, str]]
) -> tuple[float | None, float | None]:
    """An ended job's CPU and memory efficiency, from its allocation and steps as the
    domain works them out (None: not measured)."""
    figures = efficiency_figures(accounting_of(allocation, steps), ended=True)
    return figures.cpu.value, figures.mem.value


def _sacct_job(f: dict[str, str], job_id: str, *, collapsed: bool, stdio: bool) -> UserJob:
    master, underscore, index_text = job_id.partition("_")
    index = int(index_text) if underscore and index_text.isdigit() else None
    state = from_slurm(f["State"])
    work_dir = field_text(f["WorkDir"])
    node_list = field_text(f["NodeList"])
    values = _with_first_node(
        PatternValues(
            # A record of tasks that never started: none has a number of its own.
            job_id=None if collapsed else field_text(f["JobIDRaw"]) or None,
            array_job_id=master if index is not None else None,
            array_task_id=index,
            name=f["JobName"],
            user=field_text(f["User"]) or None,
            work_dir=work_dir,
        ),
        node_list,
    )
    limit_min = field_text(f["TimelimitRaw"])
    alloc = tres_gpus(f["AllocTRES"])
    return UserJob(
        job_id=job_id,
        name=f["JobName"],
        state=state,
        raw_state=f["State"].strip(),
        array_job_id=values.array_job_id,
        array_task_id=index,
        partition=f["Partition"].strip(),
        nodes=to_int(f["NNodes"]),
        node_list=node_list,
        gpus=alloc if alloc is not None else tres_gpus(f["ReqTRES"]),
        elapsed_sec=to_int(f["ElapsedRaw"]),
        time_limit_sec=int(limit_min) * 60 if limit_min.isdigit() else None,
        reason=field_text(f["Reason"]),
        exit_code=parse_exit_code(f["ExitCode"]) if state.is_terminal else None,
        work_dir=work_dir,
        submit_time=field_text(f["Submit"]),
        start_time=field_text(f["Start"]),
        end_time=field_text(f["End"]),
        stdout=_pattern_path(f["StdOut"], values, default=None, batch=True) if stdio else None,
        stderr=_pattern_path(f["StdErr"], values, default=None, batch=True) if stdio else None,
        user=field_text(f["User"]),
        source="sacct",
    )


def show_job_paths(job: dict[str, str]) -> tuple[str | None, str | None]:
    """The ``.out`` and ``.err`` that ``scontrol show job`` names. It works most patterns
    out itself; what it leaves (``%N`` in 22.05) is worked out here from the same record
    (the batch host), or the path is not known yet (a pending job's ``%N``)."""
    task = field_text(job.get("ArrayTaskId", ""))
    values = PatternValues(
        job_id=field_text(job.get("JobId", "")) or None,
        array_job_id=field_text(job.get("ArrayJobId", "")) or None,
        array_task_id=int(task) if task.isdigit() else None,
        name=job.get("JobName", ""),
        user=field_text(job.get("UserId", "").partition("(")[0]) or None,
        node=field_text(job.get("BatchHost", "")) or None,
        work_dir=field_text(job.get("WorkDir", "")),
    )

    def path(key: str) -> str | None:
        value = field_text(job.get(key, ""))
        if not value or value == "/dev/null":
            return None
        return expand_stdio_path(value, values) if "%" in value else value

    return path("StdOut"), path("StdErr")


def default_stdio(job: UserJob) -> str | None:
    """Where slurmstepd writes a batch job's output when sbatch was given no ``-o``:
    ``slurm-%j.out`` in the working directory, ``slurm-%A_%a.out`` for an array task."""
    if not job.work_dir:
        return None
    if job.array_task_id is not None:
        return f"{job.work_dir.rstrip('/')}/slurm-{job.array_job_id}_{job.array_task_id}.out"
    return f"{job.work_dir.rstrip('/')}/slurm-{job.job_id}.out"
