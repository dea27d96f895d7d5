"""A script that starts its own ranks, run with several launcher processes per node.

Scripts in the ImageNet example's idiom (``--multiprocessing-distributed``) call
``torch.multiprocessing.spawn`` to start one worker per GPU, and their workers meet at the
script's own ``--dist-url`` (``tcp://HOST:PORT``). Launched with more than one process per
node, every launcher process spawns a world of its own on that one address: one rank 0
cannot listen (``EADDRINUSE``), or the worlds' ranks collide. The port-in-use rule would
blame a stale process, and the observation journals would say "each process formed a group
of its own"; the cause is the request multiplied by the script's own spawning.

Evidence that the script spawns: run.json's ``observed.spawn`` (launchers and workers per
launcher, from the observation journals), or ``torch.multiprocessing.spawn`` in the logs'
tracebacks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddp_tui.diagnosis.logscan import Scan, clue
from ddp_tui.diagnosis.model import Diagnosis, Evidence
from ddp_tui.diagnosis.rules_base import make, rank_words
from ddp_tui.diagnosis.rules_network import IN_USE, port_of

# torch.multiprocessing's exception when a spawned worker failed, else its frames and lines.
_SPAWN_FAILED = clue(
    r"^[\w.]*Process(?:Raised|Exited)Exception\b",
    "ProcessRaisedException",
    "ProcessExitedException",
)
_SPAWN_FRAME = clue(r"torch/multiprocessing/spawn\.py", "torch/multiprocessing/spawn.py")


def _observed_spawn(run: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """(launchers, workers per launcher) from run.json's ``observed.spawn``, if recorded."""
    observed = run.get("observed") if isinstance(run, Mapping) else None
    spawn = observed.get("spawn") if isinstance(observed, Mapping) else None
    if not isinstance(spawn, Mapping):
        return None
    launchers, nprocs = spawn.get("launchers"), spawn.get("nprocs")
    if not isinstance(launchers, int) or not isinstance(nprocs, int):
        return None
    return launchers, nprocs


def spawn_collision(scan: Scan) -> Diagnosis | None:
    """Launchers that each spawned a world on the same address, and the rank that failed."""
    facts = scan.facts
    in_use = scan.find(IN_USE)
    if in_use is None:
        return None
    per_node = facts.world_size // max(1, facts.nodes)
    spawned = _observed_spawn(facts.run_json)
    spawn_line = scan.find(_SPAWN_FAILED) or scan.find(_SPAWN_FRAME)
    if spawned is None and spawn_line is None:
        return None
    launchers = spawned[0] if spawned is not None else facts.world_size
    if per_node < 2 and launchers <= max(1, facts.nodes):
        return None  # one launcher per node: a port in use is another process's
    each = f"{spawned[1]} worker{'s' if spawned[1] != 1 else ''} each" if spawned else ""
    workers = f", {each}" if each else ""
    port = port_of(in_use.line.text)
    who = rank_words(in_use).capitalize() or "A spawned rank"
    if scan.root is not None and scan.root.rank is not None:  # torchrun named the launcher
        who = f"A rank spawned by launcher rank {scan.root.rank}"
    error = in_use.line.text.strip()
    evidence: list[Any] = [in_use]
    if spawned is not None:
        evidence.append(
            Evidence(
                "run.json",
                None,
                f"observed.spawn = {launchers} launchers, {each}",
            )
        )
    else:
        evidence.append(spawn_line)
    return make(
        "spawn-collision",
        "spawned worlds collided",
        f"The script starts its own ranks (torch.multiprocessing.spawn), and the job ran "
        f"{per_node} launcher processes per node ({launchers} in all{workers}): each launcher "
        f"spawned a world of its own on the script's one address"
        f"{f' (port {port})' if port else ''}, so the worlds collided. {who} failed first: "
        f"{error}",
        "Run a script that spawns its own ranks with one process per node (--gpus-per-node 1) "
        "and let it spawn one worker per GPU; or run it without its spawning option (e.g. "
        "without --multiprocessing-distributed) in its env:// mode (--dist-url env://), so "
        "that the job's launcher starts every rank and they form one world.",
        evidence,
    )
