"""A DDP trainer in the idiom of pytorch/examples' ``imagenet/main.py``, knowing nothing of
ddp-tui (written here from scratch, none of that script's code).

What makes it that idiom: ``print`` to stdout through a ``ProgressMeter`` of ``AverageMeter``s,
each shown as ``value (running average)``, ``Epoch: [0][ 1/4]\\tTime  0.012 ( 0.020)\\tLoss
1.3862e+00 (1.3862e+00)\\tAcc@1  25.00 ( 25.00)`` every ``--print-freq`` batches, then
``Test: [1/2]`` lines and the evaluation's summary `` *   Acc@1 39.062 Acc@5 100.000``; epochs
count from 0, batches from 1; a DataLoader over a DistributedSampler; no file of its own.

Run it: ``python -m torch.distributed.run --standalone --nproc-per-node=2 imagenet_style_ddp.py``.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from toy_task import end, init_world, make_data, make_model


class AverageMeter:
    def __init__(self, name: str, fmt: str, summary: bool = False) -> None:
        self.name, self.fmt, self.summary = name, fmt, summary
        self.val = self.avg = self.sum = 0.0
        self.count = 0

    def update(self, val: float, n: int = 1) -> None:
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self) -> str:
        return f"{self.name} {self.val:{self.fmt}} ({self.avg:{self.fmt}})"

    def summary_text(self) -> str:
        return f"{self.name} {self.avg:.3f}" if self.summary else ""


class ProgressMeter:
    def __init__(self, num_batches: int, meters: list[AverageMeter], prefix: str) -> None:
        width = len(str(num_batches))
        self.batch_fmt = f"[{{:{width}d}}/{num_batches}]"
        self.meters, self.prefix = meters, prefix

    def display(self, batch: int) -> None:
        entries = [self.prefix + self.batch_fmt.format(batch), *(str(m) for m in self.meters)]
        print("\t".join(entries), flush=True)

    def display_summary(self) -> None:
        print(" ".join([" *", *(m.summary_text() for m in self.meters)]), flush=True)


def accuracy(out: torch.Tensor, y: torch.Tensor, k: int) -> float:
    ranked = out.topk(min(k, out.size(1)), dim=1).indices
    return float((ranked == y[:, None]).any(dim=1).float().mean().item() * 100)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("-b", "--batch-size", type=int, default=64)
    p.add_argument("-p", "--print-freq", type=int, default=2)
    args = p.parse_args()
    world = init_world()
    x, y = make_data()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    train_set = TensorDataset(x, y)
    sampler = DistributedSampler(train_set, num_replicas=world.size, rank=world.rank)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        batch_time, losses = AverageMeter("Time", "6.3f"), AverageMeter("Loss", ".4e")
        top1, top5 = AverageMeter("Acc@1", "6.2f"), AverageMeter("Acc@5", "6.2f")
        progress = ProgressMeter(len(loader), [batch_time, losses, top1, top5], f"Epoch: [{epoch}]")
        end_t = time.perf_counter()
        for i, (xb, yb) in enumerate(loader):
            out = model(xb)
            loss = nn.functional.cross_entropy(out, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.update(loss.item(), len(yb))
            top1.update(accuracy(out, yb, 1), len(yb))
            top5.update(accuracy(out, yb, 5), len(yb))
            batch_time.update(time.perf_counter() - end_t)
            end_t = time.perf_counter()
            if world.main and i % args.print_freq == 0:
                progress.display(i + 1)
        if world.main:
            net = model.module
            v_loss, v_top1, v_top5 = (
                AverageMeter("Loss", ".4e"),
                AverageMeter("Acc@1", "6.2f", summary=True),
                AverageMeter("Acc@5", "6.2f", summary=True),
            )
            val = ProgressMeter(2, [v_loss, v_top1, v_top5], "Test: ")
            with torch.no_grad():
                for i, (xs, ys) in enumerate(
                    zip(x[:128].split(64), y[:128].split(64), strict=True)
                ):
                    out = net(xs)
                    v_loss.update(nn.functional.cross_entropy(out, ys).item(), len(ys))
                    v_top1.update(accuracy(out, ys, 1), len(ys))
                    v_top5.update(accuracy(out, ys, 5), len(ys))
                    val.display(i + 1)
            val.display_summary()
    end()


if __name__ == "__main__":
    main()
