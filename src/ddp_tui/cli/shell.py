"""``ddp-tui shell RUN [--node HOST]``: a shell where the run's job runs (docs/shell.md).

The run is found by id, prefix or job id. The command's exit status is the shell's, as with
``ssh``.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ddp_tui.cli.lookup import add_run_argument, resolve_run

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``shell``'s parser."""
    s = sub.add_parser(
        name,
        help="a shell where a running job runs: on its node (Slurm: srun --overlap --pty), "
        "in the run directory; exit to come back",
    )
    add_run_argument(s)
    s.add_argument(
        "--node",
        metavar="HOST",
        help="one of the job's nodes (default: its first)",
    )


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """The shell's exit status."""
    return run_shell(cluster, resolve_run(cluster, args.run).run_id, node=args.node)


def run_shell(cluster: Cluster, run_id: str, *, node: str | None = None) -> int:
    """Open the shell on this terminal and wait for it; its exit status."""
    plan = cluster.shell_command(run_id, node)
    print(plan.banner, file=sys.stderr, flush=True)
    return cluster.open_shell(plan)
