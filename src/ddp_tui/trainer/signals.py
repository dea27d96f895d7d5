"""Pre-emption signals: SIGUSR2 (Slurm's ``--signal``) and SIGTERM (scancel, torchrun).

The handler only records the signal; the training loop finishes its step, saves a checkpoint and
exits with code 3. Rank 0 also leaves ``requeue.request`` in the run directory, because torchrun
turns every worker exit code into 1.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from types import FrameType

REQUEUE_FILE = "requeue.request"


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


def write_requeue_request(run_dir: Path, reason: str, epoch: int, step: int) -> None:
    """Ask the job script to requeue the job."""
    record = {"reason": reason, "time": time.time(), "epoch": epoch, "step": step}
    (run_dir / REQUEUE_FILE).write_text(json.dumps(record) + "\n")


def clear_requeue_request(run_dir: Path) -> None:
    """A (re)started trainer removes the previous attempt's request."""
    (run_dir / REQUEUE_FILE).unlink(missing_ok=True)
