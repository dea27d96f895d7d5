"""``ddp-tui envs [--partition P] [--recheck] [--json]``: what a partition offers a job's
software environment (the container runtimes and their versions, pyxis, the ``module``
command, GPUs, ``/dev/mqueue``, the hard limits), as detected by a tiny probe job and
remembered for a day (:mod:`ddp_tui.remote.submit.env_detect`). Exit 0 with the facts, 1
when they could not be found, 3 while the probe is still queued (run it again later)."""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.remote.submit.env_detect import EnvironmentFacts

#: The exit status while the probe waits in the queue: not an error, not an answer.
EXIT_PENDING: Final = 3


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``envs``'s parser."""
    p = sub.add_parser(
        name,
        help="what a partition offers a job's environment: container runtimes, pyxis, "
        "module, GPUs (detected by a tiny job, remembered a day)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument(
        "--partition",
        help="the partition to look at (default: the profile's, else the cluster's default)",
    )
    p.add_argument(
        "--recheck",
        action="store_true",
        help="forget what was detected and send a new probe",
    )
    p.add_argument(
        "--wait",
        type=float,
        metavar="SEC",
        default=None,
        help="how long to wait for the probe in the queue (default: 120)",
    )
    p.add_argument("--json", action="store_true", help="print the facts as JSON")


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Print the partition's facts."""
    from ddp_tui.remote.submit.env_detect import DETECT_WAIT_SEC

    partition = args.partition if args.partition is not None else cluster.profile.partition
    wait = DETECT_WAIT_SEC if args.wait is None else max(0.0, args.wait)
    found = cluster.detect_environment(partition, recheck=args.recheck, wait_sec=wait)
    if args.json:
        doc: dict[str, object] = {"partition": partition}
        if found.facts is not None:
            doc["facts"] = found.facts.to_dict()
            doc["runtimes"] = list(found.facts.found_runtimes)
        if found.pending_job:
            doc["pending_job"] = found.pending_job
        if found.problem:
            doc["problem"] = found.problem
        print(json.dumps(doc, indent=1, sort_keys=True))
    elif found.facts is not None:
        print("\n".join(fact_lines(found.facts)))
    else:
        print(f"ddp-tui: {found.note()}")
    if found.facts is not None:
        return 0
    return EXIT_PENDING if found.pending_job else 1


def fact_lines(facts: EnvironmentFacts, *, now: float | None = None) -> list[str]:
    """The facts as ``name: value`` lines, the runtimes first."""
    from ddp_tui.remote.submit.env_detect import age_text

    at = time.time() if now is None else now
    where = facts.partition or "(default partition)"
    lines = [
        f"partition: {where}, on {facts.host or '?'}, "
        f"detected {age_text(at - facts.checked_at)} ago",
        f"runtimes: {', '.join(facts.found_runtimes) or 'none'}",
    ]
    if facts.pyxis is not None:
        lines.append(f"pyxis: {'yes (srun --container-image)' if facts.pyxis else 'no'}")
    for tool in facts.tools:
        found = f"{tool.version or '?'} ({tool.path})" if tool.found else "not found"
        lines.append(f"{tool.name}: {found}")
    if facts.module:
        how = "defined" if facts.module == "function" else f"from {facts.module}"
        lines.append(f"module: {facts.module_version or '?'} ({how})")
    else:
        lines.append("module: not found")
    lines.append(f"gpus: {'; '.join(facts.gpus) if facts.gpus else 'none seen (nvidia-smi -L)'}")
    lines.append(f"/dev/mqueue: {'yes' if facts.mqueue else 'no'}")
    lines.append(f"hard limits: nofile {facts.nofile or '?'}, nproc {facts.nproc or '?'}")
    return lines
