"""Every Slurm job state, mapped to the few states the app shows."""

from __future__ import annotations

from enum import Enum


class JobState(str, Enum):
    """The app's job states. Local jobs use the same ones."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    REQUEUED = "REQUEUED"
    SUSPENDED = "SUSPENDED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    #: Neither squeue nor sacct knows the job any more (accounting purged, another
    #: cluster's job in a shared home): not polled again, but the run can be retried.
    LOST = "LOST"
    UNKNOWN = "UNKNOWN"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def is_active(self) -> bool:
        """Queued or running: the job may still produce output."""
        return self in ACTIVE_STATES


TERMINAL_STATES = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.OUT_OF_MEMORY,
        JobState.NODE_FAIL,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
        # Final in Slurm: a preempted job that is requeued shows as PENDING again.
        JobState.PREEMPTED,
        JobState.LOST,
    }
)
#: The ends a retry of a group submits again: every end but success (the run did not finish).
RETRY_STATES = TERMINAL_STATES - {JobState.COMPLETED}
ACTIVE_STATES = frozenset(
    {
        JobState.PENDING,
        JobState.RUNNING,
        JobState.COMPLETING,
        JobState.REQUEUED,
        JobState.SUSPENDED,
    }
)

#: Every state, in the order a count of many jobs' states lists them (a group row's
#: ``1 RUNNING 2 PENDING 1 COMPLETED``): the active ones first, what is moving before what
#: waits, then the terminal ones that ended badly, then UNKNOWN, then COMPLETED.
COUNT_ORDER: tuple[JobState, ...] = (
    JobState.RUNNING,
    JobState.COMPLETING,
    JobState.PENDING,
    JobState.REQUEUED,
    JobState.SUSPENDED,
    JobState.FAILED,
    JobState.TIMEOUT,
    JobState.OUT_OF_MEMORY,
    JobState.NODE_FAIL,
    JobState.BOOT_FAIL,
    JobState.DEADLINE,
    JobState.PREEMPTED,
    JobState.CANCELLED,
    JobState.LOST,
    JobState.UNKNOWN,
    JobState.COMPLETED,
)

# Every state squeue/sacct can print (long and compact forms), from Slurm's
# job_state_string(); the base state decides, flags such as "+" are stripped.
_SLURM_STATES: dict[str, JobState] = {
    "PENDING": JobState.PENDING,
    "PD": JobState.PENDING,
    "CONFIGURING": JobState.PENDING,
    "CF": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "RH": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RF": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "RD": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "R": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "SI": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "SO": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "RS": JobState.RUNNING,
    "COMPLETING": JobState.COMPLETING,
    "CG": JobState.COMPLETING,
    "COMPLETED": JobState.COMPLETED,
    "CD": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "F": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "SE": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "CA": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,
    "RV": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
    "TO": JobState.TIMEOUT,
    "OUT_OF_MEMORY": JobState.OUT_OF_MEMORY,
    "OOM": JobState.OUT_OF_MEMORY,
    "NODE_FAIL": JobState.NODE_FAIL,
    "NF": JobState.NODE_FAIL,
    "PREEMPTED": JobState.PREEMPTED,
    "PR": JobState.PREEMPTED,
    "REQUEUED": JobState.REQUEUED,
    "RQ": JobState.REQUEUED,
    "SUSPENDED": JobState.SUSPENDED,
    "S": JobState.SUSPENDED,
    "STOPPED": JobState.SUSPENDED,
    "ST": JobState.SUSPENDED,
    "BOOT_FAIL": JobState.BOOT_FAIL,
    "BF": JobState.BOOT_FAIL,
    "DEADLINE": JobState.DEADLINE,
    "DL": JobState.DEADLINE,
}


def from_slurm(raw: str) -> JobState:
    """Map a squeue/sacct state ("CANCELLED by 0", "RUNNING+", "F") to a JobState."""
    base = raw.strip().split(" ", 1)[0].rstrip("+*").upper()
    return _SLURM_STATES.get(base, JobState.UNKNOWN)
