"""A diagnosis as plain lines, for ``ddp-tui why`` and anywhere text is shown, and ranks as its
sentences name them."""

from __future__ import annotations

from collections.abc import Iterable

from ddp_tui.diagnosis.model import Diagnosis
from ddp_tui.jobfiles import format_ranks


def diagnosis_lines(diagnosis: Diagnosis) -> list[str]:
    """Cause, the evidence (``file:line: text``), and what to do."""
    lines = [f"cause: {diagnosis.cause}"]
    lines += [f"  {e.label}: {e.text}" for e in diagnosis.evidence]
    if diagnosis.advice:
        lines.append(f"what to do: {diagnosis.advice}")
    return lines


def rank_ranges(ranks: Iterable[int]) -> str:
    """``1-3, 5`` for 1, 2, 3, 5 (:func:`ddp_tui.jobfiles.format_ranks` in prose)."""
    return format_ranks(ranks, sep=", ")
