"""Run commands and touch files on the machine that holds the runs.

One interface, two implementations: :class:`LocalExecutor` here, and the SSH one in
``ssh/``. Everything that talks to a cluster goes through an ``Executor`` so the
same code serves the login node and a laptop.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat as stat_mod
import subprocess
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ddp_tui.errors import DdpTuiError

#: What :meth:`Executor.upload_tree` leaves out: byte-code caches, rebuilt on the target.
CACHE_DIRS = frozenset({"__pycache__"})
CACHE_SUFFIXES = (".pyc", ".pyo")


def walk_files(
    root: Path,
    *,
    skip_dirs: Collection[str] = CACHE_DIRS,
    skip_suffixes: tuple[str, ...] = CACHE_SUFFIXES,
    on_skip: Callable[[str, str], None] | None = None,
) -> Iterator[tuple[str, str]]:
    """Every file under the local directory ``root`` as (path, POSIX path relative to
    ``root``), sorted, without the directories named in ``skip_dirs`` or the files ending
    in ``skip_suffixes``. Symlinked directories are not entered (they could loop); a
    symlink to a file is listed like a file. ``on_skip(arcname, why)`` hears of each
    directory (``dir/``) or file left out, ``why`` being "pattern" or "link"."""
    for current, dirs, files in os.walk(root):
        rel = os.path.relpath(current, root)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        kept = []
        for d in sorted(dirs):
            if d in skip_dirs:
                if on_skip is not None:
                    on_skip(f"{prefix}{d}/", "pattern")
            elif os.path.islink(os.path.join(current, d)):
                if on_skip is not None:
                    on_skip(f"{prefix}{d}/", "link")
            else:
                kept.append(d)
        dirs[:] = kept
        for name in sorted(files):
            if not name.endswith(skip_suffixes):
                yield os.path.join(current, name), prefix + name
            elif on_skip is not None:
                on_skip(prefix + name, "pattern")


def check_arcname(arcname: str) -> str:
    """``arcname`` if it is a plain relative POSIX path (no ``..``, not absolute), so an
    upload can never write outside its destination."""
    parts = arcname.split("/")
    if not arcname or arcname.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"not a relative file name: {arcname!r}")
    return arcname


class ExecutorError(DdpTuiError):
    """The executor itself failed: a lost connection, a missing program, a timeout."""

    title = "Connection"


class CommandTimeout(ExecutorError):
    """A command ran past its timeout and was killed."""


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime: float
    is_dir: bool
    inode: int = 0


@dataclass(frozen=True)
class FileRead:
    """A request for the bytes of ``path`` from ``offset`` (at most ``max_bytes``).

    A negative ``offset`` asks for the file's last ``-offset`` bytes: a tail in one round
    trip, without knowing the size first (a diagnosis reads only the ends of logs).
    """

    path: str
    offset: int = 0
    max_bytes: int | None = None


@dataclass(frozen=True)
class ReadResult:
    """What a :class:`FileRead` found; ``stat`` is None when the file does not exist, or
    when it could not be read: then ``error`` says why (permission denied, a symlink loop),
    so that one unreadable file of one run never fails the batch of every run."""

    request: FileRead
    data: bytes
    stat: FileStat | None = None
    error: str = ""


@dataclass
class Batch:
    """Commands and file reads that a refresh needs, answered together.

    Over SSH the whole batch is one round trip; locally it is a plain loop.
    """

    commands: list[Sequence[str]] = field(default_factory=list)
    reads: list[FileRead] = field(default_factory=list)


@dataclass
class BatchResult:
    commands: list[CommandResult]
    reads: list[ReadResult]


class Executor(ABC):
    """Where commands run and run directories live."""

    #: Shown in the header: "local", or "user@host".
    description: str = "local"

    @abstractmethod
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        """Run ``argv`` (never a shell string) and return its exit code and output."""

    @abstractmethod
    def read_range(self, path: str, offset: int = 0, max_bytes: int | None = None) -> bytes:
        """Bytes of ``path`` from ``offset``; raises FileNotFoundError if absent."""

    @abstractmethod
    def write_atomic(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write ``path`` so that readers see the old or the new content, never half."""

    @abstractmethod
    def makedirs(self, path: str) -> None:
        """Create ``path`` and its parents; existing is fine."""

    @abstractmethod
    def listdir(self, path: str) -> list[str]:
        """Names in ``path``; raises FileNotFoundError if absent."""

    @abstractmethod
    def stat(self, path: str) -> FileStat | None:
        """Size and mtime of ``path``, or None when it does not exist."""

    @abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst`` atomically (same filesystem)."""

    @abstractmethod
    def remove_tree(self, path: str) -> None:
        """Delete ``path`` recursively; absent is fine."""

    @abstractmethod
    def upload_files(self, files: Sequence[tuple[str, str]], dst: str) -> int:
        """Copy each local file ``path`` to ``dst/arcname`` on the target, given as
        (path, arcname) pairs (arcnames relative, POSIX), making the directories on the
        way and keeping the modes; symlinks are followed. Returns the bytes sent."""

    def upload_tree(self, local_src: Path, dst: str) -> None:
        """Copy the local directory ``local_src`` (without ``__pycache__``/``*.pyc``)
        into ``dst`` on the target, merging with what is there."""
        if not Path(local_src).is_dir():
            raise FileNotFoundError(errno.ENOENT, "not a directory", str(local_src))
        self.upload_files(list(walk_files(Path(local_src))), dst)

    def symlink(self, target: str, link: str) -> None:
        """Make ``link`` a symbolic link to ``target`` (a path on the target machine, kept
        as given); raises OSError where ``link`` exists. An adopted run's first attempt's
        logs are links to where its job wrote them."""
        raise ExecutorError(f"{self.description}: cannot make symbolic links here")

    def append(self, path: str, data: bytes) -> None:
        """Append ``data`` to ``path`` (read-modify-write; small files only)."""
        try:
            old = self.read_range(path)
        except FileNotFoundError:
            old = b""
        self.write_atomic(path, old + data)

    def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
        """Answer every command and read of ``batch``; subclasses make it one round trip."""
        results = [self.run(argv, timeout=timeout) for argv in batch.commands]
        reads: list[ReadResult] = []
        for req in batch.reads:
            try:
                st = self.stat(req.path)
            except OSError as exc:  # a symlink loop, a directory that cannot be searched
                reads.append(ReadResult(req, b"", None, exc.strerror or str(exc)))
                continue
            offset = req.offset if st is None or req.offset >= 0 else max(0, st.size + req.offset)
            if st is None or st.is_dir or offset >= st.size or req.max_bytes == 0:
                # Nothing new: a stat is far cheaper than an open (refresh polls many files).
                reads.append(ReadResult(req, b"", st))
                continue
            try:
                data = self.read_range(req.path, offset, req.max_bytes)
            except FileNotFoundError:
                reads.append(ReadResult(req, b"", None))
                continue
            except OSError as exc:  # permission denied: this file, not the whole batch
                reads.append(ReadResult(req, b"", None, exc.strerror or str(exc)))
                continue
            reads.append(ReadResult(req, data, st))
        return BatchResult(results, reads)

    def interactive(self, argv: Sequence[str], *, cwd: str | None = None) -> int:
        """Run ``argv`` (never a shell string) in ``cwd`` with the user's terminal: a
        shell. It reads the keys and draws on the screen until it exits; returns its exit
        status. Call it from the main thread, with the terminal free (the app suspended)."""
        raise ExecutorError(f"{self.description}: no interactive commands here")

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op locally
        """Release connections."""

    def expand_home(self, path: str) -> str:
        """``path`` with a leading ``~`` replaced by the target's home directory."""
        return os.path.expanduser(path)

    def which(self, program: str) -> bool:
        """Whether ``program`` is on the target's PATH."""
        res = self.run(["sh", "-c", 'command -v "$0" >/dev/null 2>&1', program], timeout=10)
        return res.ok


