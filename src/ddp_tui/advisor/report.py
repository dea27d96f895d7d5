"""The advice as JSON (``ddp-tui advise --json``), Markdown and CSV (the comparison exports)."""

from __future__ import annotations

from typing import Any

from ddp_tui.advisor.result import Advice


def advice_json(advice: Advice) -> dict[str, Any]:
    raise NotImplementedError


def advice_markdown(advice: Advice) -> str:
    raise NotImplementedError


def advice_csv(advice: Advice) -> str:
    raise NotImplementedError


def speedup_series(
    advice: Advice,
) -> list[tuple[int, float | None, float | None, float | None, float | None]]:
    """For the plot: (world size, measured speedup, predicted, predicted low, predicted high)."""
    raise NotImplementedError
