"""One remote command that answers a whole :class:`Batch`: the script and its parser.

The request travels on the remote command's stdin as one line holding a Python literal
(after ``#``, so it is a comment to ``sh``) followed by an equivalent POSIX ``sh``
script. The launcher runs the Python helper (:mod:`ddp_tui.remote.backends.ssh.batch_helper`)
when ``python3`` exists on the remote side (one process for every read; stat and read on
the same file descriptor) and the ``sh`` script otherwise, or when the batch is so small
that forking ``stat``/``tail`` per read is cheaper than starting Python. Both answer in
the same framing::

    <nonce> BEGIN
    one record line per command, then per read:
        C <exit status> | N (command not found) | E <errno>
        S <size> <mtime sec>.<nsec> <st_mode hex> <inode> | M (missing) | P (permission denied)
    <nonce> SIZES
    one decimal length per blob: stdout and stderr of each command, data of each read
    <nonce> DATA
    the blobs, raw and back to back
    <nonce> END

Lengths come before bytes, so no content can be mistaken for framing; the random nonce
lets the parser skip anything a login shell prints first and detect truncation.
"""

from __future__ import annotations

import errno
import importlib.resources
import os
import secrets
import shlex
import stat as stat_mod
from collections.abc import Sequence
from typing import Literal

from ddp_tui.remote.backends.executor import (
    Batch,
    BatchResult,
    CommandResult,
    ExecutorError,
    FileStat,
    ReadResult,
)
from ddp_tui.remote.backends.ssh.api import RemoteProtocolError

#: "auto": a persistent Python helper on the remote side (started once per connection),
#: or a one-shot sh script per batch where there is no python3. "python"/"sh": one-shot
#: helpers (one remote command per batch).
BatchHelper = Literal["auto", "python", "sh"]

#: The remote program, sent as the argument of ``python3 -c``: read as text (package
#: data), never imported here.
PY_HELPER = (
    importlib.resources.files(__name__.rpartition(".")[0])
    .joinpath("batch_helper.py")
    .read_text(encoding="utf-8")
)

#: The first line a persistent helper prints (anything a login shell prints before it
#: is skipped); the same bytes as ``HELLO`` in batch_helper.py, which cannot import it.
HELPER_HELLO = b"DDPTUI-HELPER 1\n"
#: Starts the persistent helper; exits 127 at once where there is no python3.
SERVER_LAUNCHER = (
    "command -v python3 >/dev/null 2>&1 || exit 127; exec python3 -I -S -c "
    + shlex.quote(PY_HELPER)
    + " serve"
)
#: One-shot launchers: each reads one request (and for sh, the script) from stdin.
LAUNCHERS: dict[str, str] = {
    "python": "exec python3 -I -S -c " + shlex.quote(PY_HELPER),
    "sh": "exec sh -s",
}


def new_nonce() -> str:
    return "DDPTUI-" + secrets.token_hex(8)


def build_request(
    nonce: str,
    commands: Sequence[Sequence[str]],
    reads: Sequence[tuple[str, int, int | None]],
    *,
    with_script: bool = True,
) -> bytes:
    """The request line, then (for one-shot helpers) the equivalent ``sh`` script."""
    for argv in commands:
        if not argv:
            raise ValueError("a batch command needs a non-empty argv")
    for _path, _offset, max_bytes in reads:
        if max_bytes is not None and max_bytes < 0:
            raise ValueError("read sizes must not be negative")
    # A Python literal (the helper eval()s it: json would cost an import); repr() escapes
    # newlines, so it stays one line, and sh reads it as a comment.
    request = (nonce, [[str(a) for a in argv] for argv in commands], [tuple(r) for r in reads])
    line = "#" + repr(request) + "\n"
    script = _sh_script(nonce, commands, reads) if with_script else ""
    return (line + script).encode("utf-8", "surrogateescape")


def _tail_arg(offset: int) -> str:
    """``tail -c`` for a read from ``offset``; a negative one is the last ``-offset`` bytes."""
    return str(-offset) if offset < 0 else f"+{offset + 1}"


