"""Plain ``ddp-tui``: the Textual app, on the profile the options choose."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ddp_tui.cli.connection import profile_for

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster

#: Run directories the app reads per refresh: its first table shows the newest runs at
#: once, and older ones join it refresh by refresh (the CLI reads them all at once).
APP_LISTING_BATCH = 200


def run_app(args: argparse.Namespace) -> int:
    """Start the app; its exit status (2: a profile that cannot be used)."""
    from ddp_tui.errors import DdpTuiError
    from ddp_tui.tui.app import run_app as run_tui

    try:
        profile = profile_for(args)
    except DdpTuiError as exc:
        print(f"ddp-tui: {exc}", file=sys.stderr)
        return 2

    def factory(prompter: object) -> Cluster:
        # Imported here, on the app's I/O worker: the facade (job templates, ssh, the
        # diagnosis rules) loads while the first screen is already painted.
        from ddp_tui.remote.cluster import Cluster

        return Cluster.open(
            profile,
            host=args.host,
            runs_root=args.runs_root,
            prompter=prompter,
            listing_batch=APP_LISTING_BATCH,
        )

    return run_tui(factory, profile=profile)
