"""``ddp-tui preflight``: a collective test of the spec's shape (all_reduce, broadcast,
barrier over every rank, and the all_reduce bandwidth) submitted as a job of its own."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ddp_tui.cli.connection import add_scheduler_option
from ddp_tui.cli.spec_options import (
    SPEC_DESCRIPTION,
    add_python_check_options,
    add_spec_options,
    recheck_python,
    spec_from_args,
    warn,
)

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``preflight``'s parser: the spec's options, as ``submit`` takes them."""
    pf = sub.add_parser(
        name,
        help="submit a collective test of the spec's shape",
        description=SPEC_DESCRIPTION,
    )
    add_scheduler_option(pf, argparse.SUPPRESS)
    add_spec_options(pf)
    add_python_check_options(pf)


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Submit the preflight job; print its run id and job id."""
    spec = spec_from_args(cluster, args)
    recheck_python(cluster, args, spec)
    plan = cluster.plan(spec, kind="preflight")
    warn([plan])
    view = cluster.submit(plan)
    print(f"{view.run_id}\t{view.job_id}")
    return 0
