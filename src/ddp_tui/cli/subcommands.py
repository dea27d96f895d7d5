"""The one table of ``ddp-tui``'s subcommands, and the parser built from it.

A subcommand is a module of this package with two functions: ``add_parser(sub, name)``
adds its parser (options, help) under ``name``, and ``run(cluster, args)`` does it on the
opened cluster and returns the exit status. :data:`SUBCOMMANDS` names them in the order
``ddp-tui --help`` lists them; :func:`~ddp_tui.cli.entry.main` runs the one named.

Each module imports at its top only what every ``--help`` may pay for (the standard
library, the spec's descriptions); pandas, the advisor's reports and the facade load when
its ``run`` does.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Protocol

from ddp_tui import __version__
from ddp_tui.cli import (
    adopt,
    advise,
    cancel,
    compare,
    diff,
    envs,
    logs,
    ls,
    preflight,
    resources,
    retry,
    shell,
    stacks,
    submit,
    usage,
    verify,
    watch,
    why,
)
from ddp_tui.cli.connection import add_connection_options

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster


class Subcommand(Protocol):
    """What a subcommand's module provides."""

    def add_parser(
        self, sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str
    ) -> None:
        """Add the subcommand's parser to ``sub`` under ``name``."""

    def run(self, cluster: Cluster, args: argparse.Namespace) -> int:
        """Do the subcommand on ``cluster``; the exit status."""


#: Every subcommand by name, in the order ``--help`` lists them.
SUBCOMMANDS: Final[Mapping[str, Subcommand]] = {
    "submit": submit,
    "preflight": preflight,
    "ls": ls,
    "cancel": cancel,
    "retry": retry,
    "verify": verify,
    "why": why,
    "resources": resources,
    "usage": usage,
    "logs": logs,
    "adopt": adopt,
    "envs": envs,
    "compare": compare,
    "advise": advise,
    "diff": diff,
    "stacks": stacks,
    "watch": watch,
    "shell": shell,
}


def build_parser() -> argparse.ArgumentParser:
    """``ddp-tui``'s parser: the options before any subcommand, then every subcommand's."""
    p = argparse.ArgumentParser(
        prog="ddp-tui", description="Run PyTorch DDP experiments on Slurm clusters."
    )
    p.add_argument("--version", action="version", version=f"ddp-tui {__version__}")
    add_connection_options(p)
    sub = p.add_subparsers(dest="command")
    for name, command in SUBCOMMANDS.items():
        command.add_parser(sub, name)
    return p
