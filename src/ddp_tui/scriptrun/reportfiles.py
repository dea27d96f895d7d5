"""The files a script writes about itself, read by rank 0's wrapper when the script has ended.

Found under the script's working directory, written during this attempt (by modification
time), a few levels deep:

- a CSV with an ``epoch`` column: timm's ``summary.csv`` (``epoch,train_loss,eval_loss,
  eval_top1,...``), Lightning's CSVLogger (``lightning_logs/version_N/metrics.csv``), any other
  summary of the same shape (``csvsource.fold``);
- Hugging Face's ``trainer_state.json``: its ``log_history``, an entry at fractional epoch
  ``x`` belonging to epoch ``ceil(x)`` (HF counts epochs from 1, like its log lines);
- TensorBoard's ``events.out.tfevents.*`` (``tfevents.py``): scalars per step, joined to epochs
  through an ``epoch`` scalar where the script logs one (Lightning does), else taken as
  per-epoch when a tag's steps are the run of epoch numbers ``0..n`` or ``1..n``;
- a result JSON (``results.json``, ``all_results.json``, ``eval_results.json``, ...) and a W&B
  offline run's ``wandb/offline-run-*/files/wandb-summary.json``: one flat dict of final values,
  for the last epoch. They only fill cells nothing else gave (:class:`Finals`). W&B's history
  lives in the binary ``.wandb`` log (LevelDB framing around protobuf), not read here.

Standard library only (``csv``, ``json``, and our own TFRecord reader): the job's environment
need not have tensorboard or wandb. The values of a file win over the lines of the script's
output for the columns it holds: it is the script's own record, at full precision.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from .columns import SAMPLES, normalise
from .csvsource import column_for, fold
from .records import EpochRecord, as_fraction
from .tfevents import scalars

_MAX_DEPTH = 4
_MAX_ENTRIES = 20_000  # a walk stops here: a data directory is no place for reports
_MAX_BYTES = 32 << 20  # a larger file is no summary
_SKIP_DIRS = frozenset(
    {".git", "__pycache__", "node_modules", ".venv", "venv", "site-packages", "checkpoints"}
)
_STALE_SLACK_SEC = 2.0  # as csvsource: clock granularity
_RESULT_NAMES = ("results.json", "result.json", "metrics.json", "wandb-summary.json")
TFEVENTS = "events.out.tfevents"


@dataclass
class Finals:
    """A result JSON's values: for the last epoch, where nothing else gave them."""

    source: str
    values: dict[str, float] = field(default_factory=dict)
    epoch: int | None = None  # where the file names it


@dataclass
class Reports:
    epochs: list[EpochRecord] = field(default_factory=list)  # file by file, oldest file first
    finals: list[Finals] = field(default_factory=list)


def candidates(root: Path, since: float, skip: Path | None = None) -> list[Path]:
    """Files under ``root`` modified since ``since`` that may be reports, oldest first."""
    found: list[tuple[float, Path]] = []
    entries = 0
    base = len(root.parts)
    for top, dirs, files in os.walk(root):
        here = Path(top)
        depth = len(here.parts) - base
        dirs[:] = [
            d for d in dirs
            if d not in _SKIP_DIRS and depth < _MAX_DEPTH and (skip is None or here / d != skip)
        ]  # fmt: skip
        entries += len(dirs) + len(files)
        if entries > _MAX_ENTRIES:
            break
        for name in files:
            if not _is_report(name):
                continue
            path = here / name
            with contextlib.suppress(OSError):
                st = path.stat()
                if st.st_mtime >= since - _STALE_SLACK_SEC and st.st_size <= _MAX_BYTES:
                    found.append((st.st_mtime, path))
    return [p for _, p in sorted(found)]


def _is_report(name: str) -> bool:
    return (
        name.endswith(".csv")
        or name == "trainer_state.json"
        or name.startswith(TFEVENTS)
        or name.endswith(_RESULT_NAMES)
    )


def read_reports(root: Path, since: float, skip: Path | None = None) -> Reports:
    """What the script's report files hold; a file that cannot be read is passed over."""
    out = Reports()
    for path in candidates(root, since, skip):
        with contextlib.suppress(OSError, ValueError, UnicodeDecodeError):
            if path.name.startswith(TFEVENTS):
                out.epochs += tensorboard_epochs(path)
            elif path.name == "trainer_state.json":
                out.epochs += trainer_state_epochs(path)
            elif path.name.endswith(".csv"):
                out.epochs += csv_epochs(path)
            else:
                finals = result_values(path)
                if finals is not None:
                    out.finals.append(finals)
    return out


