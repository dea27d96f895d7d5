"""Python tracebacks found in the log tails, and the frame in the user's own code.

Lines are grouped by log and rank (torch prefixes a rank's traceback with ``[rankN]:``), so
two ranks' tracebacks printed in turn are told apart. Unprefixed tracebacks of several
processes that interleave line by line cannot be told apart; the parser then yields what it
can and never fails.
"""

from __future__ import annotations

import os
import re
import weakref
from dataclasses import dataclass, field

from ddp_tui.diagnosis.logscan import Line, Scan
from ddp_tui.diagnosis.model import RunFacts

_HEADER = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
_CHAINED = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
#: torchrun's own traceback when a worker failed: a summary, not the cause.
_LAUNCHER_FILES = ("torch/distributed/run.py", "torch/distributed/elastic/agent/")
_LIBRARY = re.compile(r"site-packages|dist-packages|/lib/python\d(?:\.\d+)?/|^<")
_MAX_TRACEBACKS = 200
_MAX_FRAMES = 400


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    func: str
    src: Line  # the ``File "...", line N, in f`` line itself

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Traceback:
    """One traceback: its frames, outermost first, and the exception line that ends it.

    A chained traceback ("During handling of the above exception ...") is one Traceback:
    the frames and exception of its last part, which is what ended the process.
    """

    header: Line
    frames: list[Frame] = field(default_factory=list)
    exception: Line | None = None

    @property
    def rank(self) -> int | None:
        return self.header.rank

    @property
    def exception_text(self) -> str:
        return self.exception.text.strip() if self.exception is not None else ""

    @property
    def exception_type(self) -> str:
        """``KeyError`` for ``KeyError: 'x'``; the dotted module path is dropped."""
        head = self.exception_text.split(":", 1)[0].strip()
        return head.rsplit(".", 1)[-1]

    @property
    def is_launcher(self) -> bool:
        """torchrun's own traceback (ChildFailedError), which only repeats a rank's failure."""
        if "ChildFailedError" in self.exception_text:
            return True
        return any(part in f.file for f in self.frames for part in _LAUNCHER_FILES)


#: Per scan: several rules ask, and the parse is the costliest part of a run. Weak keys,
#: so a scan and its tracebacks go together once the classifier is done with them.
_PARSED: weakref.WeakKeyDictionary[Scan, tuple[Traceback, ...]] = weakref.WeakKeyDictionary()


def tracebacks(scan: Scan) -> tuple[Traceback, ...]:
    """Every complete traceback in the scan's lines, in order of their first line."""
    found = _PARSED.get(scan)
    if found is None:
        found = _PARSED[scan] = _parse(scan)
    return found


def _parse(scan: Scan) -> tuple[Traceback, ...]:
    done: list[Traceback] = []
    open_: dict[tuple[int, int | None], Traceback] = {}
    chained: dict[tuple[int, int | None], Traceback] = {}
    start = scan.index_of(_HEADER)
    if start is None:  # most logs: no traceback, and no need to look at every line
        return ()
    for index in range(start, scan.count):
        line = scan.line(index)
        key = (id(line.log), line.rank)
        text = line.text
        stripped = text.strip()
        if stripped == _HEADER:
            previous = chained.pop(key, None)
            tb = Traceback(header=previous.header if previous else line)
            open_[key] = tb
            if previous is not None:  # by identity: two ranks may print equal tracebacks
                done = [t for t in done if t is not previous]
            continue
        if stripped in _CHAINED and key not in open_:
            last = next((t for t in reversed(done) if (id(t.header.log), t.rank) == key), None)
            if last is not None:
                chained[key] = last
            continue
        tb_open = open_.get(key)
        if tb_open is None:
            continue
        m = _FRAME.match(text)
        if m:
            if len(tb_open.frames) < _MAX_FRAMES:
                tb_open.frames.append(Frame(m["file"], int(m["line"]), m["func"], line))
        elif not stripped or text[:1].isspace() or stripped.startswith("<"):
            continue  # a source line, a ^^^ marker, "<omitting python frames>"
        else:
            tb_open.exception = line
            del open_[key]
            done.append(tb_open)
            if len(done) >= _MAX_TRACEBACKS:
                break
    return tuple(done)


def is_library(path: str) -> bool:
    """Installed packages and the standard library: not the user's code."""
    return bool(_LIBRARY.search(path))


def user_frame(tb: Traceback, facts: RunFacts) -> Frame | None:
    """The innermost frame in the user's own code.

    A script run: a frame in the script's own directory (or the script itself) first. Any
    run: else the innermost frame outside installed packages and the standard library
    (the trainer's ``ddp_tui/trainer`` or a user's ``pkg.module:function``).
    """
    own = [f for f in tb.frames if not is_library(f.file)]
    if facts.entry == "script" and facts.script:
        name = os.path.basename(facts.script)
        folder = os.path.dirname(facts.script)
        preferred = [
            f
            for f in own
            if os.path.basename(f.file) == name or (folder and f.file.startswith(folder + "/"))
        ]
        if preferred:
            return preferred[-1]
    return own[-1] if own else None


def traceback_of(scan: Scan, line: Line) -> Traceback | None:
    """The traceback that ``line`` ends or belongs to, if any."""
    for tb in tracebacks(scan):
        members = [tb.header, *(f.src for f in tb.frames)]
        if tb.exception is not None:
            members.append(tb.exception)
        if any(m.index == line.index for m in members):
            return tb
    return None
