"""Compute-time measurement that does not stall the GPU.

On a GPU each interval is bracketed by CUDA events and the elapsed times are read only when a
total is asked for (once per epoch, or at a checkpoint), so there is no per-step device sync.
On the CPU the work is synchronous and a wall clock is enough.

Besides the compute total, :class:`ComputeTimer` keeps each optimizer step's wall time and the
forward+backward time of its one micro-step that all-reduces, which the step breakdown
(:mod:`.breakdown`, docs/step-breakdown.md) compares with the calibrated pure compute.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

import torch

#: A point in time: a recorded CUDA event, or ``time.perf_counter()`` on the CPU.
Stamp = Union[float, "torch.cuda.Event"]


def stamp(cuda: bool) -> Stamp:
    """Now: a CUDA event recorded on the current stream, or the wall clock."""
    if cuda:
        event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        event.record()
        return event
    return time.perf_counter()


def seconds(pairs: Sequence[tuple[Stamp, Stamp]]) -> list[float]:
    """The seconds between each (start, end) pair; waits once, for the last CUDA event."""
    if not pairs:
        return []
    last = pairs[-1][1]
    if not isinstance(last, float):
        last.synchronize()
    out: list[float] = []
    for a, b in pairs:
        if isinstance(a, float) and isinstance(b, float):
            out.append(b - a)
        elif not isinstance(a, float) and not isinstance(b, float):
            out.append(a.elapsed_time(b) / 1000.0)
        else:  # pragma: no cover - one timer never mixes the two
            raise TypeError("a CUDA event and a wall-clock time cannot be compared")
    return out


@dataclass(frozen=True)
class StepTime:
    """One optimizer step: its wall time (data fetch start to optimizer end) and the
    forward+backward time of the micro-step that all-reduced (it holds the exposed wait)."""

    wall: float
    sync_fwd_bwd: float


class ComputeTimer:
    """Sums the time between :meth:`begin` and :meth:`end` pairs, and times each step.

    Per step: :meth:`step_begin` before the data fetch, :meth:`begin`/:meth:`end` around each
    micro-step's compute, :meth:`synced` right after the all-reducing micro-step's backward,
    and :meth:`step_end` after the optimizer (it also ends the open compute interval).
    """

    def __init__(self, device: torch.device) -> None:
        self._cuda = device.type == "cuda"
        self._pairs: list[tuple[Stamp, Stamp]] = []
        self._open: Stamp | None = None
        self._seconds = 0.0
        self._step_open: Stamp | None = None
        self._sync: tuple[Stamp, Stamp] | None = None
        # (step start, step end, sync micro-step start, its backward's end), not yet resolved
        self._step_stamps: list[tuple[Stamp, Stamp, Stamp, Stamp]] = []
        self._steps: list[StepTime] = []

    def step_begin(self) -> None:
        self._step_open = stamp(self._cuda)

    def begin(self) -> None:
        self._open = stamp(self._cuda)

    def synced(self) -> None:
        """The all-reducing micro-step's backward has returned (on GPU: DDP has made the
        compute stream wait for the all-reduce, so an event here includes the wait)."""
        if self._open is not None:
            self._sync = (self._open, stamp(self._cuda))

    def end(self) -> Stamp | None:
        if self._open is None:
            return None
        now = stamp(self._cuda)
        self._pairs.append((self._open, now))
        self._open = None
        return now

    def step_end(self) -> None:
        now = self.end()
        if now is not None and self._step_open is not None and self._sync is not None:
            self._step_stamps.append((self._step_open, now, *self._sync))
        self._step_open = self._sync = None

    def total(self) -> float:
        """Seconds so far (waits for the device to finish the recorded work)."""
        if self._pairs:
            self._seconds += sum(seconds(self._pairs))
            self._pairs.clear()
        return self._seconds

    def steps(self) -> list[StepTime]:
        """Every step timed so far (waits for the device, like :meth:`total`)."""
        if self._step_stamps:
            walls = seconds([(s[0], s[1]) for s in self._step_stamps])
            syncs = seconds([(s[2], s[3]) for s in self._step_stamps])
            self._steps.extend(StepTime(w, f) for w, f in zip(walls, syncs, strict=True))
            self._step_stamps.clear()
        return list(self._steps)
