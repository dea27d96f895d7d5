"""What the project snapshot left out, and why, as ``snapshot.json`` records it for the
diagnosis (a file the script cannot find because git ignores it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddp_tui.remote.store import snapshot as snapshot_mod
from ddp_tui.remote.store.snapshot import MB, build_manifest
from tests.unit.test_snapshot import git, repo, write

__all__ = ["repo"]  # the fixture, shared with test_snapshot.py

CAP = 10 * MB


def test_ignored_files_and_skipped_outputs_are_recorded_with_their_reason(repo: Path) -> None:
    write(repo / "data" / "train.bin")
    write(repo / "data" / "valid.bin")
    write(repo / "run.log")
    write(repo / "checkpoints" / "latest.pt")
    git(repo, "add", "-f", "checkpoints/latest.pt")  # tracked, still an output
    os.symlink("/etc/hostname", repo / "outside")  # a link out of the project
    m = build_manifest(repo, max_bytes=CAP)
    assert dict(m.excluded) == {
        "data/": "gitignore",  # a directory ignored whole is one entry
        "run.log": "gitignore",
        "checkpoints/latest.pt": "pattern",
        "outside": "link",
    }
    assert dict(m.excluded_counts) == {"gitignore": 2, "pattern": 1, "link": 1}
    doc = m.to_json()["excluded"]
    assert {"path": "data/", "reason": "gitignore"} in doc["paths"]
    assert doc["counts"] == {"gitignore": 2, "link": 1, "pattern": 1}


def test_the_list_is_bounded_and_the_counts_are_not(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(7):
        write(repo / f"out{i}.log")
    monkeypatch.setattr(snapshot_mod, "MAX_EXCLUDED", 3)
    m = build_manifest(repo, max_bytes=CAP)
    assert len(m.excluded) == 3
    assert dict(m.excluded_counts) == {"gitignore": 7}


def test_a_clean_project_left_nothing_out(repo: Path) -> None:
    m = build_manifest(repo, max_bytes=CAP)
    assert m.excluded == () and m.to_json()["excluded"] == {"paths": [], "counts": {}}


def test_a_plain_directory_records_the_outputs_it_skipped(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write(root / "train.py")
    write(root / "checkpoints" / "pretrained.pt")
    write(root / "pkg" / "__pycache__" / "m.cpython-311.pyc")
    write(root / "model.ckpt")
    (root / "elsewhere").symlink_to(tmp_path)  # a linked directory is never entered
    m = build_manifest(root, max_bytes=CAP)
    assert [arc for _, arc in m.files] == ["train.py"]
    assert dict(m.excluded) == {
        "checkpoints/": "pattern",
        "pkg/__pycache__/": "pattern",
        "model.ckpt": "pattern",
        "elsewhere/": "link",
    }


def test_inside_a_nested_repository_the_skipped_paths_keep_their_place(repo: Path) -> None:
    write(repo / "vendor" / "lib" / "code.py")
    write(repo / "vendor" / "lib" / "checkpoints" / "w.pt")
    git(repo / "vendor" / "lib", "init", "-q")
    m = build_manifest(repo, max_bytes=CAP)
    assert "vendor/lib/code.py" in [arc for _, arc in m.files]
    assert ("vendor/lib/checkpoints/", "pattern") in m.excluded
