"""Sweeps over any spec field: the values a user gives, and the member specs they make.

A :class:`Sweep` is a few :class:`SweepAxis` (a field and its values, as the text the user
typed) and a mode: ``grid`` takes their cartesian product, ``zip`` pairs lists of the same
length. :func:`expand_sweep` turns a base spec and a sweep into :class:`SweepMember` s, each
checked through the fields' own descriptions (``form.check_form``), so a bad value refuses
the whole sweep with the member and field named. The values come from ``--sweep FIELD=V1,V2``
options (:func:`sweep_from_options`) or a TOML sweep file (:func:`load_sweep_file`); see
docs/sweeps.md. Pure functions over text and specs: no I/O.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import math
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ddp_tui.spec.convert import KIND_WORDS, is_int
from ddp_tui.spec.errors import FieldError, SpecError
from ddp_tui.spec.experiment import FIELDS, ExperimentSpec
from ddp_tui.spec.fields import FieldSpec
from ddp_tui.spec.form import check_form, form_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

#: The most members one sweep may have: a larger one is refused before any spec is built.
MAX_MEMBERS: Final = 1000
#: grid: the cartesian product of the value lists; zip: the lists paired, index by index.
SWEEP_MODES: Final = ("grid", "zip")
#: The fields a sweep may vary: all but ``name``, which each member makes from the base name
#: and its own values.
SWEEPABLE_FIELDS: Final = tuple(name for name in FIELDS if name != "name")

#: How a member's name shows a field: ``-g4`` (the size sweep's names, kept), ``-lr0.1``.
_SHORT_NAMES: Final = {
    "gpus_per_node": "g",
    "nodes": "n",
    "lr": "lr",
    "batch_per_gpu": "b",
    "epochs": "e",
    "seed": "s",
    "warmup_epochs": "wu",
}
#: Fields whose values say what they are on their own (``-adamw``, ``-bf16``, ``-resnet50``).
_VALUE_ONLY: Final = frozenset({"optimizer", "precision", "model", "schedule"})
#: Characters a run name refuses (vocabulary.NAME_PATTERN), replaced in a member's name.
_NAME_REFUSED: Final = re.compile(r"[^A-Za-z0-9_.-]+")
_HASH_LEN: Final = 8
_FILE_KEYS: Final = ("mode", "max_concurrent", "base", "sweep")


@dataclass(frozen=True)
class SweepAxis:
    """One swept field and its values, each as text exactly as the user gave it."""

    field: str
    values: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.values, list):  # keep the frozen axis hashable
            object.__setattr__(self, "values", tuple(self.values))


@dataclass(frozen=True)
class Sweep:
    """The swept fields and how their values combine. Constructing one checks it: each field
    a sweepable spec field swept once, each value given once, a known mode and a positive
    ``max_concurrent`` (:class:`SpecError` naming every problem otherwise)."""

    axes: tuple[SweepAxis, ...]
    mode: str = "grid"
    #: At most this many members run at once (a sweep file's; the CLI flag overrides it).
    max_concurrent: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.axes, list):
            object.__setattr__(self, "axes", tuple(self.axes))
        errors = _sweep_errors(self.axes, self.mode, self.max_concurrent)
        if errors:
            raise SpecError(errors)

    @property
    def fields(self) -> tuple[str, ...]:
        """The swept fields, in the order given."""
        return tuple(axis.field for axis in self.axes)

    def count(self) -> int:
        """The number of members, without building a spec: the product of the list lengths
        (grid) or their common length (zip; :class:`SpecError` when they differ)."""
        lengths = [len(axis.values) for axis in self.axes]
        if self.mode == "grid":
            return math.prod(lengths)
        if len(set(lengths)) > 1:
            each = ", ".join(f"{a.field} has {len(a.values)}" for a in self.axes)
            raise SpecError(
                [
                    FieldError(
                        "sweep",
                        f"zip pairs lists of the same length, but {each} values; give each "
                        "field as many values, or use grid for every combination",
                    )
                ]
            )
        return lengths[0] if lengths else 0


@dataclass(frozen=True)
class SweepMember:
    """One run of a sweep: its array index, its swept values and its checked, named spec."""

    index: int
    values: tuple[tuple[str, str], ...]
    spec: ExperimentSpec

    @property
    def label(self) -> str:
        """The member's values in words: ``lr=0.1 batch_per_gpu=32``."""
        return " ".join(f"{field}={text}" for field, text in self.values)


