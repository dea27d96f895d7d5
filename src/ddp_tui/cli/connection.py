"""Where a command runs: the options that choose it (``--profile``, ``--host``,
``--runs-root``, ``--scheduler``), the profile they make, and the cluster opened with it."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """The options before any subcommand: which profile, host, runs root and scheduler."""
    parser.add_argument("--profile", help="cluster profile from the config file")
    parser.add_argument(
        "--host", help="run against a login node over SSH (alias from ~/.ssh/config)"
    )
    parser.add_argument("--runs-root", help="where run directories live (default: the profile's)")
    add_scheduler_option(parser, None)


def add_scheduler_option(parser: argparse.ArgumentParser, default: object) -> None:
    """``--scheduler``; a subcommand's parser takes it too, with ``argparse.SUPPRESS`` as
    its default so that a value given before the subcommand is kept."""
    from ddp_tui.config import SCHEDULERS

    parser.add_argument(
        "--scheduler",
        choices=SCHEDULERS,
        default=default,
        help="where jobs run: slurm; local (this machine, one node); auto: slurm where it "
        "answers, else local. Overrides the profile's scheduler. With submit --dry-run, "
        "slurm renders the Slurm script even where Slurm is not installed",
    )


def profile_for(args: argparse.Namespace) -> Profile:
    """The chosen profile, with ``--scheduler`` in place of its own setting."""
    from ddp_tui.config import get_profile
    from ddp_tui.remote.backends.scheduler import SchedulerError

    profile = get_profile(args.profile)
    if getattr(args, "skip_python_check", False):
        profile = dataclasses.replace(profile, check_python=False)
    if args.scheduler is None:
        return profile
    host = args.host or profile.host
    if args.scheduler == "local" and host:
        raise SchedulerError(f"--scheduler local runs jobs on this machine only, not on {host}")
    return dataclasses.replace(profile, scheduler=args.scheduler)


def open_cluster(args: argparse.Namespace) -> Cluster:
    """The cluster of the chosen profile, host and runs root, whose refreshes react as the
    command's kind is declared to (:data:`ddp_tui.remote.runs.reactions.BY_COMMAND`)."""
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.remote.runs.reactions import BY_COMMAND

    reactions = BY_COMMAND["watch" if args.command == "watch" else "cli"]
    return Cluster.open(
        profile_for(args), host=args.host, runs_root=args.runs_root, reactions=reactions
    )
