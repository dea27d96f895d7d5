"""The argv and the parsers of the queries ``ddp-tui why`` asks about one pending job, as pure
functions: ``sprio`` (the priority's factors), ``sshare`` (the user's fair-share),
``scontrol show assoc_mgr`` (the QOS and association limits, with what is in use),
``scontrol show reservation`` and ``scontrol show partition``. The job itself and its
estimated start are :func:`~ddp_tui.remote.backends.slurm.commands.show_job_argv` and
:func:`~ddp_tui.remote.backends.slurm.commands.start_argv`.

None of these is ever asked in a refresh: they are for one job, on demand
(:mod:`ddp_tui.remote.backends.slurm.wait_explainer` composes them).

Limits are read from the controller (``scontrol show assoc_mgr``), not from ``sacctmgr``:
the controller's view is the one that holds the job, it says what is in use beside each
limit (``MaxJobs=1(2)``), and on the test cluster's Slurm 22.05 ``sacctmgr show assoc``
printed ``MaxJobs`` 0 for an association whose limit was 1 and held a job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ddp_tui.diagnosis.waiting import (
    Dependency,
    FairShare,
    LimitFacts,
    PartitionFacts,
    PriorityFactors,
    ReservationFacts,
)
from ddp_tui.remote.backends.executor import CommandResult
from ddp_tui.remote.backends.job_ids import is_job_id
from ddp_tui.remote.backends.scheduler import SchedulerError
from ddp_tui.remote.backends.slurm.commands import SEP, tool_argv
from ddp_tui.remote.backends.slurm.parsers import (
    error_of,
    field_text,
    parse_duration,
    parse_show,
    show_pairs,
)

#: sprio's weighted factors, one line per partition of the job.
SPRIO_FIELDS = (
    ("job_id", "%i"),
    ("partition", "%r"),
    ("total", "%Y"),
    ("age", "%A"),
    ("fair_share", "%F"),
    ("job_size", "%J"),
    ("partition_factor", "%P"),
    ("qos", "%Q"),
    ("nice", "%N"),
    ("site", "%S"),
    ("assoc", "%B"),
    ("tres", "%T"),  # last: a list of its own
)
SSHARE_FIELDS = (
    "Account", "User", "RawShares", "NormShares", "RawUsage", "EffectvUsage", "FairShare",
)  # fmt: skip

# A name scontrol printed (an account, a QOS, a reservation, a partition) that goes back
# into an argv: never one that could read as an option or a second argument.
_NAME = re.compile(r"[A-Za-z0-9_.@%+-]+")


def _name(kind: str, name: str) -> str:
    if not _NAME.fullmatch(name) or name.startswith("-"):
        raise SchedulerError(f"not a Slurm {kind} name: {name!r}")
    return name


def sprio_argv(job_id: str) -> list[str]:
    """The job's priority factors (sprio lists pending jobs only)."""
    if not is_job_id(job_id):
        raise SchedulerError(f"not a Slurm job id: {job_id!r}")
    fmt = SEP.join(code for _, code in SPRIO_FIELDS)
    return tool_argv("sprio", "--noheader", f"--jobs={job_id}", f"--format={fmt}")


def sshare_argv() -> list[str]:
    """The user's own share lines, one per account (``--Users``: no parent accounts)."""
    return tool_argv(
        "sshare", "--noheader", "--parsable2", "--Users", f"--format={','.join(SSHARE_FIELDS)}"
    )


def assoc_limits_argv(user: str, account: str) -> list[str]:
    """The controller's association records of ``user`` in ``account`` (and the account's
    own), each limit with what is in use."""
    return tool_argv(
        "scontrol", "--oneliner", "show", "assoc_mgr",
        f"users={_name('user', user)}", f"accounts={_name('account', account)}", "flags=assoc",
    )  # fmt: skip


