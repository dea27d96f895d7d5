"""An interactive command over the executor's SSH connection: a remote pty bridged to the
user's terminal (what ``ssh -t host cmd`` does), for a shell where a job runs.

The command gets a session channel of its own on the same connection (no second login),
a pty of the local terminal's type and size, and the keys as typed: the local terminal is
in raw mode while it runs (restored however the bridge ends). Window-size changes follow
(SIGWINCH -> ``window-change``). Returns the remote exit status.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import shlex
import signal
import sys
from collections.abc import Sequence
from types import FrameType

import paramiko

from ddp_tui.remote.backends.ssh.api import ConnectionLost
from ddp_tui.remote.backends.ssh.transport import CONNECTION_TROUBLE, Link
from ddp_tui.remote.backends.terminal import (
    raw_mode,
    signals_handled,
    terminal_fd,
    terminal_size,
)

#: Bytes read at a time from either side.
CHUNK = 1 << 15
#: The exit status when the remote side gave none (killed by a signal), as ``ssh`` does.
NO_STATUS = 255


def remote_command(argv: Sequence[str], *, cwd: str | None = None) -> str:
    """The command line for the remote login shell: ``argv`` quoted, run in ``cwd``."""
    if not argv:
        raise ValueError("an interactive command needs a non-empty argv")
    command = "exec " + " ".join(shlex.quote(a) for a in argv)
    if cwd is not None:
        return f"cd -- {shlex.quote(cwd)} && {command}"
    return command


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])


class _Resized:
    """SIGWINCH noted through a pipe, so that the bridge's select wakes up for it (a flag
    alone would wait for the next key or output)."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.write_fd, False)

    def handler(self, signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):  # a full pipe: a wake-up is pending already
            os.write(self.write_fd, b"w")

    def drain(self) -> None:
        with contextlib.suppress(OSError):
            os.read(self.read_fd, 4096)

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self.write_fd)


def run_interactive(
    link: Link,
    command: str,
    *,
    label: str,
    stdin_fd: int | None = None,
    stdout_fd: int | None = None,
) -> int:
    """Run ``command`` through the remote login shell on a pty bridged to the local
    terminal (``stdin_fd``/``stdout_fd``, default: this process's own); its exit status."""
    in_fd = terminal_fd(sys.__stdin__, 0) if stdin_fd is None else stdin_fd
    out_fd = terminal_fd(sys.__stdout__, 1) if stdout_fd is None else stdout_fd
    columns, rows = terminal_size(out_fd)
    try:
        chan = link.transport.open_session(timeout=30.0)
    except CONNECTION_TROUBLE as exc:
        raise link.failure(exc, f"starting {label}") from None
    resized = _Resized()
    try:
        try:
            chan.get_pty(term=os.environ.get("TERM") or "vt100", width=columns, height=rows)
            chan.exec_command(command)
        except CONNECTION_TROUBLE as exc:
            raise link.failure(exc, f"starting {label}") from None
        # SIGWINCH is only heard in the main thread; elsewhere the size stays as it began.
        with raw_mode(in_fd), signals_handled({signal.SIGWINCH: resized.handler}):
            _bridge(chan, in_fd, out_fd, resized)
        status = chan.recv_exit_status()
    finally:
        chan.close()
        resized.close()
    if status == -1 and link.dead():
        link.lost(f"connection dropped while running {label}")
        raise ConnectionLost(
            f"connection to {link.description} lost while running {label}; reconnecting"
        )
    return NO_STATUS if status < 0 else status


def _bridge(chan: paramiko.Channel, in_fd: int, out_fd: int, resized: _Resized) -> None:
    """Copy keys to the channel and output to the terminal until the remote side closes."""
    reading_keys = True
    size = terminal_size(out_fd)
    chan_fd = chan.fileno()  # readable when output, an EOF or the close arrives
    while True:
        watched = [chan_fd, resized.read_fd]
        if reading_keys:
            watched.append(in_fd)
        try:
            ready, _, _ = select.select(watched, [], [], 1.0)
        except InterruptedError:  # pragma: no cover - PEP 475 retries select itself
            continue
        if resized.read_fd in ready:
            resized.drain()
            new = terminal_size(out_fd)
            if new != size:
                size = new
                with contextlib.suppress(*CONNECTION_TROUBLE):
                    chan.resize_pty(width=new[0], height=new[1])
        if chan_fd in ready or chan.closed:
            while chan.recv_stderr_ready():  # with a pty there is none; never leave it
                _write_all(out_fd, chan.recv_stderr(CHUNK))
            if chan.recv_ready() or chan.closed or chan.eof_received:
                data = chan.recv(CHUNK)
                if not data:
                    return
                _write_all(out_fd, data)
        if reading_keys and in_fd in ready:
            try:
                keys = os.read(in_fd, CHUNK)
            except OSError as exc:
                if exc.errno not in (errno.EIO, errno.EBADF):  # the terminal went away
                    raise
                keys = b""
            if keys:
                with contextlib.suppress(*CONNECTION_TROUBLE):
                    chan.sendall(keys)
            else:
                reading_keys = False
                with contextlib.suppress(*CONNECTION_TROUBLE):
                    chan.shutdown_write()
