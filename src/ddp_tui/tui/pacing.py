"""How often the background loops run, and how they wait without delaying app exit."""

from __future__ import annotations

import threading
import time
from typing import Any

from textual.worker import Worker

MIN_INTERVAL = 2.0  # admins throttle users who poll squeue faster than every few seconds
DEFAULT_INTERVAL = 5.0
IDLE_INTERVAL_MAX = 30.0
ERROR_BACKOFF_MAX = 60.0
#: Waits are cut into slices this long: app exit waits for worker threads.
SLICE = 0.2


def poll_delay(interval: float, failures: int, active: bool) -> float:
    """Seconds until the next refresh: the interval (never below 2 s), doubled per failure
    up to a minute, and tripled (up to 30 s) while nothing is queued or running."""
    base = max(MIN_INTERVAL, interval)
    if failures > 0:
        return float(min(ERROR_BACKOFF_MAX, base * 2 ** min(failures, 10)))
    if not active:
        return max(base, min(IDLE_INTERVAL_MAX, base * 3))
    return base


def sleep_unless_cancelled(
    worker: Worker[Any], seconds: float, wake: threading.Event | None = None
) -> bool:
    """Wait ``seconds``, or until ``wake`` is set; False when the worker was cancelled."""
    deadline = time.monotonic() + seconds
    while not worker.is_cancelled:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return True
        if wake is None:
            time.sleep(min(remaining, SLICE))
        elif wake.wait(min(remaining, SLICE)):
            wake.clear()
            return True
    return False
