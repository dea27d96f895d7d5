"""Properties of the classifier: it never raises, and what it answers is well formed.

``classify_strict`` is the classifier without its safety net, so a rule that trips over a
strange log fails here instead of being hidden.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddp_tui.diagnosis import Diagnosis, LogTail, RunFacts
from ddp_tui.diagnosis.classifier import classify_strict
from ddp_tui.diagnosis.pending import REASON_CHARS, pending_reason

STATES = st.sampled_from(
    [
        "FAILED",
        "COMPLETED",
        "CANCELLED",
        "CANCELLED by 0",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "PREEMPTED",
        "LOST",
        "RUNNING",
        "",
    ]
) | st.text(max_size=20)

#: Pieces of the lines the rules look for, so that random logs reach deep into the parsers
#: (tracebacks cut anywhere, torchrun summaries without fields, prefixes without text).
PIECES = st.sampled_from(
    [
        "Traceback (most recent call last):",
        '  File "/x/train.py", line 3, in main',
        '  File "/usr/lib/python3.11/site-packages/torch/distributed/run.py", line 9, in main',
        "    x = y[1]",
        "KeyError: 'a'",
        "During handling of the above exception, another exception occurred:",
        "[rank1]: ",
        "[rank0]:",
        "[default3]:Traceback (most recent call last):",
        "Root Cause (first observed failure):",
        "[0]:",
        "  rank      : ",
        "  rank      : 1 (local_rank: 1)",
        "  exitcode  : -11 (pid: 1)  (SIGSEGV)",
        "  exitcode  : x",
        "  host      : n1",
        "No module named '",
        "No module named 'torch'",
        "ddp-train: error: argument --data-root: ",
        "ddp-train: error: ",
        "usage: ",
        "usage: train.py [-h]",
        "train.py: error: bad",
        "rendezvous failed: rank 0 of 2 on n1 waited on n1:1 (launcher srun, timeout 1s): ",
        "Timed out after 9 seconds waiting for clients. 1/2 clients joined.",
        "Connection closed by peer",
        "init_process_group",
        "Connection refused",
        "EADDRINUSE",
        "Watchdog caught collective operation timeout: WorkNCCL(OpType=",
        "NCCL error",
        "Last error:",
        "ncclSystemError",
        "CUDA out of memory. Tried to allocate ",
        "srun: error: n1: task 0: Out Of Memory",
        "Segmentation fault",
        "terminate called after throwing an instance of '",
        "[ddp-tui] rendezvous=",
        "[ddp-tui] python=",
        "[ddp-tui] launcher exited with status 999999999999",
        "failed (exitcode: -99999) local_rank: 0",
        "DUE TO TIME LIMIT",
        "\r",
        "",
    ]
)
LINES = st.lists(st.one_of(PIECES, st.text(max_size=40), PIECES.map(lambda p: p + "\x00é")))
LOGTEXT = LINES.map("\n".join)


def well_formed(found: Diagnosis | None) -> None:
    if found is None:
        return
    assert found.code and found.cause and found.advice
    assert len(found.short) <= 32
    assert found.evidence
    assert found.severity in ("fix", "info", "ok")
    assert Diagnosis.from_dict(found.to_dict()) == found


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    state=STATES,
    err=LOGTEXT,
    out=LOGTEXT,
    whole=st.booleans(),
    exit_code=st.none() | st.integers(min_value=-300, max_value=300),
    entry=st.sampled_from(["trainer", "script"]),
    hosts=st.lists(st.text(max_size=5), max_size=3),
    nodes=st.integers(min_value=0, max_value=4),
    run_json=st.none() | st.dictionaries(st.text(max_size=10), st.text(max_size=10) | st.none()),
    checkpoint=st.none() | st.booleans(),
)
def test_classify_never_raises_on_arbitrary_logs(
    state: str,
    err: str,
    out: str,
    whole: bool,
    exit_code: int | None,
    entry: str,
    hosts: list[str],
    nodes: int,
    run_json: dict[str, str | None] | None,
    checkpoint: bool | None,
) -> None:
    facts = RunFacts(
        state=state,
        raw_state=state,
        exit_code=exit_code,
        err=LogTail.of("a.err", err.encode("utf-8", "surrogatepass"), whole=whole),
        out=LogTail("a.out", out),
        entry=entry,
        script="/x/train.py",
        hosts=tuple(hosts),
        nodes=nodes,
        run_json=run_json,
        checkpoint=checkpoint,
    )
    well_formed(classify_strict(facts))


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=2000))
def test_classify_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    facts = RunFacts(state="FAILED", exit_code=1, err=LogTail.of("b.err", data, whole=False))
    well_formed(classify_strict(facts))


@given(code=st.text(max_size=60))
def test_pending_reason_never_raises_and_keeps_unknown_codes(code: str) -> None:
    words = pending_reason(code)
    assert isinstance(words, str)
    assert words == code or len(words) <= REASON_CHARS
