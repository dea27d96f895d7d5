"""The jobs table: incremental readers of each run's files, and each run's row.

A row is rebuilt only when something it shows has changed (its attempts, its status,
its files as read so far), so a refresh of thousands of finished runs costs little.
"""

from __future__ import annotations

from collections.abc import Sequence

from ddp_tui.remote.attempt_states import AttemptStates
from ddp_tui.remote.followers import Feedable, TableReaders
from ddp_tui.remote.runs import RunInfo
from ddp_tui.remote.view_building import build_view, spec_of
from ddp_tui.remote.views import RunView
from ddp_tui.spec import ExperimentSpec


class RunTable:
    """Readers and rows of the runs the facade lists."""

    def __init__(self, states: AttemptStates) -> None:
        self.states = states
        self._readers: dict[str, TableReaders] = {}
        self._specs: dict[str, ExperimentSpec] = {}
        self._rows: dict[str, tuple[tuple[object, ...], RunView]] = {}

    def requests(self, infos: Sequence[RunInfo]) -> list[Feedable]:
        """Reads for the table: the files of runs not yet known to be finished, and one
        last read of each run whose end was learned since its files were last read."""
        out: list[Feedable] = []
        for info in infos:
            t = self._readers.get(info.run_id)
            if t is None:
                t = self._readers[info.run_id] = TableReaders(info.ref, info.kind)
            final = self.states.end_of(info)
            if final is not None:
                if t.read_after_end == final.job_id:
                    continue  # ended, and its files were read once more since: done
                t.read_after_end = final.job_id  # this read catches the last rows
            out += t.readers()
        return out

    def just_ended(self, infos: Sequence[RunInfo]) -> list[RunInfo]:
        """Runs whose end is known but whose files have not been read since."""
        return [
            info
            for info in infos
            if info.run_id in self._readers
            and (final := self.states.end_of(info)) is not None
            and self._readers[info.run_id].read_after_end != final.job_id
        ]

    def unread_end(self, infos: Sequence[RunInfo]) -> None:
        """The last read of these ended runs failed: make it again next time."""
        for info in infos:
            self._readers[info.run_id].read_after_end = None

    def view(self, info: RunInfo) -> RunView:
        """The run's row; rebuilt only when something it shows has changed."""
        t = self._readers.get(info.run_id)
        status = self.states.status_of(info)
        key = (
            len(info.jobs),
            status,
            len(t.metrics.rows) if t else -1,
            id(t.progress.latest) if t else 0,
            id(t.run_json) if t else 0,
            id(t.preflight) if t else 0,
        )
        cached = self._rows.get(info.run_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        spec = self._specs.get(info.run_id)
        if spec is None:  # spec.json never changes: parse it once
            spec = self._specs[info.run_id] = spec_of(info)
        view = build_view(
            info,
            spec,
            status,
            metrics=t.metrics.rows if t else (),
            progress=t.progress.latest if t else None,
            run_json=t.run_json if t else None,
            preflight=t.preflight if t else None,
        )
        self._rows[info.run_id] = (key, view)
        return view