def csv_epochs(path: Path) -> list[EpochRecord]:
    folded = fold(path.read_text(errors="replace"), {})
    for record in folded.values():
        record.source = path.name
    return [r for r in folded.values() if r.values]


def _values(pairs: dict[str, object]) -> dict[str, float]:
    """A dict of a framework's names -> contract values (unknown names and non-numbers out)."""
    values: dict[str, float] = {}
    for name, value in pairs.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        column = column_for(name, {})
        if column is None or column in (SAMPLES, "step") or not math.isfinite(value):
            continue
        values[column] = as_fraction(column, float(value))
    return values


def trainer_state_epochs(path: Path) -> list[EpochRecord]:
    data = json.loads(path.read_text())
    history = data.get("log_history") if isinstance(data, dict) else None
    epochs: dict[int, EpochRecord] = {}
    for entry in history if isinstance(history, list) else ():
        if not isinstance(entry, dict) or "train_runtime" in entry:  # the run's summary
            continue
        at = entry.get("epoch")
        if not isinstance(at, int | float) or at <= 0:
            continue
        epoch = math.ceil(at - 1e-6)
        values = _values({k: v for k, v in entry.items() if k not in ("step", "epoch")})
        if values:
            record = epochs.setdefault(epoch, EpochRecord(epoch, source=path.name))
            record.values.update(values)
    return [epochs[e] for e in sorted(epochs)]


def tag_column(tag: str) -> str | None:
    """A TensorBoard tag's column: ``train/loss``, ``val_acc``, ``Loss/train`` (reversed)."""
    column = column_for(tag, {})
    if column is None and "/" in tag:
        head, _, tail = tag.rpartition("/")
        column = column_for(f"{tail}/{head}", {})
    return None if column in (SAMPLES, "epoch", "step") else column


def tensorboard_epochs(path: Path) -> list[EpochRecord]:
    found = scalars(path)
    epoch_at = sorted((step, int(v)) for step, tag, v in found if normalise(tag) == "epoch")
    by_tag: dict[str, list[tuple[int, float]]] = {}
    for step, tag, value in found:
        column = tag_column(tag)
        if column is not None and math.isfinite(value):
            by_tag.setdefault(column, []).append((step, value))
    epochs: dict[int, EpochRecord] = {}
    for column, points in by_tag.items():
        for step, value in points:
            epoch = _epoch_of(step, epoch_at) if epoch_at else _step_as_epoch(step, points)
            if epoch is None:
                break  # the tag is logged per step, not per epoch: no row of its own
            record = epochs.setdefault(epoch, EpochRecord(epoch, source=TFEVENTS))
            record.values[column] = as_fraction(column, value)
    return [epochs[e] for e in sorted(epochs)]


def _epoch_of(step: int, epoch_at: list[tuple[int, int]]) -> int | None:
    """The epoch an ``epoch`` scalar logged at the last step at or before ``step`` names."""
    epoch = None
    for at, number in epoch_at:
        if at > step:
            break
        epoch = number
    return epoch


def _step_as_epoch(step: int, points: list[tuple[int, float]]) -> int | None:
    """``step`` when the tag's steps are the epoch numbers ``0..n`` or ``1..n``, else None."""
    steps = sorted({s for s, _ in points})
    if steps and steps[0] in (0, 1) and steps == list(range(steps[0], steps[0] + len(steps))):
        return step
    return None


def result_values(path: Path) -> Finals | None:
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        return None
    # timm's {"eval": {"loss": .., "top1": ..}}: one level of nesting, its keys prefixed.
    flat: dict[str, object] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update({f"{key}_{k}": v for k, v in value.items()})
        elif not key.startswith("_"):  # W&B's own _step, _runtime, _timestamp
            flat[key] = value
    values = _values(flat)
    if not values:
        return None
    at = data.get("epoch")
    epoch = round(at) if isinstance(at, int | float) and abs(at - round(at)) < 1e-6 else None
    return Finals(path.name, values, epoch)
