"""Pre-emption signals: SIGUSR2 (Slurm's ``--signal``) and SIGTERM (scancel, torchrun).

The handler only records the signal; the training loop finishes its step, saves a checkpoint and
exits with code 3. Rank 0 also leaves ``requeue.request`` in the run directory, because torchrun
turns every worker exit code into 1.
"""

from __future__ import annotations

import signal
from types import FrameType

from ddp_tui.jobfiles import REQUEUE_FILE, clear_requeue_request, write_requeue_request

__all__ = [
    "REQUEUE_FILE",
    "StopSignal",
    "clear_requeue_request",
    "signal_name",
    "write_requeue_request",
]


class StopSignal:
    """Remembers the first pre-emption signal received."""

    SIGNALS = (signal.SIGUSR2, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: str | None = None
        self.signum = 0

    def install(self) -> StopSignal:
        for sig in self.SIGNALS:
            signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        # No printing here: a handler that writes to stdout can re-enter a write in progress.
        if self.received is None:
            self.received = signal.Signals(signum).name
            self.signum = int(signum)

    @property
    def requested(self) -> bool:
        return self.received is not None


def signal_name(signum: int) -> str:
    """``12`` -> ``SIGUSR2``."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
