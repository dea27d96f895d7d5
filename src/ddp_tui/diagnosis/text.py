"""A diagnosis as plain lines, for ``ddp-tui why`` and anywhere text is shown."""

from __future__ import annotations

from ddp_tui.diagnosis.model import Diagnosis


def diagnosis_lines(diagnosis: Diagnosis) -> list[str]:
    """Cause, the evidence (``file:line: text``), and what to do."""
    lines = [f"cause: {diagnosis.cause}"]
    lines += [f"  {e.label}: {e.text}" for e in diagnosis.evidence]
    if diagnosis.advice:
        lines.append(f"what to do: {diagnosis.advice}")
    return lines
