"""A DDP script as the PyTorch tutorials write it, knowing nothing of ddp-tui.

Rank 0 prints one line per epoch in the tutorials' style, ``Epoch 3 - Avg Loss: 0.2345,
Accuracy: 92.3%`` (epochs counted from 1), among lines a parser must leave alone: a banner
and a few per-batch lines. ``--crash-at-epoch N`` makes every rank raise a RuntimeError when
epoch N starts (after N - 1 epochs), the way a bug in a user's script ends a run.

Run it: ``python -m torch.distributed.run --standalone --nproc-per-node=2 tutorial_ddp.py``.
"""

from __future__ import annotations

import argparse

import torch
from toy_task import (
    batches,
    end,
    evaluate,
    global_mean,
    init_world,
    make_data,
    make_model,
    train_step,
)

CRASH_MESSAGE = "tutorial_ddp: deliberate crash at epoch {epoch} (--crash-at-epoch)"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--crash-at-epoch", type=int, default=0, help="raise when this epoch starts")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    world = init_world()
    x, y = make_data()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    if world.main:
        print("=" * 60)
        print(f"Tutorial DDP training: {world.size} process(es), {args.epochs} epochs")
        print("=" * 60, flush=True)

    for epoch in range(1, args.epochs + 1):
        if epoch == args.crash_at_epoch:
            raise RuntimeError(CRASH_MESSAGE.format(epoch=epoch))
        mine = batches(epoch, world, args.batch_size)
        losses = []
        for i, idx in enumerate(mine):
            losses.append(train_step(model, opt, x[idx], y[idx]))
            if world.main and i % 4 == 0:
                # Noise: what a tutorial prints while it trains; not an epoch's result.
                print(f"  [batch {i + 1}/{len(mine)}] loss {losses[-1]:.4f}", flush=True)
        avg_loss = global_mean(sum(losses) / len(losses), world)
        accuracy = evaluate(model, x, y, world)
        if world.main:
            print(f"Epoch {epoch} - Avg Loss: {avg_loss:.4f}, Accuracy: {100 * accuracy:.1f}%")
            print("-" * 60, flush=True)

    if world.main:
        print("Training finished.", flush=True)
    end()


if __name__ == "__main__":
    main()
