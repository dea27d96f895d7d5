"""Observed epochs and parsed lines -> the records that become ``metrics.csv`` rows.

Once the main journal reports an epoch, the observed epochs are the rows: their time is the
epoch's own (from its start, not the script's), their samples (rank 0's batches times the world
size) give the throughput, and their data wait splits the time into ``data_load_time_sec`` and
``compute_time_sec``. The values come from the framework's own records first (Lightning's logged
metrics, the Hugging Face Trainer's logs); for a plain loop, from the lines the presets parsed,
joined by order: the *k*-th epoch the script printed is the *k*-th epoch observed, whichever
numbers it prints and whether it prints at an epoch's start or at its end.
"""

from __future__ import annotations

from typing import Any

from .columns import SAMPLES, canonical, normalise
from .records import EpochRecord, StepRecord, as_fraction

_FRAMEWORKS = ("lightning", "transformers")
# Framework log keys that describe the logging, not the model.
_NOT_METRICS = ("runtime", "per_second", "samples_per_sec", "steps_per_sec", "total_flos")


def framework_values(values: dict[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    """A framework's metrics -> contract values and extra columns (other finite numbers)."""
    contract: dict[str, float] = {}
    extras: dict[str, str] = {}
    for name, value in values.items():
        if not isinstance(value, (int, float)) or any(n in name for n in _NOT_METRICS):
            continue
        column = canonical(name)
        if column == SAMPLES:
            continue
        if column is None:
            extras[normalise(name)] = f"{float(value):.10g}"
        else:
            contract[column] = as_fraction(column, float(value))
    return contract, extras


class ObservedRows:
    def __init__(self) -> None:
        self.epochs: list[dict[str, Any]] = []  # observed, in order
        self.world_size = 1
        self.parsed: dict[int, EpochRecord] = {}  # the script's epoch number -> its values
        self.parsed_order: list[int] = []
        self.logged: dict[int, tuple[dict[str, float], dict[str, str]]] = {}
        self.steps_seen = False
        # A pass of a loader without a sampler's epoch number counts from 0 in every attempt;
        # a requeued attempt's passes continue after the earlier attempts' epochs.
        self.loader_base = 0

    @property
    def active(self) -> bool:
        return bool(self.epochs)

    # -- what the wrapper feeds in ---------------------------------------------------------
    def parsed_epoch(self, record: EpochRecord) -> list[EpochRecord]:
        """A parsed epoch; the rows it changes once observed epochs are the rows."""
        if record.epoch not in self.parsed:
            self.parsed[record.epoch] = EpochRecord(record.epoch)
            self.parsed_order.append(record.epoch)
        kept = self.parsed[record.epoch]
        kept.values.update(record.values)
        kept.extras.update(record.extras)
        # Values from several sources (stderr's lines, a summary CSV) merge: each column keeps
        # the source of the value it holds.
        kept.sources.update({c: record.source_of(c) for c in (*record.values, *record.extras)})
        if record.samples is not None:
            kept.samples = record.samples
        index = self.parsed_order.index(record.epoch)
        return [self._row(index)] if index < len(self.epochs) else []

    def observed(self, record: dict[str, Any]) -> list[EpochRecord]:
        """One record of the main journal; the rows it makes or changes."""
        kind = record.get("kind")
        if kind == "group":
            self.world_size = int(record.get("world_size") or 1)
        elif kind == "framework" and record.get("name") == "accelerate":
            # Accelerate may run each process alone in a group it formed: its count is the one
            # that shares the data.
            processes = record.get("num_processes")
            if isinstance(processes, int) and processes >= 1:
                self.world_size = min(self.world_size, processes)
        elif kind == "epoch" and isinstance(record.get("epoch"), int):
            last = self.epochs[-1] if self.epochs else {}
            if last.get("epoch") == record["epoch"] and last.get("start") == record.get("start"):
                self.epochs[-1] = record  # the same epoch again, with a late step
            else:
                self.epochs.append(record)
            return [self._row(len(self.epochs) - 1)]
        elif kind == "metrics" and isinstance(record.get("epoch"), int):
            values = record.get("values")
            if isinstance(values, dict):
                contract, extras = framework_values(values)
                old = self.logged.setdefault(record["epoch"], ({}, {}))
                old[0].update(contract)
                old[1].update(extras)
                return [
                    self._row(i)
                    for i, e in enumerate(self.epochs)
                    if e.get("epoch") == record["epoch"]
                ]
        return []

    def step(self, record: dict[str, Any]) -> StepRecord | None:
        if record.get("kind") != "step":
            return None
        self.steps_seen = True
        rate = record.get("samples_per_sec")
        return StepRecord(
            epoch=record.get("epoch"),
            step=record.get("step"),
            steps_per_epoch=record.get("steps_per_epoch"),
            samples_per_sec=rate * self.world_size if isinstance(rate, (int, float)) else None,
        )

    # -- rows ------------------------------------------------------------------------------
    def _row(self, index: int) -> EpochRecord:
        observed = self.epochs[index]
        number = int(observed["epoch"])
        if observed.get("source") == "loader":
            number += self.loader_base
        row = EpochRecord(number, source="observed")
        if observed.get("source") not in _FRAMEWORKS and index < len(self.parsed_order):
            parsed = self.parsed[self.parsed_order[index]]
            row.values.update(parsed.values)
            row.extras.update(parsed.extras)
            row.samples = parsed.samples
            row.sources.update({c: parsed.source_of(c) for c in (*parsed.values, *parsed.extras)})
        own = observed.get("values")
        if isinstance(own, dict):
            contract, extras = framework_values(own)
            row.values.update(contract)
            row.extras.update(extras)
            row.sources.update(dict.fromkeys((*contract, *extras), "observed"))
        contract, extras = self.logged.get(int(observed["epoch"]), ({}, {}))
        row.values.update(contract)
        row.extras.update(extras)
        row.sources.update(dict.fromkeys((*contract, *extras), "observed"))
        loss = observed.get("loss")
        if isinstance(loss, (int, float)) and "train_loss" not in row.values:
            # The loss from the inside, only where the script's own figure is missing.
            row.values["train_loss"] = float(loss)
            row.sources["train_loss"] = "observed"
        seconds = observed.get("seconds")
        if isinstance(seconds, (int, float)):
            row.values["epoch_time_sec"] = float(seconds)
            wait = observed.get("data_wait_sec")
            if isinstance(wait, (int, float)):
                row.values["data_load_time_sec"] = float(wait)
                row.values["compute_time_sec"] = max(float(seconds) - float(wait), 0.0)
            samples = observed.get("samples")
            if isinstance(samples, (int, float)) and samples > 0 and seconds > 0:
                # Rank 0's samples times the world: every rank takes its equal shard.
                row.values["throughput_samples_per_sec"] = samples * self.world_size / seconds
                row.samples = None
        return row
