"""The code snapshot of a user's project: which files go into ``<run>/project/``.

:func:`build_manifest` looks only at the app's machine (the project lives where the user
edits it; the cluster sees it first in the upload). In a git work tree the file list is
git's own (``.gitignore`` respected, untracked-but-not-ignored files included, the commit
and the dirty flag recorded); elsewhere the directory is walked. Either way caches,
virtual environments and checkpoints are left out, and a snapshot above the size cap is
refused with the largest files named. The run directory's ``snapshot.json`` is
:meth:`SnapshotManifest.to_json`. See docs/architecture.md ("The run directory").
"""

from __future__ import annotations

import heapq
import os
import socket
import stat as stat_mod
import subprocess
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddp_tui.errors import DdpTuiError
from ddp_tui.remote.backends.executor import walk_files

#: One MB as ``snapshot_max_mb`` counts it: ``max_bytes = snapshot_max_mb * MB``.
MB = 1 << 20
#: Past this many files the walk stops: a home directory given by mistake must be
#: refused in seconds, not listed for minutes.
MAX_FILES = 100_000
#: Past ``max_bytes * EARLY_STOP_FACTOR`` the walk stops too; the report says "more than".
EARLY_STOP_FACTOR = 2
#: How many of the largest files the too-large message names.
LARGEST = 5
#: How many left-out paths ``snapshot.json`` names (the counts per reason cover the rest):
#: enough for the diagnosis to match a missing file, bounded for a repository that
#: ignores thousands of generated files.
MAX_EXCLUDED = 200
#: Why a path was left out of the snapshot (``snapshot.json`` ``excluded.counts``' keys).
EXCLUDED_GITIGNORE = "gitignore"  # git ignores it (.gitignore, .git/info/exclude, global)
EXCLUDED_PATTERN = "pattern"  # SKIP_DIRS / SKIP_SUFFIXES: caches, environments, checkpoints
EXCLUDED_LINK = "link"  # a link out of the project or a dangling one, a fifo, a socket

# Caches and checkpoints are outputs, not code: they are rebuilt or rewritten by the run
# itself, are often far bigger than the code, and a stale checkpoint copied into a fresh
# run could even be resumed from by mistake. Virtual environments are tied to the machine
# they were made on and are useless on the cluster. So these are never snapshotted, even
# when git tracks them.
SKIP_DIRS = frozenset(
    {
        ".git",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
        ".venv",
        "venv",
        "checkpoints",
        "lightning_logs",
        "wandb",
    }
)
SKIP_SUFFIXES = (".pyc", ".pyo", ".ckpt")

# git must not take the index lock for a read-only status (the user's own git may be
# running), and must never wait for a pager or a credential prompt.
_GIT_ENV = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat"}


class SnapshotError(DdpTuiError):
    """The project directory cannot be snapshotted (missing, unreadable)."""

    title = "Snapshot"


class SnapshotTooLarge(SnapshotError):
    """The snapshot would be bigger than ``snapshot_max_mb`` (or hold too many files)."""


@dataclass(frozen=True)
class SnapshotManifest:
    """What a snapshot holds: every file as (absolute local path, relative arcname)."""

    #: The project directory, absolute, as the user named it.
    source: str
    files: tuple[tuple[str, str], ...]
    total_bytes: int
    #: ``git rev-parse HEAD``; None outside git or in a repository with no commit yet.
    commit: str | None
    #: Uncommitted changes under the project directory; None outside git.
    dirty: bool | None
    #: The largest files, (arcname, bytes), largest first.
    largest: tuple[tuple[str, int], ...]
    #: What was left out: the first :data:`MAX_EXCLUDED` (arcname, reason), sorted; a
    #: directory left out whole is one entry ending in ``/``.
    excluded: tuple[tuple[str, str], ...] = ()
    #: How many paths each reason left out, all of them (``EXCLUDED_*``).
    excluded_counts: tuple[tuple[str, int], ...] = ()

    @property
    def file_count(self) -> int:
        return len(self.files)

    def summary(self, upload_sec: float | None = None) -> str:
        """``"12 files, 0.3 MB"`` (with ``", uploaded in 0.4 s"`` when timed)."""
        text = f"{self.file_count} files, {_mb(self.total_bytes)} MB"
        return text if upload_sec is None else f"{text}, uploaded in {upload_sec:.1f} s"

    def to_json(self, *, upload_sec: float | None = None) -> dict[str, Any]:
        """The run directory's ``snapshot.json``; ``host`` is the app's machine, where
        ``source`` lives."""
        return {
            "source": self.source,
            "host": socket.gethostname(),
            "files": self.file_count,
            "bytes": self.total_bytes,
            "commit": self.commit,
            "dirty": self.dirty,
            "upload_sec": None if upload_sec is None else round(upload_sec, 3),
            # Read by the diagnosis: a FileNotFoundError for one of these is the snapshot's.
            "excluded": {
                "paths": [{"path": arc, "reason": why} for arc, why in self.excluded],
                "counts": dict(self.excluded_counts),
            },
        }


