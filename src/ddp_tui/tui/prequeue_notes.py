"""Compose's notes on the pre-queue checks: what the Python check found (with its re-check
key and its override box), and the chosen partition's idle nodes and GPUs per node.

The checks themselves run in the facade's plan (:mod:`ddp_tui.remote.submit.prequeue`); these
widgets only show what a plan brought back (docs/architecture.md, "Submit").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Checkbox, Static

from ddp_tui.remote.submit.prequeue import PythonRecord, is_check_error
from ddp_tui.spec import PartitionInfo
from ddp_tui.tui.messages import PreviewReady


@dataclass
class CheckedPreview(PreviewReady):
    """A preview's plan with what the Python check remembers for its spec (None: nothing,
    e.g. it failed, or the profile turns the check off), and where it ran."""

    python: PythonRecord | None = None
    where: str = ""
    #: The container runtimes detected on the spec's partition (None: not detected, or
    #: older than a day; :mod:`ddp_tui.remote.submit.env_detect`).
    runtimes: tuple[str, ...] | None = None


def partition_note(partitions: Sequence[PartitionInfo], chosen: str) -> str:
    """``debug: 1 of 3 nodes idle (when connected), 2 GPUs per node`` for the chosen
    partition (the cluster's default when none is chosen); "" when not known."""
    info = next((p for p in partitions if p.name == chosen or (not chosen and p.is_default)), None)
    if info is None or info.idle_nodes is None:
        return ""
    gpus = f"{info.gpus_per_node} GPU{'s' if info.gpus_per_node != 1 else ''} per node"
    return f"{info.name}: {info.idle_nodes} of {info.nodes} nodes idle (when connected), {gpus}"


class PythonCheckNote(Vertical):
    """Below the Python field: the check's answer, ctrl+r to re-check, and the box that
    overrides a failed check (ticked while an override is remembered)."""

    DEFAULT_CSS = """
    PythonCheckNote {
        height: auto;
        padding-left: 20;
        display: none;
    }
    PythonCheckNote Static {
        color: $text-muted;
    }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="python-check")
        yield Checkbox(
            "skip the torch check for this python (you know better)",
            id="skip-python-check",
            compact=True,
        )

    def show(self, message: PreviewReady) -> None:
        record = message.python if isinstance(message, CheckedPreview) else None
        failed = any(is_check_error(e) for e in message.errors)
        overridden = record is not None and record.overridden
        box = self.query_one("#skip-python-check", Checkbox)
        box.display = failed or overridden
        with box.prevent(Checkbox.Changed):  # showing the state is not the user's change
            box.value = overridden
        if overridden:
            text = "torch check skipped for this python and set-up; ctrl+r checks again"
        elif record is not None and isinstance(message, CheckedPreview):
            found = f" ({record.versions})" if record.versions else ""
            text = f"torch and torchvision found{found} on {message.where}; ctrl+r checks again"
        elif failed:
            text = "ctrl+r checks again after a fix"
        else:
            text = ""
        self.query_one("#python-check", Static).update(Text(text))
        self.display = bool(text)
