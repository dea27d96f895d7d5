"""Transports and ProxyJump hops: TCP (or ProxyCommand), the SSH handshake, and the
:class:`Link` that one successful login produces."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import paramiko

from ddp_tui.remote.backends.executor import ExecutorError
from ddp_tui.remote.backends.ssh.api import (
    ConnectFailed,
    ConnectionLost,
    ConnectTimeout,
    HostNotFound,
)
from ddp_tui.remote.backends.ssh.config import HostConfig

if TYPE_CHECKING:
    from ddp_tui.remote.backends.ssh.auth import AuthStrategy
    from ddp_tui.remote.backends.ssh.channels import BatchServer
    from ddp_tui.remote.backends.ssh.hostkeys import HostKeyPolicy

DEFAULT_CONNECT_TIMEOUT = 15.0
DEFAULT_KEEPALIVE = 30.0
#: How long paramiko waits on one authentication step; the user may be typing a code.
#: (sshd's LoginGraceTime, 120 s by default, ends it earlier.)
AUTH_STEP_TIMEOUT = 600.0
#: What a dead or dying connection raises from paramiko calls.
CONNECTION_TROUBLE = (paramiko.SSHException, EOFError, OSError)


class Link:
    """One authenticated chain of transports (jump hosts first) plus the SFTP session and
    the persistent batch helper that live on it.

    ``on_lost`` is the executor's hook for a dead link (it starts reconnecting); every
    user of the link reports through :meth:`lost` or :meth:`failure`.
    """

    def __init__(
        self,
        hops: list[HostConfig],
        transports: list[paramiko.Transport],
        keepalive: float,
        alive_count: int,
        *,
        description: str,
        on_lost: Callable[[Link, str], None],
    ) -> None:
        self.hops = hops
        self.transports = transports
        self.transport = transports[-1]
        self.keepalive = keepalive
        self.alive_count = alive_count
        self.description = description
        self._on_lost = on_lost
        self.sftp_lock = threading.Lock()
        self.closed = threading.Event()
        self._sftp: paramiko.SFTPClient | None = None
        #: The persistent batch helper; guarded by ``batch_lock``.
        self.batch_lock = threading.Lock()
        self.batch_server: BatchServer | None = None
        self.no_python = False

    def sftp(self, timeout: float) -> paramiko.SFTPClient:
        """The SFTP session, opened (again) when needed; hold ``sftp_lock``."""
        sftp = self._sftp
        if sftp is not None:
            chan = sftp.get_channel()
            if chan is not None and not chan.closed:
                return sftp
            with contextlib.suppress(Exception):
                sftp.close()
        sftp = paramiko.SFTPClient.from_transport(self.transport)
        if sftp is None:
            raise ExecutorError("the server refused the SFTP subsystem")
        chan = sftp.get_channel()
        if chan is not None:
            chan.settimeout(timeout)
        self._sftp = sftp
        return sftp

    def drop_sftp(self) -> None:
        sftp, self._sftp = self._sftp, None
        if sftp is not None:
            with contextlib.suppress(Exception):
                sftp.close()

    def drop_batch_server(self, kill: bool = False) -> None:
        server, self.batch_server = self.batch_server, None
        if server is not None:
            server.close(kill=kill)

    def probe(self, timeout: float) -> bool:
        """A full round trip (open and close a session channel) within ``timeout``."""
        try:
            chan = self.transport.open_session(timeout=timeout)
        except Exception:
            return False
        with contextlib.suppress(Exception):
            chan.close()
        return True

    def dead(self) -> bool:
        """After a failed operation: is the connection itself gone?"""
        return not self.transport.is_active() or not self.probe(10.0)

    def watch(self) -> None:
        """Notice a dead connection while idle, for the header; probe every keepalive.
        Runs on its own thread until the link is closed or lost."""
        next_probe = time.monotonic() + self.keepalive
        while not self.closed.wait(min(1.0, self.keepalive)):
            if not self.transport.is_active():
                self.lost("the server closed the connection")
                return
            if time.monotonic() >= next_probe:
                if not self.probe(self.keepalive * self.alive_count):
                    self.lost(
                        f"no answer to keepalives for {self.keepalive * self.alive_count:g} s"
                    )
                    return
                next_probe = time.monotonic() + self.keepalive

    def lost(self, reason: str) -> None:
        """Report this link dead (the executor closes it and reconnects)."""
        self._on_lost(self, reason)

    def failure(self, exc: BaseException, what: str) -> ExecutorError:
        """Classify ``exc`` raised while ``what``: a lost connection, or a plain failure."""
        if self.dead():
            self.lost(f"{type(exc).__name__} while {what}: {exc}")
            return ConnectionLost(
                f"connection to {self.description} lost while {what}; the outcome is unknown; "
                "reconnecting"
            )
        return ExecutorError(f"{what} on {self.description} failed: {exc or type(exc).__name__}")

    def close(self) -> None:
        self.closed.set()
        self.drop_sftp()
        self.drop_batch_server()
        for hop, transport in reversed(list(enumerate(self.transports))):
            with contextlib.suppress(Exception):
                transport.close()
            if hop and transport is not threading.current_thread():
                # A hop behind a jump host ends its thread by closing its channel on the
                # jump's transport: closing that transport first makes the thread die
                # with an unhandled EOFError (printed on stderr).
                with contextlib.suppress(RuntimeError):
                    transport.join(2.0)


def open_link(
    hops: list[HostConfig],
    *,
    host_keys: HostKeyPolicy,
    auth: AuthStrategy,
    connect_timeout: float | None,
    keepalive: float | None,
    description: str,
    on_lost: Callable[[Link, str], None],
) -> Link:
    """Connect, verify and log in to each hop in turn, each through the one before it.

    ``connect_timeout``/``keepalive`` apply where the SSH config sets none.
    """
    transports: list[paramiko.Transport] = []
    try:
        for i, hop in enumerate(hops):
            timeout = hop.connect_timeout or connect_timeout or DEFAULT_CONNECT_TIMEOUT
            if i == 0:
                sock: object = _tcp_connect(hop, timeout)
            else:
                sock = _forward(transports[-1], hops[i - 1], hop, timeout)
            transport = _handshake(sock, hop, timeout, host_keys.known_types(hop))
            transports.append(transport)
            host_keys.verify(hop, transport.get_remote_server_key().asbytes())
            auth.authenticate(transport, hop)
            alive = hop.server_alive_interval or keepalive or DEFAULT_KEEPALIVE
            transport.set_keepalive(max(1, int(alive)))
    except BaseException:
        for transport in reversed(transports):
            with contextlib.suppress(Exception):
                transport.close()
        raise
    target = hops[-1]
    return Link(
        hops,
        transports,
        target.server_alive_interval or keepalive or DEFAULT_KEEPALIVE,
        target.server_alive_count_max,
        description=description,
        on_lost=on_lost,
    )


def _tcp_connect(hop: HostConfig, timeout: float) -> object:
    if hop.proxy_command:
        try:
            return paramiko.ProxyCommand(hop.proxy_command)
        except Exception as exc:
            raise ConnectFailed(f"ProxyCommand for {hop.alias} could not start: {exc}") from None
    try:
        infos = socket.getaddrinfo(hop.hostname, hop.port, 0, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        if hop.in_config:
            raise HostNotFound(
                f"cannot resolve {hop.hostname!r} (HostName of {hop.alias!r} in the SSH "
                f"config): {reason}"
            ) from None
        raise HostNotFound(
            f"unknown host {hop.alias!r}: it is not a Host in the SSH config and does not "
            f"resolve ({reason})"
        ) from None
    where = f"{hop.hostname} port {hop.port}"
    last: OSError | None = None
    for family, kind, proto, _name, address in infos:
        sock = socket.socket(family, kind, proto)
        sock.settimeout(timeout)
        try:
            sock.connect(address)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        # Nagle plus delayed ACKs cost ~40 ms per request/response otherwise.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        return sock
    if isinstance(last, TimeoutError):
        raise ConnectTimeout(f"connection to {where} timed out after {timeout:g} s") from None
    if isinstance(last, ConnectionRefusedError):
        raise ConnectFailed(
            f"connection to {where} refused (no SSH server listening there?)"
        ) from None
    reason = (last.strerror or str(last)) if last is not None else "no address"
    raise ConnectFailed(f"cannot connect to {where}: {reason}") from None


def _forward(
    via: paramiko.Transport, jump: HostConfig, hop: HostConfig, timeout: float
) -> paramiko.Channel:
    try:
        return via.open_channel(
            "direct-tcpip", (hop.hostname, hop.port), ("127.0.0.1", 0), timeout=timeout
        )
    except paramiko.ChannelException as exc:
        raise ConnectFailed(
            f"jump host {jump.display} could not connect to {hop.hostname} port "
            f"{hop.port}: {exc.text}"
        ) from None
    except CONNECTION_TROUBLE as exc:
        raise ConnectFailed(
            f"jump host {jump.display} could not forward to {hop.hostname} port "
            f"{hop.port}: {exc or type(exc).__name__}"
        ) from None


def _rsa_algorithms(key_type: str) -> list[str]:
    if key_type == "ssh-rsa":
        return ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]
    return [key_type]


def _handshake(
    sock: object, hop: HostConfig, timeout: float, known_types: list[str]
) -> paramiko.Transport:
    transport = paramiko.Transport(cast(socket.socket, sock))
    transport.banner_timeout = timeout
    transport.handshake_timeout = timeout
    transport.auth_timeout = AUTH_STEP_TIMEOUT
    # Ask for a host key type already on record, as OpenSSH does, so a server with
    # several host keys is not reported as unknown.
    options = transport.get_security_options()
    available = list(options.key_types)
    preferred = [a for t in known_types for a in _rsa_algorithms(t) if a in available]
    if preferred:
        seen = list(dict.fromkeys(preferred))
        options.key_types = seen + [a for a in available if a not in seen]
    try:
        transport.start_client(timeout=timeout)
    except CONNECTION_TROUBLE as exc:
        with contextlib.suppress(Exception):
            transport.close()
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, EOFError):
            reason = "the server closed the connection"
        raise ConnectFailed(
            f"SSH handshake with {hop.hostname} port {hop.port} failed: {reason}"
        ) from None
    try:
        # start_client() returns silently when its timeout passes mid-handshake.
        transport.get_remote_server_key()
    except paramiko.SSHException:
        with contextlib.suppress(Exception):
            transport.close()
        raise ConnectTimeout(
            f"SSH handshake with {hop.hostname} port {hop.port} did not finish within "
            f"{timeout:g} s (is an SSH server listening there?)"
        ) from None
    return transport
