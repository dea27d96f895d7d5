"""The stacks key of Run detail: every rank's stack, taken on the I/O thread, shown in a modal.

Taking them (``Cluster.stacks``: one command per node, a second or so) is a request to the
I/O owner like any other; a refusal (the job is not running, no rank registered) is the usual
failure toast. The modal shows the ranks grouped by where their main thread stands, the
stuck-ranks table, and each group's stack; the taking is saved in the run directory already.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

if TYPE_CHECKING:
    from ddp_tui.remote.live.stacks import StacksTaken

#: The key, named in the stall panel and in help.
STACKS_KEY = "k"


@dataclass
class StacksReady(Message, bubble=False):
    """The reply to ``stacks``: what was taken (and saved)."""

    taken: StacksTaken


def groups_text(taken: StacksTaken) -> Text:
    """The title, the grouped summary, each group's main-thread stack, and where it was saved."""
    text = Text()
    text.append(f"Stacks of job {taken.job_id}", style="bold")
    text.append(f"  taken {taken.taken_at} in {taken.seconds:.1f} s", style="dim")
    for note in taken.notes:
        text.append(f"\n note: {note}", style="yellow")
    for group in taken.groups:
        text.append(f"\n {group.summary}", style="bold cyan" if group.frames else "yellow")
    for group in taken.groups:
        if not group.frames:
            continue
        text.append(f"\n\n {group.ranks_label}", style="bold")
        text.append(" (main thread, innermost first)", style="dim")
        for frame in group.frames:
            where = frame.file.rsplit("/", 1)[-1]
            style = "dim" if frame.is_library else ""
            text.append(f"\n   {frame.function}", style=style or "green")
            text.append(f"  {where}:{frame.line if frame.line is not None else '?'}", style="dim")
    if taken.saved:
        text.append(f"\n\n saved: {taken.saved[-1]}", style="dim")
    return text


class StacksScreen(ModalScreen[None]):
    """Every rank's stack and which ranks are stuck; ``escape`` closes."""

    DEFAULT_CSS = """
    StacksScreen { align: center middle; background: $background 60%; }
    StacksScreen > Vertical {
        width: 90%; height: 90%; border: thick $primary; background: $surface; padding: 0 1;
    }
    StacksScreen DataTable { height: auto; max-height: 12; margin: 1 0; }
    """
    BINDINGS = [Binding("escape,k,q", "dismiss", "Close")]

    def __init__(self, taken: StacksTaken) -> None:
        super().__init__()
        self.taken = taken

    def compose(self) -> ComposeResult:
        with Vertical(id="stacks"):
            table: DataTable[str] = DataTable(id="stuck-ranks", cursor_type="row")
            yield Static(Text("Which ranks are stuck", style="bold"))
            yield table
            with VerticalScroll():
                yield Static(groups_text(self.taken), id="stack-groups")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        # "quiet" before "where": the frames can be wide, and since when is the question.
        table.add_columns("rank", "host", "behind", "at", "quiet", "where")
        for row in self.taken.stuck:
            table.add_row(
                str(row.rank),
                row.host,
                "yes" if row.behind else "",
                row.position,
                f"{row.quiet_sec:.0f} s" if row.quiet_sec is not None else "-",
                row.where or "-",
            )
