"""What a job used, as sacct recorded it: the argv of the query and its parsers.

One ``sacct --jobs=ID --duplicates``, steps included, asks for the allocation and every
step of every attempt; :func:`parse_usage` keeps the last attempt (a requeued job has a
record per attempt, each followed by its own steps, which carry its ``DBIndex``) and reads
each field into :class:`~ddp_tui.reports.accounting.JobAccounting`, the domain's numbers.
:func:`parse_usages` reads the same query over many jobs (the runs whose jobs ended, in one
sacct), and :func:`accounting_of` is the one reader of an allocation and its steps, which
the listing of every job of the user shares (:mod:`.user_jobs`).

What sacct prints, measured on the test cluster (Slurm 22.05), which these parsers follow:

- ``TRESUsageInMax=cpu=00:00:01,energy=0,fs/disk=669376,mem=214996K,pages=0,vmem=220148K``
  and ``TRESUsageInMaxNode=cpu=n1,...,mem=n2,...``: usage memory in units of 1024 (``K``),
  a bare number in bytes (``fs/disk``);
- a step with no sample has ``TRESUsageInTot=energy=0`` and no ``mem`` at all: not measured;
- ``ReqMem=1000M`` for ``--mem=500M`` on 2 nodes, ``ReqMem=400M`` for ``--mem-per-cpu=100M``
  on 4 CPUs: the job's total (before 21.08, ``500Mn`` per node, ``100Mc`` per CPU);
  ``AllocTRES`` has ``mem`` only where memory is a consumable resource, ``ReqTRES`` always;
- ``TotalCPU`` as ``MM:SS.mmm``, ``HH:MM:SS`` or ``D-HH:MM:SS``;
- while a job starts, its record may read ``PENDING`` with ``ReqMem=16?``: junk is None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ddp_tui.remote.backends.hostlist import expand_hostlist
from ddp_tui.remote.backends.slurm.commands import SEP, _check_job_id, sacct_chunks, tool_prefix
from ddp_tui.remote.backends.slurm.parsers import field_text, parse_tres, split_records, tres_gpus
from ddp_tui.remote.backends.states import from_slurm
from ddp_tui.reports.accounting import (
    GPU_MEM,
    GPU_UTIL,
    MEM,
    JobAccounting,
    MemoryRequest,
    StepUsage,
    size_mib,
)

USAGE_FIELDS = (
    "JobID", "DBIndex", "State", "ElapsedRaw", "TimelimitRaw", "AllocCPUS", "AllocTRES",
    "ReqTRES", "ReqMem", "NNodes", "NTasks", "NodeList", "TotalCPU", "Start", "End",
    "TRESUsageInMax", "TRESUsageInMaxNode", "TRESUsageInMin", "TRESUsageInMinNode",
    "TRESUsageInTot", "TRESUsageInAve",
    "JobName",  # last: a name may hold anything, even the separator
)  # fmt: skip

#: The usage TRES the report reads: their amounts are sizes (memory) or percentages.
_SIZES = (MEM, GPU_MEM)
_READ = (MEM, GPU_MEM, GPU_UTIL)


def usage_argv(*job_ids: str) -> list[str]:
    """sacct's record of each of ``job_ids`` with every step and every requeued attempt (at
    most :data:`~ddp_tui.remote.backends.slurm.commands.SACCT_CHUNK` ids: see
    :func:`usage_argvs`)."""
    return [
        *tool_prefix("sacct"),
        "--duplicates",
        "--parsable2",
        "--noheader",
        f"--delimiter={SEP}",
        f"--format={','.join(USAGE_FIELDS)}",
        f"--jobs={','.join(_check_job_id(j) for j in job_ids)}",
    ]


def usage_argvs(job_ids: Sequence[str]) -> list[list[str]]:
    """:func:`usage_argv` over many jobs: one sacct per chunk of ids (a very long
    ``--jobs=`` list is a known way to break Slurm tools), each id once."""
    return [usage_argv(*chunk) for chunk in sacct_chunks(list(dict.fromkeys(job_ids)))]


def parse_cpu_time(text: str) -> float | None:
    """Seconds in sacct's CPU times: ``MM:SS.mmm``, ``HH:MM:SS``, ``D-HH:MM:SS``; None for
    anything else."""
    t = text.strip()
    days, dash, clock = t.partition("-") if "-" in t else ("0", "", t)
    parts = clock.split(":")
    try:
        numbers = [float(p) for p in parts]
        whole_days = int(days) if dash else 0
    except ValueError:
        return None
    if not 2 <= len(numbers) <= 3 or any(n < 0 for n in numbers):
        return None
    seconds = 0.0
    for n in numbers:
        seconds = seconds * 60 + n
    return whole_days * 86400 + seconds


def _number(text: str) -> int | None:
    """A positive count, None for blank, 0 or junk (sacct prints 0 for "none yet")."""
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if value > 0 else None


def _amounts(tres: Mapping[str, str]) -> dict[str, float]:
    """The usage TRES the report reads, as numbers (memory in MiB; a bare size is bytes)."""
    out: dict[str, float] = {}
    for name in _READ:
        if name not in tres:
            continue
        value = size_mib(tres[name], bare="") if name in _SIZES else _float(tres[name])
        if value is not None:
            out[name] = value
    return out


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _nodes(text: str) -> tuple[str, ...]:
    text = field_text(text)
    if not text or text == "None assigned":
        return ()
    try:
        return tuple(expand_hostlist(text))
    except ValueError:
        return (text,)


def _memory(f: Mapping[str, str]) -> MemoryRequest | None:
    """The job's memory: what it was allocated, else asked for (see the module's notes)."""
    for field in ("AllocTRES", "ReqTRES"):
        mem = parse_tres(f[field]).get(MEM)
        mib = size_mib(mem) if mem is not None else None
        if mib:
            return MemoryRequest(mib, "job", field)
    req = f["ReqMem"].strip()
    if req.endswith(("n", "c")):  # before Slurm 21.08: per node, per CPU
        mib = size_mib(req[:-1])
        return MemoryRequest(mib, "node" if req.endswith("n") else "cpu", "ReqMem") if mib else None
    mib = size_mib(req)
    return MemoryRequest(mib, "job", "ReqMem") if mib else None


def _step(step: str, f: Mapping[str, str]) -> StepUsage:
    return StepUsage(
        step=step,
        state=from_slurm(f["State"]).value,
        start=field_text(f["Start"]),
        end=field_text(f["End"]),
        elapsed_sec=_float(f["ElapsedRaw"]),
        nodes=_nodes(f["NodeList"]),
        tasks=_number(f["NTasks"]),
        cpus=_number(f["AllocCPUS"]),
        cpu_sec=parse_cpu_time(f["TotalCPU"]),
        usage_max=_amounts(parse_tres(f["TRESUsageInMax"])),
        usage_max_node=parse_tres(f["TRESUsageInMaxNode"]),
        usage_min=_amounts(parse_tres(f["TRESUsageInMin"])),
        usage_min_node=parse_tres(f["TRESUsageInMinNode"]),
        usage_tot=_amounts(parse_tres(f["TRESUsageInTot"])),
        usage_ave=_amounts(parse_tres(f["TRESUsageInAve"])),
    )


def job_key(job_id_field: str) -> str:
    """The job a record of sacct belongs to: ``1234_5`` of ``1234_5.batch``, the record's
    own id for an allocation."""
    return job_id_field.strip().partition(".")[0]


def is_step(record: Mapping[str, str]) -> bool:
    """Whether a record of sacct is a step (``1234.batch``, ``1234.0``) or an allocation."""
    return "." in record["JobID"]


def accounting_of(
    allocation: Mapping[str, str], steps: Iterable[Mapping[str, str]], *, attempts: int = 1
) -> JobAccounting:
    """One attempt's accounting: its allocation record and its step records, each a mapping
    of sacct's field names (those of :data:`USAGE_FIELDS`, which every query that reads a
    job's use asks for) to their text."""
    limit = _number(allocation["TimelimitRaw"])
    return JobAccounting(
        job_id=allocation["JobID"].strip(),
        state=from_slurm(allocation["State"]).value,
        source="sacct",
        name=allocation["JobName"],
        elapsed_sec=_float(allocation["ElapsedRaw"]),
        time_limit_sec=limit * 60.0 if limit is not None else None,
        node_count=_number(allocation["NNodes"]),
        nodes=_nodes(allocation["NodeList"]),
        cpus=_number(allocation["AllocCPUS"]),
        # None, not 0, for an allocation that names no GPU: as this report has always said.
        gpus=tres_gpus(allocation["AllocTRES"]) or None,
        memory=_memory(allocation),
        cpu_sec=parse_cpu_time(allocation["TotalCPU"]),
        steps=tuple(_step(f["JobID"].strip().partition(".")[2], f) for f in steps),
        attempts=attempts,
    )


