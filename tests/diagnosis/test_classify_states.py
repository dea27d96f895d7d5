"""What the scheduler's state decides, and what the classifier leaves alone.

The states are plain facts (the facade reads them from squeue/sacct or the local
scheduler); the real jobs that end in them are in tests/integration/test_diagnosis_*.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from ddp_tui.diagnosis import LogTail, RunFacts, classify
from ddp_tui.diagnosis.classifier import classify_strict
from ddp_tui.diagnosis.model import Diagnosis


def run(state: str, err: str = "", out: str = "", **kw: Any) -> Diagnosis | None:
    facts = RunFacts(
        state=state,
        err=LogTail("slurm-5.err", err) if err else None,
        out=LogTail("slurm-5.out", out) if out else None,
        **kw,
    )
    found = classify_strict(facts)
    assert classify(facts) == found
    if found is not None:
        assert found.evidence and len(found.short) <= 32
    return found


@pytest.mark.parametrize(
    "state", ["PENDING", "RUNNING", "COMPLETING", "REQUEUED", "SUSPENDED", "UNKNOWN", ""]
)
def test_active_or_unknown_states_have_no_diagnosis(state: str) -> None:
    err = "torch.OutOfMemoryError: CUDA out of memory.\n"  # an earlier attempt's, say
    assert run(state, err=err, exit_code=1) is None


def test_completed_with_exit_zero_is_ok() -> None:
    found = run("COMPLETED", exit_code=0, out="epoch 1/1 loss 0.1\n")
    assert found is not None and found.code == "completed" and found.severity == "ok"
    assert not found.needs_fix and found.evidence[0].file == "scheduler"


@pytest.mark.parametrize(
    ("checkpoint", "short", "words"),
    [
        (True, "time limit, ckpt saved", "resumes from the checkpoint"),
        (False, "time limit, no checkpoint", "starts over"),
        (None, "time limit", "time_limit"),
    ],
)
def test_time_limit_says_whether_a_retry_resumes(
    checkpoint: bool | None, short: str, words: str
) -> None:
    found = run("TIMEOUT", checkpoint=checkpoint, exit_code=0)
    assert found is not None and found.code == "time-limit" and found.needs_fix
    assert found.short == short
    assert words in found.cause + found.advice
    assert "time_limit" in found.advice
    assert found.evidence[0].text.startswith("TIMEOUT")


@pytest.mark.parametrize(
    ("raw", "extra", "short"),
    [
        ("CANCELLED by 1000", {"uid": 1000}, "cancelled by you"),
        ("CANCELLED by 0", {}, "cancelled by root"),
        ("CANCELLED by 1234", {"uid": 1000}, "cancelled by uid 1234"),
        ("CANCELLED", {}, "cancelled"),
    ],
)
def test_a_cancel_names_who_and_is_not_a_fault(raw: str, extra: dict[str, Any], short: str) -> None:
    err = "slurmstepd: error: *** JOB 5 ON n1 CANCELLED AT 2026-11-24T11:00:00 ***\n"
    found = run("CANCELLED", raw_state=raw, err=err, extra=extra, exit_code=0)
    assert found is not None and found.code == "cancelled"
    assert found.severity == "info" and not found.needs_fix
    assert found.short == short
    assert [e.file for e in found.evidence] == ["scheduler", "slurm-5.err"]


def test_a_cancelled_job_that_hit_its_time_limit_is_the_time_limit() -> None:
    err = (
        "slurmstepd: error: *** JOB 5 ON n1 CANCELLED AT 2026-11-24T11:00:00 "
        "DUE TO TIME LIMIT ***\n"
    )
    found = run("CANCELLED", raw_state="CANCELLED by 0", err=err)
    assert found is not None and found.code == "time-limit"


@pytest.mark.parametrize(
    ("state", "code"),
    [
        ("PREEMPTED", "preempted"),
        ("NODE_FAIL", "node-fail"),
        ("BOOT_FAIL", "node-fail"),
        ("OUT_OF_MEMORY", "host-oom"),
        ("LOST", "lost"),
    ],
)
def test_the_state_alone_decides(state: str, code: str) -> None:
    found = run(state)
    assert found is not None and found.code == code
    assert found.evidence[0].file == "scheduler"
    assert found.needs_fix == (code == "host-oom")


def test_a_node_failure_line_names_the_node() -> None:
    found = run("FAILED", err="srun: error: Node failure on n2\n", exit_code=1)
    assert found is not None and found.code == "node-fail" and "(n2)" in found.cause


def test_a_failed_state_with_an_exit_code_above_128_names_the_signal() -> None:
    found = run("FAILED", exit_code=139)
    assert found is not None and found.code == "signal" and "SIGSEGV" in found.cause


# -- what must give no diagnosis ------------------------------------------------------------

UNRECOGNISED = [
    # a script that prints its own error and exits 1
    ("ERROR: loss is NaN at step 120, stopping\n", "epoch 1 loss nan\n"),
    # warnings, NCCL's chatter, and progress: none of them is a cause
    (
        "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py:557: UserWarning: This "
        "DataLoader will create 8 worker processes in total.\n"
        "n1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n",
        "[ddp-tui] training job 5 on n1 at 2026-11-24T11:00:00Z\n"
        "[ddp-tui] rendezvous=n1:20005\n"
        "[ddp-tui] launcher exited with status 1 at 2026-11-24T11:05:00Z\n",
    ),
    # srun's own words for a task that exited 1 say nothing about why
    ("srun: error: n1: task 0: Exited with exit code 1\n", ""),
    # an incomplete traceback (the tail was cut before the exception line)
    ('Traceback (most recent call last):\n  File "/x/train.py", line 3, in <module>\n', ""),
    # nothing at all
    ("", ""),
]


@pytest.mark.parametrize(("err", "out"), UNRECOGNISED)
def test_an_unrecognised_failure_has_no_diagnosis(err: str, out: str) -> None:
    assert run("FAILED", err=err, out=out, exit_code=1) is None


def test_a_completed_job_with_a_nonzero_exit_and_no_clue_has_no_diagnosis() -> None:
    assert run("COMPLETED", exit_code=1, out="done\n") is None


def test_the_trainers_rendezvous_hint_alone_is_not_a_port_in_use() -> None:
    # The hint lists "port N is already in use" as a possible cause whatever happened.
    err = (
        "  - port 20005 is already in use on n1 (another job or a stale process; set "
        "MASTER_PORT to a free port);\n"
        "  - n1 is not reachable from every node on this interface (wrong network interface "
        "or hostname: check MASTER_ADDR, NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME, and "
        "firewalls).\n"
    )
    assert run("FAILED", err=err, exit_code=1) is None
