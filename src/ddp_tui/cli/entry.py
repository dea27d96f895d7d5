"""``main``: the command line parsed, the cluster opened, the subcommand run, and every
problem a person can act on turned into ``ddp-tui: <message>`` and an exit status.

Exit statuses: a subcommand's own (0 unless it says otherwise), 2 for a usage error (a bad
option, a spec that does not validate, an unknown run, a profile or host that cannot be
used), 1 for a problem met on the way (the scheduler, the connection, a run directory), 141
when the reader of the output went away.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

#: The shell's status for a process killed by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ddp-tui`` with ``argv`` (default: the command line); returns the exit status."""
    try:
        try:
            return _main(argv)
        finally:
            # Here, not at the interpreter's exit: a reader that went away (| head) then
            # raises into the handler below instead of printing "Exception ignored".
            sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE


def _stdout_to_devnull() -> None:
    """Point fd 1 at /dev/null, so that the interpreter's final flush of what is still
    buffered cannot fail a second time (the recipe in Python's signal docs)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file (captured output): nothing is flushed to a pipe at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


#: The options plain ``ddp-tui`` (the app) takes, each with its value.
APP_OPTIONS = ("--profile", "--host", "--runs-root", "--scheduler")


def plain_app(words: Sequence[str]) -> bool:
    """Whether ``words`` start the app: nothing but the connection options, each with a
    value. Then no subcommand's parser is built: the app's first paint does not wait for
    the spec's options (the full parser answers anything else, errors included)."""
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, _ = word.partition("=")
        if name not in APP_OPTIONS:
            return False
        i += 1 if eq else 2
    return i == len(words)


def _main(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if plain_app(words):
        from ddp_tui.cli.app import run_app
        from ddp_tui.cli.connection import add_connection_options

        app_parser = argparse.ArgumentParser(prog="ddp-tui")
        add_connection_options(app_parser)
        return run_app(app_parser.parse_args(words))
    from ddp_tui.cli.script_command import SPEC_COMMANDS, attach_word_values, script_form
    from ddp_tui.cli.subcommands import SUBCOMMANDS, build_parser

    words = attach_word_values(words)
    args = build_parser().parse_args(words)
    if args.command is None:
        from ddp_tui.cli.app import run_app

        return run_app(args)
    if args.command in SPEC_COMMANDS:
        # Refused before anything connects: the command line alone is wrong.
        refusals = script_form(args, words)
        for e in refusals:
            print(f"ddp-tui: {e.field}: {e.message}", file=sys.stderr)
        if refusals:
            return 2
    from ddp_tui.cli.connection import open_cluster
    from ddp_tui.cli.notifications import finish_notifications, prepare_notifications
    from ddp_tui.errors import DdpTuiError
    from ddp_tui.remote.backends.executor import ExecutorError
    from ddp_tui.remote.backends.scheduler import SchedulerError
    from ddp_tui.remote.submit.plan import ValidationFailed
    from ddp_tui.spec import SpecError

    try:
        cluster = open_cluster(args)
    except DdpTuiError as exc:  # a profile, a host or a scheduler that cannot be used
        print(f"ddp-tui: {exc}", file=sys.stderr)
        return 2
    prepare_notifications(cluster, args.command)
    try:
        if args.scheduler == "slurm" and _submits(args):
            try:
                cluster.partitions()
            except (SchedulerError, ExecutorError) as exc:
                # Asked for by name, Slurm is not probed first: say so now, before a run
                # directory exists and a lost sbatch answer is waited for.
                print(
                    "ddp-tui: --scheduler slurm: Slurm does not answer here, and submitting "
                    f"needs it (submit --dry-run previews the script without it): {exc}",
                    file=sys.stderr,
                )
                return 2
        return SUBCOMMANDS[args.command].run(cluster, args)
    except ValidationFailed as exc:
        for e in exc.errors:
            print(f"ddp-tui: {e.field}: {e.message}", file=sys.stderr)
        return 2
    except (SpecError, LookupError) as exc:
        print(f"ddp-tui: {exc}", file=sys.stderr)
        return 2
    except DdpTuiError as exc:  # the scheduler, the connection, a run directory
        print(f"ddp-tui: {exc}", file=sys.stderr)
        return 1
    finally:
        finish_notifications(cluster)  # the events this command claimed, delivered
        cluster.close()


def _submits(args: argparse.Namespace) -> bool:
    """Whether the command hands a job to the scheduler."""
    if args.command == "submit":
        return not args.dry_run
    return args.command in ("preflight", "retry")
