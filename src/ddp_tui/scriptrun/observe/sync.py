"""Whether a rank synchronised its gradients, and whether the script spawned its own ranks.

A process group alone proves nothing about training together: ranks that form one and then
each step their own optimizer train N separate models. So each rank keeps, beside its steps:

- whether it built a ``DistributedDataParallel`` or an FSDP module (the constructors are
  patched: DDP's own gradient all-reduce runs in C++, out of sight, so the wrap is the evidence);
- how many of its optimizer steps followed a *gradient* collective issued from Python (a
  hand-written ``dist.all_reduce(p.grad)`` loop, a flat gradient buffer, FSDP's
  reduce-scatter). A collective of the window since the previous step counts when one of its
  tensors shares storage with a gradient of the stepping optimizer's parameters, or when the
  window's collectives moved at least half as many elements as those parameters hold. A
  metric's ``[sum, count]`` or a logged loss is neither, so it never passes for gradient sync.

Nothing here touches a tensor's values on the hot path (no device sync per step): a pointer
and an element count per collective, and an attribute check per step. Only where no sync was
seen does a ``sync`` record carry a cheap parameter checksum (the sum of the first parameters,
read at the record: a few device reads) so that diverging ranks can be shown diverging.

``sync`` records are written at the 1st, 2nd, 4th, 8th... step, at most every
:data:`_SYNC_SEC` after that, when the group is destroyed, and at exit: a script that leaves
with ``os._exit`` still leaves its counts of the steps before.

Plain Python, duck-typed over tensors and optimizers, so the bookkeeping is tested without
torch; :mod:`.hooks` feeds it.
"""

from __future__ import annotations

import atexit
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from .journal import Journal, _int

_SYNC_SEC = 30.0  # past the doubling schedule, at most one sync record this often
_WINDOW = 64  # storage pointers kept per step window (a per-parameter loop issues thousands)
_GRADS_SCANNED = 256  # parameters whose gradients a window is matched against
_CHECKSUM_PARAMS = 8  # parameters summed into the checksum


class SyncWatch:
    def __init__(self, journal: Journal, clock: Callable[[], float] = time.time) -> None:
        self.journal = journal
        self.clock = clock
        self.ddp = False
        self.fsdp = False
        self.p2p = False  # tensors sent point to point: a pipeline's stages need no grad sync
        self.steps = 0
        self.grad_sync_steps = 0
        self.pointers: list[int] = []  # storages the window's collectives reduced
        self.elements = 0  # elements the window's collectives moved
        self.optimizer: Any = None  # the last optimizer that stepped
        self._next_step = 1
        self._next_time = 0.0
        self._written: tuple[int, int, bool, bool, bool] | None = None
        #: The parameters' checksum (set by the torch hooks; None: not computed).
        self.checksum: Callable[[Any], float | None] = lambda _: None

    @property
    def synchronised(self) -> bool:
        return self.ddp or self.fsdp or self.grad_sync_steps > 0

    # -- what the hooks report ------------------------------------------------------------
    def wrapped(self, kind: str) -> None:
        """A DDP (``kind`` "ddp") or FSDP ("fsdp") module was built."""
        if kind == "ddp":
            self.ddp = True
        else:
            self.fsdp = True

    def point_to_point(self) -> None:
        """A send, receive or batch of them (pipeline parallelism)."""
        self.p2p = True

    def collective(self, tensors: Iterable[Any]) -> None:
        """A reducing collective over ``tensors`` (its tensor arguments, lists flattened)."""
        for tensor in tensors:
            if not getattr(tensor, "is_floating_point", lambda: False)():
                continue
            self.elements += int(tensor.numel())
            if len(self.pointers) < _WINDOW:
                self.pointers.append(int(tensor.untyped_storage().data_ptr()))

    def step(self, optimizer: Any) -> None:
        """An optimizer step: the window's collectives were gradient sync, or not."""
        self.steps += 1
        self.optimizer = optimizer
        if self.elements:
            if self.elements * 2 >= self._size(optimizer) or self._grads_among(optimizer):
                self.grad_sync_steps += 1
            self.pointers.clear()
            self.elements = 0
        if self.steps >= self._next_step or self.clock() >= self._next_time:
            if self.steps == 1:
                atexit.register(self.write)
            self._next_step = self.steps * 2
            self.write()

    # -- records --------------------------------------------------------------------------
    def write(self) -> None:
        """A ``sync`` record, unless nothing changed since the last one (also at exit)."""
        if self.steps == 0 or os.getpid() != self.journal.pid:
            return
        state = (self.steps, self.grad_sync_steps, self.ddp, self.fsdp, self.p2p)
        if state == self._written:
            return
        self._written = state
        self._next_time = self.clock() + _SYNC_SEC
        checksum = None
        if not self.synchronised and self.optimizer is not None:
            try:
                checksum = self.checksum(self.optimizer)
            except Exception:  # a checksum is evidence, never worth failing a record for
                checksum = None
        self.journal.write(
            "sync",
            ddp=self.ddp,
            fsdp=self.fsdp,
            grad_allreduce_steps=self.grad_sync_steps,
            steps=self.steps,
            p2p=self.p2p,
            checksum=checksum,
        )

    def spawn(self, nprocs: int) -> None:
        """The script starts ``nprocs`` processes of its own (``mp.spawn``)."""
        env = os.environ
        self.journal.write(
            "spawn",
            nprocs=nprocs,
            launcher_rank=_int(env.get("RANK")),
            launcher_world=_int(env.get("WORLD_SIZE")),
        )

    # -- matching a window against the gradients ------------------------------------------
    @staticmethod
    def _size(optimizer: Any) -> int:
        """Its parameters' element count, kept on it (an ``id()`` is reused once it is freed)."""
        size = optimizer.__dict__.get("_ddp_tui_elements")
        if size is None:
            size = sum(int(p.numel()) for g in optimizer.param_groups for p in g["params"])
            size = optimizer._ddp_tui_elements = max(size, 1)
        return int(size)

    def _grads_among(self, optimizer: Any) -> bool:
        reduced = set(self.pointers)
        scanned = 0
        for group in optimizer.param_groups:
            for param in group["params"]:
                grad = param.grad
                if grad is not None and grad.untyped_storage().data_ptr() in reduced:
                    return True
                scanned += 1
                if scanned >= _GRADS_SCANNED:
                    return False
        return False


def param_checksum(optimizer: Any) -> float | None:
    """The sum of the optimizer's first parameters: equal across ranks that stay in sync."""
    total, count = 0.0, 0
    for group in optimizer.param_groups:
        for param in group["params"]:
            if getattr(param, "is_meta", False):
                return None
            total += float(param.detach().double().sum())
            count += 1
            if count >= _CHECKSUM_PARAMS:
                return total
    return total if count else None
