"""Compose's form, generated from the spec's field descriptions (``ddp_tui.spec.FIELDS``):
one row per field, in the sections the CLI's ``--help`` uses, with the widget its
description implies.

A field with a closed list of choices is a Select; one with choices and ``others`` (model,
dataset) a Select of its choices and suggestions plus a free-text box for anything else; a
flag a Checkbox; a one-item-per-line list a TextArea; the rest an Input whose placeholder is
the description's hint. The partition's options come from the cluster, not the description.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Select, TextArea

from ddp_tui.spec import FIELD_SECTIONS, FIELDS, ExperimentSpec, FieldError, FieldSpec, form_text

if TYPE_CHECKING:
    from ddp_tui.spec import PartitionInfo

#: The picker value that shows the free-text box beside it.
CUSTOM: Final = "__custom__"
CUSTOM_OPTION: Final = ("custom...", CUSTOM)


@dataclass(frozen=True)
class FieldDef:
    """One form field: the spec field it sets, its label, its widget kind and a hint."""

    name: str
    label: str
    kind: str  # "text" | "choice" | "picker" | "bool" | "lines" | "partition" | "gpu_type"
    hint: str = ""
    #: What a choice or picker offers (a picker also offers "custom...").
    choices: tuple[str, ...] = ()
    #: The entry the field is for (trainer or script); empty: shown for every entry.
    applies: str = ""


def field_def(spec: FieldSpec) -> FieldDef:
    """The form field of one spec field, from its description."""
    if spec.name == "partition":
        kind = "partition"  # the cluster's partitions, known only once connected
    elif spec.name == "gpu_type":
        kind = "gpu_type"  # the chosen partition's GPU types, known only once connected
    elif spec.kind == "bool":
        kind = "bool"
    elif spec.lines:
        kind = "lines"
    elif spec.choices and spec.others:
        kind = "picker"
    elif spec.choices:
        kind = "choice"
    else:
        kind = "text"
    return FieldDef(
        name=spec.name,
        label=spec.label,
        kind=kind,
        hint=spec.hint or spec.placeholder,
        choices=(*spec.choices, *spec.suggestions),
        applies=spec.applies,
    )


def _sections() -> tuple[tuple[str, tuple[FieldDef, ...]], ...]:
    """The spec's fields by section, in the order the sections are listed."""
    return tuple(
        (section, tuple(field_def(f) for f in FIELDS.values() if f.section == section))
        for section in FIELD_SECTIONS
    )


FORM_SECTIONS: Final = _sections()
#: Every form field by spec field name, in form order.
FORM_FIELDS: Final[Mapping[str, FieldDef]] = {
    f.name: f for _, fields in FORM_SECTIONS for f in fields
}


def form_from_spec(spec: ExperimentSpec) -> dict[str, str]:
    """The text of every form field for ``spec``; ``spec_from_form`` reads it back."""
    return {name: form_text(name, getattr(spec, name)) for name in FORM_FIELDS}


def epochs_for_entry(entry: str, epochs: str) -> str:
    """The Epochs text once Entry changes to ``entry``: a script starts with none where the
    field held only the trainer's default (a loop with no epochs was never asked for that many;
    a count the user typed stays), and the trainer, which needs a count, gets its default back
    where the field is empty."""
    default = form_text("epochs", ExperimentSpec().epochs)
    if entry == "script" and epochs.strip() == default:
        return ""
    if entry != "script" and not epochs.strip():
        return default
    return epochs


def errors_by_field(errors: Iterable[FieldError]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for error in errors:
        found.setdefault(error.field, []).append(error.message)
    return found


def runtime_options(
    choices: Sequence[str], found: Collection[str] | None, partition: str
) -> list[tuple[str, str]]:
    """The container runtime select's options. With what was detected on ``partition``
    (``found``: the runtimes there), the found ones come first and the others are marked
    ``not found on P``, still choosable (a plan then says why it is refused); undetected
    (None), the choices as described."""
    if found is None:
        return [(choice, choice) for choice in choices]
    where = partition or "the default partition"
    first = [(c, c) for c in choices if not c or c in found]
    rest = [(f"{c} (not found on {where})", c) for c in choices if c and c not in found]
    return first + rest


def gpu_type_options(partitions: Sequence[PartitionInfo], chosen: str) -> list[tuple[str, str]]:
    """The GPU type select's options: any, then the types of the chosen partitions (the
    default one when none is), each as ``H100 80GB (h100, 16 nodes)`` for its raw type, then
    custom (a raw type or plain name typed, resolved by the plan)."""
    names = [n for n in chosen.split(",") if n]
    places = [p for p in partitions if (p.name in names if names else p.is_default)]
    kinds = {k.request: k.label for p in places for k in p.gpu_kinds}
    return [("any GPU type", ""), *((label, req) for req, label in kinds.items()), CUSTOM_OPTION]


def partition_label(info: PartitionInfo) -> str:
    """``debug*  3 nodes  2 GPU/node  60 min``: the limits Compose checks against."""
    limit = "no time limit" if info.max_time_min is None else f"{info.max_time_min} min"
    default = "*" if info.is_default else ""
    return f"{info.name}{default}  {info.nodes} nodes  {info.gpus_per_node} GPU/node  {limit}"


def field_widgets(
    field: FieldDef, value: str, partitions: Sequence[PartitionInfo] = ()
) -> Iterable[Widget]:
    """The widgets that edit ``field`` (id ``f-<name>``; a picker's text box ``c-<name>``),
    holding ``value``, its form text. Call it inside ``compose()``: a picker nests its
    widgets in a container."""
    wid = f"f-{field.name}"
    if field.kind == "choice":
        options = [(choice, choice) for choice in field.choices]
        if value not in field.choices:
            options.append((value, value))
        yield Select(options, value=value, allow_blank=False, id=wid, compact=True)
    elif field.kind == "bool":
        yield Checkbox("", value=value == "yes", id=wid, compact=True)
    elif field.kind == "lines":
        area = TextArea(value, id=wid, compact=True, soft_wrap=False, classes="lines")
        area.show_line_numbers = False
        yield area
    elif field.kind == "picker":
        custom = value not in field.choices
        picks = [(name, name) for name in field.choices] + [("custom...", CUSTOM)]
        with Vertical(classes="picker"):
            yield Select(
                picks, value=CUSTOM if custom else value, allow_blank=False, id=wid, compact=True
            )
            custom_input = Input(
                value if custom else "", placeholder=field.hint, id=f"c-{field.name}", compact=True
            )
            custom_input.display = custom
            yield custom_input
    elif field.kind == "gpu_type":
        # The chosen partition's types are filled in by Compose (gpu_type_options); until
        # then a type given is shown as typed.
        with Vertical(classes="picker"):
            yield Select(
                [("any GPU type", ""), CUSTOM_OPTION],
                value=CUSTOM if value else "",
                allow_blank=False,
                id=wid,
                compact=True,
            )
            custom_input = Input(value, placeholder=field.hint, id=f"c-{field.name}", compact=True)
            custom_input.display = bool(value)
            yield custom_input
    elif field.kind == "partition":
        options = [("(cluster default)", "")]
        options += [(partition_label(p), p.name) for p in partitions]
        if value not in {v for _, v in options}:
            options.append((value, value))
        yield Select(options, value=value, allow_blank=False, id=wid, compact=True)
    else:
        yield Input(value, placeholder=field.hint, id=wid, compact=True)
