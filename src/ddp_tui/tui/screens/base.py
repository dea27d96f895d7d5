"""What every screen shares: the app, requests to the I/O owner, the one worker-error handler."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import on
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker

from ddp_tui.tui.cluster_io import Request

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

    def ask(self, request: Request[Any]) -> bool:
        """Ask the I/O owner to run ``request.call(cluster)``; ``request.reply(result)`` comes
        back to this screen as a message (see :class:`~ddp_tui.tui.cluster_io.Request`). False,
        with a notification, while not connected."""
        return self.ddp_app.ask(self, request)

    def ask_verify(self, run_id: str) -> None:
        """Ask for a run's checklist; it comes back to this screen as ``ChecksReady``."""
        from ddp_tui.tui.messages import ChecksReady

        self.ask(
            Request(
                "Verify",
                lambda cluster: cluster.verify(run_id),
                lambda checks: ChecksReady(run_id, checks),
                key=("verify", run_id),
            )
        )

    @on(Worker.StateChanged)
    def _worker_state_changed(self, event: Worker.StateChanged) -> None:
        # Worker.StateChanged does not bubble: hand it to the app's single handler.
        self.ddp_app.worker_state_changed(event)
