"""Rules that the scheduler's state decides: completed, time limit, preemption, node
failure, cancel, lost. Slurm's own ``slurmstepd`` lines back them up where the state alone
would be ambiguous (a cancel that was really the time limit)."""

from __future__ import annotations

import re

from ddp_tui.diagnosis.logscan import Scan, clue
from ddp_tui.diagnosis.model import Diagnosis
from ddp_tui.diagnosis.rules_base import make, scheduler_evidence, state_of

# slurmstepd: error: *** JOB 494583 ON n1 CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME LIMIT ***
_TIME_LIMIT = clue(r"DUE TO TIME LIMIT", "DUE TO TIME LIMIT")
_PREEMPTION = clue(r"DUE TO PREEMPTION", "DUE TO PREEMPTION")
# "... CANCELLED AT ... DUE TO NODE FAILURE ***", "srun: error: Node failure on n2"
_NODE_FAILURE = clue(
    r"DUE TO NODE FAILURE|srun: error: Node failure on (\S+)", "NODE FAILURE", "Node failure"
)
# slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2026-01-01T10:00:00 ***  (scancel)
_CANCELLED_LINE = clue(r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+ \*\*\*", "CANCELLED AT")
_CANCELLED_BY = re.compile(r"CANCELLED by (\d+)")


def completed(scan: Scan) -> Diagnosis | None:
    """COMPLETED with exit code 0 (or none reported): nothing went wrong."""
    if state_of(scan) != "COMPLETED" or scan.facts.exit_code not in (0, None):
        return None
    return make(
        "completed",
        "completed",
        "The run completed: every process exited with code 0.",
        "Nothing to do.",
        [scheduler_evidence(scan)],
        severity="ok",
    )


def time_limit(scan: Scan) -> Diagnosis | None:
    """TIMEOUT, or Slurm's "DUE TO TIME LIMIT" line (a cancel that was the time limit)."""
    hit = scan.find(_TIME_LIMIT)
    if state_of(scan) != "TIMEOUT" and hit is None:
        return None
    checkpoint = scan.facts.checkpoint
    if checkpoint:
        short = "time limit, ckpt saved"
        cause = (
            "The job reached its time limit and was stopped. A checkpoint exists, so the "
            "work done so far is kept."
        )
        advice = (
            "Retry: the retry resumes from the checkpoint. To finish in one job, raise "
            "time_limit (or turn on requeue, so Slurm requeues it and it resumes by itself)."
        )
    elif checkpoint is False:
        short = "time limit, no checkpoint"
        cause = (
            "The job reached its time limit and was stopped before any checkpoint was saved: "
            "a retry starts over."
        )
        advice = (
            "Raise time_limit, or checkpoint more often (--ckpt-every-steps in "
            "extra_trainer_args) so that a retry can resume from where it stopped."
        )
    else:
        short = "time limit"
        cause = "The job reached its time limit and was stopped."
        advice = "Raise time_limit. A retry resumes from the last checkpoint, if the run saved one."
    return make("time-limit", short, cause, advice, [hit, scheduler_evidence(scan)])


def preempted(scan: Scan) -> Diagnosis | None:
    hit = scan.find(_PREEMPTION)
    if state_of(scan) != "PREEMPTED" and hit is None:
        return None
    return make(
        "preempted",
        "preempted",
        "The scheduler preempted the job: a higher-priority job took its nodes.",
        "Nothing is wrong with the job. Retry (it resumes from the last checkpoint), or turn "
        "on requeue so that Slurm puts a preempted job back in the queue by itself.",
        [hit, scheduler_evidence(scan)],
        severity="info",
    )


def node_fail(scan: Scan) -> Diagnosis | None:
    hit = scan.find(_NODE_FAILURE)
    state = state_of(scan)
    if state not in ("NODE_FAIL", "BOOT_FAIL") and hit is None:
        return None
    node = hit.group(1) if hit else ""
    where = f" ({node})" if node else ""
    what = "could not be booted" if state == "BOOT_FAIL" else "failed while the job ran"
    return make(
        "node-fail",
        f"node failure{where}",
        f"A node of the job{where} {what}; the job ended with it.",
        "Nothing is wrong with the job. Retry (it resumes from the last checkpoint); if the "
        "same node fails again, tell the cluster's admins.",
        [hit, scheduler_evidence(scan)],
        severity="info",
    )


def cancelled(scan: Scan) -> Diagnosis | None:
    """CANCELLED: by whom, from "CANCELLED by <uid>". Not a fault."""
    if state_of(scan) != "CANCELLED":
        return None
    facts = scan.facts
    m = _CANCELLED_BY.search(facts.raw_state) or _CANCELLED_BY.search(facts.state)
    uid = int(m.group(1)) if m else None
    me = facts.extra.get("uid")
    if uid is None:
        who, short = "", "cancelled"
    elif isinstance(me, int) and not isinstance(me, bool) and me == uid:
        who, short = " by you", "cancelled by you"
    elif uid == 0:
        who, short = " by root (an admin or the system)", "cancelled by root"
    else:
        who, short = f" by user id {uid}", f"cancelled by uid {uid}"
    return make(
        "cancelled",
        short,
        f"The job was cancelled{who}.",
        "Nothing to fix. Retry it to run it again (it resumes from the last checkpoint).",
        [scheduler_evidence(scan), scan.find(_CANCELLED_LINE)],
        severity="info",
    )


def lost(scan: Scan) -> Diagnosis | None:
    if state_of(scan) != "LOST":
        return None
    return make(
        "lost",
        "lost by the scheduler",
        "The scheduler no longer knows this job (its accounting was purged, or it belongs "
        "to another cluster that shares this home directory); how it ended is unknown.",
        "Look at its logs; retry it if it did not finish.",
        [scheduler_evidence(scan)],
        severity="info",
    )
