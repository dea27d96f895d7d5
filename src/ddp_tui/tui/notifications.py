"""The app's side of notifications: for each event this process claimed, a toast, the
terminal bell, a desktop notification (an OSC escape sequence through SSH and tmux) and the
profile's ``notify_command`` (off the UI thread). See docs/notifications.md."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ddp_tui.notify_delivery import NotifyCommand, event_sequence
from ddp_tui.remote.model.events import GROUP_FINISHED, RUN_STALLED, NotifyEvent
from ddp_tui.tui.messages import RequestFailed

if TYPE_CHECKING:
    from textual.app import App
    from textual.notifications import SeverityLevel

    from ddp_tui.config import Profile


def severity_of(event: NotifyEvent) -> SeverityLevel:
    """A completed run or group is news; a stall a warning; any other end an error."""
    if event.kind == RUN_STALLED:
        return "warning"
    if event.state == "COMPLETED" or (event.kind == GROUP_FINISHED and not event.failed):
        return "information"
    return "error"


class AppNotifications:
    """Delivers claimed events in the app; lives as long as the app."""

    def __init__(
        self,
        app: App[None],
        profile: Profile | None,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.app = app
        self.mode = profile.desktop_notify if profile is not None else "auto"
        self.env = dict(os.environ) if env is None else dict(env)
        self.command = NotifyCommand(
            profile.notify_command if profile is not None else "", on_error=self._failed
        )
        #: The escape sequences written so far (what the terminal was sent; tests read it).
        self.written: list[str] = []

    def deliver(self, events: Sequence[NotifyEvent]) -> None:
        """Toast, bell, desktop notification and notify_command for each event (on the UI
        thread; the command runs in a thread of its own)."""
        for event in events:
            self.app.notify(
                event.body or event.title,
                title=event.title,
                severity=severity_of(event),
                markup=False,
                timeout=10,
            )
            self.command.send(event)
            seq = event_sequence(event, self.mode, self.env)
            if seq is not None:
                self._write(seq)
        if events:
            self.app.bell()

    def _write(self, seq: str) -> None:
        # Textual has no public call for a raw sequence; App.bell and copy_to_clipboard write
        # theirs through the driver the same way, and so skip a headless app.
        self.written.append(seq)
        driver = self.app._driver
        if not self.app.is_headless and driver is not None:
            driver.write(seq)

    def _failed(self, error: str) -> None:
        # From the command's thread: post_message is the thread-safe way back.
        self.app.post_message(RequestFailed("Notify", error, "Notification failed"))
