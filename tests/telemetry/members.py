"""Real processes for the sampler to find: each allocates and touches a known amount of memory,
writes a ready file, and holds until its stdin closes (by construction: no sleeps).

``Member(env=..., mib=50, fork=True)`` forks once before allocating, so that the child and the
grandchild each hold their own ``mib`` (not copy-on-write pages of one block).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

_CODE = r"""
import os, sys
ready, mib, fork = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
name = "parent"
if fork and os.fork() == 0:
    name = "child"
block = bytearray(mib << 20)
for i in range(0, len(block), 4096):
    block[i] = 1  # touch every page: it counts in RSS
open(ready + "." + name, "w").close()
sys.stdin.read()  # hold until the test closes our stdin (the fork shares it)
"""


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll ``condition()`` until it is true; fail after a generous deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@contextmanager
def members(
    tmp: Path, envs: Sequence[Mapping[str, str]], *, mib: int = 1, fork: bool = False
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start one holding process (two with ``fork``) per env; yield once all are ready."""
    procs: list[subprocess.Popen[bytes]] = []
    readies: list[Path] = []
    try:
        for n, extra in enumerate(envs):
            ready = tmp / f"ready-{n}"
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **extra}
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _CODE, str(ready), str(mib), "1" if fork else "0"],
                    stdin=subprocess.PIPE,
                    env=env,
                )
            )
            readies += [Path(f"{ready}.parent")] + ([Path(f"{ready}.child")] if fork else [])
        wait_for(lambda: all(r.exists() for r in readies), "the member processes")
        yield procs
    finally:
        for p in procs:
            assert p.stdin is not None
            p.stdin.close()
        for p in procs:
            p.wait(timeout=60)


def exited(pid: int) -> bool:
    """Gone, or a zombie nobody reaps (an orphan's in a container without an init)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def sampler_env(**extra: str) -> dict[str, str]:
    """The environment a job gives its sampler (``DDP_TUI_SAMPLER=1``), importing ``src``."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(SRC),
        "DDP_TUI_SAMPLER": "1",
    }
    env.update(extra)
    return env
