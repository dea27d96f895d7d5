"""FieldSpec: one spec field described once, and the machinery that attaches descriptions to
a dataclass's fields and collects them.

A description says what the field is (kind, default, label, help, section), what it allows
(the limits validation checks, and the words its messages use) and how a form shows it
(hint, one item per line, suggested values). The CLI's ``--help``, Compose's form and the
per-field validation are all generated from it, so they cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from ddp_tui.spec.convert import KIND_OF_TYPE, to_text

_DOC: Final = "ddp_tui.field"
_KIND_SYNTAX: Final = {
    "bool": "yes|no",
    "int": "N",
    "optint": "N",
    "float": "X",
    "optfloat": "X",
    "str": "TEXT",
    "strlist": "WORDS",
    "env": "NAME=VALUE...",
}
#: The generic check of each kind whose values need no more than their description.
_KIND_CHECKS: Final = {
    "bool": "bool",
    "int": "int_range",
    "optint": "int_range",
    "float": "number",
    "optfloat": "number",
}


@dataclass(frozen=True)
class FieldSpec:
    """One ExperimentSpec field, described once: its kind, default, allowed values, unit, help
    text, form section, whether it sets the run's size, and the limits validation holds it to.

    Each field of ``ExperimentSpec`` carries its description (:func:`describe`);
    :func:`describe_fields` completes them with the name and kind.
    """

    name: str
    #: How the value is typed: bool, int, optint, float, optfloat, str, strlist or env.
    kind: str
    default: Any
    section: str
    #: A short name for a form's label.
    label: str
    #: What the field is, in a phrase.
    help: str
    #: The allowed values, for fields that take one of a list (the lists validate() checks).
    choices: tuple[str, ...] = ()
    #: What else is allowed besides ``choices``, in words (model, dataset).
    others: tuple[str, ...] = ()
    unit: str = ""
    #: What an empty value stands for, where the field may be empty (``the cluster's default``).
    empty: str = ""
    #: How a value is written, as a placeholder (``HH:MM:SS``); empty: from the kind.
    syntax: str = ""
    #: Sets the run's size: runs differing only in these fields compare as one group.
    scale: bool = False
    # -- what validation checks (see checks.py) ---------------------------------------------
    #: Integers: the smallest allowed value. Numbers: values must be above it.
    minimum: int | None = None
    #: The largest allowed value (integers and numbers).
    maximum: int | None = None
    #: A regular expression the whole value must match (and, for ``one_of``, ``others``).
    pattern: str = ""
    #: What ``pattern`` allows, in words, for its message; empty: :attr:`allowed`.
    pattern_words: str = ""
    #: The longest allowed text, in characters.
    max_len: int = 0
    #: A text that must not be empty (other text fields may be, and mean :attr:`empty`).
    required: bool = False
    #: The name of the check that holds the value (checks.py, field_checks.py); empty: the
    #: generic one for the kind and the limits above (:attr:`check_name`).
    check: str = ""
    # -- how a form shows it -------------------------------------------------------------------
    #: A reminder shown in an empty form box; empty: :attr:`placeholder`.
    hint: str = ""
    #: A list whose text holds one item per line (shell lines) rather than shell words.
    lines: bool = False
    #: Values a form's picker offers beside ``choices`` (``others`` stay allowed too).
    suggestions: tuple[str, ...] = ()
    #: The entry the field is for (``trainer`` or ``script``); empty: every run. A form
    #: shows only the fields of the chosen entry, and the trainer's own rules skip scripts.
    applies: str = ""

    @property
    def allowed(self) -> str:
        """``auto, nccl or gloo``; empty for fields that take free values."""
        items = (*self.choices, *self.others)
        if len(items) < 2:
            return "".join(items)
        return f"{', '.join(items[:-1])} or {items[-1]}"

    @property
    def default_text(self) -> str:
        """The default as a form or the CLI would give it (empty for none)."""
        return self.text(self.default)

    @property
    def placeholder(self) -> str:
        """How a value is written: ``syntax``, else a word for the kind."""
        return self.syntax or _KIND_SYNTAX[self.kind]

    @property
    def optional(self) -> bool:
        """Whether the field may be empty (None, or an empty text)."""
        return self.kind in ("optint", "optfloat") or (self.kind == "str" and not self.required)

    @property
    def check_name(self) -> str:
        """The check validation runs: ``check``, else the generic one its description implies
        (empty for a list field without a named check)."""
        if self.check:
            return self.check
        if self.kind in _KIND_CHECKS:
            return _KIND_CHECKS[self.kind]
        if self.kind != "str":
            return ""
        if self.pattern:
            return "pattern"
        return "one_of" if self.choices else "text"

    def text(self, value: Any) -> str:
        """``value`` of this field as the text a form or the CLI gives."""
        return to_text(self.kind, value, lines=self.lines)


def describe(
    default: Any,
    section: str,
    label: str,
    help: str,
    *,
    choices: tuple[str, ...] = (),
    others: tuple[str, ...] = (),
    unit: str = "",
    empty: str = "",
    syntax: str = "",
    scale: bool = False,
    minimum: int | None = None,
    maximum: int | None = None,
    pattern: str = "",
    pattern_words: str = "",
    max_len: int = 0,
    required: bool = False,
    check: str = "",
    hint: str = "",
    lines: bool = False,
    suggestions: tuple[str, ...] = (),
    applies: str = "",
) -> Any:
    """A dataclass field with ``default`` and its description (name and kind come later)."""
    spec = FieldSpec(
        name="",
        kind="",
        default=default,
        section=section,
        label=label,
        help=help,
        choices=choices,
        others=others,
        unit=unit,
        empty=empty,
        syntax=syntax,
        scale=scale,
        minimum=minimum,
        maximum=maximum,
        pattern=pattern,
        pattern_words=pattern_words,
        max_len=max_len,
        required=required,
        check=check,
        hint=hint,
        lines=lines,
        suggestions=suggestions,
        applies=applies,
    )
    return dataclasses.field(default=default, metadata={_DOC: spec})


def describe_fields(cls: type) -> Mapping[str, FieldSpec]:
    """Every field's description of dataclass ``cls``, in declaration order, completed with
    its name and its kind (from the type annotation)."""
    specs: dict[str, FieldSpec] = {}
    for f in dataclasses.fields(cls):
        doc = f.metadata.get(_DOC)
        if not isinstance(doc, FieldSpec):  # pragma: no cover - a new field needs describe()
            raise TypeError(f"{cls.__name__}.{f.name} has no description: use describe()")
        kind = KIND_OF_TYPE.get(str(f.type))
        if kind is None:  # pragma: no cover - a new field type needs a kind
            raise TypeError(f"no kind for field {f.name}: {f.type}")
        specs[f.name] = dataclasses.replace(doc, name=f.name, kind=kind)
    return MappingProxyType(specs)
