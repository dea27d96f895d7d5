"""The Jobs table's two choosers: the column to sort by (``o``) and the columns shown (``t``).

Each is a small modal over the table: pick with the arrows and enter, leave with escape.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, OptionList, SelectionList, Static
from textual.widgets.option_list import Option

#: The sort chooser's first entry: the table's own order.
NEWEST_FIRST = "newest first"


class SortModal(ModalScreen[tuple[str | None, bool] | None]):
    """Pick the column to sort by; picking the current one again flips its direction.
    Dismissed with (column or None for newest first, descending), or None on escape."""

    BINDINGS = [Binding("escape", "dismiss_none", "Back")]

    def __init__(
        self, columns: Sequence[tuple[str, str]], current: str | None, descending: bool
    ) -> None:
        super().__init__()
        self.columns = list(columns)  # (key, label)
        self.current = current
        self.descending = descending

    def compose(self) -> ComposeResult:
        options = [Option(NEWEST_FIRST, id="")]
        for key, label in self.columns:
            arrow = ""
            if key == self.current:
                arrow = "  ↓ (again: ↑)" if self.descending else "  ↑ (again: ↓)"
            options.append(Option(label + arrow, id=key))
        with Vertical(classes="dialog"):
            yield Static("Sort the jobs by", classes="question")
            yield OptionList(*options, id="sort-columns")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.focus()
        keys = [""] + [key for key, _ in self.columns]
        options.highlighted = keys.index(self.current) if self.current in keys else 0

    @on(OptionList.OptionSelected, "#sort-columns")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        column = event.option.id or None
        if column is None:
            self.dismiss((None, False))
        elif column == self.current:
            self.dismiss((column, not self.descending))
        else:
            # Text ascending (A first), numbers descending (the largest, slowest, costliest
            # first): what a user sorting by a number looks for.
            self.dismiss((column, column not in ("name", "job", "state", "reason")))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class ColumnsModal(ModalScreen[list[str] | None]):
    """Tick the columns to show (the name always shows). Dismissed with the keys ticked,
    in the table's order, or None on escape."""

    BINDINGS = [Binding("escape", "dismiss_none", "Back")]

    def __init__(self, columns: Sequence[tuple[str, str]], shown: Sequence[str]) -> None:
        super().__init__()
        self.columns = [(key, label) for key, label in columns if key != "name"]
        self.shown = set(shown)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Columns to show (space ticks, enter on Done)", classes="question")
            yield SelectionList[str](
                *((label, key, key in self.shown) for key, label in self.columns),
                id="columns",
            )
            yield Button("Done", variant="primary", id="done")

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    @on(Button.Pressed, "#done")
    def _done(self) -> None:
        ticked = set(self.query_one(SelectionList).selected)
        self.dismiss([key for key, _ in self.columns if key in ticked])

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
