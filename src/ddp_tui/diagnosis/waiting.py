"""Why a pending job waits: its reason's category, what to do about it, and the record that
``ddp-tui why`` and the detail view show (:class:`WaitExplanation`). Pure: the facade asks
the scheduler (:mod:`ddp_tui.remote.runs.waiting`) and hands the answers over.

The reason codes, their words and their categories live in :mod:`ddp_tui.diagnosis.pending`;
this module adds only the advice per category and the facts gathered beside it. Each fact
the scheduler could not give (a command missing, refused, or the cluster's priority plugin
has no factors) is an :class:`Unavailable` naming the part and the reason, never an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddp_tui.diagnosis.pending import WaitCategory, pending_category, pending_reason

__all__ = [
    "Dependency",
    "FairShare",
    "LimitFacts",
    "PartitionFacts",
    "PriorityFactors",
    "ReservationFacts",
    "Unavailable",
    "WaitCategory",
    "WaitExplanation",
    "needs_action",
    "wait_advice",
    "wait_lines",
]

# Codes that never start as they are: the job asks more than a per-job limit allows, or
# names what it may not use; waiting does not help.
_NEVER_STARTS = frozenset(
    {
        "DependencyNeverSatisfied",
        "InvalidAccount",
        "InvalidQOS",
        "AccountNotAllowed",
        "QOSNotAllowed",
        "BadConstraints",
        "PartitionTimeLimit",
        "PartitionNodeLimit",
        "PartitionConfig",
    }
)


def _head(code: str) -> str:
    return code.strip().strip("()").strip().partition(",")[0].strip()


def never_starts(code: str) -> bool:
    """Whether the job waits for something that waiting will not bring: it needs a change."""
    head = _head(code)
    if head in _NEVER_STARTS:
        return True
    # QOSMaxGRESPerJob, AssocMaxWallDurationPerJobLimit...: a per-job maximum.
    return head.startswith(("QOS", "Assoc")) and ("PerJob" in head or "MinGRES" in head)


def needs_action(category: WaitCategory, code: str) -> bool:
    """Whether the person must act for the job to start (``why`` exits 1): held, or a wait
    that never ends as it is."""
    return category is WaitCategory.HELD or never_starts(code)


def wait_advice(category: WaitCategory, code: str, job_id: str, *, scheduler: str = "slurm") -> str:
    """What to do about a job pending for ``code``, in the category's terms."""
    head = _head(code)
    if scheduler == "local" and head in ("Resources", "requeued"):
        return (
            "The local scheduler runs a few jobs at once (the profile's local_max_concurrent): "
            "it starts when one of them ends."
        )
    if category is WaitCategory.HELD:
        if head == "JobHeldAdmin":
            return "An administrator held it: ask them why, or cancel it (scancel " + job_id + ")."
        if head.startswith("launch failed"):
            return (
                "Its launch failed and Slurm held it so that it does not fail again: look at "
                f"the node it tried, then release it (scontrol release {job_id})."
            )
        return f"Release it to let it start: scontrol release {job_id}."
    if category is WaitCategory.DEPENDENCY:
        if head == "DependencyNeverSatisfied":
            return (
                "A job it depends on ended in a way that cannot satisfy the dependency, so it "
                f"will never start: cancel it (scancel {job_id}) or drop the dependency "
                f"(scontrol update JobId={job_id} Dependency=)."
            )
        return (
            "It starts once the jobs it depends on (below) end as the dependency asks. A held "
            "or failed job there holds it forever: release that job, or cancel this one."
        )
    if category is WaitCategory.PRIORITY:
        return (
            "Jobs with a higher priority (below) go first; it starts as they do. A job that "
            "asks for fewer nodes or a shorter --time can start earlier, in a gap (backfill)."
        )
    if category is WaitCategory.RESOURCES:
        if head == "Licenses":
            return "The licenses it asks for are in use: it starts when a job frees them."
        return (
            "The resources it asks for are busy: it starts when running jobs end. Fewer "
            "nodes or GPUs, or a shorter --time, can start earlier, in a gap (backfill)."
        )
    if category is WaitCategory.LIMIT:
        if head == "JobArrayTaskLimit":
            return (
                "The array runs at most %K tasks at once (--array=...%K): it starts when "
                f"another task ends; scontrol update JobId={job_id} ArrayTaskThrottle=N "
                "changes K."
            )
        if head in ("InvalidAccount", "InvalidQOS"):
            return (
                "The account or QOS it names is not yours (sacctmgr show assoc "
                f"user=$USER): cancel it (scancel {job_id}) and submit with one that is."
            )
        if never_starts(code):
            return (
                "It asks for more than the limit (below) allows per job, so it never starts "
                f"as it is: cancel it (scancel {job_id}) and ask for less, or use a QOS or "
                "account with a higher limit (--qos, -A)."
            )
        return (
            "A limit of your QOS or account (below) is reached: it starts when your running "
            "jobs end and free it. Another QOS or account with room (--qos, -A) can run it now."
        )
    if category is WaitCategory.RESERVATION:
        if head == "Reservation":
            return (
                "It runs in a reservation (--reservation, below) that has not begun: it "
                "starts when the reservation does."
            )
        return (
            "Nodes it needs are reserved (below), for maintenance or for other jobs: it "
            "starts when the reservation ends, or before it begins with a --time short "
            "enough to end by then."
        )
    if category is WaitCategory.PARTITION:
        if never_starts(code):
            return (
                "It asks for more than its partition allows (below), so it never starts as it "
                f"is: cancel it (scancel {job_id}) and submit within the limits or to another "
                "partition (-p)."
            )
        return (
            "Its partition or nodes are down or drained (below): it starts when an "
            "administrator brings them back. Another partition (-p) may run it now."
        )
    if head == "BeginTime":
        return "It was submitted with --begin: it starts at that time."
    if head in ("None", ""):
        return "The scheduler has not looked at it yet: ask again in a minute."
    if head in ("Cleaning", "Prolog", "Configuring", "requeued"):
        return "It is about to start: nothing to do."
    return f"Slurm says {code!r}: see squeue(1), JOB REASON CODES."


