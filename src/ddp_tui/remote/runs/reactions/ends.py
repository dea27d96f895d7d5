"""Reaction 2: each attempt that just ended gets its end line in ``jobs.jsonl``, once."""

from __future__ import annotations

from ddp_tui.remote.observe.attempt_states import AttemptStates
from ddp_tui.remote.observe.run_table import RunTable
from ddp_tui.remote.runs.reactions import Seen


class RecordEnds:
    """From its end line on, no instance polls that attempt again, and its end outlives the
    scheduler's accounting (:meth:`AttemptStates.record_ends`, with the table's extras: the
    diagnosis and the last epoch)."""

    def __init__(self, states: AttemptStates, table: RunTable) -> None:
        self.states = states
        self.table = table

    def __call__(self, seen: Seen) -> str | None:
        return self.states.record_ends(seen.infos, self.table.end_extra)
