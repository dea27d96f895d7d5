"""``ddp-tui logs RUN|JOBID``: a run's ``.out`` (or ``--err``), as a terminal shows it; ``-f``
keeps printing until the run ends. A job id that is no run's (a job sent with plain
``sbatch``) prints that job's own ``.out``/``.err``, from the paths Slurm records."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from ddp_tui.cli.lookup import add_run_argument, resolve_run_or_job

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``logs``'s parser."""
    lg = sub.add_parser(name, help="print a run's .out (or .err), or any job's of the user")
    add_run_argument(lg)
    lg.add_argument("--err", action="store_true", help="print the .err file instead")
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing until the run ends")


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Print the log's lines, and with ``--follow`` keep printing them once a second."""
    from ddp_tui.reports.text import collapse_carriage_returns

    found = resolve_run_or_job(cluster, args.run)
    if isinstance(found, str):
        return _job_logs(cluster, found, err=args.err, follow=args.follow)
    view = found

    def show() -> None:
        detail = cluster.follow(view.run_id)
        for line in detail.err_lines if args.err else detail.out_lines:
            print(collapse_carriage_returns(line))
        sys.stdout.flush()

    show()
    while args.follow:
        state = next((v.state for v in cluster.refresh().runs if v.run_id == view.run_id), None)
        show()
        if state is not None and state.is_terminal:
            break
        time.sleep(1.0)
    return 0


def _job_logs(cluster: Cluster, job_id: str, *, err: bool, follow: bool) -> int:
    """A job that is not ddp-tui's: the tail of its log, then (``follow``) what it appends,
    once a second, until the job ends."""
    from ddp_tui.remote.backends.states import JobState
    from ddp_tui.reports.text import collapse_carriage_returns

    log = cluster.job_log(job_id, err=err)
    if log.path is None:
        print(f"ddp-tui: {log.source}", file=sys.stderr)
        return 1
    if log.chunk is None or log.chunk.size is None:
        why = f" ({log.chunk.error})" if log.chunk is not None and log.chunk.error else ""
        print(f"ddp-tui: no {log.path} yet{why} (from {log.source})", file=sys.stderr)
        if not follow:
            return 1

    def show(lines: tuple[str, ...]) -> None:
        for line in lines:
            print(collapse_carriage_returns(line))
        sys.stdout.flush()

    show(log.lines)
    while follow:
        state = cluster.job_state(job_id)
        log = cluster.job_log(job_id, err=err, offset=log.offset)
        show(log.lines)
        if state.is_terminal or state is JobState.UNKNOWN:
            if log.chunk is not None and log.chunk.partial:
                show((log.chunk.partial,))  # its last line had no newline
            break
        time.sleep(1.0)
    return 0
