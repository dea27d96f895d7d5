"""The torch patches that feed :class:`.sync.SyncWatch`: the DDP and FSDP constructors, the
reducing collectives, the end of a group, and ``torch.multiprocessing``'s process start.

Each wrapper calls the original and returns what it returned; the bookkeeping runs under the
observer's guard (hook name ``sync`` or ``spawn``), so one that raises turns itself off.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from .sync import SyncWatch, param_checksum

_WATCH: SyncWatch | None = None

#: The collectives that reduce (what gradient sync is made of), with the position and name of
#: the argument that holds what they reduce: reduce_scatter's gradients are its input.
COLLECTIVES: dict[str, tuple[int, str]] = {
    "all_reduce": (0, "tensor"),
    "all_reduce_coalesced": (0, "tensors"),
    "reduce": (0, "tensor"),
    "reduce_scatter": (1, "input_list"),
    "reduce_scatter_tensor": (1, "input"),
}


def watch() -> SyncWatch:
    global _WATCH
    if _WATCH is None:
        from .hooks import observer  # the observer's journal: one file per process

        _WATCH = SyncWatch(observer().journal)
        _WATCH.checksum = param_checksum
    return _WATCH


def _guard(hook: str, work: Callable[[], None]) -> None:
    from .hooks import observer

    observer().guard(hook, work)


def patch_collectives(module: ModuleType) -> None:
    """``torch.distributed.distributed_c10d``: its reducing collectives, and the group's end."""
    for name, where in COLLECTIVES.items():
        original = getattr(module, name, None)
        if original is not None:
            setattr(module, name, _counted(original, where))
    for name in POINT_TO_POINT:
        original = getattr(module, name, None)
        if original is not None:
            setattr(module, name, _p2p(original))
    destroy = module.destroy_process_group

    @functools.wraps(destroy)
    def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
        # A script that ends well ends its group: the last counts, before it goes.
        _guard("sync", watch().write)
        return destroy(*args, **kwargs)

    setattr(module, "destroy_process_group", destroy_process_group)  # noqa: B010 (a module of torch)


#: Point-to-point calls: where they carry training, ranks are pipeline stages, not replicas.
POINT_TO_POINT = ("send", "recv", "isend", "irecv", "batch_isend_irecv")


def _p2p(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def point_to_point(*args: Any, **kwargs: Any) -> Any:
        _guard("sync", watch().point_to_point)
        return original(*args, **kwargs)

    return point_to_point


def _counted(original: Callable[..., Any], where: tuple[int, str]) -> Callable[..., Any]:
    position, keyword = where

    @functools.wraps(original)
    def collective(*args: Any, **kwargs: Any) -> Any:
        value = args[position] if position < len(args) else kwargs.get(keyword)
        _guard("sync", lambda: watch().collective(_flat(value)))
        return original(*args, **kwargs)

    return collective


def _flat(value: Any) -> Iterator[Any]:
    if isinstance(value, (list, tuple)):
        yield from value
    elif value is not None:
        yield value


def _patch_init(cls: type, kind: str) -> None:
    original = cls.__init__  # type: ignore[misc]

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        _guard("sync", lambda: watch().wrapped(kind))

    cls.__init__ = __init__  # type: ignore[misc]


def patch_ddp(module: ModuleType) -> None:
    """``torch.nn.parallel.distributed``: a subclass's ``super().__init__`` counts too."""
    _patch_init(module.DistributedDataParallel, "ddp")


def patch_fsdp(module: ModuleType) -> None:
    """``torch.distributed.fsdp.fully_sharded_data_parallel`` (FSDP1)."""
    _patch_init(module.FullyShardedDataParallel, "fsdp")


def patch_fully_shard(module: ModuleType) -> None:
    """``torch.distributed.fsdp._fully_shard._fully_shard`` (FSDP2): the package re-exports
    ``fully_shard`` after this module ran, so it gets the wrapper."""
    original = module.fully_shard

    @functools.wraps(original)
    def fully_shard(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        _guard("sync", lambda: watch().wrapped("fsdp"))
        return result

    setattr(module, "fully_shard", fully_shard)  # noqa: B010 (a module of torch)


def patch_spawn(module: ModuleType) -> None:
    """``torch.multiprocessing.spawn``: ``spawn`` calls this module's ``start_processes``."""
    original = module.start_processes

    @functools.wraps(original)
    def start_processes(fn: Any, args: Any = (), nprocs: int = 1, *rest: Any, **kw: Any) -> Any:
        _guard("spawn", lambda: watch().spawn(int(nprocs)))
        return original(fn, args, nprocs, *rest, **kw)

    setattr(module, "start_processes", start_processes)  # noqa: B010 (a module of torch)


#: Module name -> its patch, for :data:`.hooks.PATCHES`.
PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "torch.nn.parallel.distributed": patch_ddp,
    "torch.distributed.fsdp.fully_sharded_data_parallel": patch_fsdp,
    "torch.distributed.fsdp._fully_shard._fully_shard": patch_fully_shard,
    "torch.multiprocessing.spawn": patch_spawn,
}
