"""Run directories on a real filesystem: atomic creation, cheap listing, reading back."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

import ddp_tui
from ddp_tui.remote.backends.executor import Batch, BatchResult, Executor, LocalExecutor
from ddp_tui.remote.store.runs import (
    HALF_MADE_SEC,
    RUN_ID_RE,
    RunStore,
    RunStoreError,
    package_dir,
    sanitize_name,
)
from ddp_tui.remote.store.snapshot import build_manifest

SPEC = {"model": "mlp", "dataset": "synthetic", "nodes": 1, "gpus_per_node": 2, "epochs": 3}


@pytest.fixture
def code_source(tmp_path: Path) -> Path:
    """A package tree shaped like ddp_tui, with byte-code caches that must not be copied."""
    pkg = tmp_path / "src" / "ddp_tui"
    (pkg / "trainer" / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "9.9"\n')
    (pkg / "trainer" / "__init__.py").write_text("")
    (pkg / "trainer" / "train.py").write_text("print('train')\n")
    (pkg / "trainer" / "sub" / "x.py").write_text("X = 1\n")
    (pkg / "trainer" / "sub" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (pkg / "trainer" / "old.pyc").write_bytes(b"\0")
    (pkg / "tui").mkdir()
    (pkg / "tui" / "app.py").write_text("import textual\n")  # not part of the snapshot
    return pkg


def _store(tmp_path: Path, code_source: Path, executor: LocalExecutor | None = None) -> RunStore:
    return RunStore(executor or LocalExecutor(), str(tmp_path / "runs"), code_source=code_source)


def test_create_run_builds_the_whole_run_directory(tmp_path: Path, code_source: Path) -> None:
    store = _store(tmp_path, code_source)
    run = store.create_run(
        SPEC, "mnist 2gpu", lambda run_dir: f"#!/bin/bash\ncd {run_dir}\n", group="sweep-1"
    )
    assert RUN_ID_RE.match(run.run_id)
    assert "-mnist_2gpu-" in run.run_id
    run_dir = Path(run.path)
    assert run_dir == tmp_path / "runs" / run.run_id

    doc = json.loads((run_dir / "spec.json").read_text())
    assert doc["spec"] == SPEC
    assert doc["group"] == "sweep-1"
    assert doc["run_id"] == run.run_id
    assert doc["ddp_tui_version"] == ddp_tui.__version__
    assert doc["created_at"].endswith("+00:00")
    # The script was rendered for the final path, not the temporary one.
    assert (run_dir / "job.sbatch").read_text() == f"#!/bin/bash\ncd {run_dir}\n"
    assert (run_dir / "jobs.jsonl").read_bytes() == b""

    code = run_dir / "code" / "ddp_tui"
    files = sorted(str(p.relative_to(code)) for p in code.rglob("*") if p.is_file())
    assert files == ["__init__.py", "trainer/__init__.py", "trainer/sub/x.py", "trainer/train.py"]
    assert os.listdir(tmp_path / "runs") == [run.run_id]  # no temporary directory left


def test_snapshot_of_the_installed_package(tmp_path: Path) -> None:
    store = RunStore(LocalExecutor(), str(tmp_path / "runs"))
    run = store.create_run(SPEC, "real", "#!/bin/bash\n")
    code = Path(run.path) / "code" / "ddp_tui"
    assert (code / "__init__.py").read_bytes() == (package_dir() / "__init__.py").read_bytes()
    assert (code / "trainer").is_dir()
    assert not list(code.rglob("__pycache__"))
    assert not (code / "tui").exists()


def test_names_are_sanitised_so_nothing_a_user_types_reaches_a_path() -> None:
    assert sanitize_name("$(touch /tmp/pwned)\nrm -rf ~") == "touch_tmp_pwned_rm_-rf"
    assert sanitize_name("../../etc") == "etc"
    assert sanitize_name("...") == "run"
    assert sanitize_name("résumé v2.1") == "r_sum_v2.1"
    assert len(sanitize_name("x" * 500)) == 64


class FailingUploadExecutor(LocalExecutor):
    """Fault-injecting fake: copies part of the files, then the 'connection' drops."""

    def upload_files(self, files: Sequence[tuple[str, str]], dst: str) -> int:
        super().upload_files(files[: len(files) // 2], dst)
        raise OSError("connection lost during upload")


class FailingRenameExecutor(LocalExecutor):
    """Fault-injecting fake: everything is written, then the final rename fails."""

    def rename(self, src: str, dst: str) -> None:
        raise OSError("rename refused")


@pytest.mark.parametrize("executor_cls", [FailingUploadExecutor, FailingRenameExecutor])
def test_a_failed_create_leaves_no_run_and_no_temporary_directory(
    tmp_path: Path, code_source: Path, executor_cls: type[LocalExecutor]
) -> None:
    store = _store(tmp_path, code_source, executor_cls())
    # The OSError is said with the runs root it happened under, not as a traceback.
    with pytest.raises(
        RunStoreError, match=r"cannot write a new run under .*: (connection|rename)"
    ):
        store.create_run(SPEC, "doomed", "#!/bin/bash\n")
    assert os.listdir(tmp_path / "runs") == []
    assert store.list_runs() == []


def test_a_script_renderer_that_raises_leaves_nothing(tmp_path: Path, code_source: Path) -> None:
    store = _store(tmp_path, code_source)

    def render(run_dir: str) -> str:
        raise ValueError("template error")

    with pytest.raises(ValueError, match="template error"):
        store.create_run(SPEC, "doomed", render)
    assert os.listdir(tmp_path / "runs") == []


def test_missing_trainer_package_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "nothing"
    empty.mkdir()
    store = RunStore(LocalExecutor(), str(tmp_path / "runs"), code_source=empty)
    with pytest.raises(RunStoreError, match="trainer package is missing"):
        store.create_run(SPEC, "x", "#!/bin/bash\n")
    assert os.listdir(tmp_path / "runs") == []


def test_jobs_are_appended_and_read_back(tmp_path: Path, code_source: Path) -> None:
    store = _store(tmp_path, code_source)
    run = store.create_run(SPEC, "a", "#!/bin/bash\n")
    first = {
        "job_id": "11",
        "scheduler": "local",
        "submitted_at": "t1",
        "retry_of": None,
        "attempt": 1,
    }
    second = {
        "job_id": "12",
        "scheduler": "local",
        "submitted_at": "t2",
        "retry_of": "11",
        "attempt": 2,
    }
    store.append_job(run, first)
    store.append_job(run, second)
    assert store.read_jobs(run) == [first, second]
    assert store.read_spec(run)["spec"] == SPEC
    assert store.read_run_json(run) is None
    assert store.read_metrics(run) == []
    assert store.read_script(run) == "#!/bin/bash\n"


class CountingExecutor(LocalExecutor):
    """The real local executor, counting which files it is asked to read."""

    def __init__(self) -> None:
        self.read_paths: list[str] = []

    def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
        self.read_paths += [r.path for r in batch.reads]
        return super().run_batch(batch, timeout=timeout)


def test_list_runs_reads_each_spec_once_and_follows_new_jobs(
    tmp_path: Path, code_source: Path
) -> None:
    ex = CountingExecutor()
    store = _store(tmp_path, code_source, ex)
    a = store.create_run(SPEC, "a", "#!/bin/bash\n", group="g")
    b = store.create_run({**SPEC, "nodes": 2}, "b", "#!/bin/bash\n", group="g")
    store.append_job(a, {"job_id": "1"})
    # Neither a temporary directory nor a foreign one is a run.
    (tmp_path / "runs" / ".20240101-000000-x-abcd.tmp").mkdir()
    (tmp_path / "runs" / "notes").mkdir()

    ex.read_paths.clear()
    runs = store.list_runs()
    assert [r.run_id for r in runs] == sorted([a.run_id, b.run_id])
    by_id = {r.run_id: r for r in runs}
    assert [j["job_id"] for j in by_id[a.run_id].jobs] == ["1"]
    assert by_id[b.run_id].jobs == ()
    assert by_id[b.run_id].spec["nodes"] == 2
    assert by_id[a.run_id].group == "g"
    assert sum(p.endswith("spec.json") for p in ex.read_paths) == 2

    ex.read_paths.clear()
    store.append_job(a, {"job_id": "2"})
    store.append_job(b, {"job_id": "3"})
    runs = store.list_runs()
    assert not any(p.endswith("spec.json") for p in ex.read_paths)
    by_id = {r.run_id: r for r in runs}
    assert [j["job_id"] for j in by_id[a.run_id].jobs] == ["1", "2"]
    assert [j["job_id"] for j in by_id[b.run_id].jobs] == ["3"]
    assert by_id[a.run_id].latest_job == {"job_id": "2"}

    shutil.rmtree(b.path)
    assert [r.run_id for r in store.list_runs()] == [a.run_id]


def test_list_runs_of_a_missing_root_is_empty(tmp_path: Path, code_source: Path) -> None:
    assert _store(tmp_path, code_source).list_runs() == []


def test_ref_refuses_anything_but_a_run_id(tmp_path: Path, code_source: Path) -> None:
    store = _store(tmp_path, code_source)
    with pytest.raises(RunStoreError):
        store.ref("../../etc")
    ref = store.ref("20240101-120000-x-00ff")
    assert ref.path == str(tmp_path / "runs" / "20240101-120000-x-00ff")


class RewritingAppendExecutor(CountingExecutor):
    """The local executor with the base class's append: read, then rewrite atomically.

    That is how an executor without an append primitive (SSH/SFTP) may add a line, and
    it replaces the file (a new inode) every time.
    """

    def append(self, path: str, data: bytes) -> None:
        Executor.append(self, path, data)


def test_list_runs_follows_a_jobs_file_that_is_rewritten_not_appended(
    tmp_path: Path, code_source: Path
) -> None:
    ex = RewritingAppendExecutor()
    store = _store(tmp_path, code_source, ex)
    run = store.create_run(SPEC, "a", "#!/bin/bash\n")
    store.append_job(run, {"job_id": "1"})
    assert [j["job_id"] for j in store.list_runs()[0].jobs] == ["1"]
    store.append_job(run, {"job_id": "2"})
    ex.read_paths.clear()
    # Replaced file: the reader starts over, and the old lines are not counted twice.
    assert [j["job_id"] for j in store.list_runs()[0].jobs] == ["1", "2"]
    assert store.read_jobs(run) == [{"job_id": "1"}, {"job_id": "2"}]
    # A replacement that does not start with the old content is read from its start.
    ex.write_atomic(run.file("jobs.jsonl"), b'{"job_id":"9"}\n{"job_id":"8"}\n{"job_id":"7"}\n')
    assert [j["job_id"] for j in store.list_runs()[0].jobs] == ["9", "8", "7"]


def test_list_runs_is_one_batch_of_reads_when_nothing_was_rewritten(
    tmp_path: Path, code_source: Path
) -> None:
    calls: list[int] = []

    class BatchCountingExecutor(LocalExecutor):
        def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
            calls.append(len(batch.reads))
            return super().run_batch(batch, timeout=timeout)

    store = _store(tmp_path, code_source, BatchCountingExecutor())
    for i in range(5):
        store.append_job(store.create_run(SPEC, f"r{i}", "#!/bin/bash\n"), {"job_id": str(i)})
    assert len(store.list_runs()) == 5
    # The listing (with the reads of known runs: none yet), then spec.json + jobs.jsonl +
    # usage.json of each new run and a stat of its directory (a file in its place is damage),
    # in one batch.
    assert calls == [0, 20]
    store.list_runs()
    assert calls == [0, 20, 5]  # then one batch: the listing and only the jobs files


# --------------------------------------------------------------------------- snapshots


def _project(root: Path) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "train.py").write_text("print('hi')\n")
    (root / "models" / "net.py").write_text("NET = 1\n")
    (root / "data.bin").write_bytes(os.urandom(4096))
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    return root


def test_create_run_with_a_snapshot_puts_the_project_under_project(
    tmp_path: Path, code_source: Path
) -> None:
    project = _project(tmp_path / "proj")
    manifest = build_manifest(project, max_bytes=10 << 20)
    store = _store(tmp_path, code_source)
    run = store.create_run(SPEC, "snap", "#!/bin/bash\n", snapshot=manifest)
    run_dir = Path(run.path)
    dst = run_dir / "project"
    got = sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file())
    assert got == ["data.bin", "models/net.py", "run.sh", "train.py"]
    for name in got:
        assert (dst / name).read_bytes() == (project / name).read_bytes()
    assert (dst / "run.sh").stat().st_mode & 0o100
    # code/ came in the same upload.
    assert (run_dir / "code" / "ddp_tui" / "trainer" / "train.py").is_file()
    doc = json.loads((run_dir / "snapshot.json").read_text())
    assert doc["source"] == str(project)
    assert doc["host"] == socket.gethostname()
    assert (doc["files"], doc["bytes"]) == (4, manifest.total_bytes)
    assert doc["commit"] is None and doc["dirty"] is None  # not a git repository
    assert isinstance(doc["upload_sec"], float)
    upload = store.last_upload
    assert upload is not None
    assert (upload.code_files, upload.project_files) == (4, 4)
    assert upload.bytes >= manifest.total_bytes


def test_an_empty_snapshot_still_makes_project(tmp_path: Path, code_source: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    store = _store(tmp_path, code_source)
    run = store.create_run(
        SPEC, "snap", "#!/bin/bash\n", snapshot=build_manifest(empty, max_bytes=1 << 20)
    )
    assert (Path(run.path) / "project").is_dir()
    assert json.loads((Path(run.path) / "snapshot.json").read_text())["files"] == 0


def test_a_run_without_a_snapshot_has_no_project(tmp_path: Path, code_source: Path) -> None:
    run = _store(tmp_path, code_source).create_run(SPEC, "plain", "#!/bin/bash\n")
    assert not (Path(run.path) / "project").exists()
    assert not (Path(run.path) / "snapshot.json").exists()


def test_a_snapshot_that_fails_part_way_leaves_no_run(tmp_path: Path, code_source: Path) -> None:
    manifest = build_manifest(_project(tmp_path / "proj"), max_bytes=10 << 20)
    store = _store(tmp_path, code_source, FailingUploadExecutor())
    with pytest.raises(RunStoreError, match="connection lost"):
        store.create_run(SPEC, "doomed", "#!/bin/bash\n", snapshot=manifest)
    assert os.listdir(tmp_path / "runs") == []
    assert store.last_upload is None


def test_a_file_gone_since_the_manifest_leaves_no_run(tmp_path: Path, code_source: Path) -> None:
    project = _project(tmp_path / "proj")
    manifest = build_manifest(project, max_bytes=10 << 20)
    (project / "train.py").unlink()  # deleted between plan and submit
    store = _store(tmp_path, code_source)
    with pytest.raises(RunStoreError, match=r"train\.py went away"):
        store.create_run(SPEC, "doomed", "#!/bin/bash\n", snapshot=manifest)
    assert os.listdir(tmp_path / "runs") == []


def test_the_script_runner_is_copied_when_the_package_has_it(
    tmp_path: Path, code_source: Path
) -> None:
    runner = code_source / "scriptrun"
    (runner / "__pycache__").mkdir(parents=True)
    (runner / "__init__.py").write_text("")
    (runner / "report.py").write_text("def report_epoch(): ...\n")
    (runner / "__pycache__" / "report.cpython-311.pyc").write_bytes(b"\0")
    run = _store(tmp_path, code_source).create_run(SPEC, "s", "#!/bin/bash\n")
    code = Path(run.path) / "code"
    files = sorted(p.relative_to(code).as_posix() for p in code.rglob("*") if p.is_file())
    assert files == [
        "ddp_tui/__init__.py",
        "ddp_tui/scriptrun/__init__.py",
        "ddp_tui/scriptrun/report.py",
        "ddp_tui/trainer/__init__.py",
        "ddp_tui/trainer/sub/x.py",
        "ddp_tui/trainer/train.py",
        "ddp_tui_report.py",
    ]
    assert (code / "ddp_tui_report.py").read_bytes() == (runner / "report.py").read_bytes()


def test_a_create_sweeps_the_half_made_directories_of_dead_creates(
    tmp_path: Path, code_source: Path
) -> None:
    store = _store(tmp_path, code_source)
    root = tmp_path / "runs"
    root.mkdir()
    dead = root / ".20250101-000000-killed-0a1b.tmp"  # a kill -9 mid-upload left it
    young = root / ".20250101-000001-alive-0a1c.tmp"  # another instance, uploading now
    for d in (dead, young):
        (d / "code").mkdir(parents=True)
    old = time.time() - HALF_MADE_SEC - 60
    os.utime(dead, (old, old))
    store.create_run(SPEC, "next", "#!/bin/bash\n")
    assert not dead.exists() and young.is_dir()
