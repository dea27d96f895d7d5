"""The parts every reader of runs works from, built once by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

from ddp_tui.remote.backends.executor import Executor
from ddp_tui.remote.backends.scheduler import Scheduler
from ddp_tui.remote.observe.attempt_states import AttemptStates
from ddp_tui.remote.observe.run_table import RunTable
from ddp_tui.remote.store.runs import RunStore


@dataclass(frozen=True)
class ObservedRuns:
    """One cluster's runs as observed: the executor and the scheduler that answer, the store
    that lists the run directories, each attempt's state, and the table's readers."""

    executor: Executor
    scheduler: Scheduler
    store: RunStore
    states: AttemptStates
    table: RunTable
