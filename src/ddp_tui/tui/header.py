"""The one-line header: where the app is connected, the scheduler version, the connection
state, the age of the last refresh, and how many running jobs have stalled."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from ddp_tui.tui.formatting import age

_OK = {"ok", "connected"}


@dataclass(frozen=True)
class Status:
    """What the header shows; the app owns it and replaces it as a whole."""

    location: str = "connecting..."
    version: str = ""
    connection: str = "connecting"
    last_refresh: float | None = None  # time.time() of the last good refresh
    error: str | None = None
    stalled: int = 0  # running jobs with no output, progress or heartbeat for a while


class StatusHeader(Static):
    """Re-renders when the app's status changes, and once a second for the refresh age."""

    DEFAULT_CSS = """
    StatusHeader {
        dock: top;
        height: 1;
        width: 1fr;
        background: $panel;
        color: $foreground;
    }
    """

    def __init__(self, title: str = "", *, id: str | None = None) -> None:
        super().__init__(id=id, markup=False)
        self.title = title

    def on_mount(self) -> None:
        self.watch(self.app, "status", self._show, init=True)
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        self._show(getattr(self.app, "status", Status()))

    def _show(self, status: Status) -> None:
        self.update(self.render_status(status, self._now()), layout=False)

    def _now(self) -> float:
        clock = getattr(self.app, "clock", None)
        return float(clock()) if callable(clock) else time.time()

    def render_status(self, status: Status, now: float) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" ddp-tui", style="bold")
        if self.title:
            text.append(f" · {self.title}", style="bold")
        text.append("  │ ")
        text.append(status.location, style="bold cyan")
        if status.version:
            text.append(f"  │ {status.version}")
        text.append("  │ ")
        healthy = status.connection in _OK and not status.error
        text.append("● " + status.connection, style="green" if healthy else "bold red")
        text.append("  │ ")
        if status.last_refresh is None:
            text.append("not refreshed yet", style="dim")
        else:
            text.append(f"refreshed {age(now - status.last_refresh)} ago", style="dim")
        if status.stalled:
            text.append("  │ ")
            text.append(f"⚠ {status.stalled} stalled", style="bold yellow")
        if status.error:
            text.append("  │ ")
            text.append(status.error, style="red")
        return text
