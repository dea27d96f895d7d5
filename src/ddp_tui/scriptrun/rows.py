"""Records -> ``metrics.csv`` rows and ``progress.jsonl`` lines (rank 0 of the wrapper).

The script's epoch numbers are shifted to the contract's 1-based ones by :class:`EpochNumbering`
(a script whose first epoch is 0 gets offset 1, kept in run.json across requeues). The epoch
time is the wrapper's own clock between two epochs' lines, so it is measured on the job's node.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ddp_tui.jobfiles import RunRecord, csv_cell, writing

from .columns import COLUMNS
from .records import EpochRecord, StepRecord


def note_sources(
    info: RunRecord, found: dict[str, str], implied: dict[str, str] | None = None
) -> None:
    """run.json's ``metric_sources``: where each column's values came from (the newest row's
    say; ``implied`` only where a column has no source yet), rewritten only when it changes."""
    sources = dict(info.data.get("metric_sources") or {})
    merged = {**(implied or {}), **sources}
    merged.update({column: source for column, source in found.items() if source})
    if merged != sources:
        info.update(metric_sources=dict(sorted(merged.items())))


class EpochNumbering:
    """Script epoch -> contract epoch; the offset is decided by the first epoch number seen."""

    def __init__(self, offset: int | None, on_decided: Callable[[int | None], None]) -> None:
        self.offset = offset
        self._kept = offset  # from an earlier attempt
        self._on_decided = on_decided

    def shift(self, epoch: int) -> int:
        if self.offset is None:
            self.offset = 1 if epoch == 0 else 0
            self._on_decided(self.offset)
        return epoch + self.offset

    def forget_attempt(self) -> None:
        """Undo an offset this attempt decided (its evidence was overruled)."""
        if self.offset != self._kept:
            self.offset = self._kept
            self._on_decided(self.offset)


class MetricsFile:
    """``metrics.csv``: rows of earlier attempts are kept; this attempt's epochs are appended,
    or replace the row of an epoch that is already there (one atomic rewrite).

    A script with no epochs has step windows instead (:mod:`.windows`): rows keyed by their
    ``step``, their ``epoch`` cell empty, after any epoch rows."""

    def __init__(
        self,
        path: Path,
        numbering: EpochNumbering,
        extra_columns: tuple[str, ...] = (),
        world_size: int | None = None,
        samples_per_epoch: float | None = None,
        start: float | None = None,
    ) -> None:
        self.path = path
        self.numbering = numbering
        self.header = COLUMNS + tuple(c for c in extra_columns if c not in COLUMNS)
        self.world_size = world_size
        self.samples_per_epoch = samples_per_epoch
        self._last = self._clock_start = time.monotonic() if start is None else start
        self._mine: set[int] = set()  # epochs this attempt has written
        self.windows: dict[int, dict[str, str]] = {}  # step -> its window's row
        self._mine_windows: set[int] = set()
        self.rows: dict[int, dict[str, str]] = self._load()
        self._loaded = dict(self.rows)
        self._loaded_windows = dict(self.windows)
        self._rewrite()

    def _load(self) -> dict[int, dict[str, str]]:
        rows: dict[int, dict[str, str]] = {}
        try:
            with self.path.open(newline="") as fh:
                reader = csv.DictReader(fh)
                # An earlier attempt's extra columns stay (a helper's own metric, say).
                kept = [c for c in reader.fieldnames or () if c and c not in self.header]
                self.header += tuple(kept)
                for row in reader:
                    cells = {k: v or "" for k, v in row.items() if k}
                    try:
                        epoch = int(row.get("epoch") or "")
                    except ValueError:
                        step = row.get("step") or ""
                        if not row.get("epoch") and step.isdigit():
                            self.windows[int(step)] = cells  # an earlier attempt's window
                        continue
                    rows[epoch] = cells
        except FileNotFoundError:
            pass
        return rows

    def restart_clock(self, now: float) -> None:
        """The time the next new epoch's time is measured from (the child's start)."""
        self._last = self._clock_start = now

    def forget_attempt(self) -> None:
        """Drop this attempt's rows: the script's helper lines overrule what the presets read
        from the lines before the first of them."""
        if not self._mine:
            return
        self._mine.clear()
        self._mine_windows.clear()
        self.rows = dict(self._loaded)
        self.windows = dict(self._loaded_windows)
        self._last = self._clock_start
        self.numbering.forget_attempt()
        self._rewrite()

    @property
    def earlier_epochs(self) -> int:
        """The last epoch earlier attempts wrote (0: none)."""
        return max(self._loaded, default=0)

    @property
    def epochs_completed(self) -> int:
        return max(self.rows, default=0)

    @property
    def windows_written(self) -> int:
        return len(self.windows)

    def add_window(self, step: int, values: dict[str, float]) -> bool:
        """Write one step window's row (a script with no epochs); False: nothing changed."""
        cells = {k: csv_cell(v) for k, v in values.items()}
        grown = [k for k in cells if k not in self.header]
        self.header += tuple(grown)
        if step in self._mine_windows:  # the same step again (an evaluation after its log)
            row = {**self.windows[step], **cells}
            if row == self.windows[step] and not grown:
                return False
            self.windows[step] = row
            self._rewrite()
            return True
        self._mine_windows.add(step)
        row = {"epoch": "", "step": str(step), "world_size": csv_cell(self.world_size), **cells}
        append = not grown and step > max(self.windows, default=-1)
        self.windows[step] = row
        if append:
            self._append(row)
        else:  # a resumed attempt redoing a step, or a new column: rewrite
            self._rewrite()
        return True

    def forget_windows(self) -> None:
        """Drop this attempt's windows: the script has epochs after all, and they are the rows."""
        if self._mine_windows:
            for step in self._mine_windows:
                self.windows.pop(step, None)
                if step in self._loaded_windows:
                    self.windows[step] = self._loaded_windows[step]
            self._mine_windows.clear()
            self._rewrite()

    def add(self, record: EpochRecord, now: float | None = None) -> int | None:
        """Write one epoch's record; the contract epoch written, or None (nothing changed)."""
        now = time.monotonic() if now is None else now
        epoch = self.numbering.shift(record.epoch)
        if epoch < 1:
            return None
        cells = {k: csv_cell(v) for k, v in record.values.items()}
        cells.update(record.extras)
        grown = [k for k in record.extras if k not in self.header]
        self.header += tuple(grown)  # a helper's own metric: a new column, so a rewrite below
        if epoch in self._mine:  # the same epoch again (a later line with more of its values)
            row = dict(self.rows[epoch])
            row.update(cells)
            self._fill_throughput(row, record.samples)
            if row == self.rows[epoch] and not grown:
                return None
            self.rows[epoch] = row
            self._rewrite()
            return epoch
        self._mine.add(epoch)
        row = {"epoch": str(epoch), "world_size": csv_cell(self.world_size), **cells}
        if not row.get("epoch_time_sec"):
            row["epoch_time_sec"] = csv_cell(max(now - self._last, 0.0))
        self._last = now
        self._fill_throughput(row, record.samples)
        append = epoch > self.epochs_completed and not grown
        self.rows[epoch] = row
        if append:
            self._append(row)
        else:  # a resumed attempt redoing an epoch: replace its row
            self._rewrite()
        return epoch

    def _fill_throughput(self, row: dict[str, str], samples: float | None) -> None:
        samples = samples if samples is not None else self.samples_per_epoch
        if row.get("throughput_samples_per_sec") or samples is None:
            return
        try:
            seconds = float(row.get("epoch_time_sec") or "")
        except ValueError:
            return
        if seconds > 0:
            row["throughput_samples_per_sec"] = csv_cell(samples / seconds)

    def _line(self, row: dict[str, str]) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow([row.get(c, "") for c in self.header])
        return buf.getvalue()

    def _append(self, row: dict[str, str]) -> None:
        with writing(self.path), self.path.open("a") as fh:
            fh.write(self._line(row))
            fh.flush()
            os.fsync(fh.fileno())

    def _rewrite(self) -> None:
        """Replace the file in one rename; a failed write (RunWriteError) leaves it as it was."""
        text = (
            self._line({c: c for c in self.header})
            + "".join(self._line(self.rows[e]) for e in sorted(self.rows))
            + "".join(self._line(self.windows[s]) for s in sorted(self.windows))
        )
        tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        try:
            with writing(self.path):
                with tmp.open("w") as fh:
                    fh.write(text)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)


