"""The shell key of Run detail: plan on the I/O thread, pick a node, suspend, run, resume.

Planning (which node, which command, or why none: one poll of the job) is a request to the
I/O owner like any other; its refusal is the usual failure toast. The shell itself runs on
the main thread inside :meth:`textual.app.App.suspend`: the terminal is the shell's until it
exits, and the app comes back as it was (its screen, tab and log position are untouched; the
I/O thread goes on polling and following, and what it read shows on return). It is the one
facade call made outside the I/O thread: it touches only the executor, which runs a process
of its own (or opens a channel of its own on the SSH connection).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ddp_tui.tui.formatting import describe_error

if TYPE_CHECKING:
    from ddp_tui.remote.api import ClusterAPI
    from ddp_tui.remote.live.shells import ShellPlan


@dataclass
class ShellPlanned(Message, bubble=False):
    """Where the shell of a run would open (the reply to ``shell_command``); ``chosen``: the
    node was picked already (no chooser again)."""

    plan: ShellPlan
    chosen: bool = False


class NodeChooser(ModalScreen[str | None]):
    """Pick one of a job's nodes for the shell; ``escape`` opens none."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, plan: ShellPlan) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="node-chooser"):
            yield Static(
                Text(f"A shell on which node of job {self.plan.job_id}?"), classes="question"
            )
            yield OptionList(*(Option(node, id=node) for node in self.plan.nodes))

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = self.plan.nodes.index(self.plan.node)
        options.focus()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


def run_shell(app: App[object], cluster: ClusterAPI | None, plan: ShellPlan) -> None:
    """Suspend ``app``, run ``plan``'s shell on the terminal, resume; a toast when it could
    not open or ended with a non-zero status (the user's last command's, usually)."""
    if cluster is None:
        app.notify("not connected", title="Shell", severity="error")
        return
    status, error = 0, ""
    try:
        with app.suspend():
            # Textual resumes only when the block ends normally: nothing may escape it.
            try:
                print(plan.banner, flush=True)
                status = cluster.open_shell(plan)
            except Exception as exc:
                error = describe_error(exc)
    except SuspendNotSupported:
        error = "this terminal cannot hand itself to a shell (the app cannot be suspended here)"
    if error:
        app.notify(error, title="Shell", severity="error", markup=False, timeout=8)
    elif status != 0:
        app.notify(
            f"the shell on {plan.node or 'this machine'} ended with exit status {status}",
            title="Shell",
            severity="warning",
            markup=False,
        )
