"""Diagnosis starts from the first real error: spawned worlds that collided, a file the code
snapshot left out, a disk that filled so fully the job could not say so, and the journals'
conclusions (ranks that trained alone) only after a failed job's own errors.

The spawn log is a real torchrun run of tests/helpers/user_scripts/spawn_ranks.py at 2
processes per node (tests/diagnosis/logs/README.md); the other lines are as Python prints them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ddp_tui.diagnosis.classifier import classify_strict
from ddp_tui.diagnosis.model import Diagnosis, LogTail, RunFacts

LOGS = Path(__file__).parent / "logs"
SPAWN_LOG = (LOGS / "spawn_collision.err").read_text()
SPLIT = {"group": "split", "reason": "each process formed a group of its own", "launched": 2}


def failed(err: str, **changes: Any) -> RunFacts:
    base: dict[str, Any] = {
        "state": "FAILED",
        "exit_code": 1,
        "entry": "script",
        "script": "/home/u/proj/train.py",
        "world_size": 2,
        "nodes": 1,
        "err": LogTail("slurm-7.err", err),
    }
    return RunFacts(**{**base, **changes})


def diagnosis(facts: RunFacts) -> Diagnosis:
    found = classify_strict(facts)
    assert found is not None
    return found


# -- spawned worlds ------------------------------------------------------------------------


def test_launchers_that_each_spawned_a_world_collide_and_the_error_is_quoted() -> None:
    # The journals say each process formed a group of its own: true, and not the cause.
    found = diagnosis(failed(SPAWN_LOG, run_json={"observed": SPLIT}))
    assert found.code == "spawn-collision", found
    assert "2 launcher processes per node" in found.cause
    assert "EADDRINUSE" in found.cause and "port 29877" in found.cause
    assert "--gpus-per-node 1" in found.advice and "env://" in found.advice
    assert "init_process_group" not in found.advice  # the script already calls it
    assert any("EADDRINUSE" in e.text for e in found.evidence)
    assert any("spawn" in e.text for e in found.evidence)


def test_the_observed_spawn_record_is_evidence_without_spawn_frames_in_the_log() -> None:
    line = (
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any "
        "local network address. port: 23456, useIpv6: false, code: -98, name: EADDRINUSE, "
        "message: address already in use\n"
    )
    observed = {**SPLIT, "spawn": {"launchers": 2, "nprocs": 4}}
    found = diagnosis(failed(line, run_json={"observed": observed}))
    assert found.code == "spawn-collision"
    assert "4 workers each" in found.cause and "port 23456" in found.cause
    assert any(e.file == "run.json" and "observed.spawn" in e.text for e in found.evidence)


def test_one_launcher_per_node_that_spawns_is_a_port_in_use_not_a_collision() -> None:
    found = diagnosis(failed(SPAWN_LOG, world_size=2, nodes=2))
    assert found.code == "address-in-use"


# -- the journals' conclusions come after a failed job's own errors --------------------------


def test_a_failed_job_is_diagnosed_by_its_traceback_before_the_journals() -> None:
    err = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/proj/train.py", line 12, in <module>\n'
        "    main()\n"
        "ValueError: bad shape\n"
    )
    found = diagnosis(failed(err, run_json={"observed": SPLIT}))
    assert found.code == "python-exception" and "bad shape" in found.cause


def test_a_clean_end_is_still_told_by_the_journals() -> None:
    facts = failed("", state="COMPLETED", exit_code=0, run_json={"observed": SPLIT})
    assert diagnosis(facts).code == "trained-alone"


def test_a_failed_job_with_nothing_in_its_logs_still_gets_the_journals_word() -> None:
    assert diagnosis(failed("", run_json={"observed": SPLIT})).code == "trained-alone"


# -- a file the snapshot left out ----------------------------------------------------------


def snapshot(*entries: tuple[str, str]) -> dict[str, Any]:
    return {
        "files": 3,
        "excluded": {
            "paths": [{"path": p, "reason": r} for p, r in entries],
            "counts": {"gitignore": len(entries)},
        },
    }


def missing(path: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/runs/r7/project/train.py", line 121, in <module>\n'
        "    data = open(path, 'rb').read()\n"
        f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'\n"
    )


@pytest.mark.parametrize(
    ("path", "entry"),
    [
        ("data/train.bin", "data/"),
        ("./data/train.bin", "data/"),
        ("/scratch/runs/r7/project/data/train.bin", "data/"),
        ("train.bin", "train.bin"),
    ],
)
def test_a_missing_file_the_gitignore_left_out_is_named_with_the_fix(path: str, entry: str) -> None:
    facts = failed(missing(path), snapshot=snapshot((entry, "gitignore"), ("x.log", "gitignore")))
    found = diagnosis(facts)
    assert found.code == "left-out-of-snapshot", found
    assert path in found.cause and entry in found.cause and ".gitignore" in found.cause
    assert "--code-mode in-place" in found.advice
    assert [e.file for e in found.evidence] == ["slurm-7.err", "snapshot.json"]
    assert found.evidence[1].label == "snapshot.json"


def test_a_missing_file_the_snapshot_did_not_leave_out_is_the_scripts_own_error() -> None:
    facts = failed(missing("data/valid.bin"), snapshot=snapshot(("data/train.bin", "gitignore")))
    found = diagnosis(facts)
    assert found.code == "python-exception" and "train.py:121" in found.advice


def test_a_link_left_out_says_so() -> None:
    facts = failed(missing("weights.pt"), snapshot=snapshot(("weights.pt", "link")))
    found = diagnosis(facts)
    assert found.code == "left-out-of-snapshot" and "link" in found.cause


# -- a disk that filled ----------------------------------------------------------------------


def test_a_failed_job_on_a_full_runs_root_is_disk_full_without_a_line_of_its_own() -> None:
    facts = failed("", runs_root_free=12 * 1024, runs_root="/scratch/runs")
    found = diagnosis(facts)
    assert found.code == "disk-full" and found.short == "disk full"
    assert "/scratch/runs" in found.cause and "12 KiB" in found.cause
    assert [e.file for e in found.evidence] == ["scheduler", "df"]
    assert "exit code 1" in found.evidence[0].text


@pytest.mark.parametrize(
    "changes",
    [
        {"runs_root_free": 50 * 2**30},  # room: the disk is not why
        {"runs_root_free": None},  # not read
        {"runs_root_free": 0, "state": "COMPLETED", "exit_code": 0},
        {"runs_root_free": 0, "state": "CANCELLED", "exit_code": 0},
    ],
)
def test_free_space_alone_is_no_diagnosis_where_it_is_not_the_cause(
    changes: dict[str, Any],
) -> None:
    found = classify_strict(failed("", **changes))
    assert found is None or found.code != "disk-full"


@pytest.mark.parametrize(
    "doc",
    [{}, {"excluded": []}, {"excluded": {"paths": "data/"}}, {"excluded": {"paths": [7, None]}}],
)
def test_a_damaged_snapshot_record_is_no_evidence(doc: dict[str, Any]) -> None:
    found = diagnosis(failed(missing("data/train.bin"), snapshot=doc))
    assert found.code == "python-exception"
