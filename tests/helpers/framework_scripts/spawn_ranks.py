"""A launcher that starts its own ranks with ``torch.multiprocessing.spawn``.

The pytorch/examples idiom: with ``--multiprocessing-distributed`` each launcher process
spawns ``--nprocs`` workers, and worker ``i`` of launcher ``RANK`` is rank
``RANK * nprocs + i`` of a world of ``WORLD_SIZE * nprocs``, formed over
``tcp://127.0.0.1:PORT``. Each worker trains a DDP model for a few iterations and prints
``rank {r} iter {i}: loss {loss:.4f}``.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def worker(index: int, args: argparse.Namespace, launcher: int, launchers: int) -> None:
    rank = launcher * args.nprocs + index
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{args.port}",
        world_size=launchers * args.nprocs,
        rank=rank,
    )
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for it in range(1, args.max_iters + 1):
        x = torch.randn(8, 4, generator=g)
        loss = F.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if it % 5 == 0:
            print(f"rank {rank} iter {it}: loss {loss.item():.4f}", flush=True)
    dist.barrier()
    # Workaround for the gloo teardown abort in torch 2.15 (see _leave.py): never let Python
    # tear gloo down; the spawning parent sees a clean exit.
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--multiprocessing-distributed", action="store_true")
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-iters", type=int, default=10)
    args = parser.parse_args()
    launcher = int(os.environ.get("RANK", "0"))
    launchers = int(os.environ.get("WORLD_SIZE", "1"))
    if args.multiprocessing_distributed:
        mp.spawn(worker, nprocs=args.nprocs, args=(args, launcher, launchers))
    else:
        worker(0, argparse.Namespace(**{**vars(args), "nprocs": 1}), launcher, launchers)


if __name__ == "__main__":
    main()