def _sh_script(
    nonce: str, commands: Sequence[Sequence[str]], reads: Sequence[tuple[str, int, int | None]]
) -> str:
    q = shlex.quote
    out = [
        "umask 077",
        f'T="${{TMPDIR:-/tmp}}/ddp-tui-batch.$$.{nonce[-8:]}"',
        'mkdir "$T" || exit 90',
        "trap 'rm -rf \"$T\"' EXIT",
        "trap 'exit 129' HUP",
        "trap 'exit 143' TERM",
        f"printf '%s\\n' {q(nonce + ' BEGIN')}",
    ]
    blob = 0
    for argv in commands:
        words = " ".join(q(a) for a in argv)
        o, e = f'"$T/{blob}"', f'"$T/{blob + 1}"'
        out.append(
            f"if command -v -- {q(argv[0])} >/dev/null 2>&1; then {words} </dev/null >{o} 2>{e}; "
            f"printf 'C %d\\n' \"$?\"; else printf 'N\\n'; : >{o}; : >{e}; fi"
        )
        blob += 2
    for path, offset, max_bytes in reads:
        b = f'"$T/{blob}"'
        limit = f" | head -c {max_bytes}" if max_bytes is not None else ""
        out.append(
            f"f={q(path)}; if [ ! -e \"$f\" ]; then printf 'M\\n'; : >{b}; "
            f"elif [ ! -r \"$f\" ]; then printf 'P\\n'; : >{b}; "
            f"elif s=$(stat -L -c '%s %.9Y %f %i' -- \"$f\" 2>/dev/null); then "
            f'printf \'S %s\\n\' "$s"; if [ -d "$f" ]; then : >{b}; '
            f'else tail -c {_tail_arg(offset)} -- "$f" 2>/dev/null{limit} >{b}; fi; '
            f"else printf 'M\\n'; : >{b}; fi"
        )
        blob += 1
    files = " ".join(f'"$T/{i}"' for i in range(blob))
    out.append(f"printf '%s\\n' {q(nonce + ' SIZES')}")
    if blob:
        out.append(f"stat -c %s -- {files}")
    out.append(f"printf '%s\\n' {q(nonce + ' DATA')}")
    if blob:
        out.append(f"cat -- {files}")
    out.append(f"printf '%s\\n' {q(nonce + ' END')}")
    return "\n".join(out) + "\n"


class FrameReader:
    """Finds where one framed answer ends in a growing buffer (persistent helper)."""

    def __init__(self, nonce: str) -> None:
        tag = nonce.encode("ascii")
        self._sizes_tag = tag + b" SIZES\n"
        self._data_tag = tag + b" DATA\n"
        self._end_len = len(tag) + len(b" END\n")
        self._scanned = 0
        self._total: int | None = None

    def complete(self, buf: bytes | bytearray) -> int | None:
        """The length of the whole answer once ``buf`` holds it, else None."""
        if self._total is None:
            at = buf.find(self._data_tag, max(0, self._scanned - len(self._data_tag)))
            if at < 0:
                self._scanned = len(buf)
                return None
            start = buf.rfind(self._sizes_tag, 0, at)
            if start < 0:
                self._total = len(buf)  # malformed: let the parser say what is wrong
            else:
                try:
                    sizes = [int(x) for x in bytes(buf[start + len(self._sizes_tag) : at]).split()]
                except ValueError:
                    sizes = []
                    self._total = len(buf)
                if self._total is None:
                    self._total = at + len(self._data_tag) + sum(sizes) + self._end_len
        return self._total if len(buf) >= self._total else None


def _excerpt(data: bytes, limit: int = 300) -> str:
    text = data[:limit].decode("utf-8", "replace")
    return repr(text) + (" ..." if len(data) > limit else "")