class ProgressFile:
    """``progress.jsonl``: the newest step record, at most one line per ``interval`` seconds."""

    def __init__(
        self,
        path: Path,
        numbering: EpochNumbering,
        current_epoch: Callable[[], int],
        samples_per_epoch: float | None = None,
        interval: float = 1.0,
    ) -> None:
        self.path = path
        self.numbering = numbering
        self.current_epoch = current_epoch
        self.samples_per_epoch = samples_per_epoch
        self.interval = interval
        self._fh: TextIO | None = None
        self._written = float("-inf")
        self._pending: StepRecord | None = None
        #: A script with no epochs: lines carry no epoch, and the step budget where known.
        self.by_steps = False
        self.max_steps: int | None = None

    def add(self, record: StepRecord, now: float | None = None) -> None:
        self._pending = record
        self.tick(now)

    def tick(self, now: float | None = None) -> None:
        """Write the newest record if the last line is ``interval`` old."""
        now = time.monotonic() if now is None else now
        if self._pending is None or now - self._written < self.interval:
            return
        record, self._pending = self._pending, None
        self._written = now
        line = json.dumps(self._line(record)) + "\n"
        with writing(self.path):
            if self._fh is None:
                self._fh = self.path.open("a")
            self._fh.write(line)
            self._fh.flush()

    def _line(self, r: StepRecord) -> dict[str, object]:
        if self.by_steps:
            return {
                "time": time.time(),
                "epoch": None,
                "step": r.step,
                "max_steps": self.max_steps,
                "loss": r.loss,
                "samples_per_sec": r.samples_per_sec,
            }
        epoch = self.numbering.shift(r.epoch) if r.epoch is not None else self.current_epoch()
        rate = r.samples_per_sec
        if rate is None and r.steps_per_sec and self.samples_per_epoch and r.steps_per_epoch:
            rate = r.steps_per_sec * self.samples_per_epoch / r.steps_per_epoch
        return {
            "time": time.time(),
            "epoch": epoch,
            "step": r.step,
            "steps_per_epoch": r.steps_per_epoch,
            "loss": r.loss,
            "samples_per_sec": rate,
        }

    def close(self) -> None:
        if self._fh is not None:
            fh, self._fh = self._fh, None
            with writing(self.path):
                fh.close()
