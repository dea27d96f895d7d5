"""``csv:PATH``: metrics from a CSV file the script writes, such as Lightning's CSVLogger.

Such files are rewritten whole and mix row kinds: step rows (``train_loss_step``) and epoch
rows (``val_loss``, ``train_loss_epoch``), each with the other kind's cells empty. The wrapper
polls the file about once a second; rows are folded per epoch (the last non-empty value of each
column wins), and an epoch is handed on once a later epoch appears, the last one at the end.
"""

from __future__ import annotations

import csv
import glob
import io
import os
from collections.abc import Mapping
from pathlib import Path

from .columns import SAMPLES, canonical
from .records import EpochRecord, as_fraction, number

# Lightning's suffixes: "_epoch" is the epoch's aggregate, "_step" one step's value.
_EPOCH_SUFFIX = "_epoch"
_STEP_SUFFIX = "_step"
# A file older than the attempt by more than this is a previous attempt's (clock granularity).
_STALE_SLACK_SEC = 2.0


def column_for(name: str, column_map: Mapping[str, str]) -> str | None:
    """The metrics.csv column (or ``samples``) a CSV column feeds, None for none."""
    if name in column_map:
        dst = column_map[name]
        return canonical(dst) or dst
    key = name.strip()
    if key.lower().endswith(_STEP_SUFFIX):
        return None
    if key.lower().endswith(_EPOCH_SUFFIX) and key.lower() != "epoch":
        key = key[: -len(_EPOCH_SUFFIX)]
    return canonical(key)


def extra_columns(column_map: Mapping[str, str]) -> tuple[str, ...]:
    """Targets of the column map that are no contract column: extra metrics.csv columns."""
    return tuple(dst for dst in column_map.values() if canonical(dst) is None and dst != "epoch")


def fold(text: str, column_map: Mapping[str, str]) -> dict[int, EpochRecord]:
    """The CSV's rows folded per epoch (script numbering), in file order."""
    epochs: dict[int, EpochRecord] = {}
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header or "epoch" not in header:
        return epochs
    epoch_at = header.index("epoch")
    targets = [column_for(name, column_map) for name in header]
    extras = set(extra_columns(column_map))
    for row in reader:
        if epoch_at >= len(row):
            continue
        epoch_value = number(row[epoch_at])
        if epoch_value is None:
            continue
        record = epochs.setdefault(int(epoch_value), EpochRecord(int(epoch_value)))
        for target, cell in zip(targets, row, strict=False):
            if target is None or target == "epoch" or not cell.strip():
                continue
            if target in extras:
                record.extras[target] = cell.strip()
                continue
            value = number(cell.strip().rstrip("%"), cell.strip().endswith("%"))
            if value is None:
                continue
            if target == SAMPLES:
                record.samples = value
            else:
                record.values[target] = as_fraction(target, value)
    return epochs


class CsvSource:
    """Polls one CSV file (a glob picks the newest match written during this attempt)."""

    def __init__(
        self, path: str, cwd: Path, column_map: Mapping[str, str], attempt_start: float
    ) -> None:
        self.pattern = path if os.path.isabs(path) else str(cwd / path)
        self.column_map = dict(column_map)
        self.extra_columns = extra_columns(column_map)
        self._since = attempt_start - _STALE_SLACK_SEC
        self._seen: tuple[str, float, int] | None = None
        self._epochs: dict[int, EpochRecord] = {}
        self._handed: dict[int, EpochRecord] = {}

    def _current_file(self) -> str | None:
        names = glob.glob(self.pattern) if glob.has_magic(self.pattern) else [self.pattern]
        best: tuple[float, str] | None = None
        for name in names:
            try:
                mtime = os.stat(name).st_mtime
            except OSError:
                continue
            if mtime >= self._since and (best is None or mtime > best[0]):
                best = (mtime, name)
        return best[1] if best else None

    def _reload(self) -> None:
        name = self._current_file()
        if name is None:
            return
        try:
            st = os.stat(name)
            if self._seen == (name, st.st_mtime, st.st_size):
                return
            with open(name, newline="", errors="replace") as fh:
                text = fh.read()
        except OSError:
            return
        self._seen = (name, st.st_mtime, st.st_size)
        self._epochs = fold(text, self.column_map)
        for record in self._epochs.values():
            record.source = os.path.basename(name)

    def _hand_on(self, upto: int | None) -> list[EpochRecord]:
        out: list[EpochRecord] = []
        for epoch, record in self._epochs.items():
            if upto is not None and epoch >= upto:
                continue
            if self._handed.get(epoch) != record:
                self._handed[epoch] = record
                out.append(record)
        return out

    def poll(self) -> list[EpochRecord]:
        """Epochs finished since the last poll: those before the newest epoch in the file."""
        self._reload()
        if not self._epochs:
            return []
        return self._hand_on(max(self._epochs))

    def finish(self) -> list[EpochRecord]:
        """Every epoch not handed on yet, the last one included (the script has ended)."""
        self._reload()
        return self._hand_on(None)
