"""Parsers of what sinfo, squeue, sacct, sbatch and scontrol print, as pure functions.

Each reads the output of the matching builder in :mod:`ddp_tui.remote.backends.slurm.commands`
(fields split by :data:`~ddp_tui.remote.backends.slurm.commands.SEP`, the free-text name
last) and returns the scheduler's types; :func:`error_of` turns a failed command
into the typed error a caller can act on.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ddp_tui.remote.backends.executor import CommandResult
from ddp_tui.remote.backends.job_ids import (
    covered_ids,
    expand_array_id,
    is_collapsed,
    job_id_sort_key,
)
from ddp_tui.remote.backends.scheduler import (
    JobStatus,
    PartitionInfo,
    SchedulerError,
    SchedulerUnavailable,
)
from ddp_tui.remote.backends.slurm.commands import SACCT_FIELDS, SEP, SINFO_FIELDS, SQUEUE_FIELDS
from ddp_tui.remote.backends.states import from_slurm
from ddp_tui.spec.gpu_types import gres_gpus, kinds_of_nodes

_UNAVAILABLE = re.compile(
    r"Unable to contact slurm controller|Socket timed out|Connection refused|"
    r"Connection timed out|Zero Bytes were transmitted|Could not establish a configuration"
    r"|Problem talking to the database|slurmdbd.*(?:not responding|down)|"
    r"Unable to establish a connection|Transport endpoint is not connected|"
    r"Slurm backup controller in standby mode|command not found|"
    r"something wrong with opening/reading|unable to status file",
    re.IGNORECASE,
)
_EMPTY = {"", "N/A", "n/a", "Unknown", "None", "None assigned", "(null)"}


@dataclass(frozen=True)
class NodeInfo:
    """One line of ``sinfo --Node``: a node as seen in one partition."""

    name: str
    partition: str
    is_default: bool
    available: str
    state: str
    cpus: int
    memory_mb: int
    gpus: int
    gres: str
    max_time_min: int | None
    max_nodes: int | None
    features: tuple[str, ...] = ()


@dataclass(frozen=True)
class PollResult:
    statuses: dict[str, JobStatus]
    #: Set when accounting failed while the queue was read: the statuses are partial.
    warning: SchedulerError | None = None


def parse_jobs_in_dir(texts: Sequence[str], work_dir: str) -> list[str]:
    """Job ids whose working directory is ``work_dir``, oldest first, without repeats.

    The tasks of a job array share its working directory: each is listed by its own id
    (``1234_0``, ``1234_1``...), a group of pending ones (``1234_[2-5%2]``) expanded,
    and ordered by array, then index (see :func:`ddp_tui.remote.backends.job_ids.job_id_sort_key`).
    """
    found: dict[str, None] = {}
    want = work_dir.rstrip("/")
    for text in texts:
        for line in text.splitlines():
            job_id, _, wd = line.partition(SEP)
            job_id = job_id.strip()
            if job_id and wd.strip().rstrip("/") == want:
                found.update(dict.fromkeys(_task_ids(job_id)))
    return sorted(found, key=job_id_sort_key)


def _task_ids(job_id: str, only: Collection[str] | None = None) -> list[str]:
    """The ids one printed id stands for (all, or those of ``only``); an id whose group
    does not parse stands for itself, as Slurm printed it."""
    try:
        return expand_array_id(job_id) if only is None else covered_ids(job_id, only)
    except ValueError:
        return [job_id] if only is None or job_id in only else []


def _put(out: dict[str, JobStatus], grouped: set[str], status: JobStatus, ids: list[str]) -> None:
    """Record ``status`` under each of ``ids``. A task's own record beats the group
    record it was once part of, whichever comes first (sacct may still hold both)."""
    if not is_collapsed(status.job_id):
        out[status.job_id] = status
        grouped.discard(status.job_id)
        return
    for job_id in ids:
        if job_id not in out or job_id in grouped:
            out[job_id] = replace(status, job_id=job_id)
            grouped.add(job_id)


def parse_cluster_name(text: str) -> str | None:
    """``ClusterName`` from ``scontrol show config``."""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ClusterName" and value.strip():
            return value.strip()
    return None


def split_records(text: str, nfields: int) -> list[list[str]]:
    """Split ``text`` into records of ``nfields`` fields, the last one free text.

    A job name may contain newlines: a line with too few separators continues the
    previous record's last field.
    """
    records: list[list[str]] = []
    if text.endswith("\n"):
        text = text[:-1]
    for line in text.split("\n"):
        if line.count(SEP) >= nfields - 1:
            records.append(line.split(SEP, nfields - 1))
        elif records:
            records[-1][-1] += "\n" + line
    return records


def _only_records(text: str, nfields: int, only: Collection[str]) -> str:
    """The lines of ``text`` that belong to records of the ids in ``only``.

    A cheap first pass for a queue of thousands of jobs: one partition per line, and the
    separator count only for the few lines kept.
    """
    kept: list[str] = []
    keeping = False
    for line in text.split("\n"):
        head, sep, _ = line.partition(SEP)
        if sep and line.count(SEP) >= nfields - 1:
            head = head.strip()
            keeping = head in only or ("[" in head and bool(_task_ids(head, only)))
        if keeping:
            kept.append(line)
    return "\n".join(kept)


def to_int(text: str, default: int = 0) -> int:
    """A field as a number; ``default`` where it is none (blank, ``N/A``)."""
    try:
        return int(text.strip())
    except ValueError:
        return default


def field_text(text: str) -> str:
    """A field stripped, "" where Slurm says there is none (``N/A``, ``Unknown``, ``(null)``...)."""
    text = text.strip()
    return "" if text in _EMPTY else text


def parse_tres(text: str) -> dict[str, str]:
    """A TRES list (``cpu=4,mem=8000M,gres/gpu=2``) as name to value text."""
    out: dict[str, str] = {}
    for item in text.split(","):
        name, eq, value = item.partition("=")
        if eq and name.strip():
            out[name.strip()] = value.strip()
    return out


def tres_gpus(tres: str) -> int | None:
    """GPUs in a TRES list (``cpu=2,mem=8000M,node=2,billing=2,gres/gpu=3``): the generic
    ``gres/gpu`` count (the typed ones, ``gres/gpu:a100=4``, repeat it), else the typed ones
    summed; 0 where the list names no GPU; None for no list."""
    tres = field_text(tres)
    if not tres:
        return None
    generic: int | None = None
    typed = 0
    for key, value in parse_tres(tres).items():
        if not value.isdigit():
            continue
        if key == "gres/gpu":
            generic = int(value)
        elif key.startswith("gres/gpu:"):
            typed += int(value)
    return generic if generic is not None else typed


def parse_duration(text: str) -> int | None:
    """Seconds in a Slurm duration (``D-HH:MM:SS``, ``D-HH``, ``HH:MM:SS``, ``MM:SS``, or
    bare minutes); None for ``UNLIMITED``/``INFINITE``; 0 for anything else."""
    t = text.strip()
    if t.upper() in {"UNLIMITED", "INFINITE"}:
        return None
    days_part, dash, clock = t.rpartition("-") if "-" in t else ("", "", t)
    parts = clock.split(":")
    if (dash and not days_part.isdigit()) or len(parts) > 3 or not all(p.isdigit() for p in parts):
        return 0
    nums = [int(p) for p in parts]
    if dash:  # after a day count the fields are hours[:minutes[:seconds]]
        h, m, s = [*nums, 0, 0][:3]
        return int(days_part) * 86400 + h * 3600 + m * 60 + s
    if len(nums) == 3:
        return nums[0] * 3600 + nums[1] * 60 + nums[2]
    if len(nums) == 2:
        return nums[0] * 60 + nums[1]
    return nums[0] * 60


def _limit_minutes(text: str) -> int | None:
    t = text.strip()
    if t.lower() in {"n/a", ""}:
        return None
    secs = parse_duration(t)
    return None if secs is None else secs // 60


def parse_exit_code(text: str) -> int | None:
    """``code:signal`` to one number: the code, or 128+signal when a signal ended it."""
    t = text.strip()
    if not t:
        return None
    code, _, sig = t.partition(":")
    c, s = to_int(code, -1), to_int(sig, 0)
    if c < 0:
        return None
    return 128 + s if c == 0 and s > 0 else c


def parse_squeue(text: str, only: Collection[str] | None = None) -> dict[str, JobStatus]:
    """Rows of :func:`squeue_argv` by job id; with ``only``, just those ids.

    A user may have thousands of jobs queued; the app follows few of them, so the
    rest are skipped before any field is decoded. A line of an array's pending tasks
    (``1234_[2-5%2]``, what squeue prints without ``--array``) answers for each task.
    """
    out: dict[str, JobStatus] = {}
    grouped: set[str] = set()
    if only is not None:
        text = _only_records(text, len(SQUEUE_FIELDS), only)
    for rec in split_records(text, len(SQUEUE_FIELDS)):
        job_id = rec[0].strip()
        ids = _task_ids(job_id, only) if job_id else []
        if not ids:
            continue
        f = dict(zip((name for name, _ in SQUEUE_FIELDS), rec, strict=True))
        status = JobStatus(
            job_id=job_id,
            state=from_slurm(f["state"]),
            raw_state=f["state"].strip(),
            reason=field_text(f["reason"]),
            nodes=to_int(f["nodes"]),
            node_list=field_text(f["node_list"]),
            elapsed_sec=float(parse_duration(f["elapsed"]) or 0),
            exit_code=None,
            start=field_text(f["start"]),
            end=field_text(f["end"]),
            name=f["name"],
            partition=f["partition"].strip(),
        )
        _put(out, grouped, status, ids)
    return out


def parse_sacct(text: str, only: Collection[str] | None = None) -> dict[str, JobStatus]:
    """Rows of :func:`sacct_argv` by job id (step ids such as ``12.batch`` included);
    with ``only``, just those ids.

    A record of an array's tasks that never started (``1234_[2-5%2]``: pending, or
    cancelled with the array) answers for each of them; a task's own record
    (``1234_3``) wins over it.
    """
    out: dict[str, JobStatus] = {}
    grouped: set[str] = set()
    for rec in split_records(text, len(SACCT_FIELDS)):
        f = dict(zip(SACCT_FIELDS, rec, strict=True))
        job_id = f["JobID"].strip()
        ids = _task_ids(job_id, only) if job_id else []
        if not ids:
            continue
        status = JobStatus(
            job_id=job_id,
            state=from_slurm(f["State"]),
            raw_state=f["State"].strip(),
            reason=field_text(f["Reason"]),
            nodes=to_int(f["NNodes"]),
            node_list=field_text(f["NodeList"]),
            elapsed_sec=float(to_int(f["ElapsedRaw"])),
            exit_code=parse_exit_code(f["ExitCode"]),
            start=field_text(f["Start"]),
            end=field_text(f["End"]),
            name=f["JobName"],
            partition=f["Partition"].strip(),
        )
        _put(out, grouped, status, ids)
    return out


def parse_gpus(gres: str) -> int:
    """GPUs in a GRES string such as ``gpu:2``, ``gpu:a100:4(S:0-1),gpu:v100:2`` or ``(null)``."""
    return sum(count for _, count in gres_gpus(gres))


def parse_sinfo(text: str) -> list[NodeInfo]:
    """Rows of :func:`sinfo_argv`."""
    nodes: list[NodeInfo] = []
    for rec in split_records(text, len(SINFO_FIELDS)):
        f = dict(zip((name for name, _ in SINFO_FIELDS), rec, strict=True))
        name = f["node"].strip()
        if not name:
            continue
        part = f["partition"].strip()
        size = f["job_size"].strip().rpartition("-")[2]
        nodes.append(
            NodeInfo(
                name=name,
                partition=part.rstrip("*"),
                is_default=part.endswith("*"),
                available=f["available"].strip(),
                state=f["state"].strip(),
                cpus=to_int(f["cpus"]),
                memory_mb=to_int(f["memory_mb"]),
                gpus=parse_gpus(f["gres"]),
                gres=field_text(f["gres"]),
                max_time_min=_limit_minutes(f["time_limit"]),
                max_nodes=int(size) if size.isdigit() else None,
                features=tuple(f for f in field_text(f["features"]).split(",") if f),
            )
        )
    return nodes


def _is_idle(node: NodeInfo) -> bool:
    """Whether a new job could start on ``node`` now: state ``idle`` with no flag (a
    suffix such as ``*`` not responding, ``~`` powered off, ``#`` powering up, ``@``
    reboot pending), in a partition that is up."""
    return node.state.lower() == "idle" and node.available.lower() == "up"


def partitions_from_nodes(nodes: Iterable[NodeInfo]) -> list[PartitionInfo]:
    """One :class:`PartitionInfo` per partition: the default first, then by name.

    (Not sinfo's order: ``--Node`` lists a node's partitions in no fixed order.)
    ``gpus_per_node`` and ``cpus_per_node`` are the largest over the partition's nodes.
    """
    grouped: dict[str, list[NodeInfo]] = {}
    for node in nodes:
        grouped.setdefault(node.partition, []).append(node)
    parts: list[PartitionInfo] = []
    for name, members in grouped.items():
        first = members[0]
        parts.append(
            PartitionInfo(
                name=name,
                nodes=len({m.name for m in members}),
                gpus_per_node=max(m.gpus for m in members),
                cpus_per_node=max(m.cpus for m in members),
                max_time_min=first.max_time_min,
                max_nodes=first.max_nodes,
                is_default=first.is_default,
                states=tuple(sorted({m.state for m in members})),
                idle_nodes=len({m.name for m in members if _is_idle(m)}),
                gpu_kinds=kinds_of_nodes((m.name, m.gres, m.features) for m in members),
            )
        )
    return sorted(parts, key=lambda p: (not p.is_default, p.name))


def parse_sbatch(text: str) -> tuple[str, str | None]:
    """``sbatch --parsable`` output (``jobid`` or ``jobid;cluster``) to (id, cluster)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    match = re.fullmatch(r"(\d+)(?:;(\S+))?", lines[-1]) if lines else None
    if match is None:
        raise SchedulerError(f"sbatch printed no job id: {text.strip()[:200]!r}")
    return match.group(1), match.group(2)


