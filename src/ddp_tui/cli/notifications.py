"""The notification events a CLI command claimed, delivered: the profile's
``notify_command`` for each, and for ``watch`` a line and a desktop notification on its
terminal when stdout is one.

A command other than ``watch`` claims events only when the profile has a ``notify_command``
(it has no screen to show them), runs it for each, and waits for those commands (bounded)
before it exits (:func:`finish_notifications`). See docs/notifications.md.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TextIO

from ddp_tui.errors import DdpTuiError
from ddp_tui.notify_delivery import NotifyCommand, event_sequence

if TYPE_CHECKING:
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.remote.model.events import NotifyEvent


class CliNotifications:
    """Delivers the events a CLI process claimed: notify_command, and for watch a line and
    a desktop notification on its terminal."""

    def __init__(
        self, profile: Profile, *, out: TextIO | None = None, err: TextIO | None = None
    ) -> None:
        self.out = out  # None: print nothing (a command whose stdout is its own output)
        self.err = err or sys.stderr
        self.mode = profile.desktop_notify
        self.command = NotifyCommand(profile.notify_command, on_error=self._failed)
        self.desktop = out is not None and _isatty(out)

    def deliver(self, events: Sequence[NotifyEvent]) -> None:
        for event in events:
            self.command.send(event)
            if self.out is None:
                continue
            print(
                f"{now_text()}  notify: {event.title.removeprefix('ddp-tui: ')}"
                f"{' · ' + event.body if event.body else ''}",
                file=self.out,
            )
            seq = event_sequence(event, self.mode, os.environ) if self.desktop else None
            if seq is not None:
                self.out.write(seq)
            self.out.flush()

    def wait(self) -> None:
        if not self.command.wait():
            print("ddp-tui: notify_command still running; not waiting for it", file=self.err)

    def _failed(self, error: str) -> None:
        print(f"ddp-tui: {error}", file=self.err)


def prepare_notifications(cluster: Cluster, command: str) -> None:
    """A command with no screen claims events only where it can deliver them: watch always,
    any other only with a notify_command (else the app, or watch, shows them)."""
    if command != "watch":
        cluster.notifier.enabled = bool(cluster.profile.notify_command.strip())


def finish_notifications(cluster: Cluster) -> None:
    """Deliver what this command claimed and wait for the commands (bounded). Never raises:
    it runs on the way out of every command."""
    if not cluster.notifier.enabled:
        return
    try:
        events = cluster.take_events(final=True)
    except DdpTuiError:
        return
    if events:
        delivery = CliNotifications(cluster.profile)
        delivery.deliver(events)
        delivery.wait()


def _isatty(stream: TextIO) -> bool:
    with contextlib.suppress(AttributeError, ValueError, OSError):
        return stream.isatty()
    return False


def now_text() -> str:
    """The time of day, as every line ``watch`` prints begins."""
    return datetime.now().strftime("%H:%M:%S")
