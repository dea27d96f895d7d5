"""Slurm job-array ids as text: a task ``1234_5``, a collapsed group ``1234_[2-5%2]``.

A task of array ``1234`` is named ``<master>_<index>`` by squeue (``%i``), sacct
(``JobID``), scancel and scontrol alike. squeue without ``--array`` and sacct before
23.02 (which has no ``--array``) print the tasks that have not started yet as one
record, ``<master>_[<indices>]``, where ``<indices>`` is what Slurm's
``xlate_array_task_str`` writes (src/common/slurm_protocol_defs.c):

- a bitmap as comma-separated items ``N`` or ``A-B`` (``0-3,5,7-9``);
- or a step form ``A-B:S`` when the indices are evenly spaced (``1-21:4``);
- then ``%K`` when the array is throttled (``sbatch --array=...%K``): K is how many
  tasks may run at once, not an index;
- cut to ``SLURM_BITSTR_LEN`` bytes (64 unless set; 0 means whole), the last three
  replaced by ``...``. The argv builders set it to 0; a cut spec still parses here,
  without its last, possibly cut, item.

Pure functions, for the parsers here and for whoever names or compares job ids (the
array submit, a run's jobs).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

_TASK = re.compile(r"(\d+)_(\d+)")
_COLLAPSED = re.compile(r"(\d+)_\[([^\]]*)\]")
# An id as Slurm prints it: a job, an array task or group, a het component, then a step
# (``.batch``, ``.extern``, ``.0``).
_ANY_ID = re.compile(r"(\d+)(?:_(\d+)|_\[[^\]]*\])?(?:\+(\d+))?((?:\.\w+)?)")
_ITEM = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")
_CUT = "..."


#: One job or one array task, as a user names it on the command line (``1234``, ``1234_5``).
_ONE_JOB = re.compile(r"\d+(?:_\d+)?")


def is_job_id(text: str) -> bool:
    """Whether ``text`` names one job or one array task (not a group, not a step)."""
    return _ONE_JOB.fullmatch(text) is not None


def task_id(master: str, index: int) -> str:
    """The id Slurm gives task ``index`` of array ``master`` (what ``sbatch --parsable``
    printed): ``task_id("1234", 5) == "1234_5"``."""
    if not master.isdigit():
        raise ValueError(f"array master id must be a Slurm job number, got {master!r}")
    if index < 0:
        raise ValueError(f"array index must be 0 or more, got {index}")
    return f"{master}_{index}"


def array_master(job_id: str) -> str:
    """The array's own id: ``1234`` for ``1234_5``, ``1234_5.batch`` and ``1234_[2-5]``;
    for any other Slurm id its job number (a plain job is its own master); an id of no
    Slurm shape as it is."""
    m = _ANY_ID.fullmatch(job_id.strip())
    return m.group(1) if m else job_id


def array_index(job_id: str) -> int | None:
    """The task index of ``1234_5`` (5); None for anything but one array task."""
    m = _TASK.fullmatch(job_id.strip())
    return int(m.group(2)) if m else None


def is_collapsed(job_id: str) -> bool:
    """Whether ``job_id`` is a group of tasks, ``1234_[2-5%2]``, rather than one id."""
    return _COLLAPSED.fullmatch(job_id.strip()) is not None


def task_ranges(spec: str) -> list[range]:
    """The indices of a collapsed group's ``spec`` (between the brackets) as ranges.

    Raises ValueError naming the spec where an item is not ``N``, ``A-B`` or ``A-B:S``.
    """
    spec = spec.partition("%")[0]  # the throttle: how many may run at once
    items = spec.split(",")
    if _CUT in spec:
        # Cut by SLURM_BITSTR_LEN: the item the dots end may itself be cut ("5-1" of
        # "5-19"), so only the items before it are sure.
        items = spec[: spec.index(_CUT)].split(",")[:-1]
    ranges: list[range] = []
    for item in items:
        m = _ITEM.fullmatch(item.strip())
        if m is None:
            raise ValueError(
                f"job array indices {spec!r}: item {item!r} is not N, A-B or A-B:S "
                "(optionally followed by %K)"
            )
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        step = int(m.group(3)) if m.group(3) else 1
        if hi < lo or step < 1:
            raise ValueError(f"job array indices {spec!r}: empty item {item!r}")
        ranges.append(range(lo, hi + 1, step))
    return ranges


def expand_array_id(text: str) -> list[str]:
    """Every task id that one printed id stands for: ``1234_[1,3-4%2]`` gives
    ``["1234_1", "1234_3", "1234_4"]``; any other id is itself alone.

    Raises ValueError for a group whose indices do not parse (see :func:`task_ranges`).
    """
    text = text.strip()
    m = _COLLAPSED.fullmatch(text)
    if m is None:
        return [text]
    master = m.group(1)
    seen = dict.fromkeys(f"{master}_{i}" for r in task_ranges(m.group(2)) for i in r)
    return list(seen)


def covered_ids(text: str, wanted: Collection[str]) -> list[str]:
    """The ids of ``wanted`` that ``text`` (one printed id) stands for, in ``wanted``'s
    order; for a collapsed group without expanding it (an array may have millions of
    tasks, a poll asks for a few). Raises ValueError as :func:`expand_array_id` does."""
    text = text.strip()
    m = _COLLAPSED.fullmatch(text)
    if m is None:
        return [text] if text in wanted else []
    master, ranges = m.group(1), task_ranges(m.group(2))
    out: list[str] = []
    for job_id in wanted:
        t = _TASK.fullmatch(job_id)
        if t and t.group(1) == master and any(int(t.group(2)) in r for r in ranges):
            out.append(job_id)
    return out


def job_id_sort_key(job_id: str) -> tuple[int, int, int, int, str]:
    """Orders ids as Slurm numbered them: by job number, then task index (``1234``,
    ``1234_2``, ``1234_10``, ``1235``), then heterogeneous component, then step; ids of
    no Slurm shape come last, by text."""
    m = _ANY_ID.fullmatch(job_id.strip())
    if m is None:
        return (1, 0, 0, 0, job_id)
    index = int(m.group(2)) if m.group(2) else -1
    component = int(m.group(3)) if m.group(3) else -1
    return (0, int(m.group(1)), index, component, m.group(4))


def masters(job_ids: Iterable[str]) -> list[str]:
    """The distinct array (or plain job) ids of ``job_ids``, in first-seen order."""
    return list(dict.fromkeys(array_master(j) for j in job_ids))
