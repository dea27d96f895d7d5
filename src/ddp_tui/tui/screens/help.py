"""Help: what each screen is for and its keys."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Everywhere",
        (
            ("?  f1", "this help"),
            ("ctrl+p", "command palette: every action by name"),
            ("f5", "refresh now"),
            ("q", "quit (runs keep going; reopen the app to follow them)"),
        ),
    ),
    (
        "Jobs",
        (
            ("enter", "open the run; on a group's row (a sweep), show or hide its runs"),
            ("space  → ←", "show or hide a group's runs (+ and - too; ← from one of its runs)"),
            ("n", "compose a new experiment"),
            ("c", "cancel (asks first): the run, or a group's queued and running runs"),
            ("r", "retry from the checkpoint: the run, or a group's runs that ended early"),
            ("e", "edit: compose pre-filled from the run"),
            ("v", "verify: nodes, world size, backend, every epoch"),
            ("s", "compare a group: what differs between its runs, and which won"),
            ("/", "filter by name, job, state, group or reason (stalled); esc clears"),
            ("f", "show or hide finished runs"),
            ("a", "list every job of yours too (those ddp-tui did not submit), or stop"),
            ("o", "sort by a column (the same one again flips it)"),
            ("t", "pick the columns shown"),
        ),
    ),
    (
        "Compose",
        (
            ("tab", "next field"),
            ("ctrl+s", "submit"),
            ("ctrl+g", "sweep: the same run over values of any fields, e.g. lr x batch"),
            ("ctrl+t", "preflight: a quick collective test of the same shape"),
            ("ctrl+o", "save the sbatch script without submitting"),
            ("esc", "back"),
        ),
    ),
    (
        "Run detail",
        (
            ("1 2 3 4", "logs, metrics and plots, checks and accounting, resources"),
            ("f", "logs: follow on or off"),
            ("/  n  N", "logs: search, next, previous"),
            ("g", "diagnosis: show its evidence line in the log (again: the next)"),
            ("d", "diagnose the ended run again from its logs"),
            ("t", "pending run: ask the scheduler for its estimated start"),
            ("s", "running job: a shell on its node, in the run directory (exit returns)"),
            ("k", "running job: every rank's stack, grouped, and which ranks are stuck"),
            ("c r e v", "cancel (a stalled run too), retry, edit, verify"),
            ("esc", "back"),
        ),
    ),
    (
        "Compare",
        (
            ("g", "pick a group"),
            ("o", "sort the outcome table by the next column (a header's click: by it)"),
            ("d", "sort the other way"),
            ("m", "plot the next metric per epoch, one line per run"),
            ("x", "export Markdown and CSV next to the runs"),
            ("esc", "back"),
        ),
    ),
)


def help_table() -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for section, keys in KEYS:
        table.add_row(Text(section, style="bold underline"), "")
        for key, meaning in keys:
            table.add_row(key, meaning)
        table.add_row("", "")
    return table


class HelpScreen(ModalScreen[None]):
    """The keys of every screen."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide", id="help"):
            yield Static(
                Text(
                    "ddp-tui: compose a DDP experiment, submit it, follow it, compare sizes.\n",
                    style="bold",
                )
            )
            yield Static(help_table())

    def action_close(self) -> None:
        self.dismiss(None)
