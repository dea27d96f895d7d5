"""Pure text hygiene for log lines before they reach the screen (no Textual here).

A job log holds whatever the job printed: colour codes, tqdm bars redrawn with
``\\r``, stray control bytes, megabyte-long lines. :func:`clean_line` turns one raw
line into one printable line. Its output never contains a character that
``str.splitlines`` splits on, so one raw line is always one displayed line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ddp_tui.reports.text import collapse_carriage_returns

#: Longest line shown; the rest is summarised as ``…[+N chars]``.
MAX_LINE_CHARS = 2000

# ESC-introduced sequences: CSI (colours, cursor moves), OSC (titles, hyperlinks,
# ended by BEL or ST), and two-character escapes; plus the 8-bit CSI introducer.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[ -/]*[0-~]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
# C0 controls except tab, DEL, C1 controls, and the Unicode line/paragraph
# separators (str.splitlines would break a line on them).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (a lone ESC is dropped too)."""
    if "\x1b" not in text and "\x9b" not in text:
        return text
    return _ANSI.sub("", text).replace("\x1b", "")


def remove_control_chars(text: str) -> str:
    """``text`` without control characters; tabs stay (the log view expands them)."""
    return _CONTROL.sub("", text)


def truncate_line(text: str, max_chars: int = MAX_LINE_CHARS) -> str:
    """At most ``max_chars`` characters of ``text``, then how many were left out."""
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}…[+{len(text) - max_chars:,} chars]"


def clean_line(raw: str, max_chars: int = MAX_LINE_CHARS) -> str:
    """One raw log line as it should be displayed.

    Colour codes go first so that ``\\r`` overwrites are measured in visible
    characters; then a ``\\r``-redrawn progress bar collapses to what a terminal
    would finally show; then other control characters go and the line is cut to
    ``max_chars``. An empty line becomes one space because ``Log.write_lines``
    drops empty strings.
    """
    if _CONTROL.search(raw) is not None:  # most lines need only the length check
        text = strip_ansi(raw)
        text = collapse_carriage_returns(text)
        text = remove_control_chars(text)
    else:
        text = raw
    return truncate_line(text, max_chars) or " "


def clean_lines(raw_lines: Iterable[str], max_chars: int = MAX_LINE_CHARS) -> list[str]:
    """:func:`clean_line` over ``raw_lines``; an element holding ``\\n`` counts as several lines."""
    out: list[str] = []
    for raw in raw_lines:
        if "\n" in raw:
            out.extend(clean_line(part, max_chars) for part in raw.split("\n"))
        else:
            out.append(clean_line(raw, max_chars))
    return out
