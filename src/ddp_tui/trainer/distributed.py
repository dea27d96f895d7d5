"""Process-group set-up and the few collectives the trainer needs.

Everything here is a no-op for a single process, so the training loop has one code path.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from .errors import RendezvousError, UsageError
from .exit import ending_process
from .launch_env import LaunchEnv


@dataclass
class World:
    """This process's place in the world, its device, and the groups it talks through."""

    env: LaunchEnv
    backend: str  # resolved: "nccl" | "gloo" (reported even for a single process)
    device: torch.device
    host: str = field(default_factory=socket.gethostname)
    # A gloo group for small CPU-side messages (stop flags, metric sums), so that they never
    # queue behind gradient all-reduces or force a GPU sync.
    control: Any = None

    @property
    def rank(self) -> int:
        return self.env.rank

    @property
    def world_size(self) -> int:
        return self.env.world_size

    @property
    def is_main(self) -> bool:
        return self.env.rank == 0

    @property
    def distributed(self) -> bool:
        return self.env.distributed

    def device_name(self) -> str:
        """``cuda:0 (NVIDIA H100 80GB HBM3)`` or ``cpu``."""
        if self.device.type == "cuda":
            return f"{self.device} ({torch.cuda.get_device_name(self.device)})"
        return str(self.device)


def resolve_backend(requested: str) -> str:
    """``auto`` means nccl when CUDA is present, else gloo; nccl without CUDA is a usage error."""
    cuda = torch.cuda.is_available()
    if requested == "auto":
        return "nccl" if cuda else "gloo"
    if requested == "nccl" and not cuda:
        raise UsageError("--backend", "nccl needs CUDA GPUs, and none are visible; use gloo")
    return requested


def choose_device(env: LaunchEnv) -> torch.device:
    """The GPU of this local rank (modulo what is visible), or the CPU."""
    if torch.cuda.is_available():
        index = env.local_rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


def rendezvous_hint(env: LaunchEnv, timeout_sec: float, error: BaseException) -> str:
    """The message for a failed rendezvous: where it waited, and the usual reasons."""
    first_line = (str(error).strip().splitlines() or [""])[0]
    return (
        f"rendezvous failed: rank {env.rank} of {env.world_size} on {socket.gethostname()} waited "
        f"on {env.rendezvous} (launcher {env.launcher}, timeout {timeout_sec:g}s): "
        f"{type(error).__name__}: {first_line}\n"
        "Likely causes:\n"
        f"  - a rank never started or crashed early (check every task's log; are all "
        f"{env.world_size} ranks launched, e.g. by srun/torchrun on every node?);\n"
        f"  - port {env.master_port} is already in use on {env.master_addr} (another job or a "
        "stale process; set MASTER_PORT to a free port);\n"
        f"  - {env.master_addr} is not reachable from every node on this interface (wrong "
        "network interface or hostname: check MASTER_ADDR, NCCL_SOCKET_IFNAME and "
        "GLOO_SOCKET_IFNAME, and firewalls)."
    )


def init_world(
    env: LaunchEnv, backend: str, timeout_sec: float, *, one_rank_group: bool = False
) -> World:
    """Form the process group (if more than one rank) and pick the device.

    ``one_rank_group`` forms it for a single process too (the preflight: a one-rank NCCL
    communicator still proves that NCCL starts on this device and driver).
    """
    device = choose_device(env)
    resolved = resolve_backend(backend)
    if not env.distributed and not one_rank_group:
        return World(env=env, backend=resolved, device=device)
    # env:// reads these; torchrun has set them already, srun has not.
    os.environ.setdefault("MASTER_ADDR", env.master_addr)
    os.environ.setdefault("MASTER_PORT", str(env.master_port))
    os.environ["RANK"] = str(env.rank)
    os.environ["WORLD_SIZE"] = str(env.world_size)
    os.environ.setdefault("LOCAL_RANK", str(env.local_rank))
    timeout = timedelta(seconds=timeout_sec)
    try:
        dist.init_process_group(
            backend=resolved,
            init_method="env://",
            rank=env.rank,
            world_size=env.world_size,
            timeout=timeout,
            device_id=device if resolved == "nccl" else None,
        )
        control = dist.new_group(backend="gloo", timeout=timeout) if resolved != "gloo" else None
    except (RuntimeError, ValueError, OSError, TimeoutError) as exc:  # Dist*Error are RuntimeErrors
        raise RendezvousError(rendezvous_hint(env, timeout_sec, exc)) from exc
    world = World(env=env, backend=resolved, device=device)
    world.control = control if control is not None else dist.group.WORLD
    return world


