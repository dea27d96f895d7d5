"""An iteration loop whose processes never form a process group: each trains alone.

The language-model idiom (a fixed number of iterations, batches drawn by random indices, no
DataLoader, no epochs), launched on 2 ranks without ``init_process_group``: each process runs
the whole loop on its own. It prints ``iter {i}: loss {loss:.4f}`` every ``--log-interval``
iterations and ends normally (no group, so no gloo teardown to avoid).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-iters", type=int, default=30)
    parser.add_argument("--log-interval", type=int, default=10)
    args = parser.parse_args()

    g = torch.Generator().manual_seed(0)
    data = torch.randn(256, 8, generator=g)
    target = data.sum(dim=1, keepdim=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    for it in range(1, args.max_iters + 1):
        idx = torch.randint(0, len(data), (16,), generator=g)
        loss = F.mse_loss(model(data[idx]), target[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if it % args.log_interval == 0:
            print(f"iter {it}: loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
