"""Step windows: the rows of a script that has no epochs (an iteration loop).

A script like nanoGPT trains for a number of iterations, logs a line every N of them
(``iter 100: loss 4.2, time 20.5ms``) and evaluates every M (``step 500: train loss 4.1, val
loss 4.3``). Each logged step is a window: the row of ``metrics.csv`` at that step, its epoch
cell empty. Its values are the line's own (the script's figure wins: its loss is what the user
reads in the log); what the line lacks comes from the main journal's cumulative ``step`` records
(``t``, ``steps_total``, ``samples_total``, ``tokens_total``, ``loss``, ``loss_steps``, ``lr``):
the samples and tokens per second between two windows, the mean observed loss, the lr.

A window is held until a journal record at or after its line arrives (so the rate covers it),
or :data:`HOLD_SEC` at most where no journal counts steps (``--observe off``), so that each row
is appended once, not rewritten. When the script logs no step line at all, the windows are
ddp-tui's own: one every :data:`OWN_WINDOW_SEC` of the journal's time, and one at the end.

Pure bookkeeping over records and times; :mod:`.runner` writes the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .records import StepRecord

#: The longest a logged window waits for a journal record that covers it, where no journal
#: has counted steps (observing is off, or the journal predates the counters)...
HOLD_SEC = 3.0
#: ... and where one has: its next record comes with the next step, or at the process's exit.
JOURNAL_HOLD_SEC = 30.0
#: ddp-tui's own window, where the script logs no step line.
OWN_WINDOW_SEC = 10.0


@dataclass
class Window:
    """One row: the step at its end and its contract values."""

    step: int
    values: dict[str, float] = field(default_factory=dict)
    arrived: float = 0.0  # wall time of its line
    #: Where a value came from, where not the journal (``observed``): the line's stream.
    sources: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Counters:
    """One journal ``step`` record's cumulative counters."""

    t: float
    steps: int
    samples: int | None
    tokens: int | None
    loss: float | None
    loss_steps: int
    lr: float | None


def counters(record: dict[str, Any]) -> Counters | None:
    """A journal ``step`` record with the cumulative counters, or None (an older journal's, or
    one inside an epoch: epochs are the rows there)."""
    t, steps = _float(record.get("t")), record.get("steps_total")
    if record.get("epoch") is not None or t is None or not isinstance(steps, int):
        return None
    loss_steps = record.get("loss_steps")
    return Counters(
        t=t,
        steps=steps,
        samples=_int(record.get("samples_total")),
        tokens=_int(record.get("tokens_total")),
        loss=_float(record.get("loss")),
        loss_steps=loss_steps if isinstance(loss_steps, int) and loss_steps > 0 else 1,
        lr=_float(record.get("lr")),
    )


