"""The per-step part of the benchmark: one process, no group, a DataLoader over a TensorDataset
and an SGD step on a tiny Linear, so that a step is as short as torch makes it and the
observation layer's per-batch and per-step work is as large a share of it as it can be.

Observed and plain passes alternate in this one process: the layer's two hot hooks (the
DataLoader iterator's ``__next__`` and the global optimizer step hook) are switched in and out
between passes, so both sides share the process, its memory and its caches. Prints
``bench off_us=X on_us=Y`` (medians per step over ``--pairs`` pairs of passes) and
``bench own_us=Z`` (the observer's own work for a batch and a step, called directly).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.optim.optimizer as optimizer_module
import torch.utils.data.dataloader as dataloader_module
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ddp_tui.scriptrun.observe import hooks


def switches() -> tuple[Callable[[], None], Callable[[], None]]:
    """(off, on): take the two hot hooks out, put them back."""
    cls = dataloader_module._BaseDataLoaderIter
    plain_next = cls.__next__
    hooks._patch_dataloader(dataloader_module)
    observed_next = cls.__next__
    registry = optimizer_module._global_optimizer_post_hooks
    before = set(registry)
    hooks._patch_optimizer(optimizer_module)
    (key,) = set(registry) - before
    hook = registry[key]

    def off() -> None:
        cls.__next__ = plain_next
        registry.pop(key, None)

    def on() -> None:
        cls.__next__ = observed_next
        registry[key] = hook

    return off, on


def own_work(calls: int = 200_000) -> float:
    obs = hooks.observer()
    batch = (torch.zeros(32, 8), torch.zeros(32))
    start = time.perf_counter()
    for _ in range(calls):
        obs.batch(1, hooks.batch_size(batch), 1e-4, None)
        obs.step()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--pairs", type=int, default=10)
    args = p.parse_args()
    torch.set_num_threads(1)
    n = args.steps * 32
    loader = DataLoader(TensorDataset(torch.randn(n, 8), torch.randint(0, 2, (n,))), batch_size=32)
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def one_pass() -> float:
        start = time.perf_counter()
        for x, y in loader:
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        return (time.perf_counter() - start) / len(loader) * 1e6

    off, on = switches()
    off()
    one_pass()  # warm-up
    pairs = []
    for i in range(args.pairs):  # ABBA: the order flips each pair, so drift cancels
        if i % 2:
            on()
            observed = one_pass()
            off()
            pairs.append((one_pass(), observed))
        else:
            off()
            plain = one_pass()
            on()
            pairs.append((plain, one_pass()))
    print(
        f"bench off_us={statistics.median(a for a, _ in pairs):.2f} "
        f"on_us={statistics.median(b for _, b in pairs):.2f} "
        f"extra_us={statistics.median(b - a for a, b in pairs):.2f}",
        flush=True,
    )
    print(f"bench own_us={own_work():.2f}", flush=True)


if __name__ == "__main__":
    main()