def build_manifest(project_dir: Path, *, max_bytes: int) -> SnapshotManifest:
    """The files of ``project_dir`` to snapshot; raises :class:`SnapshotTooLarge` above
    ``max_bytes`` and :class:`SnapshotError` when the directory is missing."""
    root = Path(os.path.abspath(os.path.expanduser(project_dir)))
    if not root.exists():
        raise SnapshotError(f"the project directory {root} does not exist")
    if not root.is_dir():
        raise SnapshotError(f"the project directory {root} is not a directory")
    real_root = root.resolve()
    listed = _git_listing(root)
    left_out = _LeftOut()
    if listed is None:
        candidates: Iterable[tuple[str, str]] = walk_files(
            root, skip_dirs=SKIP_DIRS, skip_suffixes=SKIP_SUFFIXES, on_skip=left_out.add
        )
        commit: str | None = None
        dirty: bool | None = None
    else:
        candidates = _from_git(root, listed, left_out)
        commit, dirty = _git_state(root)
        for arc in _git_ignored(root):
            left_out.add(arc, EXCLUDED_GITIGNORE)
    files: list[tuple[str, str]] = []
    sizes: list[tuple[int, str]] = []  # a min-heap of the largest files seen
    total = 0
    stop_bytes = max(max_bytes, 1) * EARLY_STOP_FACTOR
    stopped = False
    for path, arc in candidates:
        size = _size_inside(path, real_root)
        if size is None:
            left_out.add(arc, EXCLUDED_LINK)
            continue
        files.append((path, arc))
        total += size
        if len(sizes) < LARGEST:
            heapq.heappush(sizes, (size, arc))
        else:
            heapq.heappushpop(sizes, (size, arc))
        if total > stop_bytes or len(files) >= MAX_FILES:
            stopped = True
            break
    largest = tuple((arc, size) for size, arc in sorted(sizes, key=lambda s: (-s[0], s[1])))
    if total > max_bytes or stopped:
        raise SnapshotTooLarge(
            _too_large(root, total, len(files), max_bytes, largest, stopped, git=listed is not None)
        )
    files.sort(key=lambda f: f[1])
    return SnapshotManifest(
        str(root),
        tuple(files),
        total,
        commit,
        dirty,
        largest,
        excluded=tuple(sorted(left_out.paths)),
        excluded_counts=tuple(sorted(left_out.counts.items())),
    )


