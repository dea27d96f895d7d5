"""The import hook, and the patches it applies to torch as the script imports it.

:func:`install` puts a finder first on ``sys.meta_path``. It answers only for the few modules in
:data:`PATCHES`: it lets the normal finders find them, and wraps the loader so that the patch runs
right after the module's own code. ``torch.distributed`` re-exports ``init_process_group`` from
``distributed_c10d`` with a star import that runs after that, so the script (and any framework)
gets the patched function whichever way it reaches it.

Every wrapper calls the original first or last and never swallows what the original raised; our
bookkeeping around it runs under :meth:`.state.Observer.guard`.
"""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import importlib.machinery
import itertools
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, NoReturn

from ddp_tui.jobfiles import is_helper_process, register_stack_dump

from . import loss, sync_hooks
from .journal import Journal
from .state import Observer

_OBSERVER: Observer | None = None


def observer() -> Observer:
    global _OBSERVER
    if _OBSERVER is None:
        _OBSERVER = obs = Observer(Journal.from_environ())
        _at_exit(obs)
    return _OBSERVER


def _at_exit(obs: Observer) -> None:
    """The last steps' record at the process's exit: at a normal one, and at ``os._exit``,
    which DDP scripts call to skip gloo's teardown (it can abort) and which skips atexit."""
    atexit.register(lambda: obs.guard("final", obs.final))
    original = os._exit

    def _exit(status: int) -> NoReturn:
        obs.guard("final", obs.final)
        original(status)

    os._exit = _exit


# -- torch.distributed ---------------------------------------------------------------------
def _patch_c10d(module: ModuleType) -> None:
    original = module.init_process_group

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        obs = observer()
        obs.guard(
            "group",
            lambda: obs.group(
                str(module.get_backend()),
                int(module.get_world_size()),
                int(module.get_rank()),
                _env_int("LOCAL_RANK"),
                socket.gethostname(),
            ),
        )
        # A process that forms a group is a rank, even one no launcher named (mp.spawn).
        obs.guard(
            "stacks",
            lambda: register_stacks(int(module.get_rank()), _env_int("LOCAL_RANK"), grouped=True),
        )
        return result

    setattr(module, "init_process_group", init_process_group)  # noqa: B010 (a module of torch)
    sync_hooks.patch_collectives(module)


def register_stacks(rank: int | None, local_rank: int | None, grouped: bool = False) -> None:
    """Let ddp-tui take this rank's stack on demand (docs/stacks.md): a rank only, never a
    process a rank started (a DataLoader worker inherits its ``RANK``), unless it joined a
    group itself (``grouped``): a rank spawned by a launcher that registered (mp.spawn)."""
    run_dir = os.environ.get("DDP_TUI_RUN_DIR")
    if run_dir and rank is not None and (grouped or not is_helper_process()):
        register_stack_dump(run_dir, rank=rank, local_rank=local_rank)


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


# -- torch.utils.data ----------------------------------------------------------------------
def batch_size(batch: Any, depth: int = 0) -> int | None:
    """The batch dimension of a batch: a tensor's first, or the first tensor's inside a tuple,
    a list or a mapping (a Hugging Face ``BatchEncoding``), or None."""
    kind = type(batch)
    if kind is tuple or kind is list:  # the common case first: no ABC checks
        return batch_size(batch[0], depth + 1) if batch and depth < 3 else None
    shape = getattr(batch, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else None
    if depth > 2:
        return None
    if isinstance(batch, Mapping):
        for value in batch.values():
            return batch_size(value, depth + 1)
        return None
    if isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)) and batch:
        return batch_size(batch[0], depth + 1)
    return None


