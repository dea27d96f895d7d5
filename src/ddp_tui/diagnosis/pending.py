"""Slurm's pending reasons (squeue's ``%r``) in words, for the Jobs reason column, and the
category each belongs to, for ``ddp-tui why`` (:mod:`ddp_tui.diagnosis.waiting`).

The codes are Slurm's (``squeue(1)``, "JOB REASON CODES"); the local scheduler uses
"Resources", "requeued" and "JobArrayTaskLimit" too. Each phrase fits in
:data:`REASON_CHARS` characters. Every code is listed once, under its category.
"""

from __future__ import annotations

from enum import Enum

REASON_CHARS = 40


class WaitCategory(str, Enum):
    """What kind of thing a pending job waits for; each has its own advice."""

    PRIORITY = "priority"
    RESOURCES = "resources"
    LIMIT = "limit"
    DEPENDENCY = "dependency"
    RESERVATION = "reservation"
    HELD = "held"
    PARTITION = "partition"
    OTHER = "other"

    @property
    def words(self) -> str:
        """The category as a person reads it ("QOS or association limit")."""
        return _CATEGORY_WORDS[self]


_CATEGORY_WORDS: dict[WaitCategory, str] = {
    WaitCategory.PRIORITY: "priority",
    WaitCategory.RESOURCES: "resources",
    WaitCategory.LIMIT: "QOS or association limit",
    WaitCategory.DEPENDENCY: "dependency",
    WaitCategory.RESERVATION: "reservation or maintenance",
    WaitCategory.HELD: "held",
    WaitCategory.PARTITION: "partition down or too small",
    WaitCategory.OTHER: "other",
}

_BY_CATEGORY: dict[WaitCategory, dict[str, str]] = {
    WaitCategory.PRIORITY: {
        "Priority": "queued behind higher-priority jobs",
    },
    WaitCategory.RESOURCES: {
        "Resources": "waiting for free nodes",
        "Licenses": "waiting for licenses",
    },
    WaitCategory.DEPENDENCY: {
        "Dependency": "waiting for a job it depends on",
        "DependencyNeverSatisfied": "its dependency can never be met",
    },
    WaitCategory.RESERVATION: {
        "Reservation": "waiting for its reservation",
    },
    WaitCategory.HELD: {
        "JobHeldUser": "held by you (release it to run)",
        "JobHeldAdmin": "held by an administrator",
        "launch failed requeued held": "launch failed; requeued and held",
    },
    WaitCategory.PARTITION: {
        "BadConstraints": "its constraints cannot be met",
        "ReqNodeNotAvail": "requested nodes not available",
        "NodeDown": "a node it needs is down",
        "PartitionDown": "the partition is down",
        "PartitionInactive": "the partition is inactive",
        "PartitionTimeLimit": "over the partition's time limit",
        "PartitionNodeLimit": "more nodes than the partition allows",
        "PartitionConfig": "does not fit the partition's limits",
        "FrontEndDown": "no front-end node is available",
        "AccountNotAllowed": "account not allowed in the partition",
        "QOSNotAllowed": "QOS not allowed in the partition",
    },
    WaitCategory.LIMIT: {
        "InvalidAccount": "invalid account",
        "InvalidQOS": "invalid QOS",
        "JobArrayTaskLimit": "held back by the array's %K limit",
        # QOS limits
        "QOSMaxGRESPerUser": "at your QOS's GPU limit",
        "QOSMaxGRESPerJob": "more GPUs than the QOS allows per job",
        "QOSMaxJobsPerUserLimit": "at your QOS's running-job limit",
        "QOSMaxSubmitJobPerUserLimit": "at your QOS's submitted-job limit",
        "QOSMaxCpuPerUserLimit": "at your QOS's CPU limit",
        "QOSMaxCpuPerJobLimit": "more CPUs than the QOS allows per job",
        "QOSMaxNodePerUserLimit": "at your QOS's node limit",
        "QOSMaxNodePerJobLimit": "more nodes than the QOS allows per job",
        "QOSMaxMemoryPerUser": "at your QOS's memory limit",
        "QOSMaxWallDurationPerJobLimit": "over the QOS's time limit",
        "QOSGrpGRES": "the QOS's group GPU limit is reached",
        "QOSGrpCpuLimit": "the QOS's group CPU limit is reached",
        "QOSGrpNodeLimit": "the QOS's group node limit is reached",
        "QOSGrpMemLimit": "the QOS's group memory limit is reached",
        "QOSGrpJobsLimit": "the QOS's group job limit is reached",
        "QOSGrpSubmitJobsLimit": "the QOS's submitted-job limit is reached",
        "QOSResourceLimit": "a QOS resource limit is reached",
        "QOSJobLimit": "the QOS's job limit is reached",
        "QOSUsageThreshold": "the QOS's usage threshold is reached",
        # Association (account) limits
        "AssocGrpGRES": "your account's GPU limit is reached",
        "AssocGrpCpuLimit": "your account's CPU limit is reached",
        "AssocGrpNodeLimit": "your account's node limit is reached",
        "AssocGrpMemLimit": "your account's memory limit is reached",
        "AssocGrpJobsLimit": "your account's job limit is reached",
        "AssocGrpSubmitJobsLimit": "your account's submit limit is reached",
        "AssocGrpBillingMinutes": "your account's billing budget is used",
        "AssocGrpCPUMinutesLimit": "your account's CPU-minutes are used",
        "AssocGrpGRESMinutes": "your account's GPU-minutes are used",
        "AssocMaxJobsLimit": "at your account's running-job limit",
        "AssocMaxSubmitJobLimit": "at your account's submitted-job limit",
        "AssocMaxWallDurationPerJobLimit": "over your account's time limit",
        "AssocMaxGRESPerJob": "more GPUs than your account allows",
        "AssocMaxNodesPerJobLimit": "more nodes than your account allows",
        "AssocMaxCpuPerJobLimit": "more CPUs than your account allows",
    },
    WaitCategory.OTHER: {
        "None": "not yet considered by the scheduler",
        "BeginTime": "waiting for its start time",
        "Cleaning": "its previous run is being cleaned up",
        "Prolog": "running the node prolog",
        "Configuring": "its nodes are booting",
        "requeued": "requeued, waiting to start again",
    },
}

