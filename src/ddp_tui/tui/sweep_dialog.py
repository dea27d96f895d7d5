"""Compose's sweep dialog (ctrl+g): pick the fields to sweep and type their values; the
member table, the member count and every error show as you type, before anything is sent.

What the dialog shows is :func:`sweep_preview`, a pure function over the form's spec and the
dialog's text, made with the domain's own sweep (:mod:`ddp_tui.spec.sweep`): the members it
lists are the members the facade plans, and an error it shows is the error a submit would
get. The dialog returns the :class:`~ddp_tui.spec.Sweep`; Compose plans and submits it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import (
    Button,
    DataTable,
    Input,
    Label,
    Select,
    Static,
)

from ddp_tui.spec import (
    FIELDS,
    SWEEP_MODES,
    SWEEPABLE_FIELDS,
    ExperimentSpec,
    SpecError,
    Sweep,
    SweepMember,
    effective_lr,
    expand_sweep,
    sweep_from_options,
    value_words,
)

#: The fields researchers sweep most, first in the picker; the rest follow in spec order.
_COMMON: Final = (
    "lr",
    "batch_per_gpu",
    "gpus_per_node",
    "nodes",
    "optimizer",
    "precision",
    "model",
    "epochs",
    "warmup_epochs",
    "schedule",
    "seed",
)
#: The sweep modes as the picker says them.
_MODE_WORDS: Final = {"grid": "grid: every combination", "zip": "zip: paired in order"}
#: Errors listed at once; the rest are counted.
_SHOWN_ERRORS: Final = 12
#: Typing fires a change per key: the members are expanded once the user pauses.
_PAUSE_SEC: Final = 0.15


@dataclass(frozen=True)
class SweepPreview:
    """What the dialog shows for its text: the sweep, its members, or why not."""

    sweep: Sweep | None
    members: tuple[SweepMember, ...]
    #: How many members the sweep makes, known before they are built (None: no sweep yet).
    count: int | None
    #: Every problem, as ``field: message`` (``sweep[1] lr: must be a number, got 'abc'``).
    errors: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Whether the sweep can be submitted."""
        return self.sweep is not None and bool(self.members) and not self.errors

    def columns(self) -> tuple[str, ...]:
        """The member table's columns: the index, each swept field, the learning rate the
        trainer will use (where the linear rule makes it differ from the typed one), the name."""
        fields = self.sweep.fields if self.sweep is not None else ()
        lr = ("lr used",) if self._shows_lr() else ()
        return ("#", *fields, *lr, "name")

    def rows(self) -> list[tuple[str, ...]]:
        """One row per member, as :meth:`columns` says."""
        shows_lr = self._shows_lr()
        rows = []
        for member in self.members:
            lr = effective_lr(member.spec)
            used = (f"{lr:.4g}" if lr is not None else "",) if shows_lr else ()
            texts = tuple(text for _, text in member.values)
            rows.append((str(member.index), *texts, *used, member.spec.name))
        return rows

    def _shows_lr(self) -> bool:
        """Under lr_scaling = linear the trainer scales lr by the global batch: show the
        lr each member trains with when it differs between members or lr is swept."""
        if not any(m.spec.lr_scaling == "linear" for m in self.members):
            return False
        swept = self.sweep.fields if self.sweep is not None else ()
        return "lr" in swept or len({effective_lr(m.spec) for m in self.members}) > 1


def sweep_preview(
    spec: ExperimentSpec, axes: Sequence[tuple[str, str]], mode: str, limit: str
) -> SweepPreview:
    """The sweep of ``axes`` (each a field and its values as typed, ``0.1,0.01``) over
    ``spec``, its members and its errors; ``limit`` is the max-concurrent text (empty: no
    limit)."""
    max_concurrent: int | None = None
    errors: list[str] = []
    if limit.strip():
        try:
            max_concurrent = int(limit.strip())
        except ValueError:
            errors.append(
                "max_concurrent: must be a whole number of at least 1, or empty for no "
                f"limit, got {limit!r}"
            )
    try:
        sweep = sweep_from_options(
            [f"{field}={text}" for field, text in axes], mode=mode, max_concurrent=max_concurrent
        )
        count = sweep.count()  # zip's lists of unequal length have none
    except SpecError as e:
        return SweepPreview(None, (), None, (*errors, *(str(x) for x in e.errors)))
    try:
        members = tuple(expand_sweep(spec, sweep))
    except SpecError as e:
        return SweepPreview(sweep, (), count, (*errors, *(str(x) for x in e.errors)))
    if errors:
        return SweepPreview(sweep, members, count, tuple(errors))
    return SweepPreview(sweep, members, count, ())