def parse_usage(text: str, job_id: str) -> JobAccounting | None:
    """The last attempt of ``job_id`` in :func:`usage_argv`'s answer, with its steps; None
    when sacct has no record of it.

    The allocation rows are the attempts, in the order sacct prints them (oldest first);
    a step belongs to the attempt of its ``DBIndex`` (else to the attempt before it). Asked
    for an array (``1234``), sacct lists every task: the last printed is reported.
    """
    records = [
        dict(zip(USAGE_FIELDS, rec, strict=True)) for rec in split_records(text, len(USAGE_FIELDS))
    ]
    return _last_attempt(records, job_id)


def parse_usages(text: str, job_ids: Sequence[str]) -> dict[str, JobAccounting]:
    """Each of ``job_ids`` that sacct has a record of in :func:`usage_argv`'s answer for
    them all: its last attempt with its steps, as :func:`parse_usage` reads one job."""
    wanted = set(job_ids)
    by_job: dict[str, list[dict[str, str]]] = {}
    for rec in split_records(text, len(USAGE_FIELDS)):
        key = job_key(rec[0])
        if key in wanted:
            by_job.setdefault(key, []).append(dict(zip(USAGE_FIELDS, rec, strict=True)))
    out = {}
    for key, records in by_job.items():
        acct = _last_attempt(records, key)
        if acct is not None:
            out[key] = acct
    return out


def _last_attempt(records: Sequence[Mapping[str, str]], job_id: str) -> JobAccounting | None:
    allocations = [f for f in records if not is_step(f)]
    if not allocations:
        return None
    named = [f for f in allocations if f["JobID"].strip() == job_id]
    last = (named or allocations)[-1]
    key = last["JobID"].strip()
    steps: list[Mapping[str, str]] = []
    current: Mapping[str, str] | None = None
    for f in records:
        if not is_step(f):
            current = f
            continue
        index = f["DBIndex"].strip()
        mine = index == last["DBIndex"].strip() if index else current is last
        if job_key(f["JobID"]) == key and mine:
            steps.append(f)
    attempts = sum(f["JobID"].strip() == key for f in allocations)
    return accounting_of(last, steps, attempts=attempts)
