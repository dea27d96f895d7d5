"""One remote command that answers a whole :class:`Batch`: the script and its parser.

The request travels on the remote command's stdin as one JSON line (after ``#``, so it
is a comment to ``sh``) followed by an equivalent POSIX ``sh`` script. The launcher runs
a small Python helper when ``python3`` exists on the remote side (one process for every
read; stat and read on the same file descriptor) and the ``sh`` script otherwise. Both
answer in the same framing::

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
import json
import os
import secrets
import shlex
import stat as stat_mod
from collections.abc import Sequence
from typing import Literal

from ddp_tui.remote.executor import (
    Batch,
    BatchResult,
    CommandResult,
    ExecutorError,
    FileStat,
    ReadResult,
)
from ddp_tui.remote.ssh_api import RemoteProtocolError

BatchHelper = Literal["auto", "python", "sh"]

# Runs on the remote side with any python3 >= 3.6; keep it free of newer syntax.
PY_HELPER = r"""
import json, os, stat, subprocess, sys
def main():
    req = json.loads(sys.stdin.buffer.readline()[1:].decode("utf-8"))
    nonce = req["n"].encode()
    recs, blobs = [], []
    for argv in req["c"]:
        args = [a.encode("utf-8", "surrogateescape") for a in argv]
        try:
            p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        except OSError as e:
            recs.append(b"N" if e.errno == 2 else ("E %d" % (e.errno or 0)).encode())
            blobs += [b"", b""]
            continue
        out, err = p.communicate()
        recs.append(("C %d" % p.returncode).encode())
        blobs += [out, err]
    for path, off, mx in req["r"]:
        try:
            fd = os.open(path.encode("utf-8", "surrogateescape"), os.O_RDONLY)
        except OSError as e:
            if e.errno in (2, 20):
                recs.append(b"M")
            elif e.errno in (1, 13):
                recs.append(b"P")
            else:
                recs.append(("E %d" % (e.errno or 0)).encode())
            blobs.append(b"")
            continue
        try:
            st = os.fstat(fd)
            parts = []
            if not stat.S_ISDIR(st.st_mode):
                os.lseek(fd, off, 0)
                want = mx
                while want is None or want > 0:
                    chunk = os.read(fd, 1 << 20 if want is None else min(want, 1 << 20))
                    if not chunk:
                        break
                    parts.append(chunk)
                    if want is not None:
                        want -= len(chunk)
        finally:
            os.close(fd)
        sec, nsec = divmod(st.st_mtime_ns, 1000000000)
        recs.append(("S %d %d.%09d %x %d" % (st.st_size, sec, nsec, st.st_mode, st.st_ino))
                    .encode())
        blobs.append(b"".join(parts))
    w = sys.stdout.buffer
    w.write(nonce + b" BEGIN\n" + b"".join(r + b"\n" for r in recs))
    w.write(nonce + b" SIZES\n" + b"".join(("%d\n" % len(b)).encode() for b in blobs))
    w.write(nonce + b" DATA\n")
    for b in blobs:
        w.write(b)
    w.write(nonce + b" END\n")
    w.flush()
main()
"""

_PY_LAUNCH = "exec python3 -I -S -c " + shlex.quote(PY_HELPER)
LAUNCHERS: dict[str, str] = {
    "python": _PY_LAUNCH,
    "sh": "exec sh -s",
    "auto": f"if command -v python3 >/dev/null 2>&1; then {_PY_LAUNCH}; else exec sh -s; fi",
}


def new_nonce() -> str:
    return "DDPTUI-" + secrets.token_hex(8)


def build_request(
    nonce: str, commands: Sequence[Sequence[str]], reads: Sequence[tuple[str, int, int | None]]
) -> bytes:
    """The stdin of the batch command: the JSON line, then the ``sh`` script."""
    for argv in commands:
        if not argv:
            raise ValueError("a batch command needs a non-empty argv")
    for _path, offset, max_bytes in reads:
        if offset < 0 or (max_bytes is not None and max_bytes < 0):
            raise ValueError("read offsets and sizes must not be negative")
    request = {"n": nonce, "c": [list(a) for a in commands], "r": [list(r) for r in reads]}
    line = "#" + json.dumps(request, separators=(",", ":")) + "\n"
    return (line + _sh_script(nonce, commands, reads)).encode("utf-8", "surrogateescape")


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
            f'else tail -c +{offset + 1} -- "$f" 2>/dev/null{limit} >{b}; fi; '
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
        if rec == ["P"]:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), req.path)
        if len(rec) == 2 and rec[0] == "E" and rec[1].isdigit():
            code = int(rec[1])
            raise OSError(code, os.strerror(code), req.path)
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
