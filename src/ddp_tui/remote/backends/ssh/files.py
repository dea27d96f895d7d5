"""Files on the remote host: reads and writes over the link's one SFTP session, and many
files at once (upload, removal) through one command each."""

from __future__ import annotations

import contextlib
import errno
import io
import posixpath
import secrets
import stat as stat_mod
import tarfile
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

import paramiko

from ddp_tui.remote.backends.executor import CommandResult, ExecutorError, FileStat, check_arcname
from ddp_tui.remote.backends.ssh.transport import CONNECTION_TROUBLE, Link

T = TypeVar("T")


def sftp_call(link: Link, timeout: float, what: str, call: Callable[[paramiko.SFTPClient], T]) -> T:
    """Run ``call`` on ``link``'s SFTP session (one at a time). An SFTP status (no such
    file, permission denied) comes back as the OSError it is; anything else is sorted
    into a lost connection or a plain failure."""
    with link.sftp_lock:
        try:
            sftp = link.sftp(timeout)
        except ExecutorError:
            raise
        except CONNECTION_TROUBLE as exc:
            raise link.failure(exc, what) from None
        try:
            return call(sftp)
        except CONNECTION_TROUBLE as exc:
            chan = sftp.get_channel()
            channel_ok = chan is not None and not chan.closed
            if (
                isinstance(exc, OSError)
                and not isinstance(exc, TimeoutError)
                and channel_ok
                and link.transport.is_active()
            ):
                raise  # an SFTP status (no such file, permission denied, failure)
            link.drop_sftp()
            raise link.failure(exc, what) from None


class FileSession(Protocol):
    """What :class:`Transfer` needs from its executor."""

    description: str
    _home: str | None

    def expand_home(self, path: str) -> str: ...

    # Looked up on the executor for every operation (not bound once), so it stays the
    # one door all SFTP work goes through: tests count calls there.
    def _sftp_call(self, what: str, call: Callable[[paramiko.SFTPClient], T]) -> T: ...

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult: ...


