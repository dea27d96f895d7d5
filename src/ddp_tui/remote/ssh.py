"""The executor interface over one paramiko connection (remote mode).

``SSHExecutor("mycluster", prompter=ui)`` resolves ``mycluster`` through ``~/.ssh/config``
(HostName, User, Port, IdentityFile, IdentitiesOnly, ProxyJump chains, ProxyCommand,
ServerAliveInterval/CountMax, ConnectTimeout, UserKnownHostsFile, HostKeyAlias,
IdentityAgent), checks host keys against known_hosts (asking the :class:`Prompter` about
unknown keys, refusing changed ones) and authenticates with the agent, key files
(passphrases asked once per session), keyboard-interactive and password, in that order.

Commands are argv lists joined with shell quoting. Files go over one SFTP session.
:meth:`SSHExecutor.run_batch` answers a whole refresh with one remote command. When the
connection drops, operations raise :class:`ConnectionLost` while a background thread
reconnects with capped backoff; ``state_callback`` hears "reconnecting", "connected"
and "disconnected".
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import logging
import os
import posixpath
import re
import secrets
import shlex
import socket
import stat as stat_mod
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar, cast

import paramiko
from paramiko.agent import AgentSSH
from paramiko.pkey import PublicBlob

from ddp_tui.remote.executor import (
    Batch,
    BatchResult,
    CommandResult,
    CommandTimeout,
    Executor,
    ExecutorError,
    FileStat,
)
from ddp_tui.remote.hostkeys import (
    KnownHosts,
    changed_key_message,
    display_type,
    fingerprint_sha256,
    host_key_name,
    key_type_of,
)
from ddp_tui.remote.ssh_api import (
    CONNECTED,
    DISCONNECTED,
    RECONNECTING,
    AuthenticationFailed,
    ConnectFailed,
    ConnectionLost,
    ConnectTimeout,
    HostKeyChanged,
    HostKeyError,
    HostKeyRejected,
    HostNotFound,
    NoPrompter,
    Prompter,
    RemoteProtocolError,
    SSHConfigError,
    SSHError,
)
from ddp_tui.remote.ssh_batch import (
    HELPER_HELLO,
    LAUNCHERS,
    SERVER_LAUNCHER,
    BatchHelper,
    FrameReader,
    build_request,
    new_nonce,
    parse_response,
)
from ddp_tui.remote.ssh_config import HostConfig, SSHConfigFile

__all__ = [
    "CONNECTED",
    "DISCONNECTED",
    "RECONNECTING",
    "AuthenticationFailed",
    "ConnectFailed",
    "ConnectTimeout",
    "ConnectionLost",
    "HostKeyChanged",
    "HostKeyError",
    "HostKeyRejected",
    "HostNotFound",
    "NoPrompter",
    "Prompter",
    "RemoteProtocolError",
    "SSHConfigError",
    "SSHError",
    "SSHExecutor",
]

# paramiko logs socket errors at ERROR level; without a handler anywhere, Python's
# last-resort handler would print them on stderr, over the TUI.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
_log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_CONNECT_TIMEOUT = 15.0
DEFAULT_KEEPALIVE = 30.0
RECONNECT_DELAYS = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
#: How long paramiko waits on one authentication step; the user may be typing a code.
#: (sshd's LoginGraceTime, 120 s by default, ends it earlier.)
AUTH_STEP_TIMEOUT = 600.0
#: Bytes asked per recv on command channels.
_RECV = 1 << 20
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CONNECTION_TROUBLE = (paramiko.SSHException, EOFError, OSError)


def _rsa_algorithms(key_type: str) -> list[str]:
    if key_type == "ssh-rsa":
        return ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]
    return [key_type]


class _Connection:
    """One authenticated chain of transports (jump hosts first) plus the SFTP session."""

    def __init__(
        self,
        hops: list[HostConfig],
        transports: list[paramiko.Transport],
        keepalive: float,
        alive_count: int,
    ) -> None:
        self.hops = hops
        self.transports = transports
        self.transport = transports[-1]
        self.keepalive = keepalive
        self.alive_count = alive_count
        self.sftp_lock = threading.Lock()
        self.closed = threading.Event()
        self._sftp: paramiko.SFTPClient | None = None
        #: The persistent batch helper; guarded by ``batch_lock``.
        self.batch_lock = threading.Lock()
        self.batch_server: _BatchServer | None = None
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


class _HelperGone(Exception):
    """The persistent helper's channel ended before a full answer."""

    def __init__(self, greeted: bool) -> None:
        super().__init__("helper ended")
        self.greeted = greeted


def _send_signal(chan: paramiko.Channel, name: str) -> None:
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


class _BatchServer:
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
            data = self.chan.recv_stderr(_RECV)
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
        """Send one request and return its framed answer; raises TimeoutError or _HelperGone."""
        deadline = time.monotonic() + timeout
        self.chan.sendall(payload)
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
            data = self.chan.recv(_RECV)  # TimeoutError past the deadline
            if not data:
                raise _HelperGone(self.greeted)
            self._pending += data

    def close(self, kill: bool = False) -> None:
        if kill:
            _send_signal(self.chan, "KILL")
        with contextlib.suppress(Exception):
            self.chan.close()