def qos_limits_argv(qos: str) -> list[str]:
    """The controller's record of one QOS, its per-user and per-account limits included."""
    return tool_argv(
        "scontrol", "--oneliner", "show", "assoc_mgr", f"qos={_name('QOS', qos)}", "flags=qos"
    )


def reservation_argv(name: str | None = None) -> list[str]:
    """One reservation, or every one (``None``)."""
    names = [] if name is None else [_name("reservation", name)]
    return tool_argv("scontrol", "--oneliner", "show", "reservation", *names)


def partition_argv(name: str) -> list[str]:
    return tool_argv("scontrol", "--oneliner", "show", "partition", _name("partition", name))


# ---------------------------------------------------------------------------- failures


def unavailable_reason(res: CommandResult, what: str) -> str:
    """Why a query gave nothing, in words (the tool's own, or that it is missing)."""
    message = error_of(res, what).message
    if what == "sprio" and "priority/basic" in message:
        # "You are not running a supported priority plugin\n(priority/basic).\nOnly
        # 'priority/multifactor' is supported." (rc 1, whatever the job)
        return (
            "the cluster runs priority/basic: jobs start in the order they came, with no "
            "priority factors to show (sprio needs priority/multifactor)"
        )
    return " ".join(message.split())


# ---------------------------------------------------------------------------- parsers


