"""``ddp-tui shell RUN [--node HOST]``: a shell where the run's job runs (docs/shell.md).

Apart from ``cli.py`` for length only: ``cli.py`` finds the run (id, prefix or job id) and
hands it here. The command's exit status is the shell's, as with ``ssh``.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_shell_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``shell`` subcommand's parser."""
    s = sub.add_parser(
        "shell",
        help="a shell where a running job runs: on its node (Slurm: srun --overlap --pty), "
        "in the run directory; exit to come back",
    )
    s.add_argument("run", help="run id, a unique prefix of one, or a job id")
    s.add_argument(
        "--node",
        metavar="HOST",
        help="one of the job's nodes (default: its first)",
    )


def run_shell(cluster: Cluster, run_id: str, *, node: str | None = None) -> int:
    """Open the shell on this terminal and wait for it; its exit status."""
    plan = cluster.shell_command(run_id, node)
    print(plan.banner, file=sys.stderr, flush=True)
    return cluster.open_shell(plan)
