"""Name CPython gh-112275 when a taking of stacks shows it (pure; docs/stacks.md, Limits).

CPython 3.8 to 3.11.9 can hang a child inside ``os.fork()`` itself: ``PyOS_AfterFork_Child``
waits for ever on the interpreter's thread-list lock, held at fork time by a foreign thread
(gloo's ``ProcessGroupGloo::runLoop`` creating a thread state as it drops a tensor). The child
(a DataLoader worker) never reaches a frame of its own: its Python stack is its parent's copy,
ending in ``multiprocessing/popen_fork.py`` ``_launch``. Its parent rank waits for the
worker's batch in the DataLoader's ``_try_get_data``; the other ranks wait in a collective.

Two kinds of evidence, either enough:

- **the child itself**: a process that is no registered rank whose main thread's innermost
  Python frame is ``_launch`` in ``popen_fork.py`` (a registered rank there is a parent
  forking at that instant, not this bug);
- **the parent**: a rank waiting in the DataLoader for at least :data:`LOADER_WAIT_SEC` while
  another rank already waits in a collective for it, and its Python is one of the affected
  versions (the header of its stack registration, or py-spy's ``Python v3.11.7`` line). A rank
  waiting so on a fixed Python, or on a Python whose version is unknown, or while no other rank
  waits for it (every rank reading a slow dataset), is not named: a slow dataset is no CPython
  bug.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ddp_tui.diagnosis.stacks import OK, ProcessStack
from ddp_tui.diagnosis.stall import duration_label

BUG = "CPython gh-112275"
#: The affected versions, as (first, first fixed): 3.12.0 is fixed, so is 3.11.10.
AFFECTED = ((3, 8, 0), (3, 11, 10))
#: How long a rank waits for one DataLoader batch before the bug is named (a first batch of
#: a big dataset can take a while; a minute or two is not unusual).
LOADER_WAIT_SEC = 120.0
FIX = (
    "use Python 3.11.10+ or 3.12+, or start the workers without fork: "
    'DataLoader(..., multiprocessing_context="forkserver") (or "spawn")'
)

_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")
_PY_SPY_VERSION = re.compile(r"^Python v(\d+\.\d+(?:\.\d+)?)", re.MULTILINE)
# Where DataLoader's main process waits for a worker's batch (torch/utils/data/dataloader.py).
_LOADER_WAITS = ("_try_get_data", "_get_data")


def parse_version(text: object) -> tuple[int, int, int] | None:
    """``"3.11.7"`` -> ``(3, 11, 7)``; None for anything else."""
    m = _VERSION.match(text) if isinstance(text, str) else None
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


def python_of(header: Mapping[str, Any], text: str = "") -> str | None:
    """A process's Python version: its registration's ``python``, else py-spy's header line."""
    said = header.get("python")
    if parse_version(said) is not None:
        return str(said)
    m = _PY_SPY_VERSION.search(text)
    return m[1] if m else None


def affected(version: str | None) -> bool | None:
    """Whether Python ``version`` has the bug (None: unknown)."""
    v = parse_version(version)
    return None if v is None else AFFECTED[0] <= v < AFFECTED[1]


def in_fork_launch(process: ProcessStack) -> bool:
    """Whether the process's main thread stands in ``popen_fork.py`` ``_launch``, innermost."""
    top = process.top if process.status == OK else None
    return (
        top is not None
        and top.function == "_launch"
        and top.file.endswith("multiprocessing/popen_fork.py")
    )


def waits_for_loader(process: ProcessStack) -> bool:
    """Whether the process's main thread waits in the DataLoader for a worker's batch."""
    main = process.main if process.status == OK else None
    return main is not None and any(
        f.function in _LOADER_WAITS and f.file.endswith("torch/utils/data/dataloader.py")
        for f in main.python_frames
    )


def in_collective(process: ProcessStack) -> bool:
    """Whether the process's main thread waits in ``torch.distributed`` (a collective)."""
    main = process.main if process.status == OK else None
    return main is not None and any("torch/distributed/" in f.file for f in main.python_frames)


def fork_hang_cause(
    processes: Sequence[ProcessStack],
    *,
    python: Mapping[int, str | None],
    quiet: Mapping[int, float | None],
) -> str:
    """The likely cause in words when the stacks show gh-112275, else "".

    ``python``: each process's Python version by pid (None: unknown); ``quiet``: each rank's
    seconds since its last progress, by rank."""
    for p in processes:
        if p.rank is None and in_fork_launch(p) and affected(python.get(p.pid)) is not False:
            on = f" on Python {python[p.pid]}" if python.get(p.pid) else ""
            return (
                f"likely {BUG}: {p.label} is stuck inside os.fork() before its first frame "
                f"(its stack is its parent's, ending in popen_fork.py _launch){on}, a CPython "
                f"bug of 3.8 to 3.11.9; {FIX}"
            )
    waiting = [p for p in processes if p.rank is not None and in_collective(p)]
    for p in processes:
        waited = quiet.get(p.rank) if p.rank is not None else None
        version = python.get(p.pid)
        if (
            waited is not None
            and waited >= LOADER_WAIT_SEC
            and waits_for_loader(p)
            and any(q.rank != p.rank for q in waiting)
            and affected(version)
        ):
            return (
                f"likely {BUG}: {p.label} has waited {duration_label(waited)} for its "
                f"DataLoader's worker on Python {version}, where a worker forked while "
                "another thread (gloo's) held the interpreter's thread lock hangs before its "
                f"first frame (a CPython bug of 3.8 to 3.11.9); {FIX}"
            )
    return ""
