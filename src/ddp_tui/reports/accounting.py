"""What a scheduler's accounting recorded of one job, as numbers: the allocation and every
step, and the peak memory of each node worked out from them.

Pure: the backends read the scheduler's text (``remote/backends/slurm/usage_query.py``) into
these records; :mod:`ddp_tui.reports.efficiency` turns them into a usage report.

Why a node's peak needs care. Slurm samples every task's RSS and keeps, per step, the
largest task's peak (``TRESUsageInMax``, with the node and task it was on), the smallest
(``TRESUsageInMin``) and the sum and mean of every task's peak (``TRESUsageInTot``,
``TRESUsageInAve``). ``MaxRSS`` is the first of these: the peak of ONE task, not of a node.

- One task per node (``NTasks == NNodes``, the DDP job launched by ``srun`` with one task per
  node, or torchrun under srun): a task's peak is its node's, so the largest is exact and
  names its node, and the smallest names its own (both nodes of a 2-node job exact).
- Several tasks on a node: the node's peak is at most the sum of its tasks' peaks. Which
  tasks shared which node is not recorded, so the bound is the smaller of ``Tot`` less the
  smallest task on each other node, and the largest task times the most tasks a node can
  hold (``NTasks - NNodes + 1``). It is an upper bound ("at most"); the true peak is at least
  the largest task's.
- Steps that ran at the same time on a node (the batch script beside its ``srun`` step) add
  up; steps one after the other do not. A sum of peaks is again "at most".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal

#: How a node's figure relates to its true peak ("estimate": a sum with a part known only
#: from below, which bounds the truth neither way).
Bound = Literal["exact", "at most", "at least", "estimate"]

#: The TRES names the report reads (Slurm's spelling).
MEM: Final = "mem"
GPU_UTIL: Final = "gres/gpuutil"
GPU_MEM: Final = "gres/gpumem"


_SIZE = re.compile(r"(\d+(?:\.\d+)?)([KMGTP]?)", re.ASCII)
_UNIT_POWER: Final = {"K": -1, "M": 0, "G": 1, "T": 2, "P": 3}


def size_mib(text: str, *, bare: str = "M") -> float | None:
    """MiB in a Slurm size (``213516K``, ``208.5M``, ``4G``; units of 1024, as Slurm's
    are); a bare number is in ``bare`` units (``"M"``, or ``""`` for bytes). None for
    anything else (empty, ``16?``, a legacy ``n``/``c`` suffix is the caller's to strip)."""
    m = _SIZE.fullmatch(text.strip())
    if m is None:
        return None
    number, unit = float(m.group(1)), m.group(2) or bare
    if unit == "":
        return number / 1024**2
    return number * 1024.0 ** _UNIT_POWER[unit]


@dataclass(frozen=True)
class StepUsage:
    """One step of a job as accounting recorded it (``batch``, ``extern``, ``0``, ...).

    ``usage_*`` are Slurm's ``TRESUsageIn{Max,Min,Tot,Ave}``: a TRES name (``mem``,
    ``gres/gpuutil``, ``gres/gpumem``) to its amount, memory in MiB, utilisation in %;
    ``usage_max_node``/``usage_min_node`` name the node of the largest/smallest task. A TRES
    missing from a mapping was not measured.
    """

    step: str
    state: str = ""
    start: str = ""  # ISO 8601 (the scheduler's local time); "" unknown
    end: str = ""  # "" while it runs
    elapsed_sec: float | None = None
    nodes: tuple[str, ...] = ()
    tasks: int | None = None
    cpus: int | None = None
    cpu_sec: float | None = None  # TotalCPU: user + system of every task
    usage_max: Mapping[str, float] = field(default_factory=dict)
    usage_max_node: Mapping[str, str] = field(default_factory=dict)
    usage_min: Mapping[str, float] = field(default_factory=dict)
    usage_min_node: Mapping[str, str] = field(default_factory=dict)
    usage_tot: Mapping[str, float] = field(default_factory=dict)
    usage_ave: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryRequest:
    """The memory a job holds, as accounting gives it: ``mib`` per node, per CPU, or for the
    whole job (Slurm 21.08 and later print ``ReqMem`` and the TRES ``mem`` as the job's
    total; older versions suffix ``ReqMem`` with ``n`` per node or ``c`` per CPU)."""

    mib: float
    per: Literal["node", "cpu", "job"]
    source: str  # "AllocTRES", "ReqTRES", "ReqMem", "the run's spec"


@dataclass(frozen=True)
class JobAccounting:
    """One attempt of a job (the last, when it was requeued) with its steps."""

    job_id: str
    state: str
    source: str  # where it came from, in words: "sacct", "the run's record", ...
    name: str = ""
    elapsed_sec: float | None = None
    time_limit_sec: float | None = None  # None: no limit, or not known
    node_count: int | None = None
    nodes: tuple[str, ...] = ()
    cpus: int | None = None  # AllocCPUS
    gpus: int | None = None  # AllocTRES gres/gpu; None where not recorded
    memory: MemoryRequest | None = None
    cpu_sec: float | None = None  # the allocation's TotalCPU (every step's, summed)
    steps: tuple[StepUsage, ...] = ()
    attempts: int = 1  # records of this job in accounting: 1 + its requeues


@dataclass(frozen=True)
class NodeMemory:
    """A node's peak memory over the job, MiB, and how it bounds the truth."""

    node: str
    peak_mib: float
    bound: Bound
    how: str  # in words: "one task per node", "2 steps at once", ...


def memory_per_node_mib(acct: JobAccounting) -> float | None:
    """The memory each node may hold, MiB (an average where a per-CPU request spreads
    unevenly over the nodes); None where accounting has no request or node count."""
    req = acct.memory
    if req is None or req.mib <= 0:
        return None
    if req.per == "node":
        return req.mib
    nodes = acct.node_count or len(acct.nodes) or None
    if nodes is None:
        return None
    if req.per == "cpu":
        return req.mib * acct.cpus / nodes if acct.cpus else None
    return req.mib / nodes


def step_node_memory(step: StepUsage) -> dict[str, tuple[float, Bound, str]]:
    """Each node of ``step`` with its peak memory, MiB, the bound and how it was found;
    empty where the step has no memory sample (Slurm samples every
    JobAcctGatherFrequency seconds: a short step may have none, which is not 0)."""
    biggest = step.usage_max.get(MEM)
    if biggest is None or biggest <= 0:
        return {}
    max_node = step.usage_max_node.get(MEM, "")
    nodes = step.nodes or ((max_node,) if max_node else ("?",))
    n = len(nodes)
    tasks = step.tasks
    if tasks is not None and tasks <= n:
        out: dict[str, tuple[float, Bound, str]] = {
            node: (biggest, "at most", "no larger than the step's largest task") for node in nodes
        }
        smallest, min_node = step.usage_min.get(MEM), step.usage_min_node.get(MEM, "")
        if smallest == biggest:
            # Every task peaked at the same. Slurm then names one node for both ends (it
            # moves the min and the max only on a strictly smaller or larger task), but
            # each node's one task holds exactly that peak.
            return {
                node: (biggest, "exact", "one task per node: every task's peak") for node in nodes
            }
        if smallest is not None and smallest > 0 and min_node in out:
            out[min_node] = (smallest, "exact", "one task per node: the smallest task")
        if max_node in out or n == 1:
            out[max_node if max_node in out else nodes[0]] = (
                biggest,
                "exact",
                "one task per node: the largest task",
            )
        return out
    bounds: list[float] = []
    total, smallest = step.usage_tot.get(MEM), step.usage_min.get(MEM)
    if total is not None and total > 0:
        bounds.append(total - (n - 1) * smallest if smallest is not None else total)
    if tasks is not None:
        bounds.append((tasks - n + 1) * biggest)
    if not bounds:
        return {node: (biggest, "at least", "the largest task alone") for node in nodes}
    cap = max(biggest, min(bounds))
    how = (
        f"{tasks or 'several'} tasks on {n} node{'s' if n != 1 else ''}: at most their summed peaks"
    )
    if total is not None and total > 0 and n > 1:
        # Which tasks shared a node is not recorded; spread evenly they would hold this.
        how += f" ({total / n:.0f} MiB if spread evenly)"
    return {node: (cap, "at most", how) for node in nodes}


def _when(text: str, default: float) -> float:
    try:
        return datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return default


def node_peaks(steps: Iterable[StepUsage]) -> tuple[NodeMemory, ...]:
    """Every node's peak memory over the job's steps, by node name.

    Steps on a node add up while they overlap in time ([start, end): a step that starts the
    second another ends does not overlap it); a step whose times are unknown overlaps
    everything, which can only overstate.
    """
    per_node: dict[str, list[tuple[float, float, float, Bound, str]]] = {}
    for step in steps:
        start = _when(step.start, -math.inf)
        end = _when(step.end, math.inf) if step.end else math.inf
        for node, (mib, bound, how) in step_node_memory(step).items():
            per_node.setdefault(node, []).append((start, end, mib, bound, how))
    return tuple(_peak(node, parts) for node, parts in sorted(per_node.items()))


def _peak(node: str, parts: list[tuple[float, float, float, Bound, str]]) -> NodeMemory:
    """The largest sum of the parts that run at one time (a sweep over starts and ends)."""
    events = sorted(
        [(s, 1, i) for i, (s, *_rest) in enumerate(parts)]
        + [(e, 0, i) for i, (_s, e, *_rest) in enumerate(parts)]
    )  # at equal times ends (0) come before starts (1): half-open intervals
    live: set[int] = set()
    best: tuple[float, frozenset[int]] = (0.0, frozenset())
    for _t, kind, i in events:
        if kind == 0:
            live.discard(i)
            continue
        live.add(i)
        total = sum(parts[j][2] for j in live)
        if total > best[0]:
            best = (total, frozenset(live))
    chosen = [parts[j] for j in sorted(best[1])]
    if len(chosen) == 1:
        _s, _e, mib, bound, how = chosen[0]
        return NodeMemory(node, mib, bound, how)
    bounds = {p[3] for p in chosen}
    combined: Bound = "estimate" if "at least" in bounds else "at most"
    how = f"{len(chosen)} steps at once: at most their summed peaks"
    return NodeMemory(node, best[0], combined, how)
