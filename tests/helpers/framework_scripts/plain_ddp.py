"""Plain torch DDP in the idiom of the PyTorch DDP tutorial series (run under torchrun).

A ``Trainer`` class with ``_run_batch``, ``_run_epoch`` and ``train``, a ``DistributedSampler``
re-seeded with ``set_epoch`` each epoch, and a DDP-wrapped MLP on synthetic data.

Every rank prints only ``[GPU{rank}] Epoch {epoch} | Batchsize: {b} | Steps: {steps}`` at the
start of each epoch (epochs counted from 0); no loss is printed.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.nn.functional as F
from _leave import leave
from torch import nn
from torch.distributed import init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_dataset(n: int = 512) -> Dataset[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 20, generator=g)
    y = x @ torch.randn(20, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


class Trainer:
    def __init__(self, model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer):
        self.rank = int(os.environ["RANK"])
        self.model = DDP(model)
        self.loader = loader
        self.optimizer = optimizer

    def _run_batch(self, source: torch.Tensor, targets: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch: int) -> None:
        b = len(next(iter(self.loader))[0])  # the tutorial peeks at a batch for its size
        print(f"[GPU{self.rank}] Epoch {epoch} | Batchsize: {b} | Steps: {len(self.loader)}")
        assert isinstance(self.loader.sampler, DistributedSampler)
        self.loader.sampler.set_epoch(epoch)
        for source, targets in self.loader:
            self._run_batch(source, targets)

    def train(self, max_epochs: int) -> None:
        for epoch in range(max_epochs):
            self._run_epoch(epoch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    init_process_group(backend="gloo")
    torch.manual_seed(0)
    dataset = make_dataset()
    loader = DataLoader(dataset, batch_size=32, shuffle=False, sampler=DistributedSampler(dataset))
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    Trainer(model, loader, optimizer).train(args.epochs)
    leave()


if __name__ == "__main__":
    main()
