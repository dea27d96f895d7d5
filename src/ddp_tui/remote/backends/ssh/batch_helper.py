"""The batch helper: runs on the remote host, answers one framed request per line.

Never imported by ddp-tui: :mod:`ddp_tui.remote.backends.ssh.batch` reads this file as text and
runs it there as ``python3 -I -S -c <text>`` (with ``serve`` as argument for the
persistent helper). So it must run on any python3 >= 3.6 with no site packages:
parameter annotations that are not plain builtins stay quoted (3.6 evaluates them, and
has no ``from __future__ import annotations``; local ones are never evaluated), and it
imports nothing but builtin modules (``subprocess`` alone costs ~30 ms of start-up;
``signal`` pulls in ``enum``). Commands are forked by hand, with stdout/stderr in
unlinked temporary files, so no pipe can fill up. The framing is described in
:mod:`ddp_tui.remote.backends.ssh.batch`.
"""

import _signal  # type: ignore[import-not-found]  # builtin; typeshed has only ``signal``
import posix
import sys

#: Printed once by ``serve``; must equal ``batch.HELPER_HELLO`` (this file cannot import it).
HELLO = b"DDPTUI-HELPER 1\n"


def answer(line: bytes) -> None:
    nonce, cmds, reads = eval(line[1:])
    env = posix.environ
    path = env.get(b"PATH", b"/usr/local/bin:/usr/bin:/bin").split(b":")
    tmp = env.get(b"TMPDIR", b"/tmp")
    recs: list[bytes] = []
    blobs: list[bytes] = []
    spawn = getattr(posix, "posix_spawnp", None)

    def tmpfile() -> int:
        try:
            return posix.open(tmp, posix.O_TMPFILE | posix.O_RDWR, 384)
        except (AttributeError, OSError):
            name = b"%s/.ddp-tui-%d-%d" % (tmp, posix.getpid(), len(blobs))
            fd = posix.open(name, posix.O_CREAT | posix.O_EXCL | posix.O_RDWR, 384)
            posix.unlink(name)
            return fd

    def slurp(fd: int, off: int, limit: "int | None") -> bytes:
        posix.lseek(fd, off, 0)
        parts = []
        while limit is None or limit > 0:
            chunk = posix.read(fd, 1048576 if limit is None else min(limit, 1048576))
            if not chunk:
                break
            parts.append(chunk)
            if limit is not None:
                limit -= len(chunk)
        return b"".join(parts)

    for argv in cmds:
        args = [a.encode("utf-8", "surrogateescape") for a in argv]
        out, err = tmpfile(), tmpfile()
        failed = b""
        status = 0
        if spawn is not None:  # vfork-based: much cheaper than fork()
            try:
                pid = spawn(
                    args[0],
                    args,
                    env,
                    file_actions=[
                        (posix.POSIX_SPAWN_OPEN, 0, b"/dev/null", posix.O_RDONLY, 0),
                        (posix.POSIX_SPAWN_DUP2, out, 1),
                        (posix.POSIX_SPAWN_DUP2, err, 2),
                    ],
                )
            except OSError as e:
                failed = b"%d" % (e.errno or 0)
            else:
                status = posix.waitpid(pid, 0)[1]
        else:
            rp, wp = posix.pipe()
            pid = posix.fork()
            if pid == 0:
                try:
                    posix.close(rp)
                    null = posix.open(b"/dev/null", posix.O_RDONLY)
                    posix.dup2(null, 0)
                    posix.dup2(out, 1)
                    posix.dup2(err, 2)
                    prog = args[0]
                    code = 2
                    for cand in (
                        [prog] if b"/" in prog else [(d or b".") + b"/" + prog for d in path]
                    ):
                        try:
                            posix.execv(cand, args)
                        except OSError as e:
                            if code == 2:
                                code = e.errno or 0
                    posix.write(wp, b"%d" % code)
                finally:
                    posix._exit(127)
            posix.close(wp)
            failed = posix.read(rp, 64)
            posix.close(rp)
            status = posix.waitpid(pid, 0)[1]
        if failed:
            recs.append(b"N" if failed == b"2" else b"E " + failed)
            blobs += [b"", b""]
        else:
            rc = posix.WEXITSTATUS(status) if posix.WIFEXITED(status) else -posix.WTERMSIG(status)
            recs.append(b"C %d" % rc)
            blobs += [slurp(out, 0, None), slurp(err, 0, None)]
        posix.close(out)
        posix.close(err)
    for p, off, mx in reads:
        try:
            fd = posix.open(p.encode("utf-8", "surrogateescape"), posix.O_RDONLY)
        except OSError as e:
            recs.append(
                b"M"
                if e.errno in (2, 20)
                else b"P"
                if e.errno in (1, 13)
                else b"E %d" % (e.errno or 0)
            )
            blobs.append(b"")
            continue
        try:
            st = posix.fstat(fd)
            isdir = st.st_mode & 0o170000 == 0o040000
            data = b"" if isdir else slurp(fd, off if off >= 0 else max(0, st.st_size + off), mx)
        finally:
            posix.close(fd)
        sec, nsec = divmod(st.st_mtime_ns, 1000000000)
        recs.append(b"S %d %d.%09d %x %d" % (st.st_size, sec, nsec, st.st_mode, st.st_ino))
        blobs.append(data)
    w = sys.stdout.buffer
    w.write(nonce.encode() + b" BEGIN\n" + b"".join(r + b"\n" for r in recs))
    w.write(nonce.encode() + b" SIZES\n" + b"".join(b"%d\n" % len(b) for b in blobs))
    w.write(nonce.encode() + b" DATA\n")
    for b in blobs:
        w.write(b)
    w.write(nonce.encode() + b" END\n")
    w.flush()


def main() -> None:
    # Python ignores SIGPIPE; children must not inherit that (subprocess resets it too).
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(_signal, name):
            _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
    if sys.argv[1:] == ["serve"]:
        sys.stdout.buffer.write(HELLO)
        sys.stdout.buffer.flush()
        while True:
            line = sys.stdin.buffer.readline()
            if not line:
                return
            answer(line)
    else:
        answer(sys.stdin.buffer.readline())


if __name__ == "__main__":  # as ``python3 -c``: the only way this file runs
    main()
