"""``ddp-tui adopt JOBID [--json]``: bring in a job ddp-tui did not submit (``sbatch`` by hand,
another tool) as a run: a run directory that records the job, so that ``ls``, ``logs``,
``why``, ``watch`` and ``retry`` take it like one of ddp-tui's own
(:mod:`ddp_tui.remote.runs.adoption`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``adopt``'s parser."""
    p = sub.add_parser(
        name,
        help="bring in a job ddp-tui did not submit as a run, to follow, diagnose and retry it",
        description="Make a run of a job of yours that ddp-tui did not submit: a run directory "
        "holding the job's batch script as the scheduler kept it (original.sbatch), a "
        "job.sbatch that a retry submits (the same resources, run from the job's directory), "
        "the job as the run's first attempt and links to its logs. The job goes on as it is.",
    )
    p.add_argument("job_id", metavar="JOBID", help="the job id, or one array task's (1234_5)")
    p.add_argument("--json", action="store_true", help="print the new run's row as JSON")


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Bring the job in; print the new run's id and how to follow it."""
    view = cluster.adopt_job(args.job_id)
    if args.json:
        from ddp_tui.reports.text import strict_json

        print(
            strict_json(
                {
                    "run_id": view.run_id,
                    "run_dir": view.run_dir,
                    "name": view.name,
                    "job_id": view.job_id,
                    "kind": view.kind,
                }
            )
        )
        return 0
    print(f"{view.run_id}\tjob {view.job_id}\t{view.run_dir}")
    print(
        f"follow it: ddp-tui watch {view.run_id}; its logs: ddp-tui logs {view.run_id}; "
        f"run it again: ddp-tui retry {view.run_id}"
    )
    return 0
