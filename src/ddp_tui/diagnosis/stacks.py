"""Every rank's Python stack, read from what the ranks dumped (pure; docs/stacks.md).

Two texts come in:

- **faulthandler's**, which a rank writes into its ``stacks/live/`` file when signalled
  (:func:`ddp_tui.jobfiles.register_stack_dump`)::

      Thread 0x00007f3a2b7fe640 (most recent call first):
        File "/usr/lib/python3.11/threading.py", line 324 in wait

      Current thread 0x00007f3a3c8e1740 (most recent call first):
        File "/x/script.py", line 12 in slow_step
        File "/x/script.py", line 30 in <module>

- **py-spy's** (``py-spy dump --pid PID``), where py-spy is on the node: a two-line process
  header, then per thread ``Thread 4242 (idle): "MainThread"`` and frames
  ``    slow_step (script.py:12)``, innermost first (native frames have the same shape).

Both become :class:`ThreadStack` lists, innermost frame first. A process's *main* thread is
the one the rank named at registration (faulthandler prints the same ident), else py-spy's
``MainThread`` (or the thread whose id is the pid), else the signalled one. Ranks whose main
threads stand at the same frames are one :class:`StackGroup`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ddp_tui.diagnosis.text import rank_ranges

#: How a process's stack was taken.
FAULTHANDLER = "faulthandler"
PY_SPY = "py-spy"
#: A process's answer: ``ok`` (a stack), ``gone`` (no such process now), ``unregistered``
#: (the pid does not hold its dump file: never signalled), ``silent`` (signalled, wrote
#: nothing in time), ``failed`` (py-spy or the node command failed).
OK = "ok"

_FH_THREAD = re.compile(
    r"^(?P<current>Current thread|Thread) (?P<id>0x[0-9a-fA-F]+)(?: \[(?P<name>.*)\])?"
    r" \(most recent call first\):\s*$"
)
_FH_STACK = re.compile(r"^Stack \(most recent call first\):\s*$")
_FH_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+|\?\?\?) in (?P<func>.*?)\s*$')
_SPY_THREAD = re.compile(
    r'^Thread (?P<id>0x[0-9a-fA-F]+|\d+) \((?P<status>[^)]*)\)(?:: "(?P<name>.*)")?\s*$'
)
_SPY_FRAME = re.compile(r"^ {4}(?P<func>\S.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)\s*$")
# Frames in these are the library's, not the user's own code.
_LIBRARY_MARKS = ("/site-packages/", "/dist-packages/", "/lib/python3", "/ddp_tui/")


@dataclass(frozen=True)
class Frame:
    function: str
    file: str
    line: int | None

    @property
    def short(self) -> str:
        """``slow_step at script.py:12``."""
        where = self.file.rsplit("/", 1)[-1]
        return (
            f"{self.function} at {where}:{self.line}"
            if self.line
            else f"{self.function} at {where}"
        )

    @property
    def is_library(self) -> bool:
        """Whether the frame is in Python's or an installed package's code (or native)."""
        return (
            self.file.startswith("<")
            or any(mark in self.file for mark in _LIBRARY_MARKS)
            or self.file.endswith((".so", ".c", ".cpp", ".cc", ".h", ".cu"))
            or not self.file.endswith(".py")
        )

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "file": self.file, "line": self.line}


@dataclass(frozen=True)
class ThreadStack:
    thread_id: str  # faulthandler's hex ident, or py-spy's thread id as printed
    frames: tuple[Frame, ...]  # innermost first
    name: str = ""
    current: bool = False  # the thread that handled the signal (faulthandler)
    status: str = ""  # py-spy's "active", "idle", "active+gil"

    @property
    def python_frames(self) -> tuple[Frame, ...]:
        """The Python frames (py-spy ``--native`` adds C frames, whose addresses differ from
        process to process): what a summary names and what ranks are grouped by."""
        frames = tuple(f for f in self.frames if f.file.endswith(".py"))
        return frames or self.frames

    def to_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "name": self.name,
            "current": self.current,
            "status": self.status,
            "frames": [f.to_dict() for f in self.frames],
        }


def _int_line(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


def parse_faulthandler(text: str) -> list[ThreadStack]:
    """The threads of one faulthandler dump (``all_threads``), in the order printed. Lines
    that are no part of a dump (a header, an earlier dump's tail) are skipped."""
    threads: list[ThreadStack] = []
    head: tuple[str, str, bool] | None = None
    frames: list[Frame] = []

    def close() -> None:
        if head is not None:
            threads.append(ThreadStack(head[0], tuple(frames), name=head[1], current=head[2]))

    for line in text.splitlines():
        m = _FH_THREAD.match(line)
        if m or _FH_STACK.match(line):
            close()
            head = (
                (m["id"], m["name"] or "", m["current"] == "Current thread")
                if m
                else ("", "", True)
            )
            frames = []
            continue
        f = _FH_FRAME.match(line)
        if f and head is not None:
            frames.append(Frame(f["func"], f["file"], _int_line(f["line"])))
    close()
    return threads


def parse_py_spy(text: str) -> list[ThreadStack]:
    """The threads of one ``py-spy dump`` (its text form; ``--locals`` lines are skipped)."""
    threads: list[ThreadStack] = []
    head: tuple[str, str, str] | None = None
    frames: list[Frame] = []

    def close() -> None:
        if head is not None:
            threads.append(ThreadStack(head[0], tuple(frames), name=head[1], status=head[2]))

    for line in text.splitlines():
        m = _SPY_THREAD.match(line)
        if m:
            close()
            head = (m["id"], m["name"] or "", m["status"])
            frames = []
            continue
        f = _SPY_FRAME.match(line)
        if f and head is not None:
            frames.append(Frame(f["func"], f["file"], _int_line(f["line"])))
    close()
    return threads


def main_thread(
    threads: Sequence[ThreadStack], *, ident: int | None = None, pid: int | None = None
) -> ThreadStack | None:
    """The process's main thread: the registered ``ident`` (as faulthandler prints it), a
    thread named ``MainThread`` or numbered as the pid (py-spy), else the signalled one,
    else the oldest (printed last)."""
    if not threads:
        return None
    for t in threads:
        if ident is not None and t.thread_id.startswith("0x") and int(t.thread_id, 16) == ident:
            return t
    for t in threads:
        if t.name == "MainThread" or (pid is not None and t.thread_id == str(pid)):
            return t
    for t in threads:
        if t.current:
            return t
    return threads[-1]


@dataclass(frozen=True)
class ProcessStack:
    """One registered process's answer."""

    rank: int | None
    host: str
    pid: int
    status: str  # OK, or why there is no stack (see the module's constants)
    how: str = FAULTHANDLER
    threads: tuple[ThreadStack, ...] = ()
    main_ident: int | None = None
    local_rank: int | None = None
    detail: str = ""  # the reason in words when not OK
    text: str = ""  # what the process wrote, as written

    @property
    def main(self) -> ThreadStack | None:
        return main_thread(self.threads, ident=self.main_ident, pid=self.pid)

    @property
    def top(self) -> Frame | None:
        """The innermost Python frame of the main thread (its innermost frame where it has
        no Python frame)."""
        main = self.main
        return main.python_frames[0] if main is not None and main.frames else None

    @property
    def own_frame(self) -> Frame | None:
        """The innermost frame of the user's own code in the main thread (None: none)."""
        main = self.main
        return next((f for f in main.frames if not f.is_library), None) if main else None

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"

    @property
    def where(self) -> str:
        """``in all_reduce at distributed_c10d.py:2501 (your code: step at train.py:40)``, or
        why there is no stack."""
        if self.status != OK:
            return f"no stack: {self.detail or self.status}"
        top = self.top
        if top is None:
            return "no Python frame in its main thread"
        text = f"in {top.short}"
        own = self.own_frame
        if own is not None and own != top:
            text += f" (your code: {own.short})"
        return text

    @property
    def summary(self) -> str:
        """``rank 0: in all_reduce at distributed_c10d.py:2501``."""
        return f"{self.label}: {self.where}"

    def to_dict(self) -> dict[str, Any]:
        top, own = self.top, self.own_frame
        return {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "host": self.host,
            "pid": self.pid,
            "status": self.status,
            "how": self.how,
            "detail": self.detail,
            "summary": self.summary,
            "top": top.to_dict() if top else None,
            "own": own.to_dict() if own else None,
            "main_thread": self.main.thread_id if self.main else None,
            "threads": [t.to_dict() for t in self.threads],
            "text": self.text,
        }


def parse_process(
    header: Mapping[str, Any], status: str, how: str, text: str, detail: str = ""
) -> ProcessStack:
    """A process's stack from its registration ``header`` and what it (or py-spy) wrote."""
    threads = parse_py_spy(text) if how == PY_SPY else parse_faulthandler(text)
    if status == OK and not threads:
        status, detail = "silent", detail or "its dump held no thread"
    rank, local_rank, pid, ident = (
        header.get(k) for k in ("rank", "local_rank", "pid", "main_thread")
    )
    return ProcessStack(
        rank=rank if isinstance(rank, int) else None,
        host=str(header.get("host", "")),
        pid=pid if isinstance(pid, int) else 0,
        status=status,
        how=how,
        threads=tuple(threads),
        main_ident=ident if isinstance(ident, int) else None,
        local_rank=local_rank if isinstance(local_rank, int) else None,
        detail=detail,
        text=text,
    )


@dataclass(frozen=True)
class StackGroup:
    """Ranks whose main threads stand at the same frames."""

    processes: tuple[ProcessStack, ...]
    frames: tuple[Frame, ...] = field(default=())  # the shared main-thread stack

    @property
    def ranks_label(self) -> str:
        """``ranks 0, 2-5`` / ``rank 1`` / ``pid 42``."""
        ranks = sorted(p.rank for p in self.processes if p.rank is not None)
        pids = [f"pid {p.pid}" for p in self.processes if p.rank is None]
        parts = []
        if ranks:
            word = "rank" if len(ranks) == 1 else "ranks"
            parts.append(f"{word} {rank_ranges(ranks)}")
        return ", ".join(parts + pids)

    @property
    def summary(self) -> str:
        """``ranks 0, 2: in all_reduce at distributed_c10d.py:2501``."""
        return f"{self.ranks_label}: {self.processes[0].where}"


def group_stacks(processes: Iterable[ProcessStack]) -> list[StackGroup]:
    """Ranks with the same main-thread stack together (those without a stack grouped by
    why), the groups in the order of their lowest rank."""
    groups: dict[tuple[Any, ...], list[ProcessStack]] = {}
    for p in processes:
        main = p.main
        key: tuple[Any, ...] = (
            ("stack", tuple((f.function, f.file, f.line) for f in main.python_frames))
            if p.status == OK and main is not None
            else ("none", p.status, p.detail)
        )
        groups.setdefault(key, []).append(p)

    def order(members: list[ProcessStack]) -> tuple[int, int]:
        ranks = [p.rank for p in members if p.rank is not None]
        return (min(ranks) if ranks else 1 << 30, min(p.pid for p in members))

    out = []
    for members in sorted(groups.values(), key=order):
        members.sort(key=lambda p: (p.rank is None, p.rank or 0, p.pid))
        main = members[0].main
        out.append(StackGroup(tuple(members), main.python_frames if main else ()))
    return out


def stacks_text(
    processes: Sequence[ProcessStack],
    *,
    taken_at: str = "",
    head: Sequence[str] = (),
    after: Sequence[str] = (),
) -> str:
    """The human copy: the grouped summary (``head`` lines under the title, ``after`` lines
    below the groups), then each group's main-thread stack, then every process's full dump
    as it wrote it."""
    lines = [f"stacks taken at {taken_at}" if taken_at else "stacks", *head]
    groups = group_stacks(processes)
    lines += [f"  {g.summary}" for g in groups]
    lines += after
    for g in groups:
        if not g.frames:
            continue
        lines += ["", f"{g.ranks_label} (main thread, innermost first):"]
        lines += [
            f"  {f.function} ({f.file}:{f.line if f.line is not None else '?'})" for f in g.frames
        ]
    for p in sorted(processes, key=lambda p: (p.rank is None, p.rank or 0, p.pid)):
        lines += ["", f"--- {p.label} on {p.host} (pid {p.pid}, {p.how}): {p.status}"]
        lines += [p.text.rstrip("\n")] if p.text.strip() else []
    return "\n".join(lines) + "\n"
