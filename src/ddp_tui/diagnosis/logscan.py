"""The log tails as the rules read them: numbered lines, rank prefixes, torchrun's summary.

Every rule searches the same :class:`Scan`, built once per run: the lines of ``.err`` then
``.out``, joined into one text so that a rule's pattern runs in one C-level regex search
instead of a Python loop over lines (1,000 runs' tails are diagnosed at every cold start).

When torchrun names the *first observed failure* (its ``ChildFailedError`` summary), the
lines other ranks printed with a ``[rankN]:`` prefix are left out: their errors are
consequences (a peer that died closes the sockets, aborts the NCCL communicator), and a
rule that matched them first would name the wrong cause.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass

from ddp_tui.diagnosis.model import Evidence, LogTail, RunFacts

#: ``[rank1]: Traceback ...`` (torch's own prefix for an uncaught exception in a rank) and
#: ``[default1]:`` (torchrun ``--tee``/``--role`` prefixes).
_RANK_PREFIX_ANYWHERE = re.compile(r"^\[(?:rank|default)(\d+)\]:[ \t]?", re.MULTILINE)
_ROOT_CAUSE = "Root Cause (first observed failure):"
_FIELD = re.compile(r"^\s*(rank|exitcode|host)\s*:\s*(.*?)\s*$")
_EXITCODE = re.compile(r"^(-?\d+)(?:\s*\(pid:\s*\d+\))?\s*(?:\((SIG[A-Z0-9]+)\))?")
_RANK_FIELD = re.compile(r"^(\d+)")


@dataclass(frozen=True)
class Line:
    """One line of a log tail: where it is, its rank (from a prefix), and its text."""

    log: LogTail
    no: int | None  # 1-based line number in the file; None where the tail starts mid-file
    raw: str  # as printed, prefix included: what evidence shows
    text: str  # without a ``[rankN]:`` prefix: what patterns match
    rank: int | None
    index: int = -1  # its place among the scan's searchable lines; -1 where it has none

    def evidence(self) -> Evidence:
        return self.log.evidence(self.no, self.raw)


@dataclass(frozen=True)
class Clue:
    """A pattern, and the literal words without one of which it cannot match.

    Python's ``re`` tries a pattern that begins with an alternation or ``\\b`` at every
    position of the text; ``word in text`` is a fast substring search. Checking the words
    first makes a rule that does not apply cost almost nothing.
    """

    regex: re.Pattern[str]
    words: tuple[str, ...]

    def possible(self, text: str) -> bool:
        return any(word in text for word in self.words)


def clue(pattern: str, *words: str, flags: int = re.MULTILINE) -> Clue:
    """A :class:`Clue`; patterns are MULTILINE, so ``^``/``$`` anchor at each line."""
    if not words:
        raise ValueError("a clue needs at least one word")
    return Clue(re.compile(pattern, flags), words)


@dataclass(frozen=True)
class Hit:
    """A pattern's match, and the line it is on."""

    line: Line
    match: re.Match[str]
    index: int  # the line's place among the scan's searchable lines (``Scan.line(index)``)

    def group(self, index: int | str = 0) -> str:
        """The group's text; "" when the group did not take part in the match."""
        value = self.match.group(index)
        return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class RootCause:
    """torchrun's ``Root Cause (first observed failure)`` entry."""

    rank: int | None
    exitcode: int | None
    signal: str  # "SIGSEGV" where torchrun named one, else ""
    host: str
    lines: tuple[Line, ...]  # the header and the exitcode line, for evidence


def _physical_lines(text: str) -> list[str]:
    """The file's lines as an editor numbers them (split at ``\\n`` only); a line of
    ``\\r``-redrawn progress bars keeps its last frame, as the terminal showed it."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if "\r" in text:
        lines = [x.rstrip("\r").rsplit("\r", 1)[-1] for x in lines]
    return lines


class _Part:
    """One log tail split into lines, with each prefixed line's rank."""

    def __init__(self, tail: LogTail) -> None:
        self.tail = tail
        self.raws = _physical_lines(tail.text)
        self.texts = self.raws
        self.ranks: dict[int, int] = {}
        if "]:" not in tail.text:
            return
        # Find the prefixed lines with one C-level search; count newlines for their numbers.
        joined = "\n".join(self.raws)
        i, pos = 0, 0
        for m in _RANK_PREFIX_ANYWHERE.finditer(joined):
            i += joined.count("\n", pos, m.start())
            pos = m.start()
            if self.texts is self.raws:
                self.texts = list(self.raws)
            self.texts[i] = self.raws[i][m.end() - m.start() :]
            self.ranks[i] = int(m.group(1))

    def line(self, i: int, index: int = -1) -> Line:
        first = self.tail.first_line
        no = first + i if first is not None else None
        return Line(self.tail, no, self.raws[i], self.texts[i], self.ranks.get(i), index)


