"""A script that never forms a process group: each process trains alone on all the data.

Launched on 2 ranks it simply runs twice side by side (no ``init_process_group``, no
``DistributedSampler``). Each process prints ``epoch {e} loss {loss:.4f}`` per epoch (epochs
counted from 0; the loss is the epoch's mean batch loss).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _leave import leave
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 10, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    loader = DataLoader(
        TensorDataset(x, y), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(1)
    )
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    for epoch in range(args.epochs):
        total, count = 0.0, 0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item()
            count += 1
        print(f"epoch {epoch} loss {total / count:.4f}", flush=True)
    leave()


if __name__ == "__main__":
    main()