class Transfer:
    """The file half of the executor interface, for one executor."""

    def __init__(self, session: FileSession) -> None:
        self._session = session

    def read_range(self, path: str, offset: int, max_bytes: int | None) -> bytes:
        if offset < 0 or (max_bytes is not None and max_bytes < 0):
            raise ValueError("offset and max_bytes must not be negative")
        remote = self._session.expand_home(path)

        def call(sftp: paramiko.SFTPClient) -> bytes:
            with sftp.open(remote, "rb") as fh:
                size = fh.stat().st_size or 0
                end = size if max_bytes is None else min(size, offset + max_bytes)
                planned = max(0, end - offset)
                fh.seek(offset)
                parts: list[bytes] = []
                got = 0
                if planned:
                    if planned > 65536:
                        fh.prefetch(offset + planned)  # pipelined reads
                    data = fh.read(planned)
                    parts.append(data)
                    got = len(data)
                # Bytes appended after the stat, as a local read to EOF would see them.
                while max_bytes is None or got < max_bytes:
                    want = 1 << 20 if max_bytes is None else min(1 << 20, max_bytes - got)
                    data = fh.read(want)
                    if not data:
                        break
                    parts.append(data)
                    got += len(data)
                return b"".join(parts)

        return self._session._sftp_call(f"reading {remote}", call)

    def write_atomic(self, path: str, data: bytes, mode: int) -> None:
        remote = self._session.expand_home(path)
        directory, base = posixpath.split(remote)
        tmp = posixpath.join(directory, f".tmp-{base}.{secrets.token_hex(6)}")

        def call(sftp: paramiko.SFTPClient) -> None:
            try:
                with sftp.open(tmp, "wb") as fh:
                    fh.set_pipelined(True)
                    fh.write(data)
                sftp.chmod(tmp, mode)
                sftp.posix_rename(tmp, remote)
            except BaseException:
                with contextlib.suppress(Exception):
                    sftp.remove(tmp)
                raise

        self._session._sftp_call(f"writing {remote}", call)

    def append(self, path: str, data: bytes) -> None:
        """Append with O_APPEND on the server (SFTP's append flag), so a small record
        such as a jobs.jsonl line is never lost or interleaved by a concurrent writer."""
        remote = self._session.expand_home(path)

        def call(sftp: paramiko.SFTPClient) -> None:
            with sftp.open(remote, "ab") as fh:
                fh.write(data)

        self._session._sftp_call(f"appending to {remote}", call)

    def makedirs(self, path: str) -> None:
        remote = self._session.expand_home(path)

        def is_dir(sftp: paramiko.SFTPClient, p: str) -> bool | None:
            try:
                return stat_mod.S_ISDIR(sftp.stat(p).st_mode or 0)
            except FileNotFoundError:
                return None

        def call(sftp: paramiko.SFTPClient) -> None:
            found = is_dir(sftp, remote)
            if found:
                return
            if found is False:
                raise FileExistsError(errno.EEXIST, "exists and is not a directory", remote)
            missing = [remote]
            current = remote
            while True:
                parent = posixpath.dirname(current.rstrip("/"))
                if parent in ("", "/", current):
                    break
                state = is_dir(sftp, parent)
                if state is False:
                    raise NotADirectoryError(errno.ENOTDIR, "not a directory", parent)
                if state:
                    break
                missing.append(parent)
                current = parent
            for directory in reversed(missing):
                try:
                    sftp.mkdir(directory)
                except OSError:
                    if not is_dir(sftp, directory):  # a concurrent mkdir is fine
                        raise

        self._session._sftp_call(f"creating {remote}", call)

    def listdir(self, path: str) -> list[str]:
        remote = self._session.expand_home(path)
        return self._session._sftp_call(
            f"listing {remote}", lambda sftp: sorted(sftp.listdir(remote))
        )

    def stat(self, path: str) -> FileStat | None:
        remote = self._session.expand_home(path)

        def call(sftp: paramiko.SFTPClient) -> FileStat | None:
            try:
                st = sftp.stat(remote)
            except FileNotFoundError:
                return None
            return FileStat(
                st.st_size or 0, float(st.st_mtime or 0), stat_mod.S_ISDIR(st.st_mode or 0), 0
            )

        return self._session._sftp_call(f"stat {remote}", call)

    def rename(self, src: str, dst: str) -> None:
        a, b = self._session.expand_home(src), self._session.expand_home(dst)
        self._session._sftp_call(f"renaming {a}", lambda sftp: sftp.posix_rename(a, b))

    def symlink(self, target: str, link: str) -> None:
        """SFTP's symlink. paramiko sends (target, link) in the order OpenSSH's server reads
        them (the reverse of the draft's): a link made here points where it should."""
        remote = self._session.expand_home(link)
        self._session._sftp_call(f"linking {remote}", lambda sftp: sftp.symlink(target, remote))

    def remove_tree(self, path: str) -> None:
        session = self._session
        remote = session.expand_home(path).rstrip("/")
        if remote in ("", ".", "..", "~") or remote == (session._home or "").rstrip("/"):
            raise ValueError(f"refusing to remove {path!r}")
        res = session.run(["rm", "-rf", "--", remote], timeout=300.0)
        if not res.ok:
            raise ExecutorError(f"could not remove {remote}: {res.stderr.strip()}")

    def upload_files(self, files: Sequence[tuple[str, str]], dst: str) -> int:
        """Copy local files to ``dst/arcname`` as one tar stream over one command: one
        round trip however many files, instead of several SFTP round trips per file.
        Returns the bytes of the stream."""
        remote = self._session.expand_home(dst)

        def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            return info

        buf = io.BytesIO()
        # dereference: a symlink is sent as the file it points to (the manifest decided
        # which links to follow); GNU tar creates the member's directories on the way.
        with tarfile.open(fileobj=buf, mode="w", dereference=True) as tar:
            for path, arcname in files:
                tar.add(path, arcname=check_arcname(arcname), recursive=False, filter=clean)
        stream = buf.getvalue()
        res = self._session.run(
            [
                "sh",
                "-c",
                'mkdir -p -- "$1" && exec tar -x -f - -C "$1" --no-same-owner',
                "ddp-tui-upload",
                remote,
            ],
            stdin=stream,
            # Five minutes, or longer for a big project on a slow link (256 kB/s).
            timeout=max(300.0, len(stream) / 256_000),
        )
        if not res.ok:
            raise ExecutorError(
                f"uploading {len(files)} files to {remote} on {self._session.description} "
                f"failed: {res.stderr.strip() or f'exit status {res.returncode}'}"
            )
        return len(stream)
