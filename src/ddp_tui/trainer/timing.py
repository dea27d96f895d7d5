"""Compute-time measurement that does not stall the GPU.

On a GPU each micro-step is bracketed by CUDA events and the elapsed times are read only when a
total is asked for (once per epoch, or at a checkpoint), so there is no per-step device sync.
On the CPU the work is synchronous and a wall clock is enough.
"""

from __future__ import annotations

import time

import torch


class ComputeTimer:
    """Sums the time between :meth:`begin` and :meth:`end` pairs."""

    def __init__(self, device: torch.device) -> None:
        self._cuda = device.type == "cuda"
        self._device = device
        self._pairs: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._open: torch.cuda.Event | None = None
        self._t0 = 0.0
        self._seconds = 0.0

    def begin(self) -> None:
        if self._cuda:
            event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            event.record()
            self._open = event
        else:
            self._t0 = time.perf_counter()

    def end(self) -> None:
        if self._cuda:
            if self._open is None:
                return
            event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            event.record()
            self._pairs.append((self._open, event))
            self._open = None
        else:
            self._seconds += time.perf_counter() - self._t0

    def total(self) -> float:
        """Seconds so far (waits for the device to finish the recorded work)."""
        if self._pairs:
            self._pairs[-1][1].synchronize()
            self._seconds += sum(a.elapsed_time(b) for a, b in self._pairs) / 1000.0
            self._pairs.clear()
        return self._seconds
