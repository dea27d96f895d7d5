"""Text as a terminal shows it: helpers for log lines, shared by the app and the CLI; and
strict JSON text, as every ``--json`` prints it."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def strict_json(value: Any, *, indent: int | None = 2) -> str:
    """``value`` as strict JSON text: NaN and infinities (a diverged loss, a tampered
    file) become null, which every JSON parser reads; Python's default writes ``NaN``."""
    return json.dumps(_finite(value), indent=indent, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


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


def aligned(
    header: tuple[str, ...], rows: list[tuple[str, ...]], *, text_columns: int = 3
) -> list[str]:
    """``rows`` under ``header`` in columns: the first ``text_columns`` left-aligned (text),
    the rest right-aligned (numbers)."""
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return [
        "  ".join(
            cell.ljust(w) if i < text_columns else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in table
    ]