class StepWindows:
    def __init__(self) -> None:
        self.world_size = 1  # samples and tokens are rank 0's: every rank takes its share
        self.pending: dict[int, Window] = {}
        self.lines_seen = False
        self.last: Counters | None = None  # the newest journal counters
        self.base: Counters | None = None  # those at the last window written
        #: The journal's records a logged window may still need, oldest first: from the
        #: start of the interval the last logged window fell in.
        self.records: list[Counters] = []
        self._window_step: int | None = None  # the step of the last logged window
        self._loss_sum = 0.0
        self._loss_steps = 0
        self.last_step: int | None = None  # the newest step a window or the journal reached
        self.first_logged: int | None = None  # the script's first logged step (0 or 1 based)
        self.made = 0  # windows handed out
        self._written_with_loss: int | None = None  # the newest window handed out with a loss

    @property
    def steps_completed(self) -> int | None:
        """Optimizer steps done: the journal's count, else the last logged step (counted from
        1 where the script counts from 0; an evaluation at the budget may overcount by one)."""
        if self.last is not None:
            return self.last.steps
        if self.last_step is None:
            return None
        return self.last_step + (1 if self.first_logged == 0 else 0)

    def line(self, record: StepRecord, now: float) -> list[Window]:
        """A step line with no epoch; the windows now due."""
        if record.step is None:
            return []
        self.lines_seen = True
        if self.first_logged is None:
            self.first_logged = record.step
        window = self.pending.setdefault(record.step, Window(record.step, arrived=now))
        values = dict(record.values)
        if record.loss is not None:
            values["train_loss"] = record.loss
        logged = "train_loss" in window.values or record.step == self._written_with_loss
        if any(k.startswith("val_") for k in values) and logged:
            # An evaluation's "train loss" is an estimate over a few batches: the step's own
            # logged loss, printed before or after it, is the window's.
            values.pop("train_loss", None)
        window.values.update(values)
        window.sources.update(dict.fromkeys(values, record.source or "stdout"))
        self.last_step = max(self.last_step or 0, record.step)
        return self.due(now)

    def journal(self, record: dict[str, Any], now: float) -> list[Window]:
        """A record of the main journal; the windows now due."""
        found = counters(record) if record.get("kind") == "step" else None
        if found is None:
            return []
        if self.base is None:
            self.base = found
        self.last = found
        self.records.append(found)
        if found.loss is not None:
            self._loss_sum += found.loss * found.loss_steps
            self._loss_steps += found.loss_steps
        if self.lines_seen:
            return self.due(now)
        if found.t - self.base.t >= OWN_WINDOW_SEC:
            return [self._own()]
        return []

    def due(self, now: float, final: bool = False) -> list[Window]:
        """Held windows that a journal record covers, that waited long enough, or all (final)."""
        covered = self.last.t if self.last is not None else float("-inf")
        hold = HOLD_SEC if self.last is None else JOURNAL_HOLD_SEC
        ready = [
            w
            for w in self.pending.values()
            if final or w.arrived <= covered or now - w.arrived >= hold
        ]
        if not ready:
            return []
        for w in ready:
            del self.pending[w.step]
        ready.sort(key=lambda w: w.step)
        for w in ready:
            for column, value in self._window_rates(w.step).items():
                w.values.setdefault(column, value)
        self.made += len(ready)
        with_loss = [w.step for w in ready if "train_loss" in w.values]
        if with_loss:
            self._written_with_loss = with_loss[-1]
        return ready

    def finish(self, now: float) -> list[Window]:
        """The end: every held window, or ddp-tui's own last one."""
        if self.lines_seen:
            return self.due(now, final=True)
        if self.last is not None and (self.made == 0 or self.last != self.base):
            return [self._own()]
        return []

    def _own(self) -> Window:
        assert self.last is not None
        self.records = [self.last]  # no logged window will read the older ones
        window = Window(self.last.steps, self._rates(), arrived=self.last.t)
        self.last_step = self.last.steps
        self.made += 1
        return window

    def _window_rates(self, step: int) -> dict[str, float]:
        """A logged window's rates: the journal's over the interval that holds ``step``,
        from the record before the first one at or past it (or, where the journal has not
        reached the step yet, over its last interval).

        Records come at most once a second and lines may come faster, so windows inside
        one interval share its rates; each window's own length is its steps at the
        interval's pace. Taking the interval by step, not by when the line was read, keeps
        a window read late (a busy node: the journal ahead of the script's lines) from
        taking the steps of the windows after it.
        """
        out: dict[str, float] = {}
        records = self.records
        end = next((i for i, c in enumerate(records) if c.steps >= step), len(records) - 1)
        if end < 1:
            return out  # at or before the first record (an evaluation before any step)
        start, last = records[end - 1], records[end]
        seconds, steps = last.t - start.t, last.steps - start.steps
        if seconds > 0:
            for column, a, b in (
                ("throughput_samples_per_sec", start.samples, last.samples),
                ("tokens_per_sec", start.tokens, last.tokens),
            ):
                if a is not None and b is not None and b >= a:
                    out[column] = (b - a) * self.world_size / seconds
            since = self._window_step if self._window_step is not None else start.steps
            if steps > 0 and step > since:
                # The window's own length (what the advisor and Compare read as a row's
                # time where a script has no epochs; docs/architecture.md, metrics.csv).
                out["epoch_time_sec"] = (step - since) * seconds / steps
        if last.lr is not None:
            out["lr"] = last.lr
        if last.loss is not None:
            out["train_loss"] = last.loss
        self._window_step = step
        self.records = records[end - 1 :]
        return out

    def _rates(self) -> dict[str, float]:
        """ddp-tui's own window: what the journal says of the steps since the last one."""
        out: dict[str, float] = {}
        base, last = self.base, self.last
        if base is not None and last is not None:
            seconds = last.t - base.t
            if seconds > 0:
                # The window's own length: what the advisor and Compare read as a row's time
                # where a script has no epochs (docs/architecture.md, metrics.csv).
                out["epoch_time_sec"] = seconds
                for column, a, b in (
                    ("throughput_samples_per_sec", base.samples, last.samples),
                    ("tokens_per_sec", base.tokens, last.tokens),
                ):
                    if a is not None and b is not None and b >= a:
                        out[column] = (b - a) * self.world_size / seconds
            if last.lr is not None:
                out["lr"] = last.lr
        if self._loss_steps:
            out["train_loss"] = self._loss_sum / self._loss_steps
        self.base = last
        self._loss_sum, self._loss_steps = 0.0, 0
        return out


def _float(value: object) -> float | None:
    """A finite number, or None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
