"""``ddp-tui verify RUN``: a run's checklist (completed, nodes, world size, epochs,
checkpoint); exit 1 when a check failed or could not be made."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ddp_tui.cli.lookup import add_run_argument, resolve_run

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``verify``'s parser."""
    v = sub.add_parser(name, help="check a run: completed, nodes, world size, epochs, checkpoint")
    add_run_argument(v)


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Print each check with its mark."""
    checks = cluster.verify(resolve_run(cluster, args.run).run_id)
    for c in checks:
        mark = {True: "ok  ", False: "FAIL", None: "... "}[c.ok]
        print(f"[{mark}] {c.name}: {c.detail}")
    return 0 if all(c.ok for c in checks) else 1