def parse_version(text: str) -> str:
    """``slurm 23.11.4`` or Debian's ``slurm-wlm 22.05.8`` to ``Slurm 22.05.8``."""
    match = re.search(r"(\d+\.\d+(?:\.\d+)?\S*)", text)
    return f"Slurm {match.group(1)}" if match else text.strip()


_SHOW_KEY = re.compile(r"(?:^|\s)([A-Z][A-Za-z0-9_:/]*)=")


def parse_start(text: str) -> str:
    """``squeue --start --format=%S|%r`` in words: "2026-11-24T12:30:00 (Resources)", or ""
    where Slurm has no estimate yet (N/A: the backfill scheduler has not reached it)."""
    for line in text.splitlines():
        start, _, reason = line.strip().partition("|")
        if start and start not in ("N/A", "Unknown", "(null)"):
            return f"{start} ({reason})" if reason and reason != "None" else start
    return ""


def parse_show_job(text: str) -> list[dict[str, str]]:
    """``scontrol --oneliner show job`` output: one dict per job line.

    A value runs up to the next ``Key=`` (a capitalised word), so values with spaces,
    such as ``Command=python train.py lr=3``, stay whole; a newline in a job name
    continues the line.
    """
    return parse_show(text, "JobId")


def parse_show(text: str, head: str) -> list[dict[str, str]]:
    """``scontrol --oneliner show ...`` output: one dict per record line, a line that
    begins with ``head=`` (``JobId``, ``ReservationName``, ``PartitionName``); see
    :func:`parse_show_job`."""
    lines: list[str] = []
    for line in text.split("\n"):
        if line.startswith(f"{head}="):
            lines.append(line)
        elif lines:  # a job name with a newline in it
            lines[-1] += "\n" + line
    return [show_pairs(line) for line in lines]


