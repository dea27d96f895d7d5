"""Slurm's pending reasons (squeue's ``%r``) in words, for the Jobs reason column.

The codes are Slurm's (``squeue(1)``, "JOB REASON CODES"); the local scheduler uses
"Resources" and "requeued" too. Each phrase fits in :data:`REASON_CHARS` characters.
"""

from __future__ import annotations

REASON_CHARS = 40

_WORDS: dict[str, str] = {
    # Waiting its turn
    "None": "not yet considered by the scheduler",
    "Resources": "waiting for free nodes",
    "Priority": "queued behind higher-priority jobs",
    "Dependency": "waiting for a job it depends on",
    "DependencyNeverSatisfied": "its dependency can never be met",
    "BeginTime": "waiting for its start time",
    "Reservation": "waiting for its reservation",
    "Licenses": "waiting for licenses",
    "Cleaning": "its previous run is being cleaned up",
    "Prolog": "running the node prolog",
    "Configuring": "its nodes are booting",
    "requeued": "requeued, waiting to start again",
    # Held
    "JobHeldUser": "held by you (release it to run)",
    "JobHeldAdmin": "held by an administrator",
    "launch failed requeued held": "launch failed; requeued and held",
    "BadConstraints": "its constraints cannot be met",
    # Nodes and partitions
    "ReqNodeNotAvail": "requested nodes not available",
    "NodeDown": "a node it needs is down",
    "PartitionDown": "the partition is down",
    "PartitionInactive": "the partition is inactive",
    "PartitionTimeLimit": "over the partition's time limit",
    "PartitionNodeLimit": "more nodes than the partition allows",
    "PartitionConfig": "does not fit the partition's limits",
    "FrontEndDown": "no front-end node is available",
    "InvalidAccount": "invalid account",
    "InvalidQOS": "invalid QOS",
    "AccountNotAllowed": "account not allowed in the partition",
    "QOSNotAllowed": "QOS not allowed in the partition",
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
