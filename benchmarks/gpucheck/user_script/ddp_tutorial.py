"""A user's own training script, written as the PyTorch DDP tutorials write one: torchrun's
environment, ``init_process_group``, a ``DistributedSampler``, the model in
``DistributedDataParallel`` on this rank's GPU (NCCL), or on the CPU with gloo when there is no
GPU. It knows nothing of ddp-tui; the GPU check submits it with ``--entry script`` and reads its
epochs from the one line rank 0 prints per epoch.

    torchrun --nproc-per-node 1 ddp_tutorial.py --epochs 3
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"rank {rank}/{world} backend {dist.get_backend()} device {device}", flush=True)

    # A learnable task: labels from a random linear teacher, the same data on every rank.
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8192, 64, generator=gen)
    y = (x @ torch.randn(64, 10, generator=gen)).argmax(dim=1)
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, seed=0)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)

    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        sums = torch.zeros(3, device=device)  # loss x samples, correct, samples
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            out = ddp(xb)
            loss = F.cross_entropy(out, yb)
            loss.backward()
            opt.step()
            n = float(yb.shape[0])
            correct = (out.argmax(dim=1) == yb).sum().float()
            sums += torch.stack([loss.detach() * n, correct, torch.tensor(n, device=device)])
        dist.all_reduce(sums)
        if rank == 0:
            loss_avg, acc = (sums[0] / sums[2]).item(), (sums[1] / sums[2]).item()
            print(f"Epoch {epoch}/{args.epochs} - loss: {loss_avg:.4f}, accuracy: {100 * acc:.1f}%")
            sys.stdout.flush()

    # Leave without gloo's teardown, which can abort a finished process at exit (the README's
    # advice for scripts run under ddp-tui); NCCL gets the same clean end.
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