def sweep_fields(spec: ExperimentSpec) -> tuple[str, ...]:
    """The fields the picker offers for ``spec``: the sweepable ones that apply to its
    entry (a script's run has no learning rate), the common ones first."""
    applies = [
        name
        for name in SWEEPABLE_FIELDS
        if name != "entry" and FIELDS[name].applies in ("", spec.entry)
    ]
    return tuple(sorted(applies, key=lambda n: _COMMON.index(n) if n in _COMMON else len(_COMMON)))


def field_hint(name: str) -> str:
    """A field's help and what each of its values may be."""
    field = FIELDS[name]
    return f"{field.label}: {field.help}. Each value: {value_words(name)}."


class SweepDialog(ModalScreen[Sweep | None]):
    """Pick fields and values; see the members, their count and every error live; submit
    (enabled only when every member is valid) returns the :class:`Sweep`."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+a", "add_axis", "Add field"),
    ]
    DEFAULT_CSS = """
    SweepDialog {
        align: center middle;
        background: $background 60%;
    }
    SweepDialog #axes {
        height: auto;
    }
    SweepDialog .axis-row {
        height: auto;
        margin-top: 1;
    }
    SweepDialog .axis-row Select {
        width: 36;
    }
    SweepDialog .axis-row Input {
        width: 1fr;
        margin-left: 1;
    }
    SweepDialog .axis-row Button {
        margin-left: 1;
    }
    SweepDialog .axis-hint {
        color: $text-muted;
        height: auto;
    }
    SweepDialog #sweep-options {
        height: auto;
        margin-top: 1;
    }
    SweepDialog #sweep-options Label {
        margin: 0 1 0 3;
    }
    SweepDialog #mode {
        width: 28;
    }
    SweepDialog #max-concurrent {
        width: 10;
    }
    SweepDialog #sweep-count {
        margin-top: 1;
        text-style: bold;
        height: auto;
    }
    SweepDialog #members {
        height: 10;
    }
    """

    def __init__(self, spec: ExperimentSpec, sweep: Sweep | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.initial = sweep
        self.fields = sweep_fields(spec)
        self.preview = SweepPreview(None, (), None, ())
        self._axis_ids: list[int] = []
        self._next_id = 0
        self._timer: Timer | None = None

    # -- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        initial = self.initial
        axes = (
            [(a.field, ",".join(a.values)) for a in initial.axes]
            if initial is not None
            else [("gpus_per_node", "1,2,4,8")]
        )
        mode = initial.mode if initial is not None else "grid"
        limit = initial.max_concurrent if initial is not None else None
        with Vertical(classes="dialog wide", id="sweep-dialog"):
            yield Static(
                Text("Sweep: the same experiment over several values, as one group", style="bold")
            )
            yield Static(
                Text(
                    "Pick a field and type its values joined by commas (semicolons when a value "
                    "holds a comma); add fields for a grid of every combination, or zip them.",
                    style="dim",
                )
            )
            with Vertical(id="axes"):
                for field, text in axes:
                    n = self._new_axis_id()
                    self._axis_ids.append(n)
                    yield from self._axis_widgets(n, field, text)
            with Horizontal(id="sweep-options"):
                yield Button("Add field", id="add", compact=True)
                yield Label("Mode")
                yield Select[str](
                    [(_MODE_WORDS[name], name) for name in SWEEP_MODES],
                    value=mode,
                    allow_blank=False,
                    id="mode",
                    compact=True,
                )
                yield Label("At most at once")
                yield Input(
                    "" if limit is None else str(limit),
                    placeholder="no limit",
                    id="max-concurrent",
                    compact=True,
                )
            yield Static("", id="sweep-count")
            yield Static("", id="sweep-errors", classes="field-error")
            yield DataTable(id="members", zebra_stripes=True, cursor_type="row")
            with Horizontal(classes="buttons"):
                yield Button("Submit sweep", variant="primary", id="ok", disabled=True)
                yield Button("Cancel", id="cancel")

    def _new_axis_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _axis_widgets(self, n: int, field: str, text: str) -> list[Widget]:
        """Row ``n``: its field's picker, values and remove button, and its hint; built
        whole, not in a compose context, so that Add field can mount them later."""
        options = [(f"{FIELDS[name].label} ({name})", name) for name in self.fields]
        row = Horizontal(
            Select[str](options, value=field, allow_blank=False, id=f"field-{n}", compact=True),
            Input(text, placeholder=_placeholder(field), id=f"values-{n}", compact=True),
            Button("Remove", id=f"remove-{n}", classes="remove", compact=True),
            classes="axis-row",
            id=f"axis-{n}",
        )
        return [row, Static(field_hint(field), id=f"hint-{n}", classes="axis-hint")]

    def on_mount(self) -> None:
        if self._axis_ids:
            self.query_one(f"#values-{self._axis_ids[0]}", Input).focus()
        self.recompute()

    # -- state ----------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        """An edit whose members are not shown yet."""
        return self._timer is not None

    def axes(self) -> list[tuple[str, str]]:
        """Each row's field and values text, in order."""
        out = []
        for n in self._axis_ids:
            value = self.query_one(f"#field-{n}", Select).value
            out.append((str(value), self.query_one(f"#values-{n}", Input).value))
        return out

    def mode(self) -> str:
        return str(self.query_one("#mode", Select).value)

    def schedule(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(_PAUSE_SEC, self.recompute)

    def recompute(self) -> None:
        """Expand the sweep of the dialog's text now and show it."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        limit = self.query_one("#max-concurrent", Input).value
        self.preview = sweep_preview(self.spec, self.axes(), self.mode(), limit)
        self._show(self.preview)

    def _show(self, preview: SweepPreview) -> None:
        self.query_one("#sweep-count", Static).update(Text(_count_text(preview)))
        errors = self.query_one("#sweep-errors", Static)
        shown = list(preview.errors[:_SHOWN_ERRORS])
        if len(preview.errors) > _SHOWN_ERRORS:
            shown.append(f"... and {len(preview.errors) - _SHOWN_ERRORS} more")
        errors.update(Text("\n".join(shown)))
        errors.display = bool(shown)
        table = self.query_one("#members", DataTable)
        table.clear(columns=True)
        table.add_columns(*preview.columns())
        table.add_rows(preview.rows())
        self.query_one("#ok", Button).disabled = not preview.ok

    # -- events ---------------------------------------------------------------------------

    @on(Input.Changed)
    @on(Select.Changed, "#mode")
    def _edited(self) -> None:
        self.schedule()

    @on(Select.Changed, ".axis-row Select")
    def _field_picked(self, event: Select.Changed) -> None:
        n = (event.select.id or "field-0").removeprefix("field-")
        field = str(event.value)
        if field in FIELDS:
            self.query_one(f"#hint-{n}", Static).update(field_hint(field))
            self.query_one(f"#values-{n}", Input).placeholder = _placeholder(field)
        self.schedule()

    @on(Button.Pressed, "#add")
    async def action_add_axis(self) -> None:
        used = {field for field, _ in self.axes()}
        field = next((f for f in self.fields if f not in used), self.fields[0])
        n = self._new_axis_id()
        await self.query_one("#axes", Vertical).mount_all(self._axis_widgets(n, field, ""))
        self._axis_ids.append(n)  # read by axes() once its widgets are there
        self.query_one(f"#values-{n}", Input).focus()
        self.schedule()

    @on(Button.Pressed, ".remove")
    def _remove(self, event: Button.Pressed) -> None:
        n = int((event.button.id or "").removeprefix("remove-"))
        self._axis_ids.remove(n)
        self.query_one(f"#axis-{n}").remove()
        self.query_one(f"#hint-{n}").remove()
        self.schedule()

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def _submit(self) -> None:
        self.recompute()  # what is typed now, not what the last pause showed
        if self.preview.ok:
            self.dismiss(self.preview.sweep)
        else:
            self.notify("Fix the sweep first: the errors are listed above the table.")

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


def _placeholder(field: str) -> str:
    choices = FIELDS[field].choices
    return ",".join(choices) if choices else "V1,V2,..."


def _count_text(preview: SweepPreview) -> str:
    sweep, count = preview.sweep, preview.count
    if sweep is None or count is None:
        return "No sweep yet: fix the errors below."
    runs = f"{count} member{'s' if count != 1 else ''}"
    sizes = [f"{a.field} ({len(a.values)})" for a in sweep.axes]
    how = (
        "every combination of " + " x ".join(sizes)
        if sweep.mode == "grid"
        else (" and ".join(a.field for a in sweep.axes) + " paired")
    )
    limit = f", at most {sweep.max_concurrent} at once" if sweep.max_concurrent else ""
    return f"{runs}: {how}{limit}"
