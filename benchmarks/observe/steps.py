"""The per-step part of the benchmark: one process, no group, a DataLoader over a TensorDataset
and an SGD step on a tiny Linear, so that a step is as short as torch makes it and the
observation layer's per-batch and per-step work is as large a share of it as it can be.

Observed and plain passes alternate in this one process: the layer's hot hooks (the DataLoader
iterator's ``__next__``, the global optimizer step hook, the loss capture in
``torch.autograd.backward`` and the forward pre-hook on the model) are switched in and out
between passes, so both sides share the process, its memory and its caches. Prints
``bench off_us=X on_us=Y`` (medians per step over ``--pairs`` pairs of passes) and
``bench own_us=Z`` (the observer's own work for a batch and a step, called directly). A pass is
timed in this thread's CPU time (one torch thread, no loader workers: all of its work).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.modules.module as module_module
import torch.optim.optimizer as optimizer_module
import torch.utils.data.dataloader as dataloader_module
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ddp_tui.scriptrun.observe import hooks, loss


def switches(model: nn.Module) -> tuple[Callable[[], None], Callable[[], None]]:
    """(off, on): take the hot hooks out, put them back."""
    cls = dataloader_module._BaseDataLoaderIter
    plain_next = cls.__next__
    hooks._patch_dataloader(dataloader_module)
    observed_next = cls.__next__
    registry = optimizer_module._global_optimizer_post_hooks
    before = set(registry)
    hooks._patch_optimizer(optimizer_module)
    (key,) = set(registry) - before
    hook = registry[key]
    obs = hooks.observer()
    plain_backward = torch.autograd.backward  # Tensor.backward looks it up at each call
    loss.patch_autograd(torch.autograd, obs)
    observed_backward = torch.autograd.backward
    loss.patch_modules(module_module, obs)
    model(torch.zeros(1, 8))  # the first call with gradients enabled finds the model
    # Its hook takes itself off once a DataLoader has fed a few steps (it adds nothing then):
    # put back, it does so again in each observed pass, as in a fresh process.
    model_hooks = dict(model._forward_pre_hooks)
    with_kwargs = dict(model._forward_pre_hooks_with_kwargs)

    def off() -> None:
        cls.__next__ = plain_next
        registry.pop(key, None)
        torch.autograd.backward = plain_backward
        model._forward_pre_hooks.clear()

    def on() -> None:
        cls.__next__ = observed_next
        registry[key] = hook
        torch.autograd.backward = observed_backward
        model._forward_pre_hooks.update(model_hooks)
        model._forward_pre_hooks_with_kwargs.update(with_kwargs)

    return off, on


def own_work(calls: int = 200_000) -> float:
    obs = hooks.observer()
    batch = (torch.zeros(32, 8), torch.zeros(32))
    value = torch.zeros(())
    start = time.perf_counter()
    for _ in range(calls):
        obs.batch(1, hooks.batch_size(batch), 1e-4, None)
        obs.forward_input(*loss.input_size(loss.first_tensor(batch)))
        obs.backward(value)
        obs.step()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--calls", type=int, default=200_000, help="of the observer's own work")
    args = p.parse_args()
    torch.set_num_threads(1)
    n = args.steps * 32
    loader = DataLoader(TensorDataset(torch.randn(n, 8), torch.randint(0, 2, (n,))), batch_size=32)
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def one_pass() -> float:
        # This thread's CPU time, not the wall's: on a shared machine the wall counts the time
        # other processes held the core (+-20 us a step here), the CPU time only our work.
        start = time.thread_time()
        for x, y in loader:
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        return (time.thread_time() - start) / len(loader) * 1e6

    off, on = switches(model)
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
    print(f"bench own_us={own_work(args.calls):.2f}", flush=True)


if __name__ == "__main__":
    main()
