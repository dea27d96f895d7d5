"""Job side of ``tests/helpers/hold.py``: a built-in model whose training waits on a file.

Not imported by the tests: :class:`tests.helpers.hold.Hold` copies this file next to its hold
file, and the held job reaches it through ``PYTHONPATH`` as ``--model ddp_tui_test_hold:mlp``.
So it imports only the standard library, torch and the run's own ``ddp_tui`` code.

The model is the trainer's own (same weights, same state dict). In the job attempt the job
script chose to hold (``DDP_TUI_TEST_HOLD`` is set only there), a forward pre-hook waits before
the first forward pass that comes after ``DDP_TUI_TEST_HOLD_AFTER`` epochs are in the run's
``metrics.csv``, for as long as the hold file exists. A SIGTERM or SIGUSR2 (cancel, requeue,
time limit) ends the wait too, and is passed on to the trainer's own handler, so a held
trainer stops the way it always does: checkpoint, then exit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGUSR2)


class Gate:
    """The forward pre-hook: waits once, at the first forward after ``after`` epochs."""

    def __init__(self, hold: Path, after: int, metrics: Path) -> None:
        self.hold = hold
        self.after = after
        self.metrics = metrics
        self.done = False
        self.signalled = False

    def epochs_done(self) -> int:
        try:
            lines = self.metrics.read_text().splitlines()
        except FileNotFoundError:
            return 0
        return max(0, len([line for line in lines if line.strip()]) - 1)  # less the header

    def __call__(self, module: Any, args: Any) -> None:
        if self.done:
            return
        if not self.hold.exists():
            self.done = True  # released before it was reached: never wait
            return
        if self.epochs_done() < self.after:
            return
        self.done = True
        self._chain_signals()
        rank = os.environ.get("RANK", "0")
        print(
            f"[test hold] rank {rank} waits after {self.after} epoch(s) on {self.hold}",
            file=sys.stderr,
            flush=True,
        )
        # Tells a test that this rank is parked here, so it can act on it by construction.
        # Best effort: a job of another user (the SSH tests) may not write the directory.
        with contextlib.suppress(OSError):
            self.hold.with_name(f"waiting.{rank}").touch()
        while self.hold.exists() and not self.signalled:
            time.sleep(0.1)
        why = "a signal" if self.signalled else "the release"
        print(f"[test hold] rank {rank} goes on after {why}", file=sys.stderr, flush=True)

    def _chain_signals(self) -> None:
        for sig in SIGNALS:
            previous = signal.getsignal(sig)

            def handler(signum: int, frame: FrameType | None, previous: Any = previous) -> None:
                self.signalled = True
                if callable(previous):
                    previous(signum, frame)
                elif previous == signal.SIG_DFL:  # what the signal would have done: end it
                    signal.signal(signum, signal.SIG_DFL)
                    os.kill(os.getpid(), signum)

            try:
                signal.signal(sig, handler)
            except ValueError:  # not the main thread: the hold file alone ends the wait
                return


def _held(name: str, input_shape: tuple[int, ...], num_classes: int) -> Any:
    from ddp_tui.trainer.models import build_model

    model = build_model(name, tuple(input_shape), num_classes)
    hold = os.environ.get("DDP_TUI_TEST_HOLD")
    if hold:
        after = int(os.environ["DDP_TUI_TEST_HOLD_AFTER"])
        metrics = Path(os.environ["DDP_TUI_TEST_HOLD_RUN_DIR"]) / "metrics.csv"
        model.register_forward_pre_hook(Gate(Path(hold), after, metrics))
    return model


def mlp(input_shape: tuple[int, ...], num_classes: int) -> Any:
    return _held("mlp", input_shape, num_classes)


def simple_cnn(input_shape: tuple[int, ...], num_classes: int) -> Any:
    return _held("simple_cnn", input_shape, num_classes)