class _PromptCancelled(Exception):
    """Raised inside paramiko's handler to abort the login without sending answers."""


class _KeyboardInteractive:
    """paramiko's keyboard-interactive handler, answering through the prompter.

    paramiko calls it on its transport thread. On cancel (or a prompter error) it raises,
    which ends the transport at once: sending blank answers instead would count as a
    failed login on the server (and costs PAM's failure delay).
    """

    def __init__(self, prompter: Prompter, hop: HostConfig) -> None:
        self.prompter = prompter
        self.hop = hop
        self.cancelled = False
        self.error: BaseException | None = None

    def __call__(self, title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
        if not prompts:
            return []  # an informational round (PAM sends one after the password)
        try:
            answers = self.prompter.keyboard_interactive(
                title or f"Login to {self.hop.display}",
                instructions,
                [(str(text), bool(echo)) for text, echo in prompts],
            )
        except Exception as exc:
            self.error = exc
            raise _PromptCancelled from exc
        if answers is None or len(answers) != len(prompts):
            self.cancelled = True
            raise _PromptCancelled
        return [str(a) for a in answers]


class SSHExecutor(Executor):
    """Commands and files on a remote host, over one SSH connection.

    ``destination`` is an alias from the SSH config, ``host``, ``user@host`` or
    ``user@host:port``. Nothing is sent before :meth:`connect` (or the first operation).
    ``known_hosts_path``, when given, is the only known_hosts file used (read and
    written); otherwise UserKnownHostsFile (default ``~/.ssh/known_hosts``) plus the
    global files. ``keepalive_interval`` and ``connect_timeout`` apply when the SSH
    config sets no ServerAliveInterval / ConnectTimeout.
    """

    def __init__(
        self,
        destination: str,
        *,
        prompter: Prompter | None = None,
        ssh_config_path: str | None = None,
        known_hosts_path: str | None = None,
        state_callback: Callable[[str], None] | None = None,
        connect_timeout: float | None = None,
        keepalive_interval: float | None = None,
        reconnect: bool = True,
        reconnect_delays: Sequence[float] = RECONNECT_DELAYS,
        batch_helper: BatchHelper = "auto",
        sftp_timeout: float = 120.0,
    ) -> None:
        self.destination = destination
        self.prompter: Prompter = prompter if prompter is not None else NoPrompter()
        self.state_callback = state_callback
        self._config_path = ssh_config_path
        self._known_hosts_path = known_hosts_path
        self._connect_timeout = connect_timeout
        self._keepalive = keepalive_interval
        self._reconnect_enabled = reconnect
        self._delays = tuple(reconnect_delays) or RECONNECT_DELAYS
        self._batch_helper = batch_helper
        self._sftp_timeout = sftp_timeout

        target = SSHConfigFile(ssh_config_path).resolve(destination)
        self.description = f"{target.user}@{target.alias}"

        self._lock = threading.RLock()
        self._connect_lock = threading.Lock()
        self._stop = threading.Event()
        self._connected_event = threading.Event()
        self._conn: _Connection | None = None
        self._state = DISCONNECTED
        self._closed = False
        self._fatal: SSHError | None = None
        self._last_error: BaseException | None = None
        self._reconnect_thread: threading.Thread | None = None
        self._key_cache: dict[str, paramiko.PKey] = {}
        self._trusted: set[tuple[str, bytes]] = set()
        self._home: str | None = None
        #: Remote commands started (``exec`` requests), for tests and benchmarks.
        self.exec_count = 0
        #: Request/answer exchanges (one per run/run_batch), for tests and benchmarks.
        self.round_trips = 0
        #: Non-fatal problems worth showing (e.g. known_hosts could not be written).
        self.warnings: list[str] = []

    # ----------------------------------------------------------------- state

    @property
    def state(self) -> str:
        return self._state

    @property
    def connected(self) -> bool:
        conn = self._conn
        return conn is not None and conn.transport.is_active()

    def _emit(self, state: str) -> None:
        callback = self.state_callback
        if callback is None:
            return
        try:
            callback(state)
        except Exception:
            _log.exception("state callback failed")

    def wait_connected(self, timeout: float) -> bool:
        """Block until connected (e.g. after a reconnect); False on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            # The event may still be set for a connection that died a moment ago.
            if self._connected_event.wait(max(0.0, remaining)) and self.connected:
                return True
            if remaining <= 0:
                return False
            time.sleep(min(0.05, max(0.0, remaining)))

    def connect(self) -> None:
        """Connect and authenticate now (may ask the prompter); raises typed errors."""
        self._connect()

    def reconnect(self) -> None:
        """Forget a fatal disconnect (e.g. after the user fixed known_hosts) and connect."""
        with self._lock:
            self._fatal = None
        self._connect()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._stop.set()
            conn, self._conn = self._conn, None
            changed = self._state != DISCONNECTED
            self._state = DISCONNECTED
            self._connected_event.clear()
        if conn is not None:
            conn.close()
        if changed:
            self._emit(DISCONNECTED)

    def __enter__(self) -> SSHExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self) -> _Connection:
        with self._connect_lock:
            with self._lock:
                if self._closed:
                    raise ExecutorError(f"the connection to {self.description} was closed")
                conn = self._conn
            if conn is not None and conn.transport.is_active():
                return conn
            conn = self._open_connection()
            self._install(conn)
            return conn

    def _install(self, conn: _Connection) -> None:
        with self._lock:
            current = self._conn
            if self._closed or (current is not None and current.transport.is_active()):
                conn.close()  # closed meanwhile, or another thread connected first
                if self._closed:
                    raise ExecutorError(f"the connection to {self.description} was closed")
                return
            self._conn = conn
            self._state = CONNECTED
            self._fatal = None
            self._connected_event.set()
        threading.Thread(
            target=self._monitor, args=(conn,), name="ssh-monitor", daemon=True
        ).start()
        self._emit(CONNECTED)

    def _ensure(self) -> _Connection:
        with self._lock:
            conn, state, fatal, closed = self._conn, self._state, self._fatal, self._closed
        if closed:
            raise ExecutorError(f"the connection to {self.description} was closed")
        if conn is not None:
            if conn.transport.is_active():
                return conn
            self._on_lost(conn, "the connection dropped")
            raise ConnectionLost(self._lost_message())
        if state == RECONNECTING:
            raise ConnectionLost(self._lost_message())
        if fatal is not None:
            raise ConnectionLost(f"disconnected from {self.description}: {fatal}")
        return self._connect()

    def _lost_message(self) -> str:
        why = f" ({self._last_error})" if self._last_error else ""
        return f"connection to {self.description} lost{why}; reconnecting"

    def _on_lost(self, conn: _Connection, reason: str) -> None:
        with self._lock:
            if self._conn is not conn:
                return
            self._conn = None
            self._connected_event.clear()
            if self._closed:
                return
            self._last_error = ExecutorError(reason)
            self._state = RECONNECTING if self._reconnect_enabled else DISCONNECTED
            state = self._state
        _log.info("connection to %s lost: %s", self.description, reason)
        self._emit(state)  # before the reconnect thread can report "connected"
        conn.close()
        if state == RECONNECTING:
            thread = threading.Thread(
                target=self._reconnect_loop, name="ssh-reconnect", daemon=True
            )
            self._reconnect_thread = thread
            thread.start()

    def _reconnect_loop(self) -> None:
        attempt = 0
        while True:
            delay = self._delays[min(attempt, len(self._delays) - 1)]
            if self._stop.wait(delay):
                return
            attempt += 1
            try:
                # The same lock as connect()/reconnect(): never two logins (or prompts) at once.
                with self._connect_lock:
                    if self.connected or self._closed:
                        return
                    conn = self._open_connection()
                    self._install(conn)
                return
            except (HostKeyError, AuthenticationFailed, SSHConfigError) as exc:
                # Retrying cannot fix these, and retrying auth could lock the account.
                with self._lock:
                    if self._closed:
                        return
                    self._fatal = exc
                    self._state = DISCONNECTED
                self._emit(DISCONNECTED)
                return
            except Exception as exc:
                with self._lock:
                    if self._closed:
                        return
                    self._last_error = exc
                _log.info("reconnect attempt %d to %s failed: %s", attempt, self.description, exc)

    def _monitor(self, conn: _Connection) -> None:
        """Notice a dead connection while idle, for the header; probe every keepalive."""
        next_probe = time.monotonic() + conn.keepalive
        while not conn.closed.wait(min(1.0, conn.keepalive)):
            if not conn.transport.is_active():
                self._on_lost(conn, "the server closed the connection")
                return
            if time.monotonic() >= next_probe:
                if not self._probe(conn, conn.keepalive * conn.alive_count):
                    self._on_lost(
                        conn, f"no answer to keepalives for {conn.keepalive * conn.alive_count:g} s"
                    )
                    return
                next_probe = time.monotonic() + conn.keepalive

    @staticmethod
    def _probe(conn: _Connection, timeout: float) -> bool:
        """A full round trip (open and close a session channel) within ``timeout``."""
        try:
            chan = conn.transport.open_session(timeout=timeout)
        except Exception:
            return False
        with contextlib.suppress(Exception):
            chan.close()
        return True

    def _failure(self, conn: _Connection, exc: BaseException, what: str) -> ExecutorError:
        """Classify ``exc`` raised while ``what``: a lost connection, or a plain failure."""
        if not conn.transport.is_active() or not self._probe(conn, 10.0):
            self._on_lost(conn, f"{type(exc).__name__} while {what}: {exc}")
            return ConnectionLost(
                f"connection to {self.description} lost while {what}; the outcome is unknown; "
                "reconnecting"
            )
        return ExecutorError(f"{what} on {self.description} failed: {exc or type(exc).__name__}")

    # ------------------------------------------------------------ connecting

    def _open_connection(self) -> _Connection:
        keys_before = len(self._key_cache)
        try:
            return self._open_connection_once()
        except AuthenticationFailed as exc:
            # The server gave up while the user was typing a passphrase; the key is now
            # decrypted, so a second login needs no prompt and is quick.
            if exc.server_closed and len(self._key_cache) > keys_before:
                return self._open_connection_once()
            raise

    def _open_connection_once(self) -> _Connection:
        config = SSHConfigFile(self._config_path)
        hops = config.hop_chain(self.destination)
        transports: list[paramiko.Transport] = []
        try:
            for i, hop in enumerate(hops):
                timeout = hop.connect_timeout or self._connect_timeout or DEFAULT_CONNECT_TIMEOUT
                if i == 0:
                    sock: object = self._tcp_connect(hop, timeout)
                else:
                    sock = self._forward(transports[-1], hops[i - 1], hop, timeout)
                transport = self._handshake(sock, hop, timeout)
                transports.append(transport)
                self._verify_host_key(transport, hop)
                self._authenticate(transport, hop)
                keepalive = hop.server_alive_interval or self._keepalive or DEFAULT_KEEPALIVE
                transport.set_keepalive(max(1, int(keepalive)))
        except BaseException:
            for transport in reversed(transports):
                with contextlib.suppress(Exception):
                    transport.close()
            raise
        target = hops[-1]
        conn = _Connection(
            hops,
            transports,
            target.server_alive_interval or self._keepalive or DEFAULT_KEEPALIVE,
            target.server_alive_count_max,
        )
        if self._home is None:
            try:
                with conn.sftp_lock:
                    self._home = conn.sftp(self._sftp_timeout).normalize(".")
            except Exception as exc:  # SFTP may be disabled; commands still work
                warning = f"SFTP is not available on {self.description}: {exc}"
                if warning not in self.warnings:
                    self.warnings.append(warning)
        return conn

    def _tcp_connect(self, hop: HostConfig, timeout: float) -> object:
        if hop.proxy_command:
            try:
                return paramiko.ProxyCommand(hop.proxy_command)
            except Exception as exc:
                raise ConnectFailed(
                    f"ProxyCommand for {hop.alias} could not start: {exc}"
                ) from None
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

    @staticmethod
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
        except _CONNECTION_TROUBLE as exc:
            raise ConnectFailed(
                f"jump host {jump.display} could not forward to {hop.hostname} port "
                f"{hop.port}: {exc or type(exc).__name__}"
            ) from None

    def _known_hosts(self, hop: HostConfig) -> KnownHosts:
        if self._known_hosts_path is not None:
            return KnownHosts([self._known_hosts_path], global_files=())
        return KnownHosts(hop.known_hosts_files)

    @staticmethod
    def _key_name(hop: HostConfig) -> str:
        if hop.host_key_alias:
            return hop.host_key_alias
        return host_key_name(hop.hostname, hop.port)

    def _handshake(self, sock: object, hop: HostConfig, timeout: float) -> paramiko.Transport:
        transport = paramiko.Transport(cast(socket.socket, sock))
        transport.banner_timeout = timeout
        transport.handshake_timeout = timeout
        transport.auth_timeout = AUTH_STEP_TIMEOUT
        # Ask for a host key type already on record, as OpenSSH does, so a server with
        # several host keys is not reported as unknown.
        known = self._known_hosts(hop).known_types(self._key_name(hop))
        options = transport.get_security_options()
        available = list(options.key_types)
        preferred = [a for t in known for a in _rsa_algorithms(t) if a in available]
        if preferred:
            seen = list(dict.fromkeys(preferred))
            options.key_types = seen + [a for a in available if a not in seen]
        try:
            transport.start_client(timeout=timeout)
        except _CONNECTION_TROUBLE as exc:
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

    def _verify_host_key(self, transport: paramiko.Transport, hop: HostConfig) -> None:
        key = transport.get_remote_server_key()
        blob = key.asbytes()
        key_type = key_type_of(blob)
        fingerprint = fingerprint_sha256(blob)
        name = self._key_name(hop)
        if (name, blob) in self._trusted:
            return
        known = self._known_hosts(hop)
        check = known.check(name, blob)
        if check.status == "ok":
            return
        if check.status in ("changed", "revoked"):
            assert check.entry is not None
            raise HostKeyChanged(
                changed_key_message(
                    name, key_type, fingerprint, check.entry, revoked=check.status == "revoked"
                ),
                host=hop.hostname,
                port=hop.port,
                key_type=key_type,
                fingerprint=fingerprint,
                known_hosts_file=check.entry.path,
                line=check.entry.line,
            )
        if not self.prompter.confirm_host_key(hop.hostname, hop.port, key_type, fingerprint):
            raise HostKeyRejected(
                f"the {display_type(key_type)} host key of {name} ({fingerprint}) was not "
                "accepted; not connecting"
            )
        self._trusted.add((name, blob))
        try:
            known.add(name, blob)
        except OSError as exc:
            self.warnings.append(
                f"could not save the host key of {name} to {known.write_path}: {exc.strerror}"
            )

    # -------------------------------------------------------- authentication

    def _agent_keys(self, hop: HostConfig) -> tuple[AgentSSH | None, list[paramiko.PKey]]:
        if hop.identity_agent == "none":
            return None, []
        agent: AgentSSH
        try:
            if hop.identity_agent is None:
                agent = paramiko.Agent()
            else:
                agent = AgentSSH()
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.connect(hop.identity_agent)
                # paramiko has no public way to use an agent socket given by path.
                getattr(agent, "_connect")(conn)  # noqa: B009 - private, untyped
            keys: list[paramiko.PKey] = list(agent.get_keys())
        except Exception as exc:
            _log.info("ssh-agent not usable: %s", exc)
            return None, []
        return agent, keys

    def _load_key(self, path: str, hop: HostConfig, tried: list[str]) -> paramiko.PKey | None:
        cached = self._key_cache.get(path)
        if cached is not None:
            return cached
        if not os.path.exists(path):
            if hop.identity_files_configured:
                tried.append(f"key file {path}: not found")
            return None
        try:
            key = paramiko.PKey.from_path(path)
        except TypeError:  # cryptography: "password-protected, but password was not provided"
            pass
        except Exception as exc:
            tried.append(f"key file {path}: cannot load ({exc})")
            return None
        else:
            self._key_cache[path] = key
            return key
        prompt = f"Enter passphrase for key '{path}':"
        for _ in range(3):
            secret = self.prompter.ask_secret("Key passphrase", prompt)
            if not secret:
                tried.append(f"key file {path}: no passphrase given")
                return None
            try:
                # paramiko 5.1 hands the password straight to cryptography, which wants bytes.
                key = paramiko.PKey.from_path(path, cast(str, secret.encode("utf-8")))
            except Exception:
                prompt = f"Wrong passphrase. Enter passphrase for key '{path}':"
                continue
            self._key_cache[path] = key
            return key
        tried.append(f"key file {path}: wrong passphrase")
        return None

    def _public_keys(
        self, hop: HostConfig, agent_keys: list[paramiko.PKey], tried: list[str]
    ) -> Iterator[tuple[str, paramiko.PKey]]:
        """Agent keys, then key files (loaded lazily: a passphrase is asked only if reached)."""
        seen: set[bytes] = set()
        if hop.identities_only:
            wanted = set()
            for path in hop.identity_files:
                with contextlib.suppress(Exception):
                    wanted.add(PublicBlob.from_file(path + ".pub").key_blob)
                cached = self._key_cache.get(path)
                if cached is not None:
                    wanted.add(cached.asbytes())
            agent_keys = [k for k in agent_keys if k.asbytes() in wanted]
        for key in agent_keys:
            blob = key.asbytes()
            seen.add(blob)
            yield f"agent key {display_type(key_type_of(blob))} {fingerprint_sha256(blob)}", key
        for path in hop.identity_files:
            file_key = self._load_key(path, hop, tried)
            if file_key is None or file_key.asbytes() in seen:
                continue
            seen.add(file_key.asbytes())
            yield f"key file {path}", file_key

    def _authenticate(self, transport: paramiko.Transport, hop: HostConfig) -> None:
        user = hop.user
        tried: list[str] = []
        remaining: list[str]
        try:
            transport.auth_none(user)
            remaining = []
        except paramiko.BadAuthenticationType as exc:
            remaining = list(exc.allowed_types)
        except paramiko.AuthenticationException:
            remaining = ["publickey", "keyboard-interactive", "password"]
        except _CONNECTION_TROUBLE as exc:
            raise ConnectFailed(
                f"{hop.display} closed the connection before authentication: {exc}"
            ) from None
        if transport.is_authenticated():
            return
        allowed_first = list(remaining)

        def attempt(label: str, call: Callable[[], list[str]]) -> bool:
            """Run one method; True when it got us further (success or partial)."""
            nonlocal remaining
            try:
                result = call()
            except paramiko.BadAuthenticationType as exc:
                remaining = list(exc.allowed_types)
                tried.append(f"{label}: not allowed")
                return False
            except paramiko.AuthenticationException:
                tried.append(f"{label}: rejected")
                return False
            except _CONNECTION_TROUBLE as exc:
                tried.append(f"{label}: {exc or type(exc).__name__}")
                raise self._auth_failed(hop, allowed_first, tried, closed=True) from None
            if transport.is_authenticated():
                return True
            remaining = list(result or [])
            tried.append(f"{label}: accepted, the server wants more ({', '.join(remaining)})")
            return True

        agent, agent_keys = self._agent_keys(hop)
        try:
            pubkey_done = False
            kbd_left, password_left = 3, hop.password_prompts
            while not transport.is_authenticated():
                if not transport.is_active():
                    raise self._auth_failed(hop, allowed_first, tried, closed=True)
                if "publickey" in remaining and not pubkey_done:
                    pubkey_done = True
                    for label, key in self._public_keys(hop, agent_keys, tried):
                        if not transport.is_active():
                            break
                        if attempt(label, functools.partial(transport.auth_publickey, user, key)):
                            break
                    continue
                if "keyboard-interactive" in remaining and kbd_left > 0:
                    kbd_left -= 1
                    handler = _KeyboardInteractive(self.prompter, hop)
                    try:
                        attempt(
                            "keyboard-interactive",
                            functools.partial(transport.auth_interactive, user, handler),
                        )
                    except Exception:
                        if not (handler.cancelled or handler.error):
                            raise
                    if handler.error is not None:
                        raise handler.error
                    if handler.cancelled:
                        raise self._cancelled(hop, "keyboard-interactive", tried)
                    continue
                if "password" in remaining and password_left > 0:
                    password_left -= 1
                    secret = self.prompter.ask_secret(
                        f"Password for {hop.display}", f"{hop.user}@{hop.hostname}'s password:"
                    )
                    if secret is None:
                        raise self._cancelled(hop, "password", tried)
                    attempt(
                        "password",
                        functools.partial(transport.auth_password, user, secret, fallback=False),
                    )
                    continue
                break
        finally:
            if agent is not None:
                with contextlib.suppress(Exception):
                    getattr(agent, "_close")()  # noqa: B009 - private, untyped
        if not transport.is_authenticated():
            raise self._auth_failed(hop, allowed_first, tried, closed=not transport.is_active())

    @staticmethod
    def _cancelled(hop: HostConfig, method: str, tried: list[str]) -> AuthenticationFailed:
        before = f" (tried before: {'; '.join(tried)})" if tried else ""
        return AuthenticationFailed(
            f"login to {hop.display} cancelled at the {method} prompt{before}", tried=tried
        )

    @staticmethod
    def _auth_failed(
        hop: HostConfig, allowed: list[str], tried: list[str], *, closed: bool
    ) -> AuthenticationFailed:
        methods = ", ".join(allowed) or "none"
        attempts = "; ".join(tried) or "nothing (no usable key, and no prompt was possible)"
        extra = (
            " The server closed the connection (too many failed attempts, or the login took "
            "longer than its LoginGraceTime)."
            if closed
            else ""
        )
        return AuthenticationFailed(
            f"permission denied for {hop.display} (the server accepts: {methods}). "
            f"Tried: {attempts}.{extra}",
            tried=tried,
            server_closed=closed,
        )

    # -------------------------------------------------------------- commands

    def expand_home(self, path: str) -> str:
        return self._expand(path)

    def _expand(self, path: str) -> str:
        """``~`` and ``~/x`` are the remote home, as in a shell."""
        if path != "~" and not path.startswith("~/"):
            return path
        if self._home is None:
            self._ensure()
        if self._home is None:
            raise ExecutorError(f"cannot expand {path!r}: the remote home is unknown (no SFTP)")
        return self._home + path[1:]

    def _exec(
        self, command: str, *, stdin: bytes | None, timeout: float, label: str
    ) -> tuple[int, bytes, bytes]:
        """Run ``command`` through the remote login shell; stdout and stderr drained
        together; killed (process group, then channel) at ``timeout``."""
        conn = self._ensure()
        transport = conn.transport
        try:
            chan = transport.open_session(timeout=min(timeout, 30.0))
        except _CONNECTION_TROUBLE as exc:
            raise self._failure(conn, exc, f"starting {label}") from None
        with self._lock:
            self.exec_count += 1
            self.round_trips += 1
        try:
            chan.exec_command(command)
        except _CONNECTION_TROUBLE as exc:
            chan.close()
            raise self._failure(conn, exc, f"starting {label}") from None

        out: list[bytes] = []
        err: list[bytes] = []
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            _send_signal(chan, "KILL")
            chan.close()

        def drain_stderr() -> None:
            while True:
                data = chan.recv_stderr(_RECV)
                if not data:
                    return
                err.append(data)

        def feed_stdin() -> None:
            try:
                if stdin:
                    chan.sendall(stdin)
                chan.shutdown_write()
            except Exception:  # the command exited without reading it all
                pass

        timer = threading.Timer(timeout, kill)
        timer.daemon = True
        err_thread = threading.Thread(target=drain_stderr, name="ssh-stderr", daemon=True)
        in_thread: threading.Thread | None = None
        timer.start()
        err_thread.start()
        if stdin:
            in_thread = threading.Thread(target=feed_stdin, name="ssh-stdin", daemon=True)
            in_thread.start()
        else:
            feed_stdin()
        try:
            while True:
                data = chan.recv(_RECV)
                if not data:
                    break
                out.append(data)
            err_thread.join()
            status = chan.recv_exit_status()
        finally:
            timer.cancel()
            chan.close()
            if in_thread is not None:
                in_thread.join(5.0)
        if timed_out.is_set():
            raise CommandTimeout(f"{label} did not finish within {timeout:g} s and was killed")
        if status == -1 and (not transport.is_active() or not self._probe(conn, 10.0)):
            # No exit status because the connection died: the outcome is unknown.
            self._on_lost(conn, f"connection dropped while running {label}")
            raise ConnectionLost(
                f"connection to {self.description} lost while running {label}; its outcome "
                "is unknown; reconnecting"
            )
        return status, b"".join(out), b"".join(err)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        if not argv:
            raise ValueError("run() needs a non-empty argv")
        q = shlex.quote
        token = secrets.token_hex(6)
        not_found = f"ddp-tui:{token}: command not found"
        bad_dir = f"ddp-tui:{token}: no such directory"
        parts: list[str] = []
        if cwd is not None:
            remote_cwd = self._expand(cwd)
            parts.append(
                f"{{ cd -- {q(remote_cwd)} 2>/dev/null || {{ printf '%s\\n' {q(bad_dir)} >&2; "
                "exit 126; }; }"
            )
        for name, value in (env or {}).items():
            if not _ENV_NAME.match(name):
                raise ValueError(f"invalid environment variable name {name!r}")
            parts.append(f"export {name}={q(value)}")
        parts.append(
            f"{{ command -v -- {q(argv[0])} >/dev/null 2>&1 || {{ printf '%s\\n' "
            f"{q(not_found)} >&2; exit 127; }}; }}"
        )
        parts.append("exec " + " ".join(q(a) for a in argv))
        status, out, err = self._exec(
            "; ".join(parts),
            stdin=stdin,
            timeout=timeout,
            label=argv[0],
        )
        if status == 127 and err.endswith((not_found + "\n").encode()):
            raise ExecutorError(f"{argv[0]}: command not found on {self.description}")
        if status == 126 and err.endswith((bad_dir + "\n").encode()):
            raise ExecutorError(f"{cwd}: no such directory on {self.description}")
        return CommandResult(
            tuple(argv), status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        )

    def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
        """Every command and read of ``batch`` in one round trip.

        With ``batch_helper="auto"`` the request goes to a persistent helper started on
        first use (its start is pipelined with the first request); where the remote side
        has no python3, each batch is one ``sh`` command instead.
        """
        reads = [(self._expand(r.path), r.offset, r.max_bytes) for r in batch.reads]
        nonce = new_nonce()
        conn = self._ensure()
        if self._batch_helper == "auto" and not conn.no_python:
            payload = build_request(nonce, batch.commands, reads, with_script=False)
            if conn.batch_lock.acquire(timeout=timeout):
                try:
                    answer = self._helper_request(conn, payload, nonce, timeout)
                finally:
                    conn.batch_lock.release()
                if answer is not None:
                    return parse_response(batch, nonce, answer, b"", 0, self.description)
        helper = "sh" if self._batch_helper == "auto" else self._batch_helper
        request = build_request(nonce, batch.commands, reads)
        status, out, err = self._exec(
            LAUNCHERS[helper], stdin=request, timeout=timeout, label="batched refresh"
        )
        return parse_response(batch, nonce, out, err, status, self.description)

    def _helper_request(
        self, conn: _Connection, payload: bytes, nonce: str, timeout: float
    ) -> bytes | None:
        """One request to the persistent helper (started if needed); None when the remote
        side cannot run it (then the caller falls back to a one-shot command)."""
        server = conn.batch_server
        try:
            if server is None or not server.usable():
                conn.drop_batch_server()
                chan = conn.transport.open_session(timeout=min(timeout, 30.0))
                with self._lock:
                    self.exec_count += 1
                chan.exec_command(SERVER_LAUNCHER)
                server = conn.batch_server = _BatchServer(chan)
            with self._lock:
                self.round_trips += 1
            return server.request(payload, nonce, timeout)
        except TimeoutError:
            conn.drop_batch_server(kill=True)
            raise CommandTimeout(
                f"batched refresh did not finish within {timeout:g} s and was killed"
            ) from None
        except _HelperGone as gone:
            tail = server.stderr_tail if server is not None else ""
            conn.drop_batch_server()
            if not conn.transport.is_active() or not self._probe(conn, 10.0):
                self._on_lost(conn, "connection dropped during a batched refresh")
                raise ConnectionLost(
                    f"connection to {self.description} lost during a refresh; reconnecting"
                ) from None
            if not gone.greeted:
                conn.no_python = True  # no python3 there (or a ForceCommand): use sh
                return None
            raise RemoteProtocolError(
                f"the batch helper on {self.description} stopped unexpectedly"
                + (f": {tail}" if tail else "")
            ) from None
        except _CONNECTION_TROUBLE as exc:
            conn.drop_batch_server()
            raise self._failure(conn, exc, "a batched refresh") from None

    # ----------------------------------------------------------------- files

    def _sftp_call(self, what: str, call: Callable[[paramiko.SFTPClient], T]) -> T:
        conn = self._ensure()
        with conn.sftp_lock:
            try:
                sftp = conn.sftp(self._sftp_timeout)
            except ExecutorError:
                raise
            except _CONNECTION_TROUBLE as exc:
                raise self._failure(conn, exc, what) from None
            try:
                return call(sftp)
            except _CONNECTION_TROUBLE as exc:
                chan = sftp.get_channel()
                channel_ok = chan is not None and not chan.closed
                if (
                    isinstance(exc, OSError)
                    and not isinstance(exc, TimeoutError)
                    and channel_ok
                    and conn.transport.is_active()
                ):
                    raise  # an SFTP status (no such file, permission denied, failure)
                conn.drop_sftp()
                raise self._failure(conn, exc, what) from None

    def read_range(self, path: str, offset: int = 0, max_bytes: int | None = None) -> bytes:
        if offset < 0 or (max_bytes is not None and max_bytes < 0):
            raise ValueError("offset and max_bytes must not be negative")
        remote = self._expand(path)

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

        return self._sftp_call(f"reading {remote}", call)

    def write_atomic(self, path: str, data: bytes, mode: int = 0o644) -> None:
        remote = self._expand(path)
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

        self._sftp_call(f"writing {remote}", call)

    def append(self, path: str, data: bytes) -> None:
        """Append with O_APPEND on the server (SFTP's append flag), so a small record
        such as a jobs.jsonl line is never lost or interleaved by a concurrent writer."""
        remote = self._expand(path)

        def call(sftp: paramiko.SFTPClient) -> None:
            with sftp.open(remote, "ab") as fh:
                fh.write(data)

        self._sftp_call(f"appending to {remote}", call)

    def makedirs(self, path: str) -> None:
        remote = self._expand(path)

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

        self._sftp_call(f"creating {remote}", call)

    def listdir(self, path: str) -> list[str]:
        remote = self._expand(path)
        return self._sftp_call(f"listing {remote}", lambda sftp: sorted(sftp.listdir(remote)))

    def stat(self, path: str) -> FileStat | None:
        """Size and mtime over SFTP: whole seconds, and ``inode`` 0 (SFTP v3 has neither
        sub-second times nor inodes; :meth:`run_batch` reports both)."""
        remote = self._expand(path)

        def call(sftp: paramiko.SFTPClient) -> FileStat | None:
            try:
                st = sftp.stat(remote)
            except FileNotFoundError:
                return None
            return FileStat(
                st.st_size or 0, float(st.st_mtime or 0), stat_mod.S_ISDIR(st.st_mode or 0), 0
            )

        return self._sftp_call(f"stat {remote}", call)

    def rename(self, src: str, dst: str) -> None:
        a, b = self._expand(src), self._expand(dst)
        self._sftp_call(f"renaming {a}", lambda sftp: sftp.posix_rename(a, b))

    def remove_tree(self, path: str) -> None:
        remote = self._expand(path).rstrip("/")
        if remote in ("", ".", "..", "~") or remote == (self._home or "").rstrip("/"):
            raise ValueError(f"refusing to remove {path!r}")
        res = self.run(["rm", "-rf", "--", remote], timeout=300.0)
        if not res.ok:
            raise ExecutorError(f"could not remove {remote}: {res.stderr.strip()}")

    def upload_tree(self, local_src: Path, dst: str) -> None:
        """Copy ``local_src`` (without ``__pycache__``/``*.pyc``) into ``dst``: one tar
        stream over one command instead of several SFTP round trips per file."""
        remote = self._expand(dst)
        buf = io.BytesIO()
        root = Path(local_src)
        if not root.is_dir():
            raise FileNotFoundError(errno.ENOENT, "not a directory", str(local_src))

        def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            return info

        with tarfile.open(fileobj=buf, mode="w", dereference=True) as tar:
            for current, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                rel = os.path.relpath(current, root)
                if rel != ".":
                    tar.add(current, arcname=rel, recursive=False, filter=clean)
                for name in sorted(files):
                    if name.endswith(".pyc"):
                        continue
                    arc = name if rel == "." else f"{rel}/{name}"
                    tar.add(os.path.join(current, name), arcname=arc, filter=clean)
        res = self.run(
            [
                "sh",
                "-c",
                'mkdir -p -- "$1" && exec tar -x -f - -C "$1" --no-same-owner',
                "ddp-tui-upload",
                remote,
            ],
            stdin=buf.getvalue(),
            timeout=300.0,
        )
        if not res.ok:
            raise ExecutorError(
                f"uploading {local_src} to {remote} on {self.description} failed: "
                f"{res.stderr.strip() or f'exit status {res.returncode}'}"
            )
