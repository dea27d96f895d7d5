"""``ddp-tui logs RUN``: a run's ``.out`` (or ``--err``), as a terminal shows it; ``-f``
keeps printing until the run ends."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from ddp_tui.cli.lookup import add_run_argument, resolve_run

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``logs``'s parser."""
    lg = sub.add_parser(name, help="print a run's .out (or .err)")
    add_run_argument(lg)
    lg.add_argument("--err", action="store_true", help="print the .err file instead")
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing until the run ends")


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Print the log's lines, and with ``--follow`` keep printing them once a second."""
    from ddp_tui.reports.text import collapse_carriage_returns

    view = resolve_run(cluster, args.run)

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