class _LeftOut:
    """The paths left out of a snapshot: the first :data:`MAX_EXCLUDED`, and every count."""

    def __init__(self) -> None:
        self.paths: list[tuple[str, str]] = []
        self.counts: dict[str, int] = {}

    def add(self, arc: str, reason: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        if len(self.paths) < MAX_EXCLUDED:
            self.paths.append((arc, reason))

    def under(self, prefix: str) -> Callable[[str, str], None]:
        """:meth:`add` for paths relative to the directory ``prefix`` of the project."""
        return lambda arc, reason: self.add(prefix + arc, reason)


def _mb(size: int) -> str:
    return f"{size / MB:.1f}"


def _size(size: int) -> str:
    """A file's size for a person: ``3.2 MB``, or ``12 kB`` below a tenth of a MB."""
    return f"{_mb(size)} MB" if size >= MB // 10 else f"{-(-size // 1024)} kB"


def _too_large(
    root: Path,
    total: int,
    count: int,
    max_bytes: int,
    largest: tuple[tuple[str, int], ...],
    stopped: bool,
    *,
    git: bool,
) -> str:
    if stopped and count >= MAX_FILES:
        what = f"more than {MAX_FILES} files ({_mb(total)} MB so far)"
    elif stopped:
        what = f"more than {_mb(total)} MB"
    else:
        what = f"{_mb(total)} MB in {count} files"
    names = ", ".join(f"{arc} ({_size(size)})" for arc, size in largest)
    # Only a git work tree honours .gitignore; elsewhere the files must move out.
    leave_out = (
        "add them to .gitignore"
        if git
        else f"move them out of {root} (or make it a git repository and list them in .gitignore)"
    )
    cap = _mb(max_bytes).removesuffix(".0")
    return (
        f"the project directory {root} holds {what}, above the snapshot cap of {cap} MB. "
        f"Largest files: {names}. To leave them out, {leave_out}; "
        "to allow more, raise snapshot_max_mb (--snapshot-max-mb)."
    )


def _size_inside(path: str, real_root: Path) -> int | None:
    """The size of a regular file, following a symlink only when it stays inside the
    project; None for what is skipped (dangling or outward links, directories reached
    through a link, fifos and sockets, files deleted since they were listed)."""
    try:
        st = os.lstat(path)
        if stat_mod.S_ISLNK(st.st_mode):
            target = Path(path).resolve(strict=True)
            # An outward link would copy files the user never put in the project (and
            # the same files again on every run); a link to a directory could loop.
            if not target.is_relative_to(real_root):
                return None
            st = os.stat(path)
    except (OSError, RuntimeError):  # gone, dangling, or a symlink loop
        return None
    if not stat_mod.S_ISREG(st.st_mode):
        return None
    if not os.access(path, os.R_OK):
        raise SnapshotError(f"cannot read {path}: permission denied")
    return st.st_size


def _skipped(arc: str) -> bool:
    *dirs, name = arc.split("/")
    return name.endswith(SKIP_SUFFIXES) or any(d in SKIP_DIRS for d in dirs)


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    """``git -C root ARGS``, or None when git is not installed."""
    try:
        return subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **_GIT_ENV},
            check=False,
            timeout=120,
        )
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None


def _git_listing(root: Path) -> list[str] | None:
    """The paths git would snapshot, relative to ``root``; None outside a work tree (or
    where git refuses the repository, such as one owned by another user)."""
    inside = _git(root, "rev-parse", "--is-inside-work-tree")
    if inside is None or inside.returncode != 0 or inside.stdout.strip() != b"true":
        return None
    res = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if res is None or res.returncode != 0:
        return None
    # -z: names are raw bytes, relative to root (git lists only what is under it).
    return sorted({os.fsdecode(p) for p in res.stdout.split(b"\0") if p})


def _git_ignored(root: Path) -> list[str]:
    """What git ignores under ``root``, relative to it; a directory ignored whole is one
    entry ending in ``/`` (``--directory``: git does not list a huge ignored tree)."""
    res = _git(root, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
    if res is None or res.returncode != 0:
        return []
    return sorted(os.fsdecode(p) for p in res.stdout.split(b"\0") if p)


def _from_git(root: Path, listed: list[str], left_out: _LeftOut) -> Iterator[tuple[str, str]]:
    base = str(root)
    for rel in listed:
        # A trailing slash is an untracked nested repository; a submodule is listed as
        # its directory. git does not look inside either: walk them like any directory.
        rel = rel.rstrip("/")
        if _skipped(rel):
            left_out.add(rel, EXCLUDED_PATTERN)
            continue
        path = os.path.join(base, rel)  # strings, not Paths: this runs once per file
        if os.path.isdir(path) and not os.path.islink(path):
            for sub, arc in walk_files(
                Path(path),
                skip_dirs=SKIP_DIRS,
                skip_suffixes=SKIP_SUFFIXES,
                on_skip=left_out.under(f"{rel}/"),
            ):
                yield sub, f"{rel}/{arc}"
        else:
            yield path, rel


def _git_state(root: Path) -> tuple[str | None, bool | None]:
    head = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    commit = None
    if head is not None and head.returncode == 0:
        commit = head.stdout.decode().strip() or None  # exit 1 before the first commit
    status = _git(root, "status", "--porcelain", "--", ".")
    dirty = bool(status.stdout.strip()) if status and status.returncode == 0 else None
    return commit, dirty
