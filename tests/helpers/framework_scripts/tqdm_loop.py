"""Plain DDP with a tqdm progress bar per epoch on rank 0 (run under torchrun).

``init_process_group("gloo")`` from the torchrun environment, a ``DistributedSampler`` with
``set_epoch``, and a DDP-wrapped classifier. Rank 0 shows ``tqdm(loader, desc=f"Epoch {e}")``
(epochs from 0) with ``set_postfix(loss=...)`` on stderr; the other ranks print nothing.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from _leave import leave
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
from tqdm import tqdm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    dist.init_process_group(backend="gloo")
    rank = int(os.environ["RANK"])
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 16, generator=g)
    y = (x.sum(dim=1) > 0).long()
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        bar = tqdm(loader, desc=f"Epoch {epoch}", disable=rank != 0)
        for xb, yb in bar:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            bar.set_postfix(loss=f"{loss.item():.4f}")
    leave()


if __name__ == "__main__":
    main()
