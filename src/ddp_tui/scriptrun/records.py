"""What a metrics source hands the writers: an epoch's values, or one step's progress."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from .columns import ACCURACY_COLUMNS, SAMPLES, canonical


@dataclass
class EpochRecord:
    """One epoch's metrics, numbered as the script numbers it (0-based scripts are shifted
    later, by :class:`.rows.MetricsFile`)."""

    epoch: int
    values: dict[str, float] = field(default_factory=dict)  # contract column -> value
    extras: dict[str, str] = field(default_factory=dict)  # extra column -> text
    samples: float | None = None  # samples this epoch, for throughput
    helper: bool = False  # from a reporting helper's line
    #: Where the values came from (run.json's ``metric_sources``): ``stdout``, ``stderr``,
    #: ``helper``, ``regex``, ``observed`` or a file's name; ``sources`` names a column's own
    #: where a row merges several.
    source: str = ""
    sources: dict[str, str] = field(default_factory=dict)

    def source_of(self, column: str) -> str:
        return self.sources.get(column, self.source)


@dataclass
class StepRecord:
    """A progress report inside an epoch (script numbering, like :class:`EpochRecord`), or,
    with no epoch, a step line of an iteration loop (``iter 100: loss 4.2``)."""

    epoch: int | None = None
    step: int | None = None
    steps_per_epoch: int | None = None
    loss: float | None = None
    steps_per_sec: float | None = None
    samples_per_sec: float | None = None
    helper: bool = False
    source: str = ""  # as EpochRecord's: ``stdout``, ``stderr``, ...
    #: The line's other values (an evaluation's ``val loss``, the ``lr``): a step window's row
    #: takes them where the script has no epochs.
    values: dict[str, float] = field(default_factory=dict)


Record = EpochRecord | StepRecord


def number(text: str, percent: bool = False) -> float | None:
    """``"92.3"`` -> 92.3; ``percent`` divides by 100. None for text that is no finite number."""
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return value / 100.0 if percent else value


def as_fraction(column: str, value: float) -> float:
    """Accuracies above 1 are percentages: 92.3 -> 0.923."""
    if column in ACCURACY_COLUMNS and value > 1.0:
        return value / 100.0
    return value


def collect(pairs: Iterable[tuple[str, str, bool]]) -> tuple[dict[str, float], float | None]:
    """``(name, number text, has % suffix)`` pairs -> contract values and the sample count.

    Unknown names are dropped; a later value of a column wins.
    """
    values: dict[str, float] = {}
    samples: float | None = None
    for name, text, percent in pairs:
        column = canonical(name)
        if column is None:
            continue
        value = number(text, percent)
        if value is None:
            continue
        if column == SAMPLES:
            samples = value
        else:
            values[column] = as_fraction(column, value)
    return values, samples
