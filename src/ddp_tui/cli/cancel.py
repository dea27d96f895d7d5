"""``ddp-tui cancel RUN|JOBID``: cancel a run's job; ``--group``: every live job of its group. A
job id that is no run's (a job sent with plain ``sbatch``) cancels that job."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ddp_tui.cli.lookup import (
    GROUP_OPTION_HELP,
    add_run_argument,
    resolve_group,
    resolve_run_or_job,
)

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``cancel``'s parser."""
    c = sub.add_parser(
        name,
        help="cancel a run's job (with --group: every live job of its group), or any job of "
        "the user by its job id",
    )
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
    found = resolve_run_or_job(cluster, args.run)
    if isinstance(found, str):  # a job that is not ddp-tui's
        cluster.cancel_job(found)
        print(f"cancelled job {found} (not a ddp-tui run)")
        return 0
    view = found
    jobs = cluster.cancel(view.run_id)
    print(f"cancelled {view.run_id} (job {', '.join(jobs)})")
    return 0
