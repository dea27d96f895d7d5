"""How many data-loader workers a rank runs, and how many batches each keeps ready: chosen from
the cores and the host memory the rank really has, so that no node runs out of memory.

A worker costs a Python process with torch imported (about :data:`WORKER_BASE_BYTES`) plus the
batches it holds: ``prefetch`` finished ones waiting in shared memory and the one it builds.
The main process holds a pinned copy and the device prefetcher's next batch. The input pipeline
may take :data:`INPUT_SHARE` of the rank's memory; prefetch falls first (to 1), then workers.
The sizes and why they were chosen go to run.json (``input_pipeline``).

Cores: what the job script found for the job on the node (``DDP_TUI_NODE_CORES``), else Slurm's
``SLURM_CPUS_PER_TASK`` (one task per rank under srun, one per node under torchrun), else the
CPUs this process may run on; shared by the node's ranks. Memory: the least of the cgroup's
limit, Slurm's (``SLURM_MEM_PER_NODE``, ``SLURM_MEM_PER_CPU``) and what the kernel calls
available at the start, shared by the node's ranks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

#: At most this many workers per rank: beyond it, more processes add memory, not speed.
MAX_WORKERS = 8
#: The most batches a worker keeps ready (what the trainer always used before these sizes).
MAX_PREFETCH = 4
#: What one worker process costs before it holds a batch (Python, torch, the dataset's index).
WORKER_BASE_BYTES = 384 * 2**20
#: The share of a rank's memory the input pipeline may take; the model, the optimizer and the
#: framework keep the rest.
INPUT_SHARE = 0.5
#: Batches the main process holds besides the workers' (the pinned copy, the device's next).
MAIN_BATCHES = 2
_UNLIMITED = 2**60  # cgroup v1 writes "no limit" as a number near 2**63


@dataclass(frozen=True)
class LoaderSizes:
    """A rank's data-loader sizes, and what they were chosen from (run.json)."""

    workers: int
    prefetch: int  # batches each worker keeps ready; meaningless without workers
    cores: int | None  # the cores this rank has, as sized from
    memory_bytes: int | None  # this rank's share of the host memory, None when unknown
    why: str

    def as_dict(self) -> dict[str, object]:
        return {
            "workers": self.workers,
            "prefetch": self.prefetch,
            "cores": self.cores,
            "memory_bytes": self.memory_bytes,
            "why": self.why,
        }

    def host_bytes(self, batch_bytes: int) -> int:
        """The host memory these sizes may hold in batches and worker processes."""
        return self.workers * (WORKER_BASE_BYTES + (self.prefetch + 1) * batch_bytes) + (
            MAIN_BATCHES * batch_bytes
        )


