"""Session channels: the "signal" request, and the persistent batch helper's channel."""

from __future__ import annotations

import contextlib
import threading
import time

import paramiko

from ddp_tui.remote.backends.ssh.batch import HELPER_HELLO, FrameReader

#: Bytes asked per recv on command channels.
RECV = 1 << 20


def send_signal(chan: paramiko.Channel, name: str) -> None:
    """Ask sshd to signal the command's process group (RFC 4254 "signal" request)."""
    transport = chan.get_transport()
    if transport is None:
        return
    msg = paramiko.Message()
    msg.add_byte(paramiko.common.cMSG_CHANNEL_REQUEST)
    msg.add_int(chan.remote_chanid)
    msg.add_string("signal")
    msg.add_boolean(False)
    msg.add_string(name)
    with contextlib.suppress(Exception):
        # paramiko has no public API for the "signal" channel request.
        transport._send_user_message(msg)  # type: ignore[attr-defined]


class HelperGone(Exception):
    """The persistent helper's channel ended before a full answer."""

    def __init__(self, greeted: bool) -> None:
        super().__init__("helper ended")
        self.greeted = greeted


class BatchServer:
    """A long-lived ``python3`` helper on one session channel: each batch is one request
    line and one framed answer, without a new channel, login shell or interpreter."""

    def __init__(self, chan: paramiko.Channel) -> None:
        self.chan = chan
        self.greeted = False
        self._pending = bytearray()
        self._stderr = bytearray()
        self._drain = threading.Thread(
            target=self._drain_stderr, name="ssh-helper-err", daemon=True
        )
        self._drain.start()

    def _drain_stderr(self) -> None:
        while True:
            data = self.chan.recv_stderr(RECV)
            if not data:
                return
            self._stderr += data
            del self._stderr[:-4096]

    @property
    def stderr_tail(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace").strip()

    def usable(self) -> bool:
        return not self.chan.closed and not self.chan.eof_received

    def request(self, payload: bytes, nonce: str, timeout: float) -> bytes:
        """Send one request and return its framed answer; raises TimeoutError or HelperGone."""
        deadline = time.monotonic() + timeout
        try:
            self.chan.sendall(payload)
        except OSError:
            # What runs there (no python3, a ForceCommand) may end before the request is
            # even sent: the same as ending before the answer, not a connection failure.
            if not self.chan.closed:
                raise
            raise HelperGone(self.greeted) from None
        reader = FrameReader(nonce)
        while True:
            if not self.greeted:
                at = self._pending.find(HELPER_HELLO)
                if at >= 0:
                    del self._pending[: at + len(HELPER_HELLO)]
                    self.greeted = True
            if self.greeted:
                end = reader.complete(self._pending)
                if end is not None:
                    answer = bytes(self._pending[:end])
                    del self._pending[:end]
                    return answer
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self.chan.settimeout(remaining)
            data = self.chan.recv(RECV)  # TimeoutError past the deadline
            if not data:
                raise HelperGone(self.greeted)
            self._pending += data

    def close(self, kill: bool = False) -> None:
        if kill:
            send_signal(self.chan, "KILL")
        with contextlib.suppress(Exception):
            self.chan.close()