@dataclass(frozen=True)
class Unavailable:
    """A part of the explanation the scheduler could not give, and why."""

    part: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"part": self.part, "reason": self.reason}


@dataclass(frozen=True)
class PriorityFactors:
    """``sprio``'s weighted factors of the job in one partition; they add up to ``total``."""

    partition: str
    total: float
    age: float
    fair_share: float
    job_size: float
    partition_factor: float
    qos: float
    nice: float = 0.0
    site: float = 0.0
    assoc: float = 0.0
    tres: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "total": self.total,
            "age": self.age,
            "fair_share": self.fair_share,
            "job_size": self.job_size,
            "partition_factor": self.partition_factor,
            "qos": self.qos,
            "nice": self.nice,
            "site": self.site,
            "assoc": self.assoc,
            "tres": self.tres,
        }


@dataclass(frozen=True)
class FairShare:
    """The user's share in one account (``sshare``): FairShare 1.0 is the best, 0 the worst."""

    account: str
    user: str
    raw_shares: str
    norm_shares: float | None
    raw_usage: float | None
    effective_usage: float | None
    fair_share: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "account": self.account,
            "user": self.user,
            "raw_shares": self.raw_shares,
            "norm_shares": self.norm_shares,
            "raw_usage": self.raw_usage,
            "effective_usage": self.effective_usage,
            "fair_share": self.fair_share,
        }


