"""Ranks that form a gloo group but never synchronise their gradients.

Each rank calls ``init_process_group`` and draws its own data (seeded by its rank; rank 1's
targets are scaled by 1000, so the two models drift far apart), steps its own optimizer on its
own model, and all-reduces only a logged ``[loss sum, count]`` every ``--log-interval``
iterations (a metric, never gradients). ``--average-grads`` all-reduces and averages every
gradient between ``backward()`` and ``optimizer.step()``: the hand-written way to train
together. At the end each rank prints ``rank {r} final loss {loss:.4e}``.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from _leave import leave
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-iters", type=int, default=30)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--average-grads", action="store_true")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(100 + rank)
    data = torch.randn(256, 8, generator=g)
    target = data.sum(dim=1, keepdim=True) * (1000.0 if rank == 1 else 1.0)
    torch.manual_seed(0)  # one initial model on every rank
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    loss = torch.zeros(())
    for it in range(1, args.max_iters + 1):
        idx = torch.randint(0, len(data), (16,), generator=g)
        loss = F.mse_loss(model(data[idx]), target[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if args.average_grads:
            for param in model.parameters():
                if param.grad is not None:
                    dist.all_reduce(param.grad)
                    param.grad /= world
        optimizer.step()
        if it % args.log_interval == 0:
            logged = torch.tensor([loss.item(), 1.0])
            dist.all_reduce(logged)
            if rank == 0:
                print(f"iter {it}: loss {logged[0].item() / logged[1].item():.4e}", flush=True)
    print(f"rank {rank} final loss {loss.item():.4e} (pid {os.getpid()})", flush=True)
    leave()


if __name__ == "__main__":
    main()
