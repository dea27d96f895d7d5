"""A DDP script that checkpoints, resumes, and stops cleanly on SIGTERM (pre-emption).

What it knows of ddp-tui is two environment variables, both with a default outside ddp-tui:

- ``DDP_TUI_CHECKPOINT_DIR``: where ``ckpt.pt`` lives. A run that finds one resumes from it
  (rank 0 reads it and broadcasts it, so the ranks need not share a filesystem); rank 0 saves
  after every epoch and when it stops, to a temporary file then ``os.replace``, so a kill
  never leaves half a checkpoint.
- ``DDP_TUI_REQUEUE_EXIT_CODE``: the exit status after a SIGTERM (or SIGUSR2): the ranks agree
  on stopping after the same step (an all-reduce of the signal flag with each step's loss),
  rank 0 saves where they stopped, and every rank exits with it.

Rank 0 prints ``epoch=E loss=L acc=A`` per epoch (1-based, accuracy a fraction).

``--hold-file PATH --hold-after N`` holds the run for a test, by construction: after epoch N,
in an attempt that found no checkpoint when it started, rank 0 waits while PATH exists and no
SIGTERM has come, and the other ranks wait at a barrier. A resumed attempt is never held.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist
from toy_task import (
    World,
    batches,
    end,
    evaluate,
    init_world,
    make_data,
    make_model,
    train_step,
)

CHECKPOINT = "ckpt.pt"


class Stop:
    """Remembers that a stop signal came; the handler only sets a flag (safe anywhere)."""

    def __init__(self) -> None:
        self.requested = False
        for sig in (signal.SIGTERM, signal.SIGUSR2):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hold-file", type=Path, default=None, help="(tests) wait while it exists")
    p.add_argument("--hold-after", type=int, default=0, help="(tests) ... after this epoch")
    return p.parse_args()


def load(path: Path, world: World) -> dict[str, Any] | None:
    """Rank 0's checkpoint (or None), on every rank."""
    box: list[Any] = [torch.load(path) if world.main and path.exists() else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def save(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def hold(file: Path, stop: Stop) -> None:
    """Rank 0 waits while ``file`` exists, or until a stop signal."""
    print(f"checkpoint_ddp: held on {file}", file=sys.stderr, flush=True)
    while file.exists() and not stop.requested:
        time.sleep(0.1)
    why = "a signal" if stop.requested else "the release"
    print(f"checkpoint_ddp: goes on after {why}", file=sys.stderr, flush=True)


def main() -> None:
    args = parse_args()
    stop = Stop()
    requeue_code = int(os.environ.get("DDP_TUI_REQUEUE_EXIT_CODE", "3"))
    path = Path(os.environ.get("DDP_TUI_CHECKPOINT_DIR", "checkpoints")) / CHECKPOINT
    world = init_world()
    x, y = make_data()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    # Position: the 0-based epoch in progress, the next step in it, and that epoch's loss so far.
    epoch, first_step, loss_sum = 0, 0, 0.0
    state = load(path, world)
    resumed = state is not None
    if state is not None:
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        epoch, first_step, loss_sum = state["epoch"], state["step"], state["loss_sum"]
        if world.main:
            print(f"checkpoint_ddp: resuming from {path} at epoch {epoch + 1} step {first_step}")

    def checkpoint(epoch: int, step: int, loss_sum: float) -> None:
        if world.main:
            weights = {"model": model.module.state_dict(), "optimizer": opt.state_dict()}
            save(path, weights | {"epoch": epoch, "step": step, "loss_sum": loss_sum})

    def stop_here(epoch: int, step: int, loss_sum: float) -> None:
        checkpoint(epoch, step, loss_sum)
        dist.barrier()  # no rank leaves before rank 0 has saved
        if world.main:
            print(
                f"checkpoint_ddp: stop signal: saved epoch {epoch + 1} step {step}; "
                f"exiting with {requeue_code}",
                file=sys.stderr,
                flush=True,
            )
        end(requeue_code)

    while epoch < args.epochs:
        mine = batches(epoch, world, args.batch_size)
        for step in range(first_step, len(mine)):
            local = train_step(model, opt, x[mine[step]], y[mine[step]])
            # The step's loss and the stop vote in one all-reduce: every rank stops together.
            votes = torch.tensor([local, float(stop.requested)], dtype=torch.float64)
            dist.all_reduce(votes)
            loss_sum += float(votes[0]) / world.size
            if votes[1] > 0 and step + 1 < len(mine):
                stop_here(epoch, step + 1, loss_sum)
        loss = loss_sum / len(mine)
        acc = evaluate(model, x, y, world)
        epoch, first_step, loss_sum = epoch + 1, 0, 0.0
        checkpoint(epoch, 0, 0.0)
        if world.main:
            print(f"epoch={epoch} loss={loss:.4f} acc={acc:.4f}", flush=True)
        if args.hold_file is not None and epoch == args.hold_after and not resumed:
            if world.main:
                hold(args.hold_file, stop)
            dist.barrier()
        if epoch < args.epochs:
            # A signal that came during evaluation or the hold is seen at the epoch boundary.
            flag = torch.tensor([float(stop.requested)])
            dist.all_reduce(flag)
            if flag.item() > 0:
                stop_here(epoch, 0, 0.0)

    end()


if __name__ == "__main__":
    main()