def _root_cause(part: _Part, i: int) -> RootCause:
    """torchrun's root-cause entry whose header is line ``i`` of ``part``."""
    fields: dict[str, tuple[str, int]] = {}
    # The entry is "[0]:" and then a handful of "name : value" lines.
    for j in range(i + 1, min(i + 10, len(part.texts))):
        m = _FIELD.match(part.texts[j])
        if m:
            fields.setdefault(m.group(1), (m.group(2), j))
    rank = _RANK_FIELD.match(fields["rank"][0]) if "rank" in fields else None
    code = _EXITCODE.match(fields["exitcode"][0]) if "exitcode" in fields else None
    evidence = [part.line(i)] + ([part.line(fields["exitcode"][1])] if "exitcode" in fields else [])
    return RootCause(
        rank=int(rank.group(1)) if rank else None,
        exitcode=int(code.group(1)) if code else None,
        signal=(code.group(2) or "") if code else "",
        host=fields["host"][0] if "host" in fields else "",
        lines=tuple(evidence),
    )


def _find_root_cause(parts: list[_Part]) -> RootCause | None:
    """The first root-cause entry torchrun printed, if any."""
    for part in parts:
        if _ROOT_CAUSE not in part.tail.text:  # most logs have none: a fast test first
            continue
        for i, text in enumerate(part.texts):
            if text.strip() == _ROOT_CAUSE:
                return _root_cause(part, i)
    return None


class Scan:
    """The facts of one run and its searchable lines.

    The searchable lines are numbered 0..``count``-1: ``.err`` then ``.out``, other ranks'
    lines left out where torchrun named the first failure. :class:`Line` objects are made
    only for the lines a rule asks about, since most of a tail is never looked at.
    """

    def __init__(self, facts: RunFacts) -> None:
        self.facts = facts
        parts = [_Part(tail) for tail in facts.logs()]
        self.root = _find_root_cause(parts)
        focus = self.root.rank if self.root is not None else None
        # Per part, the kept line numbers (None: every line).
        self._parts: list[tuple[_Part, list[int] | None]] = []
        texts: list[str] = []
        for part in parts:
            kept: list[int] | None = None
            if focus is not None and part.ranks:
                kept = [i for i in range(len(part.texts)) if part.ranks.get(i, focus) == focus]
                texts += [part.texts[i] for i in kept]
            else:
                texts += part.texts
            self._parts.append((part, kept))
        self._offsets = list(
            itertools.accumulate(
                (len(k) if k is not None else len(p.texts) for p, k in self._parts), initial=0
            )
        )
        self.count = len(texts)
        self._text = "\n".join(texts)

    def line(self, index: int) -> Line:
        """The ``index``-th searchable line."""
        p = bisect.bisect_right(self._offsets, index) - 1
        part, kept = self._parts[p]
        local = index - self._offsets[p]
        return part.line(kept[local] if kept is not None else local, index)

    def index_of(self, text: str) -> int | None:
        """The index of the first line that contains ``text``, or None."""
        pos = self._text.find(text)
        return None if pos < 0 else self._text.count("\n", 0, pos)

    def _hit(self, m: re.Match[str]) -> Hit | None:
        if not self.count:  # a pattern that matches "" matches an empty text too
            return None
        # Counting newlines (C speed) on a hit beats keeping every line's offset.
        index = self._text.count("\n", 0, m.start())
        return Hit(self.line(index), m, index)

    def find(self, pattern: Clue) -> Hit | None:
        """The first line (``.err`` before ``.out``) where ``pattern`` matches."""
        if not pattern.possible(self._text):
            return None
        m = pattern.regex.search(self._text)
        return self._hit(m) if m else None

    def find_all(self, pattern: Clue, limit: int = 50) -> list[Hit]:
        """Up to ``limit`` matches, in order."""
        hits: list[Hit] = []
        if not pattern.possible(self._text):
            return hits
        for m in pattern.regex.finditer(self._text):
            hit = self._hit(m)
            if hit is not None:
                hits.append(hit)
            if len(hits) >= limit:
                break
        return hits

    def _window(self, hit: Hit, start: int, stop: int) -> list[Line]:
        window = [self.line(i) for i in range(max(0, start), min(stop, self.count))]
        return [x for x in window if x.log is hit.line.log and x.rank == hit.line.rank]

    def before(self, hit: Hit, count: int) -> list[Line]:
        """Up to ``count`` lines before the hit's, in the same log and of the same rank."""
        return self._window(hit, hit.index - count, hit.index)

    def after(self, hit: Hit, count: int) -> list[Line]:
        """Up to ``count`` lines after the hit's, in the same log and of the same rank."""
        return self._window(hit, hit.index + 1, hit.index + 1 + count)

    # -- what the job script said about itself (sbatch_templates/_job.sbatch.j2) ---------

    def job_says(self, key: str) -> str:
        """The value of the job script's ``[ddp-tui] key=value`` line, or ""."""
        hit = self.find(clue(rf"^\[ddp-tui\] {re.escape(key)}=(.*)$", f"[ddp-tui] {key}="))
        return hit.group(1).strip() if hit else ""

    def rendezvous(self) -> str:
        """Where the ranks were to meet: the job script's line, else ``run.json``."""
        said = self.job_says("rendezvous")
        if said:
            return said
        doc = self.facts.run_json or {}
        value = doc.get("rendezvous") if hasattr(doc, "get") else None
        return value if isinstance(value, str) else ""