def _describe(iterator: Any) -> tuple[int | None, int | None]:
    """A new iterator's sampler epoch (where its sampler has ``set_epoch``) and length."""
    sampler = getattr(iterator, "_index_sampler", None)
    sampler = getattr(sampler, "sampler", sampler)  # a BatchSampler's own sampler
    epoch = getattr(sampler, "epoch", None)
    numbered = epoch if isinstance(epoch, int) and hasattr(sampler, "set_epoch") else None
    try:
        length: int | None = len(iterator)
    except (TypeError, ValueError):  # an IterableDataset without a length
        length = None
    return numbered, length


_KEYS = itertools.count(1)


def _key(iterator: Any) -> int:
    """The iterator's own number, kept on it: an ``id()`` is reused as soon as an iterator is
    freed (a script that peeks with ``next(iter(loader))`` frees one every epoch)."""
    key = iterator.__dict__.get("_ddp_tui_key")
    if key is None:
        key = iterator._ddp_tui_key = next(_KEYS)
    return int(key)


def _patch_dataloader(module: ModuleType) -> None:
    cls = module._BaseDataLoaderIter
    original = cls.__next__
    perf = time.perf_counter
    observer().describe = _describe

    # The hottest hook (every batch): no closures, one try.
    def __next__(self: Any) -> Any:
        start = perf()
        try:
            batch = original(self)
        except StopIteration:
            obs = observer()
            obs.guard("loader", lambda: obs.exhausted(_key(self)))
            raise
        wait = perf() - start
        obs = _OBSERVER or observer()
        if "loader" not in obs.off:
            try:
                obs.batch(_key(self), batch_size(batch), wait, self)
            except Exception as exc:
                obs.failed("loader", exc)
        return batch

    cls.__next__ = __next__


# -- torch.optim ---------------------------------------------------------------------------
def _param_device(optimizer: Any) -> str | None:
    for group in optimizer.param_groups:
        for param in group["params"]:
            return str(param.device)
    return None


def _patch_optimizer(module: ModuleType) -> None:
    def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        obs = _OBSERVER or observer()
        if "step" in obs.off:
            return
        try:
            if obs.device is None:
                obs.first_device(_param_device(optimizer))
            obs.step(optimizer.param_groups[0].get("lr"))
        except Exception as exc:
            obs.failed("step", exc)
        if "sync" not in obs.off:
            try:
                sync_hooks.watch().step(optimizer)
            except Exception as exc:
                obs.failed("sync", exc)

    module.register_optimizer_step_post_hook(after_step)


def _frameworks(name: str) -> Callable[[ModuleType], None]:
    """The framework patches live in their own module, imported only when a framework is."""

    def patch(module: ModuleType) -> None:
        from . import frameworks

        frameworks.PATCHES[name](module, observer())

    return patch


def _inside(name: str) -> Callable[[ModuleType], None]:
    """The loss a script calls backward() on, and its model's input (:mod:`.loss`)."""
    return lambda module: loss.PATCHES[name](module, observer())


#: Module name -> what to do to it right after it is first imported.
PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "torch.distributed.distributed_c10d": _patch_c10d,
    "torch.utils.data.dataloader": _patch_dataloader,
    "torch.optim.optimizer": _patch_optimizer,
    "pytorch_lightning.trainer.trainer": _frameworks("lightning"),
    "lightning.pytorch.trainer.trainer": _frameworks("lightning"),
    "transformers.trainer": _frameworks("transformers"),
    "accelerate.accelerator": _frameworks("accelerate"),
    **sync_hooks.PATCHES,  # DDP/FSDP wraps and mp.spawn: whether the ranks train together
    **{name: _inside(name) for name in loss.PATCHES},
}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        patch = PATCHES.get(fullname)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = spec.loader if spec is not None else None
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            obs = observer()
            obs.guard(f"patch {fullname}", lambda: patch(module))

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Start observing this process (idempotent)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    # A launcher's rank (torchrun, srun) is known now; a process without one (a launcher
    # such as mp.spawn's parent) registers only if it forms a group.
    register_stacks(_env_int("RANK"), _env_int("LOCAL_RANK"))
