"""From what a run directory holds to the advisor's inputs (pure: the files are read already)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ddp_tui.advisor.inputs import FabricSample, SizeRun
from ddp_tui.results import RunData


def size_run(run: RunData, step_times: Sequence[Mapping[str, Any]] = ()) -> SizeRun | None:
    """One run as the advisor sees it; None when it has no steady epoch time yet.
    ``step_times``: the lines of its ``step_times.jsonl``, parsed (empty: none)."""
    raise NotImplementedError


def fabric_sample(
    run_id: str, preflight: Mapping[str, Any], nodes: int, partition: str | None = None
) -> FabricSample | None:
    """A passed preflight's all-reduce table (None: failed, one rank, or no table)."""
    raise NotImplementedError
