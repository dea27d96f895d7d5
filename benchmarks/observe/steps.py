"""The per-step part of the benchmark: one process, no group, a DataLoader over a TensorDataset
and an SGD step on a tiny Linear, so that a step is as short as torch makes it and the
observation layer's per-batch and per-step work is as large a share as it can be. Prints
``bench us_per_step=X`` (the best of ``--repeats`` timed passes, after one warm-up pass)."""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(args.steps * 32, 8), torch.randint(0, 2, (args.steps * 32,)))
    loader = DataLoader(data, batch_size=32)
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    best = float("inf")
    for i in range(args.repeats + 1):
        start = time.perf_counter()
        for x, y in loader:
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        if i:  # the first pass warms up
            best = min(best, (time.perf_counter() - start) / len(loader))
    print(f"bench us_per_step={best * 1e6:.2f}", flush=True)


if __name__ == "__main__":
    main()
