"""What every screen shares: the header, the footer and the one worker-error handler."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import on
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker

if TYPE_CHECKING:
    from ddp_tui.tui.app import DdpTuiApp


#: The keys that act on one run, the same wherever a run is selected (Jobs, Run detail).
RUN_ACTION_BINDINGS = [
    Binding("c", "cancel_run", "Cancel"),
    Binding("r", "retry", "Retry"),
    Binding("e", "edit", "Edit"),
    Binding("v", "verify", "Verify"),
]


class BaseScreen(Screen[Any]):
    """A screen of the app. Workers started here report failures to the app's handler."""

    @property
    def ddp_app(self) -> DdpTuiApp:
        from ddp_tui.tui.app import DdpTuiApp

        app = self.app
        assert isinstance(app, DdpTuiApp)
        return app

    @on(Worker.StateChanged)
    def _worker_state_changed(self, event: Worker.StateChanged) -> None:
        # Worker.StateChanged does not bubble: hand it to the app's single handler.
        self.ddp_app.worker_state_changed(event)