class LocalExecutor(Executor):
    """Commands and files on this machine."""

    description = "local"

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        full_env = None
        if env is not None:
            full_env = dict(os.environ)
            full_env.update(env)
        if cwd is not None and not os.path.isdir(cwd):
            raise ExecutorError(f"{argv[0]}: working directory {cwd} does not exist")
        try:
            # Never the app's terminal: a command that reads stdin must not eat keystrokes.
            proc = subprocess.run(
                list(argv),
                input=stdin if stdin is not None else b"",
                capture_output=True,
                timeout=timeout,
                env=full_env,
                cwd=cwd,
                check=False,
            )
        except FileNotFoundError as exc:
            raise ExecutorError(f"{argv[0]}: command not found") from exc
        except subprocess.TimeoutExpired as exc:
            raise CommandTimeout(f"{argv[0]} did not finish within {timeout:g} s") from exc
        return CommandResult(
            tuple(argv),
            proc.returncode,
            proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"),
        )

    def interactive(self, argv: Sequence[str], *, cwd: str | None = None) -> int:
        """A process of this machine on this process's terminal (see
        :func:`ddp_tui.remote.backends.terminal.run_on_terminal`)."""
        from ddp_tui.remote.backends.terminal import run_on_terminal

        return run_on_terminal(argv, cwd=cwd)

    def read_range(self, path: str, offset: int = 0, max_bytes: int | None = None) -> bytes:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read() if max_bytes is None else fh.read(max_bytes)

    def write_atomic(self, path: str, data: bytes, mode: int = 0o644) -> None:
        directory = os.path.dirname(path) or "."
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def stat(self, path: str) -> FileStat | None:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return FileStat(st.st_size, st.st_mtime, stat_mod.S_ISDIR(st.st_mode), st.st_ino)

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def remove_tree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def upload_files(self, files: Sequence[tuple[str, str]], dst: str) -> int:
        sent = 0
        made: set[str] = set()
        for path, arcname in files:
            target = os.path.join(dst, *check_arcname(arcname).split("/"))
            parent = os.path.dirname(target)
            if parent not in made:
                os.makedirs(parent, exist_ok=True)
                made.add(parent)
            shutil.copy2(path, target)
            sent += os.path.getsize(target)
        return sent

    def symlink(self, target: str, link: str) -> None:
        os.symlink(target, link)

    def append(self, path: str, data: bytes) -> None:
        # O_APPEND writes of one small line are atomic on local filesystems.
        with open(path, "ab") as fh:
            fh.write(data)
            fh.flush()