@dataclass(frozen=True)
class SweepFile:
    """What a TOML sweep file holds: the sweep, and the fields it sets for every member."""

    sweep: Sweep
    #: Spec fields set for every member, as the text a form gives (``form.convert_form``).
    base: dict[str, str]


# -- reading a sweep ------------------------------------------------------------------------


def parse_sweep_option(text: str, *, size_field: str = "gpus_per_node") -> SweepAxis:
    """One ``--sweep`` option: ``FIELD=V1,V2,...``, or sizes alone (``1,2,4``), which sweep
    ``size_field``. Values are split on commas, or on semicolons when any holds a comma
    (``synthetic_shape=1,28,28;3,32,32``). Raises :class:`SpecError` (field ``sweep``) for
    an unknown or unsweepable field, an empty value or a value given twice."""
    axis = _split_option(text, size_field)
    errors = _axis_errors(axis)
    if errors:
        raise SpecError(errors)
    return axis


def sweep_from_options(
    options: Sequence[str],
    *,
    mode: str = "grid",
    size_field: str = "gpus_per_node",
    max_concurrent: int | None = None,
) -> Sweep:
    """The sweep of several ``--sweep`` options (see :func:`parse_sweep_option`); raises
    :class:`SpecError` with every problem of every option at once."""
    return Sweep(tuple(_split_option(o, size_field) for o in options), mode, max_concurrent)


