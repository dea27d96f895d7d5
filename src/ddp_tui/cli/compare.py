"""``ddp-tui compare GROUP``: the outcome table (the fields that differ, the outcomes, the best
marked), then the scaling table where the runs' sizes differ; ``--export`` writes both with
the scaling advice next to the runs (docs/compare.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ddp_tui.cli.lookup import GROUP_HELP, resolve_group

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``compare``'s parser."""
    cp = sub.add_parser(
        name,
        help="a group's runs: the fields that differ, their outcomes, the best marked; and "
        "the scaling table where their sizes differ",
    )
    cp.add_argument("group", help=GROUP_HELP)
    cp.add_argument(
        "--sort",
        metavar="COLUMN",
        help="order the outcome table by a column: a differing field, final_val, best_val, "
        "epochs_done, wall_sec, gpu_hours (cpu_hours), throughput, cpu_used, mem_used (what "
        "each ended job used of the CPUs and memory it held), state or run_id; the "
        "metric's best first, others ascending (docs/compare.md)",
    )
    cp.add_argument(
        "--export",
        action="store_true",
        help="write Markdown and CSV next to the runs, with the scaling advice",
    )


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """The outcome table (fields that differ, outcomes, the best marked), then the scaling
    table where the runs' sizes differ (or nothing does)."""
    from ddp_tui.reports.outcomes import outcomes_markdown, sort_outcomes
    from ddp_tui.reports.results import to_markdown

    group = resolve_group(cluster, args.group)
    outcomes = cluster.outcomes(group)  # LookupError for a group with no runs
    if args.sort:
        try:
            outcomes = sort_outcomes(outcomes, args.sort)
        except ValueError as exc:
            print(f"ddp-tui: --sort: {exc}", file=sys.stderr)
            return 2
    print(f"# Outcomes: {group}\n")
    print(outcomes_markdown(outcomes))
    if outcomes.shows_scaling:
        print("# Scaling\n")
        print(to_markdown(cluster.compare(group)))
    if args.export:
        for path in cluster.export_comparison(group):
            print(f"wrote {path}")
    return 0