def announce(world: World) -> None:
    """Print this rank's start line in one write. All ranks share one stdout, and print()
    writes the text and its newline separately, so two ranks' lines could interleave
    ("rank 1/2 ... gloorank 0/2 ... gloo")."""
    w = world
    sys.stdout.write(f"rank {w.rank}/{w.world_size} {w.host} {w.device} {w.backend}\n")
    sys.stdout.flush()


def close_world(world: World) -> None:
    """Tear down the process group; never raises (it runs on the way out).

    Not in a process that ends through :func:`.exit.run_process`: there ``os._exit`` follows,
    the kernel closes the group's sockets, and ``destroy_process_group()`` would only be one more
    place where gloo's teardown can abort (see :mod:`.exit`).
    """
    if ending_process():
        return
    if world.distributed and dist.is_initialized():
        # Shutting down: a failure here has nothing left to break.
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def barrier(world: World) -> None:
    """All ranks wait here (over the CPU control group)."""
    if world.distributed:
        dist.barrier(group=world.control)


def all_sum(world: World, values: list[float]) -> list[float]:
    """Element-wise sum over ranks of a short list of numbers (float64, CPU)."""
    if not world.distributed:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.SUM, group=world.control)
    return [float(v) for v in t.tolist()]


def all_max(world: World, values: list[float]) -> list[float]:
    """Element-wise maximum over ranks."""
    if not world.distributed:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=world.control)
    return [float(v) for v in t.tolist()]


def all_gather(world: World, obj: Any) -> list[Any]:
    """Every rank's (picklable) object, in rank order."""
    if not world.distributed:
        return [obj]
    out: list[Any] = [None] * world.world_size
    dist.all_gather_object(out, obj, group=world.control)
    return out


def broadcast_object(world: World, obj: Any) -> Any:
    """Rank 0's object on every rank."""
    if not world.distributed:
        return obj
    box = [obj if world.is_main else None]
    dist.broadcast_object_list(box, src=0, group=world.control)
    return box[0]


def sync_buffers(world: World, module: torch.nn.Module) -> None:
    """Give every rank rank 0's buffers (BatchNorm running stats).

    DDP broadcasts them at the start of each training forward anyway, so doing it early changes
    nothing for training; it makes evaluation and the weight hashes agree across ranks.
    """
    if not world.distributed:
        return
    for buf in module.buffers():
        dist.broadcast(buf.data, src=0)


class StopVote:
    """Agree, across ranks, on whether to stop after the current step.

    A signal may reach only some ranks, or reach them at different steps. Each step's vote is an
    all-reduce (MAX) of the local signal numbers (0: none), started before the step's compute and
    read after it, so it adds no wait and every rank stops after the same step.
    """

    def __init__(self, world: World) -> None:
        self._world = world
        self._flag = torch.zeros(1, dtype=torch.int32)
        self._work: Any = None

    def start(self, local_signum: int) -> None:
        """Launch this step's vote with this rank's signal number (0 for none)."""
        self._flag.fill_(local_signum)
        if self._world.distributed:
            self._work = dist.all_reduce(
                self._flag, op=dist.ReduceOp.MAX, group=self._world.control, async_op=True
            )

    def result(self) -> int:
        """The largest signal number any rank received (0: carry on)."""
        if self._work is not None:
            self._work.wait()
            self._work = None
        return int(self._flag.item())
