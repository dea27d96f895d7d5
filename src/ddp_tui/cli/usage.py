"""``ddp-tui usage RUN|JOBID``: what a run or any job of the user used against what it held
(CPU and memory efficiency, GPU utilisation and memory, time, GPU-hours), with the source of
each figure, and what to ask for next time."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ddp_tui.cli.lookup import resolve_run_or_job

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``usage``'s parser."""
    p = sub.add_parser(
        name,
        help="what a run or any job used (CPU, memory per node, GPUs, time) and what to "
        "ask for next time",
        description="Efficiency of a run's latest job, or of any Slurm job of yours, summed "
        "over every step and node, and a right-sizing suggestion (--mem, --time, "
        "--cpus-per-task, GPUs per node). A figure with no source says 'not measured'.",
    )
    p.add_argument("run", metavar="RUN|JOBID", help="run id, a unique prefix of one, or a job id")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Print the report of the run or job."""
    from ddp_tui.reports.text import strict_json

    found = resolve_run_or_job(cluster, args.run)
    report = cluster.usage(found if isinstance(found, str) else found.run_id)
    if args.json:
        print(strict_json(report.to_json()))
    else:
        from ddp_tui.reports.usage_text import usage_text

        print(usage_text(report), end="")
    return 0
