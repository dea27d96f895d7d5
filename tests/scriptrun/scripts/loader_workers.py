"""A plain DDP loop whose DataLoader has 2 workers started by ``--context`` (fork or spawn),
optionally with a ``torch.compile``-d model: the observation layer must see its epochs and
samples, and the workers must leave no journals. Prints ``done samples=N`` on rank 0."""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--context", choices=("fork", "spawn"), default="fork")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--epochs", type=int, default=2)
    args = p.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(256, 8, generator=g), torch.randint(0, 2, (256,), generator=g))
    sampler = DistributedSampler(data)
    loader = DataLoader(
        data, batch_size=16, sampler=sampler, num_workers=2, multiprocessing_context=args.context
    )
    model: nn.Module = DistributedDataParallel(nn.Linear(8, 2))
    if args.compile:
        model = torch.compile(model, backend="eager")  # dynamo traces past the patched torch
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            seen += len(x)
        print(f"epoch {epoch} seen {seen}", flush=True)
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)  # torch 2.15's gloo may abort at teardown


if __name__ == "__main__":
    main()
