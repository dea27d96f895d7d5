"""The reporting helper a training script may call: ``from ddp_tui_report import report_epoch``.

Each call prints one line, ``@ddp-tui {json}``, to stdout and flushes it; the wrapper
(:mod:`ddp_tui.scriptrun.runner`) takes these lines as the authoritative metrics and stops
guessing from other output once it sees one. Outside ddp-tui the lines are merely printed, so a
script keeps working anywhere. Only rank 0 (``RANK``, default 0) prints.

This module is also copied into each run as the top-level ``code/ddp_tui_report.py``, so it
imports nothing but the standard library (and no relative import).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any

TAG = "@ddp-tui"
STEP_INTERVAL_SEC = 1.0

_last_epoch = 0
_last_step_time = -math.inf


def _is_rank0() -> bool:
    try:
        return int(os.environ.get("RANK") or 0) == 0
    except ValueError:
        return True


def _plain(value: Any) -> Any:
    """Numbers as JSON numbers (tensors and numpy scalars through ``.item()``), else text."""
    if hasattr(value, "item"):
        try:
            value = value.item()
        except (TypeError, ValueError, RuntimeError):
            return str(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return value if not isinstance(value, float) or math.isfinite(value) else None
    return str(value)


def _emit(payload: dict[str, Any]) -> None:
    sys.stdout.write(f"{TAG} {json.dumps(payload)}\n")
    sys.stdout.flush()


def report_epoch(epoch: int | None = None, **metrics: Any) -> None:
    """Report one finished epoch: ``report_epoch(3, train_loss=0.2, val_acc=0.91)``.

    ``epoch`` counts as your script counts (from 0 or 1); left out, it is the previous one
    plus one, starting at 1. Names may be the metrics.csv columns or common aliases (``loss``,
    ``acc``, ``learning_rate``, ...); ``samples=N`` gives the epoch's sample count.
    """
    global _last_epoch
    if epoch is None:
        epoch = _last_epoch + 1
    _last_epoch = int(epoch)
    if not _is_rank0():
        return
    _emit(
        {
            "event": "epoch",
            "epoch": int(epoch),
            "metrics": {k: _plain(v) for k, v in metrics.items()},
        }
    )


def report_step(
    step: int,
    steps_per_epoch: int | None = None,
    loss: Any = None,
    epoch: int | None = None,
) -> None:
    """Report progress inside an epoch; prints at most about once a second, so it is cheap to
    call every step."""
    global _last_step_time
    if not _is_rank0():
        return
    now = time.monotonic()
    if now - _last_step_time < STEP_INTERVAL_SEC:
        return
    _last_step_time = now
    _emit(
        {
            "event": "step",
            "step": int(step),
            "steps_per_epoch": None if steps_per_epoch is None else int(steps_per_epoch),
            "loss": _plain(loss),
            "epoch": None if epoch is None else int(epoch),
        }
    )


__all__ = ["report_epoch", "report_step"]
