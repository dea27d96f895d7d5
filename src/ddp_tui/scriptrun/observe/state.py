"""What one process has seen so far, and the records it turns that into.

Plain Python, fed by the hooks (:mod:`.hooks`, :mod:`.frameworks`), so it is tested without torch.

**Epochs.** A framework that knows its epochs (Lightning, the Hugging Face Trainer) says where they
start and end, and its own hooks call :meth:`Observer.epoch_start` and :meth:`Observer.epoch_end`.
Otherwise an epoch is one pass of the *training* DataLoader: the iterator whose batches were
followed by an optimizer step. It starts at that iterator's first fetch and ends when the iterator
is exhausted (or when another one starts feeding the steps). A ``DistributedSampler``'s
``set_epoch`` number, where the script calls it, numbers the epochs; else passes count from 0
(a sampler whose ``set_epoch`` is never called says 0 every pass: then the passes count too).

**Samples and step time.** The batch dimension of each batch counts, but only batches followed by
an optimizer step (a validation pass's batches are dropped at the next fetch from another
iterator). The time inside ``__next__`` of the training iterator is the data wait; the rest of an
epoch is compute plus the communication it does not hide.

**Steps, with or without epochs** (:meth:`Observer.step`). Every process counts its optimizer
steps, samples and tokens since it started, and its loss (:mod:`.loss`), whether or not an epoch
is open: an iteration loop with no DataLoader has none. A step's samples are its DataLoader
batches where a loader fed it, else the model's inputs; its tokens are the model's inputs'. The
``step`` record carries these totals, and one more is written at exit (:meth:`Observer.final`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .journal import Journal
from .loss import LossMeter

_PROGRESS_SEC = 1.0  # at most one step record a second
_INPUT_STEPS = 3  # steps after which the model's input is dropped if a loader said it all
_MAX_ITERATORS = 64  # iterators never exhausted (infinite loaders) are forgotten past this


@dataclass
class _Epoch:
    number: int
    source: str
    start: float
    iterator: int | None = None
    steps: int = 0  # optimizer steps
    batches: int = 0  # training batches they stepped on (what a loader's length counts)
    samples: int = 0
    samples_known: bool = True
    wait: float = 0.0
    last_step: float | None = None
    steps_per_epoch: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    loss_sum: float = 0.0  # observed step losses read while the epoch was open (sum, count)
    loss_steps: int = 0


@dataclass
class _Iterator:
    serial: int
    first: float  # wall time of its first fetch's start
    sampler_epoch: int | None
    length: int | None


class Observer:
    def __init__(self, journal: Journal, clock: Callable[[], float] = time.time) -> None:
        self.journal = journal
        self.clock = clock
        self.framework: str | None = None  # drives the epochs once set
        self.epoch: _Epoch | None = None
        self.last_number: int | None = None  # of the last loader epoch
        self.iterators: dict[int, _Iterator] = {}  # live iterators by their key (never reused)
        self.serials = 0
        self.last_iterator: int | None = None  # serial of the iterator of the last batch
        self.closed: _Epoch | None = None  # the last loader epoch, while a late step may come
        self.pending_samples = 0
        self.pending_batches = 0
        self.pending_known = True
        self.pending_wait = 0.0
        self.group_seen = False
        self.device: str | None = None
        self.epochs_done = 0
        self.off: set[str] = set()  # hooks that failed and turned themselves off
        #: A new iterator -> (its sampler's epoch, its length): set by the torch hooks.
        self.describe: Callable[[Any], tuple[int | None, int | None]] = lambda _: (None, None)
        self._next_progress = 0.0
        self._progress_samples = 0
        self._progress_time: float | None = None
        # Step losses read from the device but not yet in a ``step`` record (sum, count): an
        # epoch's close reads its last steps' losses, which the next record still covers.
        self._carry_sum = 0.0
        self._carry_steps = 0
        self._init_totals()

    def _init_totals(self) -> None:
        """Counters since the process started, for any loop (the ``step`` record's totals)."""
        self.loss = LossMeter()
        self.optimizer_steps = 0  # every optimizer step (a GradScaler's skip shows as none)
        self.steps_total = 0  # training steps: steps after the same backward count once
        self.samples_total = 0
        self.samples_total_known = True
        self.tokens_total: int | None = None
        self.forward_samples: int | None = None  # the model's inputs since the last step
        self.forward_tokens: int | None = None
        self.lr: Any = None  # param_groups[0]["lr"] as the optimizer holds it (maybe a tensor)
        self._window_unknown = False  # a step since the last record had unknown samples
        self.input_wanted = True  # the model's input adds samples (no loader) or tokens
        self.finished = False  # the final record is written
        self._input_useful = False

    # -- guarding ------------------------------------------------------------------------
    def guard(self, hook: str, work: Callable[[], None]) -> None:
        """Run one hook's bookkeeping; if it raises, turn that hook off and leave a note."""
        if hook in self.off:
            return
        try:
            work()
        except Exception as exc:
            self.failed(hook, exc)

    def failed(self, hook: str, exc: Exception) -> None:
        """Turn ``hook`` off, with a note (for the hot hooks, which catch for themselves)."""
        self.off.add(hook)
        self.journal.write("note", hook=hook, error=repr(exc)[:500])

    # -- the process group ---------------------------------------------------------------
    def group(
        self, backend: str, world_size: int, rank: int, local_rank: int | None, host: str
    ) -> None:
        self.group_seen = True
        self.journal.write(
            "group",
            backend=backend,
            world_size=world_size,
            rank=rank,
            local_rank=local_rank,
            host=host,
        )

    def framework_info(self, name: str, **facts: Any) -> None:
        self.journal.write("framework", name=name, **facts)

    # -- the loader ----------------------------------------------------------------------
    def batch(self, iterator: int, size: int | None, wait: float, source: Any = None) -> None:
        """A batch of the iterator numbered ``iterator`` (``source``: the iterator itself, which
        :attr:`describe` reads once for its sampler's epoch and its length)."""
        seen = self.iterators.get(iterator)
        if seen is None:
            if len(self.iterators) >= _MAX_ITERATORS:
                self.iterators.pop(next(iter(self.iterators)))
            self.serials += 1
            sampler_epoch, length = self.describe(source)
            seen = _Iterator(self.serials, self.clock() - wait, sampler_epoch, length)
            self.iterators[iterator] = seen
        if seen.serial != self.last_iterator:  # another loader's batches: not the training ones
            self._clear_pending()
            self.last_iterator = seen.serial
            self.closed = None
        if size is None:
            self.pending_known = False
        else:
            self.pending_samples += size
        self.pending_batches += 1
        self.pending_wait += wait

    def exhausted(self, iterator: int) -> None:
        seen = self.iterators.pop(iterator, None)
        epoch = self.epoch
        if seen is None or self.framework is not None or epoch is None:
            return
        if epoch.iterator == seen.serial:
            self._close(self.clock())
            self.closed = epoch

    # -- optimizer steps -----------------------------------------------------------------
    def first_device(self, device: str | None) -> None:
        self.device = device or "?"
        self.journal.write("device", device=self.device)

    def step(self, lr: Any = None) -> None:
        now = self.clock()
        self._count_step(lr)
        iterator = self.last_iterator
        closed = self.closed
        if self.framework is None and closed is not None and closed.iterator == iterator:
            # A loader that fetches one batch ahead (Accelerate's) exhausts the iterator before
            # the last batch's step: that step still belongs to the epoch just written.
            self._take_pending(closed, now)
            self._drain_loss(closed)
            self._write_epoch(closed, now)
            return
        if self.framework is None and iterator is not None:
            epoch = self.epoch
            if epoch is None or epoch.iterator != iterator:
                if epoch is not None:
                    self._close(epoch.last_step or now)
                self._open_loader_epoch(iterator, now)
        epoch = self.epoch
        if epoch is None:
            if self.pending_batches:  # a framework's loader outside its epochs
                self._progress_samples += self.pending_samples
            self._clear_pending()
            if now >= self._next_progress:  # an iteration loop: steps without epochs
                self._progress(None, now)
            return
        self._take_pending(epoch, now)
        if now >= self._next_progress:
            self._progress(epoch, now)

    # -- totals for any loop: steps, samples, tokens, loss, lr ---------------------------
    def backward(self, value: Any) -> None:
        """The (detached, unscaled) scalar the script called backward() on."""
        self.loss.backward(value)

    def forward_input(self, samples: int | None, tokens: int | None) -> None:
        """The model's input in a forward with gradients enabled."""
        if samples is not None:
            self.forward_samples = (self.forward_samples or 0) + samples
        if tokens is not None:
            self.forward_tokens = (self.forward_tokens or 0) + tokens

    def skipped_step(self) -> None:
        """A GradScaler skipped the optimizer's step: the script's iteration still ended."""
        self.loss.step()
        self.forward_samples = self.forward_tokens = None

    def _count_step(self, lr: Any) -> None:
        self.optimizer_steps += 1
        if not self.loss.step() and self.loss.seen:
            return  # another optimizer stepping on the same backward: the same training step
        self.steps_total += 1
        if lr is not None:  # the first optimizer's after a backward: the model's, not a head's
            self.lr = lr
        tokens = self.forward_tokens
        if self.pending_batches:  # a DataLoader fed it: its batches are the samples
            samples = self.pending_samples if self.pending_known else None
            if tokens is not None:
                self._input_useful = True
        else:
            samples = self.forward_samples
            self._input_useful = True
            if samples is not None:
                self._progress_samples += samples
        if self.steps_total == _INPUT_STEPS:
            self.input_wanted = self._input_useful
        if samples is None:
            self.samples_total_known = False
            self._window_unknown = True
        else:
            self.samples_total += samples
        if tokens is not None:
            self.tokens_total = (self.tokens_total or 0) + tokens
            self.forward_tokens = None
        if self.forward_samples is not None:
            self.forward_samples = None

    def _drain_loss(self, epoch: _Epoch | None) -> None:
        """Read the meter's finished steps (the one device read of a record or an epoch's end)
        into the next ``step`` record's sums and the epoch they belong to."""
        mean, steps = self._loss_window()
        if mean is None or not steps:
            return
        self._carry_sum += mean * steps
        self._carry_steps += steps
        if epoch is not None:
            epoch.loss_sum += mean * steps
            epoch.loss_steps += steps

    def _loss_window(self) -> tuple[float | None, int]:
        if "loss" in self.off:
            return None, 0
        try:
            return self.loss.window()
        except Exception as exc:  # a device that cannot be read: no loss, the counts go on
            self.failed("loss", exc)
            return None, 0

    def final(self) -> None:
        """The last ``step`` record, at the process's exit: the steps since the last one. Once,
        and only in the process that took them: a forked child (a DataLoader worker) inherits
        the counts, and must not touch its parent's device tensors."""
        if self.steps_total and not self.finished and os.getpid() == self.journal.pid:
            self.finished = True
            self._progress(self.epoch, self.clock(), final=True)

    def _take_pending(self, epoch: _Epoch, now: float) -> None:
        """One optimizer step: the batches since the last one are its samples."""
        epoch.steps += 1
        epoch.batches += self.pending_batches
        epoch.samples += self.pending_samples
        epoch.samples_known = epoch.samples_known and self.pending_known
        epoch.wait += self.pending_wait
        epoch.last_step = now
        self._progress_samples += self.pending_samples
        self._clear_pending()

    def _clear_pending(self) -> None:
        self.pending_samples, self.pending_batches = 0, 0
        self.pending_known, self.pending_wait = True, 0.0

    def _open_loader_epoch(self, iterator: int, now: float) -> None:
        seen = next((i for i in self.iterators.values() if i.serial == iterator), None)
        numbered = seen.sampler_epoch if seen is not None else None
        last = self.last_number
        if numbered is not None and (last is None or numbered > last):
            number, source = numbered, "sampler"
        else:  # no sampler, or one whose set_epoch the script never calls (it stays at 0)
            number, source = (0 if last is None else last + 1), "loader"
        self.last_number = number
        self.epoch = _Epoch(
            number=number,
            source=source,
            start=seen.first if seen is not None else now,
            iterator=iterator,
            steps_per_epoch=seen.length if seen is not None else None,
        )

    def _progress(self, epoch: _Epoch | None, now: float, final: bool = False) -> None:
        rate = None
        if self._progress_time is not None and now > self._progress_time:
            rate = self._progress_samples / (now - self._progress_time)
        known = epoch.samples_known if epoch is not None else not self._window_unknown
        self._drain_loss(epoch)
        loss_steps = self._carry_steps
        loss = self._carry_sum / loss_steps if loss_steps else None
        self._carry_sum, self._carry_steps = 0.0, 0
        self.journal.write(
            "step",
            t=now,
            epoch=epoch.number if epoch is not None else None,
            # In the loader's units (its length is the steps per epoch); else optimizer steps.
            step=epoch.batches if epoch is not None else self.steps_total,
            steps_per_epoch=epoch.steps_per_epoch if epoch is not None else None,
            samples_per_sec=rate if known else None,
            steps_total=self.steps_total,
            samples_total=self.samples_total if self.samples_total_known else None,
            tokens_total=self.tokens_total,
            loss=loss,
            loss_steps=loss_steps,
            lr=_float(self.lr),
            **({"final": True} if final else {}),
        )
        self._progress_time = now
        self._progress_samples = 0
        self._window_unknown = False
        self._next_progress = now + _PROGRESS_SEC

    # -- a framework's epochs and records ------------------------------------------------
    def epoch_start(self, number: int, source: str, steps_per_epoch: int | None = None) -> None:
        if self.epoch is not None:
            self._close(self.clock())
        self.epoch = _Epoch(number, source, self.clock(), steps_per_epoch=steps_per_epoch)
        self._clear_pending()

    def epoch_end(self, metrics: Mapping[str, Any] | None = None) -> None:
        if self.epoch is None:
            return
        if metrics:
            self.epoch.metrics.update(numbers(metrics))
        self._close(self.clock())

    def metrics(self, epoch: int, values: Mapping[str, Any], phase: str = "train") -> None:
        """Values a framework logged for an epoch, perhaps after its end (an evaluation)."""
        found = numbers(values)
        if found:
            self.journal.write("metrics", epoch=epoch, phase=phase, values=found)

    def phase(self, name: str, start: float, metrics: Mapping[str, Any] | None = None) -> None:
        """A test, validate or predict run: never an epoch."""
        self.journal.write(
            "phase", phase=name, start=start, end=self.clock(), values=numbers(metrics or {})
        )

    def _close(self, end: float) -> None:
        epoch, self.epoch = self.epoch, None
        self.closed = None
        if epoch is None:
            return
        self.epochs_done += 1
        if not self.group_seen and self.epochs_done == 1:
            self.journal.write("no_group", epoch=epoch.number)
        self._drain_loss(epoch)
        self._write_epoch(epoch, end)

    def _write_epoch(self, epoch: _Epoch, end: float) -> None:
        """The epoch's record (again, with its late step, for a loader one batch ahead)."""
        seconds = max(end - epoch.start, 0.0)
        self.journal.write(
            "epoch",
            epoch=epoch.number,
            source=epoch.source,
            start=epoch.start,
            end=end,
            seconds=seconds,
            steps=epoch.steps,
            samples=epoch.samples if epoch.samples_known and epoch.steps else None,
            data_wait_sec=epoch.wait if epoch.steps else None,
            steps_per_epoch=epoch.steps_per_epoch,
            values=epoch.metrics,
            # The mean step loss of the epoch, observed: the row's train_loss where the script
            # reports none of its own (merge.py).
            loss=epoch.loss_sum / epoch.loss_steps if epoch.loss_steps else None,
        )


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError, RuntimeError):
        return None


def numbers(values: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers among a framework's metrics (tensors of one element included)."""
    out: dict[str, float] = {}
    for key, value in values.items():
        try:
            number = float(value.item() if hasattr(value, "item") else value)
        except (TypeError, ValueError, RuntimeError):
            continue
        if math.isfinite(number):
            out[str(key)] = number
    return out
