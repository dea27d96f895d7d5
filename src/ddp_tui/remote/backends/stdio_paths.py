"""sbatch's filename patterns (``%j``, ``%x``, ``%A``, ``%a``, ``%u``, ``%N``...) worked out for
one job: where its ``.out`` and ``.err`` are.

The rules are slurmstepd's, which names the files (``expand_stdio_fields`` in Slurm's
``src/common/print_fields.c``): a relative path is under the job's working directory; a path
with a backslash anywhere is taken literally, backslashes dropped; ``%%`` is one ``%``; a
number between ``%`` and the letter zero-pads a number (at most 10 digits); a letter that is
no pattern keeps its ``%``. For a batch script ``%J`` is the job id alone, ``%s`` is
``batch``, ``%n`` and ``%t`` are 0, ``%N`` is the batch host, and ``%a`` of a job that is no
array task is 4294967294 (Slurm's NO_VAL: the name slurmstepd really writes).

Used by the Slurm listing (squeue and sacct print the patterns as given to sbatch) and by the
local scheduler, which names its jobs' files the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``%a`` of a job that is no array task: slurmstepd writes Slurm's NO_VAL there.
NO_TASK = 4294967294
_MAX_PAD = 10


@dataclass(frozen=True)
class PatternValues:
    """What one job's patterns stand for; None where it is not known yet."""

    #: The job's own number (``%j``). None for an array task still pending: it gets a number
    #: of its own only when it starts.
    job_id: str | None
    #: The array's number (``%A``) and the task's index (``%a``); None for a plain job.
    array_job_id: str | None = None
    array_task_id: int | None = None
    name: str = ""
    #: ``%u``: the user name.
    user: str | None = None
    #: ``%N``: the batch host (the job's first node); None before the job starts.
    node: str | None = None
    #: Where a relative path is; "" leaves it relative.
    work_dir: str = ""


def _value(letter: str, v: PatternValues) -> str | int | None:
    """What ``%<letter>`` stands for (an int is zero-padded); None where it is not known.
    Raises KeyError for a letter that is no pattern."""
    task = v.array_task_id if v.array_task_id is not None else NO_TASK
    values: dict[str, str | int | None] = {
        "A": v.array_job_id or v.job_id,
        "a": task,
        "b": task % 10,
        "j": v.job_id,
        "J": v.job_id,  # a batch script's step: the job id alone
        "s": "batch",
        "n": 0,
        "t": 0,
        "N": v.node,
        "u": v.user,
        "x": v.name,
    }
    value = values[letter]
    if isinstance(value, str) and value.isdigit() and letter in "AjJ":
        return int(value)
    return value


def expand_stdio_path(pattern: str, values: PatternValues) -> str | None:
    """The path ``pattern`` names for the job of ``values``; None when it needs a value that
    is not known yet (``%N`` before the job starts, ``%j`` of a pending array task), or when
    there is no pattern."""
    if not pattern:
        return None
    prefix = ""
    if values.work_dir and not pattern.startswith("/"):
        prefix = values.work_dir if values.work_dir.endswith("/") else values.work_dir + "/"
    if "\\" in pattern:
        return prefix + pattern.replace("\\", "")
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        i += 1
        if ch != "%":
            out.append(ch)
            continue
        if i >= n:
            break  # a lone "%" at the end: slurmstepd drops it
        if pattern[i] == "%":
            out.append("%")
            i += 1
            continue
        start = i
        while i < n and pattern[i].isdigit():
            i += 1
        pad = min(int(pattern[start:i]), _MAX_PAD) if i > start else 0
        if i >= n:
            out.append("%" + pattern[start:i])
            break
        letter = pattern[i]
        i += 1
        try:
            value = _value(letter, values)
        except KeyError:
            out.append("%" + pattern[start:i])  # no pattern: kept as written
            continue
        if value is None:
            return None
        out.append(str(value).zfill(pad) if isinstance(value, int) else value)
    return prefix + "".join(out)