def _float(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def parse_sprio(text: str, job_id: str) -> list[PriorityFactors]:
    """The job's lines of :func:`sprio_argv`; none when sprio does not list it ("Unable to
    find jobs matching user/id(s) specified": it lists pending jobs only)."""
    out: list[PriorityFactors] = []
    names = [name for name, _ in SPRIO_FIELDS]
    for line in text.splitlines():
        parts = line.split(SEP)
        if len(parts) != len(names):
            continue
        f = dict(zip(names, (p.strip() for p in parts), strict=True))
        if f["job_id"] != job_id:
            continue
        out.append(
            PriorityFactors(
                partition=f["partition"],
                total=_float(f["total"]) or 0.0,
                age=_float(f["age"]) or 0.0,
                fair_share=_float(f["fair_share"]) or 0.0,
                job_size=_float(f["job_size"]) or 0.0,
                partition_factor=_float(f["partition_factor"]) or 0.0,
                qos=_float(f["qos"]) or 0.0,
                nice=_float(f["nice"]) or 0.0,
                site=_float(f["site"]) or 0.0,
                assoc=_float(f["assoc"]) or 0.0,
                tres=field_text(f["tres"]),
            )
        )
    return out


def parse_sshare(text: str) -> list[FairShare]:
    """Lines of :func:`sshare_argv`."""
    out: list[FairShare] = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != len(SSHARE_FIELDS):
            continue
        f = dict(zip(SSHARE_FIELDS, (p.strip() for p in parts), strict=True))
        out.append(
            FairShare(
                account=f["Account"],
                user=f["User"],
                raw_shares=f["RawShares"],
                norm_shares=_float(f["NormShares"]),
                raw_usage=_float(f["RawUsage"]),
                effective_usage=_float(f["EffectvUsage"]),
                fair_share=_float(f["FairShare"]),
            )
        )
    return out


_DEPENDENCY = re.compile(r"([a-z_]+)(?::(\d+(?:_\d+)?)(?:\+\d+)?)?\(([^)]*)\)")


def parse_dependency(text: str) -> list[Dependency]:
    """scontrol's ``Dependency=afterok:12(unfulfilled),afterany:13_2(unfulfilled)`` (``?``
    between them for "any of"); ``singleton(unfulfilled)`` has no job id."""
    return [
        Dependency(job_id=m.group(2) or "", kind=m.group(1), status=m.group(3))
        for m in _DEPENDENCY.finditer(field_text(text))
    ]


def parse_reservations(text: str) -> list[ReservationFacts]:
    """Records of :func:`reservation_argv` ("No reservations in the system": none)."""
    return [
        ReservationFacts(
            name=r.get("ReservationName", ""),
            start=field_text(r.get("StartTime", "")),
            end=field_text(r.get("EndTime", "")),
            state=field_text(r.get("State", "")),
            nodes=field_text(r.get("Nodes", "")),
            flags=field_text(r.get("Flags", "")),
        )
        for r in parse_show(text, "ReservationName")
    ]


def _min_nodes(num_nodes: str) -> int | None:
    head = num_nodes.partition("-")[0].strip()  # "3-3", "1-4" or "2"
    return int(head) if head.isdigit() else None


def partition_facts(text: str, job: Mapping[str, str]) -> list[PartitionFacts]:
    """Records of :func:`partition_argv`, each with what keeps ``job`` (scontrol's record
    of it) out: a state other than UP, more nodes than it allows or has, a time limit over
    its MaxTime."""
    out: list[PartitionFacts] = []
    nodes = _min_nodes(job.get("NumNodes", ""))
    time_limit = job.get("TimeLimit", "")
    asked_sec = parse_duration(time_limit) if field_text(time_limit) else None
    for p in parse_show(text, "PartitionName"):
        problems: list[str] = []
        state = p.get("State", "")
        if state and state != "UP":
            problems.append(f"it is {state}")
        max_nodes, total = p.get("MaxNodes", ""), p.get("TotalNodes", "")
        if nodes is not None and max_nodes.isdigit() and nodes > int(max_nodes):
            problems.append(f"the job asks for {nodes} nodes, MaxNodes is {max_nodes}")
        elif nodes is not None and total.isdigit() and nodes > int(total):
            problems.append(f"the job asks for {nodes} nodes, the partition has {total}")
        max_time = p.get("MaxTime", "")
        max_sec = parse_duration(max_time) if max_time else None
        if asked_sec and max_sec and asked_sec > max_sec:
            problems.append(f"the job's time limit {time_limit} is over MaxTime {max_time}")
        out.append(
            PartitionFacts(
                name=p.get("PartitionName", ""),
                state=state,
                max_nodes=max_nodes,
                max_time=max_time,
                total_nodes=total,
                problems=tuple(problems),
            )
        )
    return out


# ---------------------------------------------------------------------------- limits


@dataclass(frozen=True)
class LimitRef:
    """Which limit a reason code names: where it is set (``qos`` or ``assoc``), its name in
    ``scontrol show assoc_mgr`` and, for a TRES limit, the TRES."""

    scope: str
    name: str
    tres: str = ""


_LIMIT_CODE = re.compile(
    r"(QOS|Assoc)(Grp|Max|Min)(\w+?)(PerUser|PerAccount|PerJob|PerNode)?(?:Limit)?"
)
_TRES_WORDS = {
    "GRES": "gres/gpu", "Gres": "gres/gpu", "Cpu": "cpu", "CPU": "cpu", "Node": "node",
    "Nodes": "node", "Mem": "mem", "Memory": "mem", "Billing": "billing", "Energy": "energy",
    "License": "license", "Licenses": "license", "BB": "bb",
}  # fmt: skip
_PER = {"PerUser": "PU", "PerAccount": "PA"}


def limit_ref(code: str) -> LimitRef | None:
    """The limit a QOS or association reason code names, read from the code's own parts
    (``QOS`` ``Max`` ``GRES`` ``PerUser`` is the QOS's ``MaxTRESPU`` of ``gres/gpu``), so
    that codes Slurm adds later are read too; None where the code names no one limit
    (``QOSResourceLimit``)."""
    m = _LIMIT_CODE.fullmatch(code.strip())
    if m is None:
        return None
    scope = "qos" if m.group(1) == "QOS" else "assoc"
    kind, body, per = m.group(2), m.group(3), m.group(4) or ""
    mins = ""
    for suffix, tag in (("RunMinutes", "RunMins"), ("Minutes", "Mins")):
        if body.endswith(suffix):
            body, mins = body.removesuffix(suffix), tag
            break
    if body in ("Jobs", "Job", "SubmitJob", "SubmitJobs"):
        count = "SubmitJobs" if body.startswith("Submit") else "Jobs"
        name = f"Grp{count}" if kind == "Grp" else f"Max{count}{_PER.get(per, '')}"
        return LimitRef(scope, name)
    if body in ("Wall", "WallDuration"):
        return LimitRef(scope, "GrpWall" if kind == "Grp" else "MaxWallPJ")
    tres = _TRES_WORDS.get(body)
    if tres is None:
        return None
    if kind == "Grp":
        return LimitRef(scope, f"GrpTRES{mins}", tres)
    if kind == "Min":
        return LimitRef(scope, "MinTRESPJ", tres)
    if per == "PerNode":
        return LimitRef(scope, "MaxTRESPN", tres)
    if per in _PER:
        return LimitRef(scope, f"MaxTRES{mins}{_PER[per]}", tres)
    return LimitRef(scope, f"MaxTRES{mins}PJ", tres)


_VALUE = re.compile(r"([^()]*)(?:\(([^()]*)\))?")


def _limit_and_use(value: str) -> tuple[str, str]:
    """``1(2)``: limit 1, 2 in use; ``N(2)``: no limit; ``30``: limit 30."""
    m = _VALUE.fullmatch(value.strip())
    if m is None:
        return "", ""
    limit, used = m.group(1).strip(), (m.group(2) or "").strip()
    return ("" if limit in ("N", "") else limit), used


def _tres_value(value: str, tres: str) -> str:
    for item in value.split(","):
        name, eq, rest = item.partition("=")
        if eq and name.strip() == tres:
            return rest
    return ""


def _limit_of(values: Mapping[str, str], ref: LimitRef) -> tuple[str, str]:
    value = values.get(ref.name, "")
    if ref.tres:
        value = _tres_value(value, ref.tres)
    return _limit_and_use(value)


_BLOCK = re.compile(r"(\S+)=\{([^}]*)\}")


def _qos_values(line: str, uid: str, account: str) -> dict[str, str]:
    """A QOS record's own limits, with those of its ``User Limits`` block for ``uid`` and
    its ``Account Limits`` block for ``account`` (names there end in PU and PA)."""
    head, _, blocks = line.partition(" Account Limits=")
    values = show_pairs(head)
    accounts, _, users = blocks.partition(" User Limits=")
    for section, key in ((accounts, account), (users, uid)):
        for m in _BLOCK.finditer(section):
            if m.group(1) == key:
                values.update(show_pairs(m.group(2)))
    return values


def qos_limit(text: str, ref: LimitRef, *, uid: str, account: str) -> LimitFacts | None:
    """The limit ``ref`` of the QOS in :func:`qos_limits_argv`'s answer."""
    for line in text.splitlines():
        if not line.startswith("QOS="):
            continue
        name = line.partition(" ")[0].removeprefix("QOS=").partition("(")[0]
        limit, used = _limit_of(_qos_values(line, uid, account), ref)
        return LimitFacts(f"QOS {name}", ref.name, ref.tres, limit, used, "scontrol show assoc_mgr")
    return None


def assoc_limit(text: str, ref: LimitRef, *, user: str) -> LimitFacts | None:
    """The limit ``ref`` in :func:`assoc_limits_argv`'s answer: from the first record that
    sets it, the user's own before the account's; else the user's (not set there: a parent
    account holds it)."""
    found: list[LimitFacts] = []
    for record in parse_show(text, "ClusterName"):
        who = record.get("UserName", "").partition("(")[0]
        if who and who != user:
            continue
        account = record.get("Account", "")
        scope = f"association {account}/{who}" if who else f"account {account}"
        limit, used = _limit_of(record, ref)
        found.append(LimitFacts(scope, ref.name, ref.tres, limit, used, "scontrol show assoc_mgr"))
    found.sort(key=lambda f: (not f.limit, not f.scope.startswith("association")))
    return found[0] if found else None
