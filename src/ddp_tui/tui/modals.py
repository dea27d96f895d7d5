"""Modal screens: confirmations, SSH prompts, save path, verification results (the sweep's
dialog is ``sweep_dialog.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

if TYPE_CHECKING:
    from ddp_tui.remote.model.views import Check


class ConfirmModal(ModalScreen[bool]):
    """Ask yes or no; ``y``/``enter`` confirms, ``n``/``escape`` declines."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, *, yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.question = question
        self.yes = yes
        self.no = no

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(self.question), classes="question")
            with Horizontal(classes="buttons"):
                yield Button(self.yes, variant="error", id="yes")
                yield Button(self.no, variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class HostKeyModal(ModalScreen[bool]):
    """An unknown (or changed) SSH host key: show the SHA256 fingerprint, ask to trust it."""

    BINDINGS = [Binding("escape", "reject", "Reject")]

    def __init__(
        self, host: str, key_type: str, fingerprint: str, *, changed: bool = False
    ) -> None:
        super().__init__()
        self.host = host
        self.key_type = key_type
        self.fingerprint = fingerprint
        self.changed = changed

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            if self.changed:
                yield Static(
                    Text(
                        f"WARNING: the host key of {self.host} has CHANGED. "
                        "Someone may be intercepting the connection.",
                        style="bold red",
                    )
                )
            else:
                yield Static(Text(f"The authenticity of host {self.host} can't be established."))
            yield Static(Text(f"{self.key_type} key fingerprint is"))
            yield Static(Text(self.fingerprint, style="bold"), id="fingerprint")
            yield Static(
                Text("Trust this key and remember it in known_hosts? (tab: choose, esc: reject)")
            )
            with Horizontal(classes="buttons"):
                yield Button("Trust", variant="warning", id="trust")
                yield Button("Reject", variant="primary", id="reject")

    def on_mount(self) -> None:
        self.query_one("#reject", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "trust")

    def action_reject(self) -> None:
        self.dismiss(False)


@dataclass(frozen=True)
class PromptField:
    """One keyboard-interactive prompt: its text and whether the answer is echoed."""

    prompt: str
    echo: bool


class PromptModal(ModalScreen[list[str] | None]):
    """Ask one or more questions (passphrase, password, 2FA code); ``None`` when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, instructions: str, fields: Sequence[PromptField]) -> None:
        super().__init__()
        self.title_text = title
        self.instructions = instructions
        self.fields = list(fields)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            if self.title_text:
                yield Static(Text(self.title_text, style="bold"))
            if self.instructions:
                yield Static(Text(self.instructions))
            for index, field in enumerate(self.fields):
                yield Label(Text(field.prompt))
                yield Input(password=not field.echo, id=f"answer-{index}")
            with Horizontal(classes="buttons"):
                yield Button("OK", variant="primary", id="ok")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        if self.fields:
            self.query_one("#answer-0", Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        index = int((event.input.id or "answer-0").rsplit("-", 1)[1])
        if index + 1 < len(self.fields):
            self.query_one(f"#answer-{index + 1}", Input).focus()
        else:
            self._finish()

    @on(Button.Pressed, "#ok")
    def _ok(self) -> None:
        self._finish()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def _finish(self) -> None:
        self.dismiss([self.query_one(f"#answer-{i}", Input).value for i in range(len(self.fields))])


class PathModal(ModalScreen[str | None]):
    """Ask for a file path (saving the script)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, default: str) -> None:
        super().__init__()
        self.title_text = title
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(self.title_text, style="bold"))
            yield Input(self.default, id="path")
            yield Static("", id="path-error", classes="field-error")
            with Horizontal(classes="buttons"):
                yield Button("Save", variant="primary", id="ok")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#path", Input).focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def _ok(self) -> None:
        path = self.query_one("#path", Input).value.strip()
        if not path:
            self.query_one("#path-error", Static).update("path: enter a file name")
            return
        self.dismiss(path)

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


def checks_text(checks: Sequence[Check]) -> Text:
    """The verification checklist: ✓ passed, ✗ failed, · not applicable yet."""
    text = Text()
    if not checks:
        text.append("No checks yet.", style="dim")
        return text
    for check in checks:
        if check.ok is True:
            text.append(" ✓ ", style="bold green")
        elif check.ok is False:
            text.append(" ✗ ", style="bold red")
        else:
            text.append(" · ", style="dim")
        text.append(check.name, style="bold")
        if check.detail:
            text.append(f"  {check.detail}")
        text.append("\n")
    text.rstrip()
    return text


class ChecksModal(ModalScreen[None]):
    """The verification checklist of one run."""

    BINDINGS = [Binding("escape,enter,v,q", "close", "Close")]

    def __init__(self, title: str, checks: Sequence[Check]) -> None:
        super().__init__()
        self.title_text = title
        self.checks = list(checks)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Static(Text(self.title_text, style="bold"))
            yield Static(checks_text(self.checks), id="checks")
            with Horizontal(classes="buttons"):
                yield Button("Close", variant="primary", id="close")

    @on(Button.Pressed)
    def _close_pressed(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
