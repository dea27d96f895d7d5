"""A DDP trainer in the idiom of timm's ``train.py``, knowing nothing of ddp-tui.

What makes it that idiom (written here from scratch, no timm code):

- it logs through Python's ``logging`` (``basicConfig``: stderr), rank 0 only, with
  ``AverageMeter``s printed as ``value (running average)``:
  ``Train: 0 [   1/4 ( 33%)]  Loss: 1.57 (1.50)  Time: 0.017s,  59.24/s  (0.020s,  50.00/s)
  LR: 1.000e-01  Data: 0.001 (0.002)`` every ``--log-interval`` batches and at the last, then
  ``Test: [   1/1]  Time: ...  Loss:  0.6900 (0.6900)  Acc@1: 50.0000 (50.0000)  Acc@5: ...``;
- epochs count from 0; the batch index is 0-based and the last one prints as ``[N-1/N-1]``
  at 100%;
- it writes ``<output>/summary.csv`` itself, one row per epoch (``epoch,train_loss,eval_loss,
  eval_top1,eval_top5,lr``: the train loss is the epoch's running average), and at the end a
  result JSON with the last evaluation;
- a DataLoader over a DistributedSampler, ``set_epoch`` each epoch, the model in DDP.

Run it: ``python -m torch.distributed.run --standalone --nproc-per-node=2 timm_style_ddp.py``.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from toy_task import end, init_world, make_data, make_model

_logger = logging.getLogger("train")


class AverageMeter:
    """The last value and the running average of a quantity (timm's utils, rewritten)."""

    def __init__(self) -> None:
        self.val = self.avg = self.sum = 0.0
        self.count = 0

    def update(self, val: float, n: int = 1) -> None:
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("-b", "--batch-size", type=int, default=64)
    p.add_argument("--log-interval", type=int, default=2)
    p.add_argument("--output", default="output/train")
    return p.parse_args()


def train_one_epoch(
    epoch: int,
    model: nn.Module,
    loader: DataLoader[tuple[torch.Tensor, ...]],
    opt: torch.optim.Optimizer,
    world_size: int,
    log_interval: int,
) -> dict[str, float]:
    """One epoch; ``log_interval`` 0 logs nothing (ranks other than 0)."""
    losses, batch_time, data_time = AverageMeter(), AverageMeter(), AverageMeter()
    model.train()
    last_idx = len(loader) - 1
    end_t = time.perf_counter()
    for batch_idx, (x, y) in enumerate(loader):
        data_time.update(time.perf_counter() - end_t)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.update(loss.item(), x.size(0))
        batch_time.update(time.perf_counter() - end_t)
        if log_interval and (batch_idx == last_idx or batch_idx % log_interval == 0):
            lr = opt.param_groups[0]["lr"]
            rate = x.size(0) * world_size / max(batch_time.val, 1e-9)
            rate_avg = x.size(0) * world_size / max(batch_time.avg, 1e-9)
            _logger.info(
                f"Train: {epoch} [{batch_idx:>4d}/{len(loader)} "
                f"({100.0 * batch_idx / max(last_idx, 1):>3.0f}%)]  "
                f"Loss: {losses.val:#.3g} ({losses.avg:#.3g})  "
                f"Time: {batch_time.val:.3f}s, {rate:>7.2f}/s  "
                f"({batch_time.avg:.3f}s, {rate_avg:>7.2f}/s)  "
                f"LR: {lr:.3e}  "
                f"Data: {data_time.val:.3f} ({data_time.avg:.3f})"
            )
        end_t = time.perf_counter()
    return {"loss": losses.avg}


def validate(
    model: nn.Module, loader: DataLoader[tuple[torch.Tensor, ...]], log_interval: int
) -> dict[str, float]:
    losses, top1, top5, batch_time = AverageMeter(), AverageMeter(), AverageMeter(), AverageMeter()
    net = getattr(model, "module", model)
    last_idx = len(loader) - 1
    end_t = time.perf_counter()
    with torch.no_grad():
        for batch_idx, (x, y) in enumerate(loader):
            out = net(x)
            loss = nn.functional.cross_entropy(out, y)
            k = min(5, out.size(1))
            ranked = out.topk(k, dim=1).indices
            acc1 = (ranked[:, 0] == y).float().mean().item() * 100
            acc5 = (ranked == y[:, None]).any(dim=1).float().mean().item() * 100
            losses.update(loss.item(), x.size(0))
            top1.update(acc1, x.size(0))
            top5.update(acc5, x.size(0))
            batch_time.update(time.perf_counter() - end_t)
            end_t = time.perf_counter()
            if batch_idx == last_idx or batch_idx % log_interval == 0:
                _logger.info(
                    f"Test: [{batch_idx:>4d}/{last_idx}]  "
                    f"Time: {batch_time.val:.3f} ({batch_time.avg:.3f})  "
                    f"Loss: {losses.val:>7.4f} ({losses.avg:>6.4f})  "
                    f"Acc@1: {top1.val:>7.4f} ({top1.avg:>7.4f})  "
                    f"Acc@5: {top5.val:>7.4f} ({top5.avg:>7.4f})"
                )
    return {"loss": losses.avg, "top1": top1.avg, "top5": top5.avg}


def update_summary(
    path: Path, epoch: int, train: dict[str, float], evals: dict[str, float], lr: float
) -> None:
    row: dict[str, float] = {"epoch": epoch, "train_loss": train["loss"]}
    row.update({f"eval_{k}": v for k, v in evals.items()})
    row["lr"] = lr
    new = not path.exists()
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def main() -> None:
    args = parse_args()
    world = init_world()
    if world.main:
        logging.basicConfig(level=logging.INFO, format="%(message)s")  # stderr, as timm's
    x, y = make_data()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    train_set = TensorDataset(x, y)
    sampler = DistributedSampler(train_set, num_replicas=world.size, rank=world.rank)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    val_loader = DataLoader(TensorDataset(x[:128], y[:128]), batch_size=64)
    output = Path(args.output)
    if world.main:
        output.mkdir(parents=True, exist_ok=True)
        _logger.info(f"Training with {world.size} processes, {args.epochs} epochs")
    evals: dict[str, float] = {}
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        log_interval = args.log_interval if world.main else 0
        train = train_one_epoch(epoch, model, loader, opt, world.size, log_interval)
        dist.barrier()
        if world.main:
            evals = validate(model, val_loader, args.log_interval)
            update_summary(output / "summary.csv", epoch, train, evals, opt.param_groups[0]["lr"])
        dist.barrier()
    if world.main:
        result = {"eval": evals, "epochs": args.epochs}
        (output / "results.json").write_text(json.dumps(result, indent=4))
        _logger.info(f"--result\n{json.dumps(result, indent=4)}")
    end()


if __name__ == "__main__":
    main()