#: Every code in words (the Jobs reason column).
_WORDS: dict[str, str] = {
    code: words for table in _BY_CATEGORY.values() for code, words in table.items()
}
_CATEGORY: dict[str, WaitCategory] = {
    code: category for category, table in _BY_CATEGORY.items() for code in table
}


def pending_reason(code: str) -> str:
    """``code`` (squeue's ``%r``) in words; an unknown code is shown as it is.

    ``ReqNodeNotAvail, UnavailableNodes:n[1-2]`` keeps the nodes where they fit.
    """
    text = code.strip().strip("()").strip()
    if text in _WORDS:
        return _WORDS[text]
    head, sep, rest = text.partition(",")
    if sep and head.strip() in _WORDS:
        words = _WORDS[head.strip()]
        nodes = rest.strip().removeprefix("UnavailableNodes:").strip()
        if nodes and len(f"{words}: {nodes}") <= REASON_CHARS:
            return f"{words}: {nodes}"
        return words
    return code


def pending_category(code: str) -> WaitCategory:
    """The category of a pending reason (squeue's ``%r`` or ``scontrol``'s ``Reason``).

    ``ReqNodeNotAvail`` is a reservation when Slurm says why ("Reserved for maintenance",
    "May be reserved for other job": nodes an advance reservation holds), else the nodes
    are down or drained. A QOS or association code that this table does not name yet
    (Slurm adds them) is still a limit.
    """
    text = code.strip().strip("()").strip()
    head, _, detail = text.partition(",")
    head = head.strip()
    if head == "ReqNodeNotAvail" and "reserved" in detail.lower():
        return WaitCategory.RESERVATION
    category = _CATEGORY.get(text) or _CATEGORY.get(head)
    if category is not None:
        return category
    if head.startswith(("QOS", "Assoc")):
        return WaitCategory.LIMIT
    return WaitCategory.OTHER
