"""A ``--metrics regex:...`` built from a log's own repeating lines, for a script whose output no
preset understood.

Lines are grouped by their shape (the line with every number replaced). The shape to use is the
one that repeats, preferring one seen as many times as the run's epochs, then one whose numbers
follow words ddp-tui knows (``loss``, ``acc``, ``epoch``, ...). Its first line becomes the pattern:
literal text escaped, runs of blanks as ``\\s+``, and each number a group named for the word
before it (``epoch``, a metrics.csv column) or left unnamed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ddp_tui.scriptrun.columns import canonical, normalise

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?%?")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z_]*)[^A-Za-z0-9]*$")
_BLANKS = re.compile(r"(?:\\ )+|\\s\+")  # re.escape writes a blank as "\ "
_MAX_LINE = 200
_ANY_NUMBER = r"[-+\d.eE]+%?"


def _name(text_before: str) -> str | None:
    m = _WORD_BEFORE.search(text_before)
    if m is None:
        return None
    word = normalise(m.group(1))
    return "epoch" if word == "epoch" else canonical(word)


def _known(line: str) -> int:
    """How many of the line's numbers follow a word ddp-tui knows."""
    count, last = 0, 0
    for m in _NUMBER.finditer(line):
        count += _name(line[last : m.start()]) is not None
        last = m.end()
    return count


def pattern_for(line: str) -> str:
    """The line as a pattern: its numbers as groups, named where the word before says what."""
    parts: list[str] = []
    used: set[str] = set()
    last = 0
    for m in _NUMBER.finditer(line):
        before = line[last : m.start()]
        parts.append(_BLANKS.sub(r"\\s+", re.escape(before)))
        name = _name(before)
        if name == "epoch" and "epoch" not in used:
            parts.append(r"(?P<epoch>\d+)")
        elif name is not None and name not in used and name != "epoch":
            parts.append(f"(?P<{name}>{_ANY_NUMBER})")
        else:
            parts.append(_ANY_NUMBER)
        if name is not None:
            used.add(name)
        last = m.end()
    return "".join(parts)


def suggest_regex(lines: Iterable[str], epochs: int | None) -> str | None:
    """``regex:PATTERN`` for the repeating numeric line most likely to be the epochs, or None."""
    shapes: dict[str, list[str]] = {}
    for raw in lines:
        line = raw.strip()
        if not line or len(line) > _MAX_LINE or _NUMBER.search(line) is None:
            continue
        shapes.setdefault(_NUMBER.sub("#", line), []).append(line)
    repeating = [found for found in shapes.values() if len(found) >= 2]
    if not repeating:
        return None
    best = max(
        repeating,
        key=lambda found: (len(found) == epochs, _known(found[0]) > 0, len(found)),
    )
    return "regex:" + pattern_for(best[0])
