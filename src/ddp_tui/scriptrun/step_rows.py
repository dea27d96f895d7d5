"""Rank 0's wrapper, for a script with no epochs: its step windows (:mod:`.windows`) written as
``metrics.csv`` rows, its progress by steps in ``progress.jsonl``, and ``run.json``'s
``max_steps``, ``steps_completed`` and ``step_windows`` (the windows the wrapper made: verify
checks every one is a row).

Windows are the rows only while the script shows no epoch: once an epoch row is written (an
epoch line, an observed loader pass, the helper), this attempt's windows are dropped and the
epochs are the rows, as before.
"""

from __future__ import annotations

import time
from typing import Any

from ddp_tui.jobfiles import RunRecord

from .records import StepRecord
from .rows import MetricsFile, ProgressFile, note_sources
from .windows import StepWindows, Window


class StepRows:
    def __init__(
        self,
        metrics: MetricsFile,
        progress: ProgressFile,
        info: RunRecord,
        max_steps: int | None,
        clock: Any = time.time,
    ) -> None:
        self.metrics = metrics
        self.progress = progress
        self.info = info
        self.max_steps = max_steps
        self.clock = clock
        self.windows = StepWindows()
        self.on = True
        self._recorded: tuple[int | None, int] = (None, 0)
        self._last: Window | None = None
        progress.max_steps = max_steps
        info.update(max_steps=max_steps)

    def line(self, record: StepRecord) -> None:
        """A parsed step line; one with no epoch is a window."""
        if self.on and record.epoch is None and record.values and not record.helper:
            self._write(self.windows.line(record, self.clock()))

    def journal(self, record: dict[str, Any], world_size: int) -> None:
        """A record of the main journal (its cumulative ``step`` counters)."""
        if self.on:
            self.windows.world_size = world_size
            self._write(self.windows.journal(record, self.clock()))

    def tick(self) -> None:
        """Held windows now due; ``run.json`` and the progress line when the steps moved."""
        if self.on:
            self._write(self.windows.due(self.clock()))
            self._record()

    def finish(self) -> None:
        if self.on:
            self._write(self.windows.finish(self.clock()))
            self._record()

    def epochs_seen(self) -> None:
        """The script has epochs: they are the rows, and this attempt's windows go."""
        if self.on:
            self.on = False
            self.metrics.forget_windows()
            self.progress.by_steps = False
            self.info.update(steps_completed=None, step_windows=None)

    def _write(self, windows: list[Window]) -> None:
        for window in windows:
            self.metrics.add_window(window.step, window.values)
            self._last = window
            note_sources(self.info, {c: window.sources.get(c, "observed") for c in window.values})
        if windows:
            self.progress.by_steps = True

    def _record(self) -> None:
        done = self.windows.steps_completed
        state = (done, self.metrics.windows_written)
        if done is None or state == self._recorded:
            return
        self._recorded = state
        self.info.update(steps_completed=done, step_windows=self.metrics.windows_written)
        last = self._last.values if self._last is not None else {}
        self.progress.by_steps = True
        self.progress.add(
            StepRecord(
                step=done,
                loss=last.get("train_loss"),
                samples_per_sec=last.get("throughput_samples_per_sec"),
            )
        )