def load_sweep_file(text: str, *, source: str = "sweep file") -> SweepFile:
    """A TOML sweep file (docs/sweeps.md)::

        mode = "grid"            # optional: grid or zip
        max_concurrent = 2       # optional: at least 1
        [base]                   # optional: spec fields for every member
        epochs = 3
        [sweep]                  # required: field = [values], or "V1,V2" text
        lr = [0.1, 0.01]

    TOML numbers and booleans become the text the form reads (``0.1``, ``true``); a list
    field takes a list of strings, an env field a table. Raises :class:`SpecError` with
    field ``sweep_file`` and messages starting ``{source}: `` for every problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:  # its message says the line and column
        raise SpecError([FieldError("sweep_file", f"{source}: not valid TOML: {e}")]) from None
    problems: list[str] = [
        f"unknown key {key!r}; a sweep file has {', '.join(_FILE_KEYS)}"
        for key in data
        if key not in _FILE_KEYS
    ]
    mode = data.get("mode", "grid")
    if mode not in SWEEP_MODES:
        problems.append(f"mode must be grid or zip, got {mode!r}")
    limit = data.get("max_concurrent")
    if limit is not None and not (is_int(limit) and limit >= 1):
        problems.append(f"max_concurrent must be an integer of at least 1, got {limit!r}")
    base = _file_base(data.get("base", {}), problems)
    axes = _file_axes(data.get("sweep"), problems)
    problems += [f"{f} is set in both [base] and [sweep]; set it in one" for f in base if f in axes]
    if not problems:
        try:
            sweep = Sweep(tuple(SweepAxis(f, v) for f, v in axes.items()), mode, limit)
        except SpecError as e:
            problems += [f"[sweep] {err.message}" for err in e.errors]
        else:
            return SweepFile(sweep, base)
    raise SpecError([FieldError("sweep_file", f"{source}: {p}") for p in problems])


# -- the members ----------------------------------------------------------------------------


def expand_sweep(
    base: ExperimentSpec, sweep: Sweep, *, cap: int = MAX_MEMBERS
) -> list[SweepMember]:
    """Every member of ``sweep`` over ``base``, in order (grid: the first field slowest),
    each checked and named ``<base name>-<short><value>...``.

    Raises :class:`SpecError` when the sweep has more than ``cap`` members (before any spec
    is built), when zip's lists differ in length, or with every member's errors, named
    ``sweep[<index>] <field>``. An error of a field the sweep does not set that every member
    shares (the base's own) is reported once, under its field's name."""
    count = sweep.count()
    if count > cap:
        raise SpecError(
            [
                FieldError(
                    "sweep",
                    f"the sweep makes {count} members, more than the cap of {cap}; sweep "
                    "fewer values, or split it into several sweeps",
                )
            ]
        )
    swept = set(sweep.fields)
    members: list[SweepMember] = []
    checked: list[tuple[str, list[FieldError]]] = []  # each member's label and errors
    for index, combo in enumerate(_combinations(sweep)):
        values = tuple(zip(sweep.fields, combo, strict=True))
        spec, member_errors = check_form(dict(values), base)
        member = SweepMember(index, values, spec if spec is not None else base)
        checked.append((member.label, member_errors))
        if spec is not None:
            members.append(member)
    # The base's own errors come back from every member alike: say them once.
    shared = set.intersection(*(set(e) for _, e in checked)) if checked else set()
    shared = {e for e in shared if e.field not in swept}
    errors = [e for e in checked[0][1] if e in shared] if shared else []
    for index, (label, member_errors) in enumerate(checked):
        errors += [
            FieldError(
                f"sweep[{index}] {e.field}",
                e.message if e.field in swept else f"{e.message} (in {label})",
            )
            for e in member_errors
            if e not in shared
        ]
    errors += _identical_members(members, base.name)
    if errors:
        raise SpecError(errors)
    return _named(members, base.name)


def varying_fields(members: Sequence[SweepMember]) -> tuple[str, ...]:
    """The spec fields (``name`` aside) whose values differ between ``members``, in the
    spec's order: what a table of the members needs to show."""
    if len(members) < 2:
        return ()
    first = members[0].spec
    return tuple(
        name
        for name in SWEEPABLE_FIELDS
        if any(getattr(m.spec, name) != getattr(first, name) for m in members[1:])
    )


# The built-in trainer's defaults and option names that its learning rate depends on
# (ddp_tui/trainer/args.py: TrainConfig.base_lr, base_batch_size, grad_accum). The trainer is
# copied alone into each run and cannot be imported here; tests/unit/test_sweep.py holds these
# to the trainer's own scaled_lr.
_TRAINER_DEFAULT_LR: Final = {"sgd": 0.05, "adamw": 1e-3}
_TRAINER_BASE_BATCH: Final = 256


def effective_lr(spec: ExperimentSpec) -> float | None:
    """The learning rate the built-in trainer will use for ``spec``; None for a user's own
    script (its learning rate is its own) or one the trainer would refuse.

    The rule is the trainer's ``scaled_lr`` (ddp_tui/trainer/optim.py): the given lr, or 0.05
    for sgd and 1e-3 for adamw; under ``lr_scaling = linear``, times
    ``batch_per_gpu * world_size * grad_accum / base_batch`` (base batch 256 by default).
    ``extra_trainer_args`` come after the spec's own options on the trainer's command line,
    so where they give one of these options again (or ``--grad-accum``, which has no spec
    field), theirs is the value it uses."""
    if spec.entry == "script":
        return None
    extra = spec.extra_trainer_args
    try:
        optimizer = _last_option(extra, "--optimizer") or spec.optimizer
        lr_text = _last_option(extra, "--lr")
        lr = float(lr_text) if lr_text is not None else spec.lr
        scaling = _last_option(extra, "--lr-scaling") or spec.lr_scaling
        batch = int(_last_option(extra, "--batch-size") or spec.batch_per_gpu)
        base_text = _last_option(extra, "--base-batch-size")
        base_batch = int(base_text) if base_text is not None else spec.base_batch
        accum = int(_last_option(extra, "--grad-accum") or 1)
    except ValueError:  # the trainer refuses the option too
        return None
    if lr is None:
        lr = _TRAINER_DEFAULT_LR.get(optimizer)
        if lr is None:
            return None
    if scaling == "linear":
        lr *= batch * spec.world_size * accum / (base_batch or _TRAINER_BASE_BATCH)
    return lr


# -- helpers --------------------------------------------------------------------------------


def _split_option(text: str, size_field: str) -> SweepAxis:
    """``FIELD=V1,V2`` (or ``V1,V2`` of ``size_field``) as an axis, unchecked."""
    field, sep, rest = text.partition("=")
    if not sep:
        field, rest = size_field, text
    field = field.strip()
    dashed = field.replace("-", "_")  # the CLI's option spelling, --batch-per-gpu
    if field not in FIELDS and dashed in FIELDS:
        field = dashed
    return SweepAxis(field, _split_values(rest))


def _split_values(text: str) -> tuple[str, ...]:
    if not text.strip():
        return ()
    separator = ";" if ";" in text else ","
    return tuple(value.strip() for value in text.split(separator))


def value_words(name: str) -> str:
    """What one value of field ``name`` is, in words (``one of sgd or adamw``, ``an integer
    from 1 to 128``), for a sweep's messages and the sweep dialog's hints."""
    field = FIELDS[name]
    if field.choices:
        return f"one of {field.allowed}"
    if field.kind in ("int", "optint") and field.minimum is not None:
        words = f"an integer from {field.minimum} to {field.maximum}"
    elif field.kind in ("float", "optfloat") and field.minimum is not None:
        words = f"a number above {field.minimum} and at most {field.maximum}"
    elif field.kind in ("str", "strlist", "env"):
        words = field.pattern_words or field.placeholder
    else:
        words = KIND_WORDS[field.kind]
    return f"{words} ({field.unit})" if field.unit else words


def _not_a_field(name: str) -> str:
    """Why ``name`` is refused as a field, with the closest spec fields."""
    if name in _FILE_KEYS:  # TOML puts every key after [sweep] into that table
        return f"{name} is not a spec field: put {name} = ... above the first [table]"
    close = difflib.get_close_matches(name, SWEEPABLE_FIELDS, n=3)
    hint = f"did you mean {' or '.join(close)}?" if close else "see ddp-tui submit --help"
    return (
        f"{name!r} is not a spec field ({hint}); write FIELD=V1,V2,... with a spec field, "
        "or sizes alone such as 1,2,4"
    )


def _axis_errors(axis: SweepAxis) -> list[FieldError]:
    field = FIELDS.get(axis.field)
    if axis.field == "name":
        return [
            FieldError(
                "sweep",
                "name cannot be swept: each member is named after the base name and its "
                "values; sweep another field",
            )
        ]
    if field is None:
        return [FieldError("sweep", _not_a_field(axis.field))]
    example = f"write {axis.field}=V1,V2,... where each value is {value_words(axis.field)}"
    if not axis.values:
        return [FieldError("sweep", f"{axis.field}: give at least one value; {example}")]
    errors: list[FieldError] = []
    empty = [str(i + 1) for i, value in enumerate(axis.values) if not value.strip()]
    if empty:
        given = ",".join(axis.values)
        errors.append(
            FieldError(
                "sweep",
                f"{axis.field}: value {' and '.join(empty)} of {given!r} is empty; {example}",
            )
        )
    repeated = sorted({v for v in axis.values if axis.values.count(v) > 1})
    if repeated:
        twice = ", ".join(repr(v) for v in repeated)
        errors.append(
            FieldError("sweep", f"{axis.field}: {twice} given twice; give each value once")
        )
    return errors


def _sweep_errors(
    axes: Sequence[SweepAxis], mode: str, max_concurrent: int | None
) -> list[FieldError]:
    errors = [e for axis in axes for e in _axis_errors(axis)]
    if not axes:
        errors.append(
            FieldError(
                "sweep", "give at least one field and its values, e.g. lr=0.1,0.01, or sizes 1,2,4"
            )
        )
    fields = [axis.field for axis in axes]
    for field in sorted({f for f in fields if fields.count(f) > 1}):
        errors.append(
            FieldError(
                "sweep", f"{field} is swept twice; give all of its values at once ({field}=V1,V2)"
            )
        )
    if mode not in SWEEP_MODES:
        errors.append(FieldError("sweep_mode", f"must be grid or zip, got {mode!r}"))
    if max_concurrent is not None and not (is_int(max_concurrent) and max_concurrent >= 1):
        errors.append(
            FieldError(
                "max_concurrent",
                f"must be an integer of at least 1 (or none: no limit), got {max_concurrent!r}",
            )
        )
    return errors


def _combinations(sweep: Sweep) -> Iterator[tuple[str, ...]]:
    values = [axis.values for axis in sweep.axes]
    return itertools.product(*values) if sweep.mode == "grid" else zip(*values, strict=True)


def _identical_members(members: Sequence[SweepMember], name: str) -> list[FieldError]:
    """Members whose specs are equal though their texts differ (``0.1`` and ``0.10``)."""
    first: dict[ExperimentSpec, SweepMember] = {}
    errors: list[FieldError] = []
    for member in members:
        same = first.setdefault(member.spec.replace(name=name), member)
        if same is not member:
            errors.append(
                FieldError(
                    f"sweep[{member.index}]",
                    f"is the same run as sweep[{same.index}] ({member.label} and "
                    f"{same.label}); give each value once",
                )
            )
    return errors


def _named(members: Sequence[SweepMember], base_name: str) -> list[SweepMember]:
    """``members`` with their specs named ``<base>-<short><value>...``, each name unique."""
    named: list[SweepMember] = []
    used: set[str] = set()
    for member in members:
        full = base_name + "".join(_name_part(f, text) for f, text in member.values)
        name = _fit_name(full)
        if name in used:  # a value's refused characters replaced, or a cut long name
            name = _fit_name(f"{full}-{_digest(member.label)}")
        used.add(name)
        named.append(SweepMember(member.index, member.values, member.spec.replace(name=name)))
    return named


def _name_part(field: str, text: str) -> str:
    value = text.strip()
    if field in ("gpus_per_node", "nodes"):
        value = str(int(value))  # converted already: "04" names -g4, as the size sweep did
    value = _NAME_REFUSED.sub("_", value)
    return f"-{value}" if field in _VALUE_ONLY else f"-{_SHORT_NAMES.get(field, field)}{value}"


def _fit_name(name: str) -> str:
    """``name`` within the name field's length: cut, with a short hash of the whole name
    so that two long names cut alike stay apart."""
    limit = FIELDS["name"].max_len
    if len(name) <= limit:
        return name
    return f"{name[: limit - _HASH_LEN - 1]}-{_digest(name)}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH_LEN]


def _last_option(args: Sequence[str], option: str) -> str | None:
    """The last value of ``option`` in trainer arguments (``--opt V`` or ``--opt=V``): the
    trainer's argparse keeps the last, and takes no abbreviations (``allow_abbrev=False``)."""
    found: str | None = None
    for i, arg in enumerate(args):
        if arg == option and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(option + "="):
            found = arg[len(option) + 1 :]
    return found


def _toml_text(field: FieldSpec, value: Any) -> str:
    """A TOML value of ``field`` as the text the form reads; ValueError says what fits."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if (
        field.kind == "strlist"
        and isinstance(value, list)
        and all(isinstance(item, str) for item in value)
    ):
        return form_text(field.name, tuple(value))
    if (
        field.kind == "env"
        and isinstance(value, dict)
        and all(isinstance(item, str) for item in value.values())
    ):
        return form_text(field.name, tuple(value.items()))
    fits = {"strlist": ", or a list of strings", "env": ', or a table of NAME = "value"'}
    raise ValueError(
        f"{field.name} takes a string, number or true/false{fits.get(field.kind, '')}, "
        f"got {value!r}"
    )


def _file_base(table: object, problems: list[str]) -> dict[str, str]:
    if not isinstance(table, Mapping):
        problems.append(f"[base] must be a table of field = value, got {table!r}")
        return {}
    base: dict[str, str] = {}
    for key, value in table.items():
        field = FIELDS.get(key)
        if field is None:
            problems.append(f"[base] {_not_a_field(key)}")
            continue
        try:
            base[key] = _toml_text(field, value)
        except ValueError as e:
            problems.append(f"[base] {e}")
    return base


def _file_axes(table: object, problems: list[str]) -> dict[str, tuple[str, ...]]:
    if table is None:
        problems.append("a [sweep] table is required, e.g. [sweep] then lr = [0.1, 0.01]")
        return {}
    if not isinstance(table, Mapping):
        problems.append(f"[sweep] must be a table of field = [values], got {table!r}")
        return {}
    axes: dict[str, tuple[str, ...]] = {}
    for key, value in table.items():
        field = FIELDS.get(key)
        if field is None:
            problems.append(f"[sweep] {_not_a_field(key)}")
        elif isinstance(value, str):
            axes[key] = _split_values(value)
        elif isinstance(value, list):
            try:
                axes[key] = tuple(_toml_text(field, item) for item in value)
            except ValueError as e:
                problems.append(f"[sweep] {e}")
        else:
            problems.append(
                f"[sweep] {key} must be a list of values, e.g. {key} = [V1, V2], got {value!r}"
            )
    if not table:
        problems.append("[sweep] is empty; give at least one field = [values]")
    return axes