def show_pairs(line: str) -> dict[str, str]:
    """The ``Key=value`` pairs of one of scontrol's lines, a value running up to the next
    ``Key=`` (see :func:`parse_show_job`)."""
    found = list(_SHOW_KEY.finditer(line))
    pairs: dict[str, str] = {}
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(line)
        pairs[m.group(1)] = line[m.end() : end].strip()
    return pairs


def error_of(res: CommandResult, what: str) -> SchedulerError:
    """The typed error for a failed command, carrying the tool's own message."""
    message = (res.stderr.strip() or res.stdout.strip() or f"exit status {res.returncode}")[:2000]
    if res.returncode == 127:  # "env: 'squeue': No such file or directory"
        tool = what.split()[0]
        message = f"{tool}: command not found (is Slurm installed, or a module loaded?)"
        return SchedulerUnavailable(message, argv=res.argv, returncode=res.returncode)
    cls = SchedulerUnavailable if _UNAVAILABLE.search(message) else SchedulerError
    return cls(message, argv=res.argv, returncode=res.returncode)


def merge_poll(
    job_ids: Sequence[str],
    queued: Mapping[str, JobStatus],
    accounted: Mapping[str, JobStatus],
) -> dict[str, JobStatus]:
    """The status of each of ``job_ids``: squeue wins (it is current, sacct lags);
    ids that neither knows are left out."""
    out: dict[str, JobStatus] = {}
    for job_id in job_ids:
        status = queued.get(job_id) or accounted.get(job_id)
        if status is not None:
            out[job_id] = status
    return out


def poll_from_results(
    job_ids: Sequence[str],
    squeue: CommandResult,
    *saccts: CommandResult,
) -> PollResult:
    """Parse the answers of :func:`squeue_argv` and of each :func:`sacct_argv` chunk.

    Raises the squeue error (typically :class:`SchedulerUnavailable`); a failed sacct
    only makes :attr:`PollResult.warning`.
    """
    if not squeue.ok:
        raise error_of(squeue, "squeue")
    wanted = set(job_ids)
    queued = parse_squeue(squeue.stdout, only=wanted)
    accounted: dict[str, JobStatus] = {}
    warning: SchedulerError | None = None
    for sacct in saccts:
        if sacct.ok:
            # Asked by array (accounting_ids), sacct lists tasks nobody asked about.
            accounted.update(parse_sacct(sacct.stdout, only=wanted))
        elif warning is None:
            warning = error_of(sacct, "sacct")
    return PollResult(merge_poll(job_ids, queued, accounted), warning)
