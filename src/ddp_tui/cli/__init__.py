"""`ddp-tui`: the app, and scriptable subcommands on the same facade.

Plain ``ddp-tui`` starts the app. ``ddp-tui submit|ls|logs|cancel|retry|verify|why|
resources|compare|diff|advise|preflight|stacks|watch|shell`` do the same things without a
screen, for scripts and CI. Nothing here imports torch, and textual is imported only when
the app starts.

Output behaves like a Unix tool's: piped into ``head``, a command stops quietly when the
reader goes away (exit status 141, as if killed by SIGPIPE).

The package: :mod:`~ddp_tui.cli.entry` (``main``: parse, open the cluster, run, errors to
exit statuses); :mod:`~ddp_tui.cli.subcommands` (the one table of subcommands, and the parser
built from it); one module per subcommand, each with ``add_parser`` and ``run``; and what
they share: :mod:`~ddp_tui.cli.connection` (the profile and the cluster the options choose),
:mod:`~ddp_tui.cli.lookup` (a run or group named on the command line),
:mod:`~ddp_tui.cli.spec_options` (the spec's options, for submit and preflight),
:mod:`~ddp_tui.cli.script_command` (a script's command line as typed) and
:mod:`~ddp_tui.cli.notifications` (the events a command claimed, delivered).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddp_tui.cli.entry import main

if TYPE_CHECKING:
    import argparse

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """``ddp-tui``'s whole parser (:func:`ddp_tui.cli.subcommands.build_parser`). Built on
    demand: plain ``ddp-tui`` starts the app without every subcommand's options."""
    from ddp_tui.cli.subcommands import build_parser as build

    return build()
