"""``ddp-tui retry RUN``: resubmit a run, which resumes from its checkpoint; ``--group``:
every failed run of its group."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ddp_tui.cli.lookup import GROUP_OPTION_HELP, add_run_argument, resolve_group, resolve_run

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``retry``'s parser."""
    r = sub.add_parser(
        name, help="resubmit a run; it resumes from its checkpoint (--group: every failed run)"
    )
    add_run_argument(r)
    r.add_argument("--group", action="store_true", help=GROUP_OPTION_HELP)


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Resubmit; print the run id, the new job id and the attempt (each run's fate with
    ``--group``)."""
    if args.group:
        result = cluster.retry_group(resolve_group(cluster, args.run))
        for run_id in result.retried:
            print(f"{run_id}\tretried")
        for run_id, why in result.skipped:
            print(f"{run_id}\tleft as it is: {why}")
        return 0
    seen = resolve_run(cluster, args.run)
    view = cluster.retry(seen.run_id, seen=len(seen.attempts))
    print(f"{view.run_id}\t{view.job_id}\tattempt {len(view.attempts)}")
    return 0
