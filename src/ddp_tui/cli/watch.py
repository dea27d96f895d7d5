"""``ddp-tui watch [RUN|GROUP]``: follow runs until they end, notify, exit with the worst end.

``watch`` follows runs without the app: every active run with no argument, one run, or
every run of a group. It prints each state change, delivers the notification events it
claims (the profile's ``notify_command``; a desktop notification through its own terminal
when stdout is one), and exits once every run it follows has ended. Its exit status says
the worst end among them:

- 0: every run COMPLETED;
- 1: a run failed: FAILED, OUT_OF_MEMORY, TIMEOUT, NODE_FAIL, BOOT_FAIL, DEADLINE, LOST or
  any other end that is not a cancel;
- 3: none failed, but one was CANCELLED or PREEMPTED (not requeued);
- 2: a usage error (no such run), as for every command; 130: interrupted (Ctrl-C).

Every other command delivers what it claimed through :mod:`ddp_tui.cli.notifications`
too. See docs/notifications.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from ddp_tui.cli.lookup import resolve_run
from ddp_tui.cli.notifications import CliNotifications, now_text

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.remote.model.views import RunView

EXIT_COMPLETED = 0
EXIT_FAILED = 1
EXIT_CANCELLED = 3
EXIT_INTERRUPTED = 130
#: Ends that are a person's (or the scheduler's) decision, not the run's failure.
_CANCEL_STATES = frozenset({"CANCELLED", "PREEMPTED"})


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """``watch``'s parser."""
    w = sub.add_parser(
        name,
        help="follow runs without the app until they end, notifying each end (exit 0: all "
        "completed, 1: one failed, 3: one cancelled)",
        description="Follow runs until they have all ended: every active run, one run (id, "
        "prefix or job id) or a group. Prints each state change, sends the profile's "
        "notify_command and a desktop notification for each end, stall and finished group, "
        "and exits 0 when all completed, 1 when one failed, 3 when none failed but one was "
        "cancelled (docs/notifications.md).",
    )
    w.add_argument(
        "target",
        nargs="?",
        help="a run (id, prefix or job id) or a group key; default: every active run",
    )
    w.add_argument(
        "--interval",
        type=float,
        metavar="SEC",
        help="seconds between refreshes (default: the profile's poll_interval_sec; at least 2)",
    )


def run(cluster: Cluster, args: argparse.Namespace) -> int:
    """Follow the runs until they end; the worst end as the exit status."""
    return watch(
        cluster, args.target, resolve=lambda key: resolve_run(cluster, key), interval=args.interval
    )


def exit_status(states: Sequence[str]) -> int:
    """The worst end among ``states`` as watch's exit status (see the module's text)."""
    if any(s != "COMPLETED" and s not in _CANCEL_STATES for s in states):
        return EXIT_FAILED
    if any(s in _CANCEL_STATES for s in states):
        return EXIT_CANCELLED
    return EXIT_COMPLETED


def watch(
    cluster: Cluster,
    target: str | None,
    *,
    resolve: Callable[[str], RunView],
    interval: float | None = None,
    out: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Follow the runs ``target`` names until they end; returns the exit status."""
    from ddp_tui.config import MIN_POLL_INTERVAL_SEC

    out = out or sys.stdout
    pause = max(MIN_POLL_INTERVAL_SEC, interval or cluster.profile.poll_interval_sec)
    delivery = CliNotifications(cluster.profile, out=out)
    snap = cluster.refresh()
    followed = _targets(snap.runs, target, resolve)
    if not followed:
        print("ddp-tui: no active runs to watch", file=sys.stderr)
        return EXIT_COMPLETED
    shown: dict[str, tuple[str, str]] = {}
    try:
        while True:
            if snap.error:
                print(f"{now_text()}  warning: {snap.error}", file=out)
            views = [v for v in snap.runs if v.run_id in followed]
            for v in views:
                now = (v.state_label, v.reason_label)
                if shown.get(v.run_id) != now:
                    shown[v.run_id] = now
                    reason = f"  {v.reason_label}" if v.reason_label else ""
                    print(f"{now_text()}  {v.run_id}  {v.state_label}{reason}", file=out)
            out.flush()
            delivery.deliver(cluster.take_events())
            if len(views) == len(followed) and all(_ended(v) for v in views):
                break
            sleep(pause)
            snap = cluster.refresh()
    except KeyboardInterrupt:
        delivery.deliver(cluster.take_events(final=True))
        delivery.wait()
        return EXIT_INTERRUPTED
    delivery.deliver(cluster.take_events(final=True))
    delivery.wait()
    return exit_status([v.state.value for v in views])


def _targets(
    runs: Sequence[RunView],
    target: str | None,
    resolve: Callable[[str], RunView],
) -> set[str]:
    if target is None:
        return {v.run_id for v in runs if v.job_id is not None and not v.state.is_terminal}
    members = {v.run_id for v in runs if v.group == target}
    if members:
        return members
    return {resolve(target).run_id}


def _ended(view: RunView) -> bool:
    return view.job_id is not None and view.state.is_terminal
