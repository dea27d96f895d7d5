"""What a run directory must hold (remote/store/run_damage.py), held where it is read: the
cases of issue 21 that need a state a finished run cannot give on demand (a running job's
progress line) or that are cheapest checked on the pure readers."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ddp_tui.remote.backends.executor import Batch, FileRead, LocalExecutor
from ddp_tui.remote.backends.scheduler import JobStatus
from ddp_tui.remote.backends.ssh.batch import (
    LAUNCHERS,
    PY_HELPER,
    build_request,
    new_nonce,
    parse_response,
)
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.model.verification import RunFiles, verify_run
from ddp_tui.remote.model.view_building import build_view
from ddp_tui.remote.store.run_damage import (
    check_run_json,
    check_spec_json,
    clean_job_line,
    load_object,
    spec_json_of,
)
from ddp_tui.remote.store.runs import RunInfo, RunRef, spec_nodes
from ddp_tui.reports.text import strict_json
from ddp_tui.spec import ExperimentSpec

INFO = RunInfo(
    RunRef("20260101-000000-x-abcd", "/runs/20260101-000000-x-abcd"),
    {"spec": {"name": "x", "epochs": 3}},
    ({"job_id": "7", "attempt": 1},),
)


def test_an_infinite_epoch_in_progress_is_refused_while_the_job_runs() -> None:
    """An `Infinity` epoch in progress.jsonl raised OverflowError in `ls` for a running run."""
    running = JobStatus("7", JobState.RUNNING)
    progress = {"epoch": math.inf, "step": 3, "steps_per_epoch": 10, "loss": 0.5}
    view = build_view(INFO, ExperimentSpec(name="x"), running, progress=progress)
    assert view.progress is None
    good = build_view(INFO, ExperimentSpec(name="x"), running, progress={**progress, "epoch": 1})
    assert good.progress is not None and good.progress.epoch == 1


def test_run_json_of_wrong_types_keeps_what_is_right() -> None:
    """run.json with wrong types raised TypeError in `ls`, breaking the whole listing."""
    doc = {"hosts": 5, "world_size": "two", "backend": "gloo", "state": "completed"}
    clean, problems = check_run_json(doc)
    assert clean == {"backend": "gloo", "state": "completed"}
    assert any(p.startswith("hosts must be a list of texts") for p in problems)
    view = build_view(INFO, ExperimentSpec(name="x"), None, run_json=doc)
    assert view.hosts == () and view.world_size is None and view.backend == "gloo"


def test_a_jobs_line_of_wrong_types_keeps_its_attempt() -> None:
    """`"attempt": "two"` raised ValueError; the line still counts as an attempt (so that a
    retry never takes the run for one never submitted)."""
    clean, problems = clean_job_line({"job_id": "7", "attempt": "two", "intent": "t1"})
    assert clean == {"job_id": "7", "intent": "t1"}
    assert problems == ["attempt must be a whole number from 1 to 1000000, got 'two'"]
    assert clean_job_line({"event": "end", "job_id": [1], "state": "FAILED"})[0] is None


def test_numbers_that_cannot_be_real_are_refused_where_read() -> None:
    """ "nodes": 10**12 made logs, resources and compare open 10**12 telemetry files
    (MemoryError); "epochs": 10**18 made verify build a list of every epoch."""
    doc = {"spec": {"name": "x", "nodes": 10**12, "epochs": 10**18, "lr": math.nan}}
    clean, problems = check_spec_json(doc)
    assert "nodes" not in clean["spec"] and "epochs" not in clean["spec"]
    assert "lr" not in clean["spec"] and len(problems) == 3
    assert spec_nodes({"nodes": 10**12}) == 1 and spec_nodes({"nodes": 4}) == 4
    checks = verify_run(
        ExperimentSpec(name="x", epochs=10**18),
        "train",
        "7",
        JobStatus("7", JobState.COMPLETED),
        RunFiles(metrics=[{"epoch": 1.0}, {"epoch": math.inf}, {"epoch": math.nan}]),
    )
    epochs = next(c for c in checks if c.name == "every epoch is in metrics.csv")
    assert epochs.ok is False and "(duplicates or gaps)" in epochs.detail


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "is empty"),
        (b'{"spec": {', "is not JSON, or cut short"),
        (bytes(range(256)), "is not text"),
        (b"[1, 2]", "holds a JSON array, not a JSON object"),
        (b"[" * 100_000, "is not JSON"),
    ],
)
def test_a_json_file_that_is_not_an_object_says_why(data: bytes, problem: str) -> None:
    doc, said = load_object(data)
    assert doc is None and said is not None and said.startswith(problem)


def test_an_unreadable_file_is_that_reads_answer_not_the_batchs(tmp_path: Path) -> None:
    """A symlink loop (or a file root cannot be denied, as another user) used to raise out
    of the batch, hiding every run of the refresh."""
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "ok").write_text("{}")
    batch = Batch(reads=[FileRead(str(tmp_path / "loop")), FileRead(str(tmp_path / "ok"))])
    res = LocalExecutor().run_batch(batch).reads
    assert res[0].stat is None and "symbolic links" in res[0].error
    assert res[1].data == b"{}" and not res[1].error
    doc, problems = spec_json_of(res[0])
    assert doc == {} and problems[0].startswith("cannot be read")


def test_json_output_is_strict() -> None:
    """`ls --json` printed NaN for a NaN loss: not JSON to any strict parser."""
    text = strict_json({"loss": math.nan, "rows": [math.inf, -math.inf, 1.5]})
    assert json.loads(text) == {"loss": None, "rows": [None, None, 1.5]}


@pytest.mark.parametrize("variant", ["python", "sh"])
def test_over_ssh_an_unreadable_file_is_that_reads_answer_too(tmp_path: Path, variant: str) -> None:
    """The login node's batch helpers (run here, without SSH) answer a symlink loop as the
    local executor does: an error for that read, the other reads as they are."""
    if variant == "sh" and (shutil.which("stat") is None or sys.platform != "linux"):
        pytest.skip("the sh helper needs GNU coreutils")
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "ok").write_text("{}")
    (tmp_path / "dir").mkdir()
    batch = Batch(reads=[FileRead(str(tmp_path / n)) for n in ("loop", "ok", "dir")])
    nonce = new_nonce()
    argv = (
        ["sh", "-c", LAUNCHERS["sh"]]
        if variant == "sh"
        else [sys.executable, "-I", "-S", "-c", PY_HELPER]
    )
    request = build_request(nonce, [], [(r.path, r.offset, r.max_bytes) for r in batch.reads])
    proc = subprocess.run(argv, input=request, capture_output=True, check=False, timeout=60)
    got = parse_response(batch, nonce, proc.stdout, proc.stderr, proc.returncode, "here")
    local = LocalExecutor().run_batch(batch)
    assert got.reads[1:] == local.reads[1:] and got.reads[0].stat is None
    if variant == "python":  # the sh helper cannot tell a loop from a missing file
        assert got.reads[0] == local.reads[0] and got.reads[0].error
