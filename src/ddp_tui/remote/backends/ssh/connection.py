"""The :class:`SSHExecutor`: connection state and reconnects; commands and files are
delegated to :class:`~ddp_tui.remote.backends.ssh.commands.Remote` and
:class:`~ddp_tui.remote.backends.ssh.files.Transfer`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import paramiko

from ddp_tui.remote.backends.executor import (
    Batch,
    BatchResult,
    CommandResult,
    Executor,
    ExecutorError,
    FileStat,
)
from ddp_tui.remote.backends.ssh.api import (
    CONNECTED,
    DISCONNECTED,
    RECONNECTING,
    AuthenticationFailed,
    ConnectionLost,
    HostKeyError,
    NoPrompter,
    Prompter,
    SSHConfigError,
    SSHError,
)
from ddp_tui.remote.backends.ssh.auth import AuthStrategy
from ddp_tui.remote.backends.ssh.batch import BatchHelper
from ddp_tui.remote.backends.ssh.commands import Remote
from ddp_tui.remote.backends.ssh.config import SSHConfigFile
from ddp_tui.remote.backends.ssh.files import Transfer, sftp_call
from ddp_tui.remote.backends.ssh.hostkeys import HostKeyPolicy
from ddp_tui.remote.backends.ssh.interactive import remote_command, run_interactive
from ddp_tui.remote.backends.ssh.transport import Link, open_link

# paramiko logs socket errors at ERROR level; without a handler anywhere, Python's
# last-resort handler would print them on stderr, over the TUI.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
_log = logging.getLogger(__name__)

T = TypeVar("T")

RECONNECT_DELAYS = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)


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
        self.state_callback = state_callback
        self._config_path = ssh_config_path
        self._connect_timeout = connect_timeout
        self._keepalive = keepalive_interval
        self._reconnect_enabled = reconnect
        self._delays = tuple(reconnect_delays) or RECONNECT_DELAYS
        self._sftp_timeout = sftp_timeout

        target = SSHConfigFile(ssh_config_path).resolve(destination)
        self.description = f"{target.user}@{target.alias}"

        self._lock = threading.RLock()
        self._connect_lock = threading.Lock()
        self._stop = threading.Event()
        self._connected_event = threading.Event()
        self._conn: Link | None = None
        self._state = DISCONNECTED
        self._closed = False
        self._fatal: SSHError | None = None
        self._last_error: BaseException | None = None
        #: Host keys the user accepted this session (kept across reconnects).
        self._trusted: set[tuple[str, bytes]] = set()
        self._home: str | None = None
        #: Non-fatal problems worth showing (e.g. known_hosts could not be written).
        self.warnings: list[str] = []
        chosen: Prompter = prompter if prompter is not None else NoPrompter()
        self._host_keys = HostKeyPolicy(
            chosen,
            known_hosts_path=known_hosts_path,
            trusted=self._trusted,
            warnings=self.warnings,
        )
        self._auth = AuthStrategy(chosen)
        self._remote = Remote(
            self._ensure, self.expand_home, description=self.description, batch_helper=batch_helper
        )
        self._files = Transfer(self)

    @property
    def prompter(self) -> Prompter:
        return self._auth.prompter

    @property
    def exec_count(self) -> int:
        """Remote commands started (``exec`` requests), for tests and benchmarks."""
        return self._remote.exec_count

    @property
    def round_trips(self) -> int:
        """Request/answer exchanges (one per run/run_batch), for tests and benchmarks."""
        return self._remote.round_trips

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

    def _connect(self) -> Link:
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

    def _install(self, conn: Link) -> None:
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
        threading.Thread(target=conn.watch, name="ssh-monitor", daemon=True).start()
        self._emit(CONNECTED)

    def _ensure(self) -> Link:
        """The live link, connecting on first use; ConnectionLost while reconnecting."""
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

    def _on_lost(self, conn: Link, reason: str) -> None:
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
            threading.Thread(target=self._reconnect_loop, name="ssh-reconnect", daemon=True).start()

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

    def _open_connection(self) -> Link:
        keys_before = len(self._auth.key_cache)
        try:
            return self._open_connection_once()
        except AuthenticationFailed as exc:
            # The server gave up while the user was typing a passphrase; the key is now
            # decrypted, so a second login needs no prompt and is quick.
            if exc.server_closed and len(self._auth.key_cache) > keys_before:
                return self._open_connection_once()
            raise

    def _open_connection_once(self) -> Link:
        conn = open_link(
            SSHConfigFile(self._config_path).hop_chain(self.destination),
            host_keys=self._host_keys,
            auth=self._auth,
            connect_timeout=self._connect_timeout,
            keepalive=self._keepalive,
            description=self.description,
            on_lost=self._on_lost,
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

    # ------------------------------------------------------ the executor API

    def expand_home(self, path: str) -> str:
        """``~`` and ``~/x`` are the remote home, as in a shell."""
        if path != "~" and not path.startswith("~/"):
            return path
        if self._home is None:
            self._ensure()
        if self._home is None:
            raise ExecutorError(f"cannot expand {path!r}: the remote home is unknown (no SFTP)")
        return self._home + path[1:]

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        return self._remote.run(argv, timeout=timeout, env=env, cwd=cwd, stdin=stdin)

    def run_batch(self, batch: Batch, *, timeout: float = 60.0) -> BatchResult:
        """Every command and read of ``batch`` in one round trip (see Remote.run_batch)."""
        return self._remote.run_batch(batch, timeout=timeout)

    def interactive(self, argv: Sequence[str], *, cwd: str | None = None) -> int:
        """``argv`` on a pty of its own on this connection, bridged to the user's terminal
        (see :mod:`ddp_tui.remote.backends.ssh.interactive`); the remote exit status."""
        command = remote_command(argv, cwd=self.expand_home(cwd) if cwd is not None else None)
        return run_interactive(self._ensure(), command, label=argv[0])

    def _sftp_call(self, what: str, call: Callable[[paramiko.SFTPClient], T]) -> T:
        """The one door of every SFTP operation (Transfer calls it)."""
        return sftp_call(self._ensure(), self._sftp_timeout, what, call)

    def read_range(self, path: str, offset: int = 0, max_bytes: int | None = None) -> bytes:
        return self._files.read_range(path, offset, max_bytes)

    def write_atomic(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self._files.write_atomic(path, data, mode)

    def append(self, path: str, data: bytes) -> None:
        """Append with O_APPEND on the server, so a concurrent writer never interleaves."""
        self._files.append(path, data)

    def makedirs(self, path: str) -> None:
        self._files.makedirs(path)

    def listdir(self, path: str) -> list[str]:
        return self._files.listdir(path)

    def stat(self, path: str) -> FileStat | None:
        """Size and mtime over SFTP: whole seconds, and ``inode`` 0 (SFTP v3 has neither
        sub-second times nor inodes; :meth:`run_batch` reports both)."""
        return self._files.stat(path)

    def rename(self, src: str, dst: str) -> None:
        self._files.rename(src, dst)

    def symlink(self, target: str, link: str) -> None:
        self._files.symlink(target, link)

    def remove_tree(self, path: str) -> None:
        self._files.remove_tree(path)

    def upload_files(self, files: Sequence[tuple[str, str]], dst: str) -> int:
        """Copy local files to ``dst/arcname`` in one tar stream over one command."""
        return self._files.upload_files(files, dst)