def _size(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def size_loader(
    *,
    cores: int,
    memory_bytes: int | None,
    batch_bytes: int,
    workers: int | None = None,
    prefetch: int | None = None,
) -> LoaderSizes:
    """The workers and prefetch for a rank with ``cores`` cores and ``memory_bytes`` of host
    memory (None: unknown, not limited), whose batches are ``batch_bytes`` each; ``workers`` and
    ``prefetch`` given by the user are kept as they are.

    Without a limit: one worker per core but the rank's own, at most :data:`MAX_WORKERS`, each
    :data:`MAX_PREFETCH` batches ahead. Within the memory: as many of those workers as hold one
    batch ahead each, then as many batches ahead as they all can hold."""
    budget = INPUT_SHARE * memory_bytes if memory_bytes else float("inf")
    spare = budget - MAIN_BATCHES * batch_bytes

    def held(w: int, p: int) -> int:
        return w * (WORKER_BASE_BYTES + (p + 1) * batch_bytes) + MAIN_BATCHES * batch_bytes

    by_cores = min(MAX_WORKERS, max(0, cores - 1))
    if workers is not None:
        w, why = workers, f"--workers {workers}"
    else:
        w = by_cores
        while w > 0 and held(w, prefetch or 1) - MAIN_BATCHES * batch_bytes > spare:
            w -= 1
        core_s = "core" if cores == 1 else "cores"
        why = f"{w} workers ({cores} {core_s}" + ("; memory for no more)" if w < by_cores else ")")
    p = MAX_PREFETCH
    if prefetch is not None:
        p, why = prefetch, f"{why}, --prefetch {prefetch}"
    elif w:
        while p > 1 and held(w, p) > budget:
            p -= 1
        ahead = "1 batch" if p == 1 else f"{p} batches"
        why += f", {ahead} ahead each" + (" (memory)" if p < MAX_PREFETCH else "")
    else:
        why += ": the rank loads its own batches"
    total = held(w, p)
    if not memory_bytes:
        why += "; host memory limit unknown"
    elif total > budget:
        fix = "fewer workers or a smaller --prefetch" if w else "a smaller --batch-size"
        why += f"; {_size(total)}, over half this rank's {_size(memory_bytes)}: {fix} would fit"
    else:
        why += f"; up to {_size(total)} of this rank's {_size(memory_bytes)}"
    return LoaderSizes(w, p, cores, memory_bytes, why)


# --------------------------------------------------------------------- what the node gives


def _positive_int(raw: str | None) -> int | None:
    raw = (raw or "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def rank_cores(env: Mapping[str, str], local_ranks: int, launcher: str) -> int:
    """The cores one of the node's ``local_ranks`` ranks has for its loader and itself."""
    ranks = max(1, local_ranks)
    node = _positive_int(env.get("DDP_TUI_NODE_CORES"))
    if node:
        return max(1, node // ranks)
    per_task = _positive_int(env.get("SLURM_CPUS_PER_TASK"))
    if per_task:
        # srun starts a task per rank; torchrun's ranks share the one task of the node.
        return per_task if launcher == "srun" else max(1, per_task // ranks)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, cpus // ranks)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cgroup_limit(
    root: Path = Path("/sys/fs/cgroup"), proc: Path = Path("/proc/self")
) -> int | None:
    """This process's cgroup memory limit (v2 ``memory.max`` up its hierarchy, or v1
    ``memory.limit_in_bytes``), None when there is none."""
    limits: list[int] = []
    for line in (_read(proc / "cgroup") or "").splitlines():
        hid, controllers, path = [*line.split(":", 2), "", ""][:3]
        rel = path.strip().lstrip("/")
        if hid == "0" and controllers == "":  # v2: every level up to the root may limit
            here = root / rel
            while True:
                raw = (_read(here / "memory.max") or "").strip()
                if raw.isdigit():
                    limits.append(int(raw))
                if here == root or root not in here.parents:
                    break
                here = here.parent
        elif "memory" in controllers.split(","):  # v1, mounted at its path or (a container) at /
            for base in (root / "memory" / rel, root / "memory"):
                raw = (_read(base / "memory.limit_in_bytes") or "").strip()
                if raw.isdigit():
                    limits.append(int(raw))
                    break
    real = [n for n in limits if 0 < n < _UNLIMITED]
    return min(real) if real else None


def slurm_limit(env: Mapping[str, str]) -> int | None:
    """Slurm's memory for the job on this node, from ``--mem`` or ``--mem-per-cpu`` (MiB)."""
    per_node = _positive_int(env.get("SLURM_MEM_PER_NODE"))
    if per_node:
        return per_node * 2**20
    per_cpu = _positive_int(env.get("SLURM_MEM_PER_CPU"))
    cpus = _positive_int(env.get("SLURM_CPUS_ON_NODE"))
    if per_cpu and cpus:
        return per_cpu * cpus * 2**20
    return None


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The kernel's ``MemAvailable``: what can be had without swapping, now."""
    for line in (_read(meminfo) or "").splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None


def rank_memory(
    env: Mapping[str, str],
    local_ranks: int,
    sources: tuple[Callable[[], int | None], ...] = (cgroup_limit, available_memory),
) -> int | None:
    """One of the node's ``local_ranks`` ranks' share of the host memory, None when unknown."""
    found = [n for n in (slurm_limit(env), *(source() for source in sources)) if n]
    return min(found) // max(1, local_ranks) if found else None
