"""A 2-rank DDP script in which rank 1 stops in ``slow_step`` until a file appears, while rank 0
waits for it in the next all_reduce: the stacks story (docs/stacks.md).

``--release PATH``: rank 1 enters ``slow_step`` in its second step, after that step's
all_reduce and before its optimizer step, writes ``PATH.entered``, and waits until ``PATH``
exists. Rank 0 finishes the step and waits in the third step's all_reduce. Each step first
sleeps a little over a second, so that the observation layer (which records a step at most
once a second) records every step: rank 1 is then one step behind rank 0, by construction.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.distributed as dist
from toy_task import end


def slow_step(release: Path) -> None:
    Path(f"{release}.entered").write_text("")
    while not release.exists():
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    for step, (x, y) in enumerate(loader):
        time.sleep(1.1)
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        for p in model.parameters():
            assert p.grad is not None
            dist.all_reduce(p.grad)
        if rank == 1 and step == 1:
            slow_step(args.release)
        opt.step()
        opt.zero_grad()
    if rank == 0:
        print(f"epoch=1 loss={loss.item():.4f}", flush=True)
    end()  # not destroy_process_group(): gloo's teardown aborts one run in three


if __name__ == "__main__":
    main()
