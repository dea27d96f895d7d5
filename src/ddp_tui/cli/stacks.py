"""``ddp-tui stacks RUN``: every rank's Python stack of a running job, grouped, and saved.

The run is found by id, prefix or job id, and what :func:`stacks_output` returns for the
facade's :class:`~ddp_tui.remote.live.stacks.StacksTaken` is printed (docs/stacks.md).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ddp_tui.cli.lookup import add_run_argument, resolve_run
from ddp_tui.reports.text import strict_json

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.remote.live.stacks import StacksTaken

#: The deadline of the whole taking, seconds, unless ``--timeout`` says otherwise.
DEFAULT_TIMEOUT_SEC = 8.0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``stacks``'s parser."""
    s = sub.add_parser(
        name,
        help="every rank's Python stack of a running job, ranks at the same frames grouped, "
        "and which ranks are behind; saved in the run directory under stacks/",
    )
    add_run_argument(s)
    s.add_argument("--json", action="store_true", help="print the stacks as JSON")
    s.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_SEC,
        metavar="SEC",
        help=f"give up on ranks that have not answered after SEC seconds "
        f"(default {DEFAULT_TIMEOUT_SEC:g})",
    )
    s.add_argument(
        "--py-spy",
        choices=("auto", "never"),
        default="auto",
        help="auto: use py-spy where a node has it on its PATH (native frames too, nothing "
        "asked of the rank), else the rank's own faulthandler dump; never: always the dump",
    )


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Take the stacks and print them."""
    run_id = resolve_run(cluster, args.run).run_id
    taken = cluster.stacks(run_id, timeout=args.timeout, py_spy=args.py_spy)
    sys.stdout.write(stacks_output(taken, as_json=args.json))
    return 0


def stacks_output(taken: StacksTaken, *, as_json: bool = False) -> str:
    """What ``ddp-tui stacks`` prints: the text copy it saved, or its JSON."""
    if as_json:
        return strict_json(taken.to_dict()) + "\n"
    text = taken.text()
    if taken.saved:
        text += "\nsaved: " + ", ".join(taken.saved) + "\n"
    return text
