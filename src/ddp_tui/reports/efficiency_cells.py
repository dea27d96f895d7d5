"""Efficiency figures as table cells: the one wording of Jobs, Compare and ``ls``.

Apart from :mod:`ddp_tui.reports.efficiency` (which computes them) because the jobs screen
draws these cells before its first frame, and that module's imports (accounting, right-sizing)
are not needed for it.
"""

from __future__ import annotations

from typing import Final

#: A table cell's text where a figure was not measured (never 0).
NO_FIGURE: Final = "—"


def share_text(value: float | None) -> str:
    """A fraction as a table cell's percentage, ``45%``; :data:`NO_FIGURE` for None."""
    return NO_FIGURE if value is None else f"{value * 100:.0f}%"


def efficiency_text(cpu: float | None, mem: float | None) -> str:
    """The one efficiency cell of Jobs and ``ls``: ``cpu 45% mem 30%``, each part
    :data:`NO_FIGURE` where not measured; the whole cell that where neither was."""
    if cpu is None and mem is None:
        return NO_FIGURE
    return f"cpu {share_text(cpu)} mem {share_text(mem)}"
