"""Which launcher started this process, and the rank layout it implies (no torch needed).

Order of precedence: torchrun (``RANK``/``WORLD_SIZE``), then one ``srun`` task per GPU
(``SLURM_PROCID``/``SLURM_NTASKS``), then a single process.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from .nodelist import first_host


@dataclass(frozen=True)
class LaunchEnv:
    """The rank layout of this process and where the world meets."""

    launcher: str  # "torchrun" | "env" | "srun" | "single"
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    master_addr: str
    master_port: int
    job_id: str | None

    @property
    def distributed(self) -> bool:
        """True when a process group is needed."""
        return self.world_size > 1

    @property
    def rendezvous(self) -> str:
        """``addr:port`` where the ranks meet."""
        return f"{self.master_addr}:{self.master_port}"


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        if default is None:
            raise ValueError(f"environment variable {name} is not set")
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None


def _tasks_per_node(text: str | None, fallback: int) -> int:
    """Slurm's ``SLURM_STEP_TASKS_PER_NODE`` looks like ``4(x2),3``; take the first count."""
    if not text:
        return fallback
    match = re.match(r"^(\d+)", text)
    return int(match.group(1)) if match else fallback


def slurm_master_port(job_id: str | None) -> int:
    """20000 + job id mod 10000, so that concurrent jobs on a node rarely collide."""
    if job_id and job_id.isdigit():
        return 20000 + int(job_id) % 10000
    return 29500


def detect(env: Mapping[str, str] | None = None) -> LaunchEnv:
    """Work out the rank layout from the environment; raises ValueError on inconsistent values."""
    env = os.environ if env is None else env
    job_id = env.get("SLURM_JOB_ID") or None
    if "RANK" in env and "WORLD_SIZE" in env:
        world = _int(env, "WORLD_SIZE")
        rank = _int(env, "RANK")
        local_rank = _int(env, "LOCAL_RANK", 0)
        local_world = _int(env, "LOCAL_WORLD_SIZE", world)
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
        addr = env.get("MASTER_ADDR", "127.0.0.1")
        port = _int(env, "MASTER_PORT", 29500)
    elif (
        "SLURM_PROCID" in env
        and _int(env, "SLURM_STEP_NUM_TASKS", _int(env, "SLURM_NTASKS", 1)) > 1
    ):
        world = _int(env, "SLURM_STEP_NUM_TASKS", _int(env, "SLURM_NTASKS", 1))
        if "SLURM_STEP_ID" not in env:
            # The batch script itself has SLURM_NTASKS but is one process: srun was forgotten.
            print(
                f"warning: SLURM_NTASKS={world} but this process was not started by srun; "
                "running as a single process (launch with srun or torchrun for DDP)",
                file=sys.stderr,
                flush=True,
            )
            return LaunchEnv("single", 0, 0, 1, 1, "127.0.0.1", 0, job_id)
        rank = _int(env, "SLURM_PROCID")
        local_rank = _int(env, "SLURM_LOCALID", 0)
        local_world = _tasks_per_node(
            env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE"), world
        )
        launcher = "srun"
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
        addr = env.get("MASTER_ADDR") or (first_host(nodelist) if nodelist else "127.0.0.1")
        port = _int(env, "MASTER_PORT", slurm_master_port(job_id))
    else:
        return LaunchEnv("single", 0, 0, 1, 1, "127.0.0.1", 0, job_id)
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is outside the world of size {world}")
    if not 0 <= local_rank < max(local_world, 1):
        local_world = max(local_world, local_rank + 1)
    return LaunchEnv(launcher, rank, local_rank, world, local_world, addr, port, job_id)


def cpu_share(
    threads: int, ranks_on_node: int, env: Mapping[str, str] | None = None
) -> dict[str, int | None]:
    """What a rank has of its node's cores, for run.json (docs/advisor.md, "Ranks that share a
    node's cores"): its ``threads``, the ``ranks_on_node`` that share the node, and what the job
    script found there: ``cpus``, those the job's processes may run on, and ``cores``, of them
    the job's, which its ranks share as threads (None: no job script said, a trainer started
    by hand)."""
    env = os.environ if env is None else env
    out: dict[str, int | None] = {"threads": threads, "ranks_on_node": ranks_on_node}
    for key, name in (("cpus", "DDP_TUI_NODE_CPUS"), ("cores", "DDP_TUI_NODE_CORES")):
        raw = env.get(name, "")
        out[key] = int(raw) if raw.isdigit() and int(raw) > 0 else None
    return out
