"""Text as a terminal shows it: helpers for log lines, shared by the app and the CLI."""

from __future__ import annotations


def collapse_carriage_returns(line: str) -> str:
    """What a terminal shows for ``line``: each ``\\r`` returns to column 0 and overwrites.

    tqdm redraws its bar with ``\\r``; a log line ``"\\r 10%|#  \\r 20%|## "`` shows
    as ``" 20%|## "``. Longer earlier text stays visible past the end of a shorter
    overwrite, as on a terminal.
    """
    if "\r" not in line:
        return line
    screen: list[str] = []
    for segment in line.split("\r"):
        if len(segment) >= len(screen):
            screen = list(segment)
        else:
            screen[: len(segment)] = segment
    return "".join(screen)
