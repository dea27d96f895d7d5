"""The disk rule: the job's own write-failure line, and Python's words for the same failure.

The job's line is what ``RunWriteError.message()`` prints (built here by the real class on a
real path, not typed out); Python's lines are as an interpreter prints them. Each is put at
the end of a real torchrun log whose other ranks lost their connection, so the rule must win
over the network and traceback rules those lines would match.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ddp_tui.diagnosis import LogTail, RunFacts, classify
from ddp_tui.diagnosis.classifier import classify_strict
from ddp_tui.jobfiles import RunWriteError

LOGS = Path(__file__).parent / "logs"
PEER_LOST = (
    "[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection "
    "closed by peer [127.0.0.1]:2478\n"
)


def facts(*lines: str) -> RunFacts:
    text = PEER_LOST + "".join(line + "\n" for line in lines)
    return RunFacts(
        state="FAILED", exit_code=1, err=LogTail("slurm-7.err", text.replace("\n\n", "\n"))
    )


def test_the_jobs_own_line_names_the_path_and_the_free_space(tmp_path: Path) -> None:
    target = tmp_path / "runs" / "r1" / "metrics.csv"
    line = RunWriteError(target, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))).message()
    found = classify_strict(facts(line))
    assert found is not None and found.code == "disk-full"
    assert found.short == "disk full"
    assert str(target) in found.cause and "No space left on device" in found.cause
    assert " free of " in found.cause  # the free space as the job reported it
    assert "runs_root" in found.advice and "Free space" in found.advice
    assert found.evidence[0].text == line and found.evidence[0].file == "slurm-7.err"
    assert classify(facts(line)) == found


@pytest.mark.parametrize(
    ("line", "code", "short", "path"),
    [
        (
            "OSError: [Errno 28] No space left on device: '/scratch/runs/r1/out.bin'",
            "disk-full",
            "disk full",
            "/scratch/runs/r1/out.bin",
        ),
        (
            "[rank0]: OSError: [Errno 30] Read-only file system: '/runs/r1/ckpt.pt'",
            "read-only-disk",
            "read-only disk",
            "/runs/r1/ckpt.pt",
        ),
        ("OSError: [Errno 122] Disk quota exceeded", "disk-full", "disk quota exceeded", ""),
    ],
)
def test_pythons_own_words_for_a_full_read_only_or_over_quota_disk(
    line: str, code: str, short: str, path: str
) -> None:
    found = classify_strict(facts(line))
    assert found is not None and (found.code, found.short) == (code, short)
    assert path in found.cause
    assert "did not report the free space" in found.cause
    assert "runs_root" in found.advice


def test_it_wins_over_the_traceback_of_a_recorded_torchrun_failure() -> None:
    log = (LOGS / "torchrun_keyerror_rank1.err").read_text()
    line = "OSError: [Errno 28] No space left on device: '/runs/r1/checkpoints/latest.pt'"
    found = classify_strict(
        RunFacts(state="FAILED", exit_code=1, err=LogTail("slurm-7.err", f"{line}\n{log}"))
    )
    assert found is not None and found.code == "disk-full"


def test_other_errnos_and_a_clean_log_are_not_a_full_disk() -> None:
    found = classify_strict(facts("OSError: [Errno 5] Input/output error"))
    assert found is None or found.code not in ("disk-full", "read-only-disk")
