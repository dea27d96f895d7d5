"""``ddp-tui cancel RUN``: cancel a run's job; ``--group``: every live job of its group."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ddp_tui.cli.lookup import GROUP_OPTION_HELP, add_run_argument, resolve_group, resolve_run

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``cancel``'s parser."""
    c = sub.add_parser(name, help="cancel a run's job (with --group: every live job of its group)")
    add_run_argument(c)
    c.add_argument("--group", action="store_true", help=GROUP_OPTION_HELP)


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Cancel, and say which jobs were."""
    if args.group:
        group = resolve_group(cluster, args.run)
        jobs = cluster.cancel_group(group)
        done = f"job {', '.join(jobs)}" if jobs else "nothing was alive"
        print(f"cancelled group {group} ({done})")
        return 0
    view = resolve_run(cluster, args.run)
    jobs = cluster.cancel(view.run_id)
    print(f"cancelled {view.run_id} (job {', '.join(jobs)})")
    return 0
