"""A DDP script that reports through ddp-tui's helper, ``ddp_tui_report``.

All it knows of ddp-tui is that module (ddp-tui ships it in every run's ``code/``, which the
job puts on ``PYTHONPATH``): ``report_step`` during each epoch, ``report_epoch`` at its end,
with the global number of samples so that throughput comes from the script itself. It prints
nothing else a metrics parser could mistake for an epoch.
"""

from __future__ import annotations

import argparse

import torch
from ddp_tui_report import report_epoch, report_step
from toy_task import (
    SAMPLES,
    batches,
    end,
    evaluate,
    global_mean,
    init_world,
    make_data,
    make_model,
    train_step,
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--batch-size", type=int, default=32)
    return p.parse_args()


def main() -> None:
    args = parse_args()
    world = init_world()
    x, y = make_data()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    if world.main:
        print(f"helper_ddp: {world.size} process(es), reporting through ddp_tui_report")

    for epoch in range(1, args.epochs + 1):
        mine = batches(epoch, world, args.batch_size)
        losses = []
        for i, idx in enumerate(mine):
            losses.append(train_step(model, opt, x[idx], y[idx]))
            # Rank 0 only and rate-limited by the helper itself; every rank may call it.
            report_step(i + 1, steps_per_epoch=len(mine), loss=losses[-1], epoch=epoch)
        train_loss = global_mean(sum(losses) / len(losses), world)
        val_acc = evaluate(model, x, y, world)
        report_epoch(epoch=epoch, train_loss=train_loss, val_acc=val_acc, samples=SAMPLES)

    end()


if __name__ == "__main__":
    main()
