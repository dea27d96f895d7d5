"""The toy classification task the user scripts next to this file train (CPU, gloo).

A user's own project, as ddp-tui meets it: the scripts know nothing of ddp-tui except where
their docstrings say so, and this module is one more file of the project, so the run's code
snapshot has more than the script in it. Everything here is plain torch.distributed:

- the data are the same on every rank (a fixed seed): ``SAMPLES`` points in ``FEATURES``
  dimensions, labelled by a random linear teacher into ``CLASSES`` classes;
- each epoch, a permutation seeded by the epoch is cut into ``world`` shards (rank ``r``
  takes every ``world``-th index from ``r``), then into batches of ``batch`` samples;
- the loss and the accuracy are summed over ranks with all-reduce, so rank 0 prints the
  global values.

An epoch takes milliseconds: the tests that run these scripts measure the tool, not torch.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import NoReturn

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

SAMPLES = 512
FEATURES = 16
CLASSES = 4


@dataclass(frozen=True)
class World:
    """This process's place in the job, as torchrun's environment gives it."""

    rank: int
    size: int

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_world() -> World:
    """``init_process_group("gloo")`` from torchrun's env:// variables."""
    dist.init_process_group("gloo")
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    return World(dist.get_rank(), dist.get_world_size())


def make_data(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole data set, identical on every rank."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(SAMPLES, FEATURES, generator=gen)
    teacher = torch.randn(FEATURES, CLASSES, generator=gen)
    y = (x @ teacher).argmax(dim=1)
    return x, y


def make_model(seed: int = 0) -> DistributedDataParallel:
    """A small MLP, wrapped in DDP (which copies rank 0's weights to every rank)."""
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, CLASSES))
    return DistributedDataParallel(net)


def batches(epoch: int, world: World, batch: int) -> list[torch.Tensor]:
    """This rank's index batches for ``epoch`` (0-based): a seeded shuffle, then a shard."""
    order = torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(1000 + epoch))
    mine = order[world.rank :: world.size]
    return list(mine.split(batch))


def train_step(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
) -> float:
    """One optimizer step on one batch; this rank's loss."""
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()  # DDP all-reduces the gradients here
    opt.step()
    return float(loss.item())


def global_mean(value: float, world: World) -> float:
    """The mean of ``value`` over the ranks."""
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return float(t.item()) / world.size


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, world: World) -> float:
    """Accuracy (a fraction) over the whole data set, each rank scoring its shard."""
    net = getattr(model, "module", model)  # the bare net: no DDP hooks for a no-grad pass
    with torch.no_grad():
        xs, ys = x[world.rank :: world.size], y[world.rank :: world.size]
        correct = (net(xs).argmax(dim=1) == ys).sum().to(torch.float64)
    counts = torch.stack([correct, torch.tensor(float(len(ys)), dtype=torch.float64)])
    dist.all_reduce(counts)
    return float(counts[0] / counts[1])


def end(code: int = 0) -> NoReturn:
    """Leave the job without tearing gloo down: flush, wait for every rank, ``os._exit``.

    A finished gloo job whose ranks call ``destroy_process_group()`` and return dies after
    its last line in about 1 run of 3 (torch 2.15, measured): ``terminate called without an
    active exception``, SIGABRT, and torchrun reports the whole job failed. The abort comes
    from gloo's threads at teardown; skipping the teardown is the workaround ddp-tui's own
    trainer uses (and the README suggests), so these scripts end the same way and a test
    that runs them does not fail one run in three.
    """
    if dist.is_initialized():
        dist.barrier()  # no rank leaves while a peer still talks to it
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
