"""The benchmark's training script: a plain DDP loop (DataLoader, DistributedSampler, AdamW)
over synthetic data that times its own steps and prints ``bench samples_per_sec=X``.

The step is small on purpose (an MLP on the CPU, about a millisecond or two): the observation
layer's cost is per batch and per step, so a short step shows it at its largest.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--samples", type=int, default=32768)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.samples, 64, generator=g)
    y = (x[:, :8].sum(dim=1) > 0).long()
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=args.batch, sampler=sampler)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 2)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    timed = 0.0
    samples = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        start = time.perf_counter()
        for xb, yb in loader:
            opt.zero_grad(set_to_none=True)
            loss_fn(model(xb), yb).backward()
            opt.step()
            samples += len(xb)
        if epoch > 0:  # the first epoch warms up
            timed += time.perf_counter() - start
        else:
            samples = 0
    rate = torch.tensor([samples / timed])
    dist.all_reduce(rate)
    if dist.get_rank() == 0:
        print(f"bench samples_per_sec={rate.item():.1f}", flush=True)
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)  # torch 2.15's gloo can abort at teardown; skip it (as the tests' scripts do)


if __name__ == "__main__":
    main()
