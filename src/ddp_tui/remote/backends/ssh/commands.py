"""Running commands: one at a time through the login shell, and whole batches through
the persistent helper (or a one-shot launcher)."""

from __future__ import annotations

import re
import secrets
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence

from ddp_tui.remote.backends.executor import (
    Batch,
    BatchResult,
    CommandResult,
    CommandTimeout,
    ExecutorError,
)
from ddp_tui.remote.backends.ssh.api import ConnectionLost, RemoteProtocolError
from ddp_tui.remote.backends.ssh.batch import (
    LAUNCHERS,
    SERVER_LAUNCHER,
    BatchHelper,
    build_request,
    new_nonce,
    parse_response,
)
from ddp_tui.remote.backends.ssh.channels import RECV, BatchServer, HelperGone, send_signal
from ddp_tui.remote.backends.ssh.transport import CONNECTION_TROUBLE, Link

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Bytes of a command's stdin handed to the channel at a time.
STDIN_SLICE = 1 << 16


class Remote:
    """Commands on the far side of the executor's link.

    ``link`` returns the live link (connecting on first use, raising ConnectionLost while
    reconnecting); ``expand`` turns ``~`` into the remote home.
    """

    def __init__(
        self,
        link: Callable[[], Link],
        expand: Callable[[str], str],
        *,
        description: str,
        batch_helper: BatchHelper,
    ) -> None:
        self._link = link
        self._expand = expand
        self.description = description
        self.batch_helper = batch_helper
        self._count_lock = threading.Lock()
        #: Remote commands started (``exec`` requests), for tests and benchmarks.
        self.exec_count = 0
        #: Request/answer exchanges (one per run/run_batch), for tests and benchmarks.
        self.round_trips = 0

    def _count(self, *, execs: int, round_trips: int) -> None:
        with self._count_lock:
            self.exec_count += execs
            self.round_trips += round_trips

    def exec(
        self, command: str, *, stdin: bytes | None, timeout: float, label: str
    ) -> tuple[int, bytes, bytes]:
        """Run ``command`` through the remote login shell; stdout and stderr drained
        together; killed (process group, then channel) at ``timeout``."""
        conn = self._link()
        transport = conn.transport
        try:
            chan = transport.open_session(timeout=min(timeout, 30.0))
        except CONNECTION_TROUBLE as exc:
            raise conn.failure(exc, f"starting {label}") from None
        self._count(execs=1, round_trips=1)
        try:
            chan.exec_command(command)
        except CONNECTION_TROUBLE as exc:
            chan.close()
            raise conn.failure(exc, f"starting {label}") from None

        out: list[bytes] = []
        err: list[bytes] = []
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            send_signal(chan, "KILL")
            chan.close()

        def drain_stderr() -> None:
            while True:
                data = chan.recv_stderr(RECV)
                if not data:
                    return
                err.append(data)

        def feed_stdin() -> None:
            try:
                # In slices: paramiko's sendall copies what is left after every packet,
                # which is quadratic in a large stdin such as an upload's tar stream.
                data = stdin or b""
                for at in range(0, len(data), STDIN_SLICE):
                    chan.sendall(data[at : at + STDIN_SLICE])
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
                data = chan.recv(RECV)
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
        if status == -1 and conn.dead():
            # No exit status because the connection died: the outcome is unknown.
            conn.lost(f"connection dropped while running {label}")
            raise ConnectionLost(
                f"connection to {self.description} lost while running {label}; its outcome "
                "is unknown; reconnecting"
            )
        return status, b"".join(out), b"".join(err)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None,
        cwd: str | None,
        stdin: bytes | None,
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
        status, out, err = self.exec(
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

    def run_batch(self, batch: Batch, *, timeout: float) -> BatchResult:
        """Every command and read of ``batch`` in one round trip.

        With ``batch_helper="auto"`` the request goes to a persistent helper started on
        first use (its start is pipelined with the first request); where the remote side
        has no python3, each batch is one ``sh`` command instead.
        """
        reads = [(self._expand(r.path), r.offset, r.max_bytes) for r in batch.reads]
        nonce = new_nonce()
        conn = self._link()
        if self.batch_helper == "auto" and not conn.no_python:
            payload = build_request(nonce, batch.commands, reads, with_script=False)
            if conn.batch_lock.acquire(timeout=timeout):
                try:
                    answer = self._helper_request(conn, payload, nonce, timeout)
                finally:
                    conn.batch_lock.release()
                if answer is not None:
                    return parse_response(batch, nonce, answer, b"", 0, self.description)
        helper = "sh" if self.batch_helper == "auto" else self.batch_helper
        request = build_request(nonce, batch.commands, reads)
        status, out, err = self.exec(
            LAUNCHERS[helper], stdin=request, timeout=timeout, label="batched refresh"
        )
        return parse_response(batch, nonce, out, err, status, self.description)

    def _helper_request(
        self, conn: Link, payload: bytes, nonce: str, timeout: float
    ) -> bytes | None:
        """One request to the persistent helper (started if needed); None when the remote
        side cannot run it (then the caller falls back to a one-shot command)."""
        server = conn.batch_server
        try:
            if server is None or not server.usable():
                conn.drop_batch_server()
                chan = conn.transport.open_session(timeout=min(timeout, 30.0))
                self._count(execs=1, round_trips=0)
                chan.exec_command(SERVER_LAUNCHER)
                server = conn.batch_server = BatchServer(chan)
            self._count(execs=0, round_trips=1)
            return server.request(payload, nonce, timeout)
        except TimeoutError:
            conn.drop_batch_server(kill=True)
            raise CommandTimeout(
                f"batched refresh did not finish within {timeout:g} s and was killed"
            ) from None
        except HelperGone as gone:
            tail = server.stderr_tail if server is not None else ""
            conn.drop_batch_server()
            if conn.dead():
                conn.lost("connection dropped during a batched refresh")
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
        except CONNECTION_TROUBLE as exc:
            conn.drop_batch_server()
            raise conn.failure(exc, "a batched refresh") from None
