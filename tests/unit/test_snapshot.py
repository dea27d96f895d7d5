"""The project snapshot's manifest, on real git repositories and plain directories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ddp_tui.errors import DdpTuiError
from ddp_tui.remote.store import snapshot as snapshot_mod
from ddp_tui.remote.store.snapshot import (
    MB,
    SnapshotError,
    SnapshotManifest,
    SnapshotTooLarge,
    build_manifest,
)

CAP = 10 * MB


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


def arcnames(manifest: SnapshotManifest) -> list[str]:
    return [arc for _, arc in manifest.files]


def write(path: Path, text: str = "x\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def make_outputs(root: Path) -> None:
    """What a project accumulates that is not code: caches, environments, checkpoints."""
    for name in (
        "__pycache__/train.cpython-311.pyc",
        "pkg/__pycache__/m.cpython-311.pyc",
        "stale.pyc",
        ".mypy_cache/x.json",
        ".pytest_cache/v",
        ".ruff_cache/c",
        "nb/.ipynb_checkpoints/a.ipynb",
        ".venv/bin/python",
        "venv/lib/site.py",
        "checkpoints/latest.pt",
        "lightning_logs/version_0/hparams.yaml",
        "wandb/run-1/files.txt",
        "model.ckpt",
        "sub/epoch=3.ckpt",
    ):
        write(root / name)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root / "train.py", "print('train')\n")
    write(root / "pkg" / "model.py", "M = 1\n")
    write(root / ".gitignore", "data/\n*.log\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return root


def test_git_listing_respects_gitignore_and_keeps_untracked_files(repo: Path) -> None:
    write(repo / "data" / "big.bin")
    write(repo / "out.log")
    write(repo / "new_module.py")  # untracked, not ignored: the script may import it
    write(repo / "pkg" / "deleted.py")
    git(repo, "add", "pkg/deleted.py")
    (repo / "pkg" / "deleted.py").unlink()  # tracked, deleted in the work tree
    make_outputs(repo)
    m = build_manifest(repo, max_bytes=CAP)
    assert arcnames(m) == [".gitignore", "new_module.py", "pkg/model.py", "train.py"]
    assert all(Path(path).is_absolute() and Path(path).is_file() for path, _ in m.files)
    assert m.total_bytes == sum(Path(path).stat().st_size for path, _ in m.files)
    assert m.source == str(repo)


def test_tracked_outputs_are_still_left_out(repo: Path) -> None:
    make_outputs(repo)
    git(repo, "add", "-f", "-A")
    git(repo, "commit", "-q", "-m", "oops, committed the checkpoints")
    assert arcnames(build_manifest(repo, max_bytes=CAP)) == [
        ".gitignore",
        "pkg/model.py",
        "train.py",
    ]


def test_commit_and_dirty_flag(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    clean = build_manifest(repo, max_bytes=CAP)
    assert (clean.commit, clean.dirty) == (head, False)
    write(repo / "train.py", "print('changed')\n")
    changed = build_manifest(repo, max_bytes=CAP)
    assert (changed.commit, changed.dirty) == (head, True)
    doc = changed.to_json(upload_sec=0.25)
    assert (doc["commit"], doc["dirty"], doc["files"], doc["upload_sec"]) == (head, True, 3, 0.25)


def test_a_subdirectory_of_a_repository_is_its_own_snapshot(repo: Path) -> None:
    write(repo / "pkg" / "extra.py")
    m = build_manifest(repo / "pkg", max_bytes=CAP)
    assert arcnames(m) == ["extra.py", "model.py"]
    assert m.commit == git(repo, "rev-parse", "HEAD").strip()
    assert m.dirty is True  # extra.py is untracked under pkg/


def test_a_repository_without_a_commit(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    write(root / "train.py")
    git(root, "init", "-q")
    m = build_manifest(root, max_bytes=CAP)
    assert arcnames(m) == ["train.py"]
    assert (m.commit, m.dirty) == (None, True)


def test_a_plain_directory_is_walked_without_the_outputs(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write(root / "train.py")
    write(root / "pkg" / "model.py")
    write(root / ".env.example")
    write(root / ".git" / "HEAD")  # a broken repository: git says no, the walk skips .git
    make_outputs(root)
    m = build_manifest(root, max_bytes=CAP)
    assert arcnames(m) == [".env.example", "pkg/model.py", "train.py"]
    assert (m.commit, m.dirty) == (None, None)
    assert m.summary() == "3 files, 0.0 MB"
    assert snapshot_mod._size(1500) == "2 kB"
    assert m.summary(1.26) == "3 files, 0.0 MB, uploaded in 1.3 s"


@pytest.mark.parametrize("in_git", [False, True])
def test_symlinks_inside_are_followed_outside_and_dangling_are_skipped(
    tmp_path: Path, in_git: bool
) -> None:
    outside = write(tmp_path / "secret.txt", "not part of the project\n")
    root = tmp_path / "proj"
    write(root / "train.py", "T = 1\n")
    write(root / "conf" / "base.yaml", "lr: 1\n")
    (root / "current.yaml").symlink_to("conf/base.yaml")
    (root / "leak.txt").symlink_to(outside)
    (root / "dangling.py").symlink_to("nowhere.py")
    (root / "conf_link").symlink_to("conf")  # a directory link: its files are there already
    (root / "up").symlink_to("..")  # would loop
    if in_git:
        git(root, "init", "-q")
    m = build_manifest(root, max_bytes=CAP)
    assert arcnames(m) == ["conf/base.yaml", "current.yaml", "train.py"]
    by_name = {arc: path for path, arc in m.files}
    assert Path(by_name["current.yaml"]).read_text() == "lr: 1\n"
    assert m.total_bytes == len("T = 1\n") + 2 * len("lr: 1\n")


@pytest.mark.parametrize("in_git", [False, True])
def test_above_the_cap_names_the_largest_files_and_the_option(tmp_path: Path, in_git: bool) -> None:
    root = tmp_path / "heavy"
    write(root / "train.py")
    for i, size in enumerate((300, 250, 200, 150, 120, 100)):
        (root / f"data{i}.bin").write_bytes(b"\0" * size * 1024)
    if in_git:
        git(root, "init", "-q")
    with pytest.raises(SnapshotTooLarge) as info:
        build_manifest(root, max_bytes=MB)
    message = str(info.value)
    assert str(root) in message
    assert "1.1 MB" in message and "cap of 1 MB" in message
    listed = "data0.bin (0.3 MB), data1.bin (0.2 MB), data2.bin (0.2 MB), data3.bin (0.1 MB), "
    assert listed + "data4.bin (0.1 MB)." in message and "data5.bin" not in message
    assert "snapshot_max_mb" in message and "--snapshot-max-mb" in message
    assert (".gitignore" in message) and (("move them out" in message) != in_git)
    assert isinstance(info.value, DdpTuiError) and info.value.title == "Snapshot"


def test_a_huge_directory_is_refused_without_walking_all_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "home"
    for i in range(30):
        (root / f"d{i}").mkdir(parents=True)
        (root / f"d{i}" / "f.bin").write_bytes(b"\0" * 1000)
    seen: list[str] = []
    real = snapshot_mod._size_inside

    def counting(path: str, real_root: Path) -> int | None:
        seen.append(path)
        return real(path, real_root)

    monkeypatch.setattr(snapshot_mod, "_size_inside", counting)
    with pytest.raises(SnapshotTooLarge, match=r"more than 0\.0 MB"):
        build_manifest(root, max_bytes=2500)  # stops past twice the cap: the 6th file
    assert len(seen) == 6
    monkeypatch.setattr(snapshot_mod, "MAX_FILES", 10)
    seen.clear()
    with pytest.raises(SnapshotTooLarge, match="more than 10 files"):
        build_manifest(root, max_bytes=CAP)
    assert len(seen) == 10


def test_a_missing_project_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match=f"{tmp_path / 'nope'} does not exist"):
        build_manifest(tmp_path / "nope", max_bytes=CAP)
    write(tmp_path / "file.py")
    with pytest.raises(SnapshotError, match="is not a directory"):
        build_manifest(tmp_path / "file.py", max_bytes=CAP)


def test_a_fifo_is_not_a_file_to_copy(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    write(root / "train.py")
    os.mkfifo(root / "pipe")  # copying it would block forever
    assert arcnames(build_manifest(root, max_bytes=CAP)) == ["train.py"]


def test_a_nested_repository_is_walked_without_its_git_directory(repo: Path) -> None:
    nested = repo / "vendor" / "lib"
    write(nested / "lib.py", "L = 1\n")
    write(nested / "__pycache__" / "lib.cpython-311.pyc")
    git(nested, "init", "-q")  # git lists it as "vendor/lib/" and does not look inside
    names = arcnames(build_manifest(repo, max_bytes=CAP))
    assert "vendor/lib/lib.py" in names
    assert not any(n.startswith("vendor/lib/") and n != "vendor/lib/lib.py" for n in names)