@dataclass(frozen=True)
class LimitFacts:
    """One limit that holds the job: where it is set (``scope``), its name as Slurm's tools
    print it (``MaxJobsPU``, ``GrpTRES``), the TRES it counts, its value and what is in use."""

    scope: str
    name: str
    tres: str = ""
    limit: str = ""
    used: str = ""
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "name": self.name,
            "tres": self.tres,
            "limit": self.limit,
            "used": self.used,
            "source": self.source,
        }

    def __str__(self) -> str:
        what = f"{self.name}[{self.tres}]" if self.tres else self.name
        value = self.limit or "not set here"
        used = f" ({self.used} in use)" if self.used else ""
        return f"{self.scope}: {what} = {value}{used}"


@dataclass(frozen=True)
class Dependency:
    """One job the pending job depends on, and where that job is."""

    job_id: str
    kind: str
    status: str
    state: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "kind": self.kind,
            "status": self.status,
            "state": self.state,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class ReservationFacts:
    """A reservation (``scontrol show reservation``)."""

    name: str
    start: str
    end: str
    state: str = ""
    nodes: str = ""
    flags: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "start": self.start,
            "end": self.end,
            "state": self.state,
            "nodes": self.nodes,
            "flags": self.flags,
        }


@dataclass(frozen=True)
class PartitionFacts:
    """A partition the job asked for, and what keeps the job out of it (``problems``)."""

    name: str
    state: str
    max_nodes: str = ""
    max_time: str = ""
    total_nodes: str = ""
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "max_nodes": self.max_nodes,
            "max_time": self.max_time,
            "total_nodes": self.total_nodes,
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class WaitExplanation:
    """Why one job waits, as far as its scheduler would say.

    ``category`` is None for a job that is not pending (``state`` says where it is); every
    other part is empty where it does not apply, and named in ``unavailable`` where the
    scheduler could not give it.
    """

    job_id: str
    state: str
    scheduler: str
    run_id: str | None = None
    reason: str = ""
    category: WaitCategory | None = None
    advice: str = ""
    estimated_start: str = ""
    account: str = ""
    qos: str = ""
    partition: str = ""
    dependency: str = ""
    dependencies: tuple[Dependency, ...] = ()
    reservation: str = ""
    priority: tuple[PriorityFactors, ...] = ()
    fair_share: tuple[FairShare, ...] = ()
    limits: tuple[LimitFacts, ...] = ()
    reservations: tuple[ReservationFacts, ...] = ()
    partitions: tuple[PartitionFacts, ...] = ()
    unavailable: tuple[Unavailable, ...] = field(default=())

    @classmethod
    def of_reason(
        cls, job_id: str, state: str, reason: str, *, scheduler: str, **parts: Any
    ) -> WaitExplanation:
        """The explanation of a job in ``state`` for ``reason``: categorised and advised
        when the job is pending, bare otherwise."""
        if state != "PENDING":
            return cls(job_id, state, scheduler, reason=reason, **parts)
        category = pending_category(reason) if reason else WaitCategory.OTHER
        return cls(
            job_id,
            state,
            scheduler,
            reason=reason,
            category=category,
            advice=wait_advice(category, reason, job_id, scheduler=scheduler),
            **parts,
        )

    @property
    def pending(self) -> bool:
        return self.category is not None

    @property
    def reason_words(self) -> str:
        return pending_reason(self.reason) if self.reason else ""

    @property
    def needs_action(self) -> bool:
        """Whether it starts only once the person acts (held, or never as it is)."""
        return self.category is not None and needs_action(self.category, self.reason)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "run_id": self.run_id,
            "state": self.state,
            "scheduler": self.scheduler,
            "pending": self.pending,
            "reason": self.reason,
            "reason_words": self.reason_words,
            "category": self.category.value if self.category else None,
            "category_words": self.category.words if self.category else None,
            "advice": self.advice,
            "needs_action": self.needs_action,
            "estimated_start": self.estimated_start or None,
            "account": self.account,
            "qos": self.qos,
            "partition": self.partition,
            "dependency": self.dependency,
            "dependencies": [d.to_dict() for d in self.dependencies],
            "reservation": self.reservation,
            "priority": [p.to_dict() for p in self.priority],
            "fair_share": [f.to_dict() for f in self.fair_share],
            "limits": [lim.to_dict() for lim in self.limits],
            "reservations": [r.to_dict() for r in self.reservations],
            "partitions": [p.to_dict() for p in self.partitions],
            "unavailable": [u.to_dict() for u in self.unavailable],
        }


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