def parse_response(
    batch: Batch,
    nonce: str,
    stdout: bytes,
    stderr: bytes,
    exit_status: int,
    where: str,
) -> BatchResult:
    """Turn the helper's framed answer into the :class:`BatchResult` LocalExecutor gives.

    Raises :class:`RemoteProtocolError` when the answer is not well framed, and the same
    errors LocalExecutor raises for a missing program or an unreadable file.
    """

    def bad(reason: str) -> RemoteProtocolError:
        err_tail = stderr[-500:].decode("utf-8", "replace").strip()
        return RemoteProtocolError(
            f"unexpected answer from {where} to a batched refresh ({reason}); "
            f"exit status {exit_status}; output began {_excerpt(stdout)}"
            + (f"; stderr: {err_tail}" if err_tail else "")
        )

    tag = nonce.encode("ascii")
    begin = tag + b" BEGIN\n"
    start = stdout.find(begin)
    if start < 0:
        raise bad("no start marker")
    pos = start + len(begin)

    def line() -> bytes:
        nonlocal pos
        end = stdout.find(b"\n", pos)
        if end < 0:
            raise bad("output ends in the middle of a header")
        text = stdout[pos:end]
        pos = end + 1
        return text

    records: list[list[str]] = []
    while True:
        text = line()
        if text == tag + b" SIZES":
            break
        records.append(text.decode("ascii", "replace").split())
    sizes: list[int] = []
    while True:
        text = line()
        if text == tag + b" DATA":
            break
        try:
            sizes.append(int(text))
        except ValueError:
            raise bad(f"bad length line {text[:60]!r}") from None
    n_cmd, n_read = len(batch.commands), len(batch.reads)
    if len(records) != n_cmd + n_read or len(sizes) != 2 * n_cmd + n_read:
        raise bad(
            f"{len(records)} records and {len(sizes)} blobs for {n_cmd} commands and {n_read} reads"
        )
    blobs: list[bytes] = []
    for size in sizes:
        if size < 0 or pos + size > len(stdout):
            raise bad("output is shorter than announced")
        blobs.append(stdout[pos : pos + size])
        pos += size
    if stdout[pos : pos + len(tag) + 5] != tag + b" END\n":
        raise bad("no end marker after the data")

    results: list[CommandResult] = []
    for i, argv in enumerate(batch.commands):
        rec = records[i]
        out, err = blobs[2 * i], blobs[2 * i + 1]
        if rec == ["N"]:
            raise ExecutorError(f"{argv[0]}: command not found on {where}")
        if len(rec) == 2 and rec[0] == "E" and rec[1].isdigit():
            raise ExecutorError(f"{argv[0]}: cannot run on {where}: {os.strerror(int(rec[1]))}")
        if len(rec) != 2 or rec[0] != "C":
            raise bad(f"bad command record {' '.join(rec)!r}")
        try:
            code = int(rec[1])
        except ValueError:
            raise bad(f"bad exit status {rec[1]!r}") from None
        results.append(
            CommandResult(
                tuple(argv), code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
            )
        )
    reads: list[ReadResult] = []
    for j, req in enumerate(batch.reads):
        rec = records[n_cmd + j]
        data = blobs[2 * n_cmd + j]
        if rec == ["M"]:
            reads.append(ReadResult(req, b"", None))
            continue
        # A file that cannot be read is that read's answer, not the batch's failure: one
        # damaged run directory must not hide every other run.
        if rec == ["P"]:
            reads.append(ReadResult(req, b"", None, os.strerror(errno.EACCES)))
            continue
        if len(rec) == 2 and rec[0] == "E" and rec[1].isdigit():
            reads.append(ReadResult(req, b"", None, os.strerror(int(rec[1]))))
            continue
        if len(rec) != 5 or rec[0] != "S":
            raise bad(f"bad read record {' '.join(rec)!r}")
        try:
            size = int(rec[1])
            sec_text, _, nsec_text = rec[2].partition(".")
            sec, nsec = int(sec_text), int(nsec_text or "0")
            mode = int(rec[3], 16)
            inode = int(rec[4])
        except ValueError:
            raise bad(f"bad read record {' '.join(rec)!r}") from None
        # The same arithmetic as CPython's st_mtime, so equal files give equal floats.
        mtime = sec + nsec * 1e-9
        st = FileStat(size, mtime, stat_mod.S_ISDIR(mode), inode)
        reads.append(ReadResult(req, data, st))
    return BatchResult(results, reads)
