"""A script that starts its own ranks, as ImageNet-style trainers do, knowing nothing of ddp-tui.

``python spawn_ranks.py --multiprocessing-distributed`` spawns ``--procs`` workers (one per
"GPU") with ``torch.multiprocessing.spawn``. Worker ``i`` of the launcher with ``--rank r``
joins rank ``r * procs + i`` of a world of ``--world-size * procs``, at ``--dist-url``
(``tcp://HOST:PORT``): rank 0 listens there. Without the flag, it trains in one process, or
under torchrun in ``--dist-url env://`` mode.

Started twice on one node with the defaults (``--rank 0 --world-size 1``), as a launcher with
2 processes per node does, both launchers start a world on the same port: one rank 0 cannot
listen (``EADDRINUSE``). So that the collision happens by construction, whatever the machine's
speed, a rank 0 that did listen keeps its store until every launcher's rank 0 has tried
(each leaves a marker file in the working directory, ``listen-<pid>.ok`` or ``.failed``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

#: Bounds the wait for the other launchers (a hang, not a synchronisation).
WAIT_SEC = 120.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="spawn_ranks")
    p.add_argument("--multiprocessing-distributed", action="store_true")
    p.add_argument("--procs", type=int, default=2, help="workers per launcher ('GPUs')")
    p.add_argument("--world-size", type=int, default=1, help="launchers (nodes)")
    p.add_argument("--rank", type=int, default=0, help="this launcher's rank")
    p.add_argument("--dist-url", default="tcp://127.0.0.1:23456")
    p.add_argument("--epochs", type=int, default=2)
    return p.parse_args()


def launchers_on_this_node() -> int:
    """How many copies of this launcher the job started here (torchrun says)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def mark(outcome: str) -> None:
    Path(f"listen-{os.getppid()}.{outcome}").write_text("")


def wait_for_every_launcher() -> None:
    deadline = time.monotonic() + WAIT_SEC
    while len(list(Path(".").glob("listen-*.*"))) < launchers_on_this_node():
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)


def worker(gpu: int, args: argparse.Namespace) -> None:
    rank = args.rank * args.procs + gpu
    world = args.world_size * args.procs
    timeout = datetime.timedelta(seconds=60)
    try:
        dist.init_process_group(
            "gloo", init_method=args.dist_url, rank=rank, world_size=world, timeout=timeout
        )
    except Exception:
        if rank == 0:
            mark("failed")
        raise
    if rank == 0:
        mark("ok")
        wait_for_every_launcher()
    train(rank, world, args.epochs)
    dist.destroy_process_group()


def train(rank: int, world: int, epochs: int) -> None:
    torch.manual_seed(0)
    model: nn.Module = nn.Linear(8, 1)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 8)
    y = x.sum(dim=1, keepdim=True)
    for epoch in range(epochs):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"Epoch {epoch} loss {loss.item():.4f}", flush=True)


def main() -> None:
    args = parse_args()
    if args.multiprocessing_distributed:
        mp.spawn(worker, nprocs=args.procs, args=(args,))
    elif args.dist_url == "env://":
        dist.init_process_group("gloo")
        train(dist.get_rank(), dist.get_world_size(), args.epochs)
        dist.destroy_process_group()
    else:
        train(0, 1, args.epochs)


if __name__ == "__main__":
    main()