def _priority_line(p: PriorityFactors) -> str:
    parts = [
        f"age {_num(p.age)}",
        f"fair-share {_num(p.fair_share)}",
        f"job size {_num(p.job_size)}",
        f"partition {_num(p.partition_factor)}",
        f"QOS {_num(p.qos)}",
    ]
    parts += [f"{name} {_num(v)}" for name, v in (("assoc", p.assoc), ("site", p.site)) if v]
    if p.tres:
        parts.append(f"TRES {p.tres}")
    if p.nice:
        parts.append(f"nice -{_num(p.nice)}")
    where = f" in {p.partition}" if p.partition else ""
    return f"priority{where}: {_num(p.total)} = " + " + ".join(parts)


def _fair_share_line(f: FairShare) -> str:
    return (
        f"fair-share of {f.user or 'you'} in account {f.account}: {_num(f.fair_share)} "
        f"(1 is best; usage {_num(f.effective_usage)} of shares {_num(f.norm_shares)})"
    )


def _dependency_line(d: Dependency) -> str:
    where = f": job {d.job_id} is {d.state}" if d.state else ""
    why = f" ({pending_reason(d.reason)})" if d.reason and d.reason != "None" else ""
    return f"depends on job {d.job_id} ({d.kind}, {d.status or 'unknown'}){where}{why}"


def _partition_line(p: PartitionFacts) -> str:
    limits = ", ".join(
        f"{name} {v}"
        for name, v in (
            ("MaxNodes", p.max_nodes),
            ("MaxTime", p.max_time),
            ("nodes", p.total_nodes),
        )
        if v
    )
    where = f"partition {p.name}" + (f" ({limits})" if limits else "")
    return f"{where}: " + ("; ".join(p.problems) if p.problems else p.state)


def wait_lines(w: WaitExplanation) -> list[str]:
    """The explanation as ``ddp-tui why`` prints it, one fact a line."""
    who = f"{w.run_id} (job {w.job_id})" if w.run_id else f"job {w.job_id}"
    lines = [f"{who}: {w.state}"]
    if w.category is None:
        if w.reason and w.reason != "None":
            lines.append(f"reason: {w.reason}")
    else:
        words = w.reason_words
        reason = w.reason if not words or words == w.reason else f"{words} [{w.reason}]"
        lines.append(f"waits for: {w.category.words}")
        lines.append(f"reason: {reason or 'none given'}")
        lines.append(f"what to do: {w.advice}")
        if w.estimated_start:
            lines.append(f"estimated start: {w.estimated_start}")
        elif not any(u.part == "estimated_start" for u in w.unavailable):
            lines.append("estimated start: none given yet (Slurm has not planned it)")
    lines += [_priority_line(p) for p in w.priority]
    lines += [_fair_share_line(f) for f in w.fair_share]
    lines += [f"limit: {lim}" for lim in w.limits]
    if w.dependency and not w.dependencies:
        lines.append(f"dependency: {w.dependency}")
    lines += [_dependency_line(d) for d in w.dependencies]
    lines += [
        f"reservation {r.name}: {r.start} to {r.end}"
        + (f" ({r.state})" if r.state else "")
        + (f", nodes {r.nodes}" if r.nodes else "")
        + (f", flags {r.flags}" if r.flags else "")
        for r in w.reservations
    ]
    lines += [_partition_line(p) for p in w.partitions]
    lines += [f"not available: {u.part}: {u.reason}" for u in w.unavailable]
    return lines
