"""Raw text (a form, CLI options) to a spec and back.

Each field's text is read by its description's kind (``convert.py``). :func:`spec_from_form`
only converts: a value of the right type may still be refused by :func:`~ddp_tui.spec.validate`,
which its callers run once (Compose through the facade's plan). :func:`check_form` does both,
for one-shot callers such as the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ddp_tui.spec.convert import from_text, to_text
from ddp_tui.spec.errors import FieldError
from ddp_tui.spec.experiment import FIELDS, ExperimentSpec
from ddp_tui.spec.validate import validate


def form_text(name: str, value: Any) -> str:
    """``value`` of field ``name`` as the text :func:`spec_from_form` reads back to it."""
    field = FIELDS.get(name)
    return to_text("", value) if field is None else field.text(value)


def convert_form(
    form: Mapping[str, str], base: ExperimentSpec | None = None
) -> tuple[ExperimentSpec, list[FieldError]]:
    """``base`` (default: ExperimentSpec()) with every field of ``form`` that converts, and an
    error for each that does not (those keep the base's value).

    List fields take shell words (``extra_sbatch``, ``extra_trainer_args``), one line per
    item (``env_setup``) or ``NAME=value`` words (``nccl_env``)."""
    spec = base if base is not None else ExperimentSpec()
    errors: list[FieldError] = []
    changes: dict[str, Any] = {}
    for key, raw in form.items():
        field = FIELDS.get(key)
        if field is None:
            errors.append(FieldError(key, "unknown field"))
            continue
        if not isinstance(raw, str):
            errors.append(FieldError(key, f"expected text, got {raw!r}"))
            continue
        try:
            changes[key] = from_text(field.kind, raw, lines=field.lines)
        except ValueError as e:
            errors.append(FieldError(key, str(e)))
    if changes.get("entry") == "script" and "epochs" not in form and spec.entry != "script":
        # The trainer's default count is no script's: a loop with no epochs was never asked
        # for 10 of them. A script's epochs are only those given.
        changes["epochs"] = None
    return spec.replace(**changes), errors


def spec_from_form(
    form: Mapping[str, str], base: ExperimentSpec | None = None
) -> tuple[ExperimentSpec | None, list[FieldError]]:
    """Convert raw text fields onto ``base`` (default: ExperimentSpec()), validating nothing.

    Returns ``(spec, [])`` when every field converts, else ``(None, errors)`` with every
    conversion error, each naming its field (see :func:`convert_form`)."""
    spec, errors = convert_form(form, base)
    return (None, errors) if errors else (spec, [])


def check_form(
    form: Mapping[str, str], base: ExperimentSpec | None = None
) -> tuple[ExperimentSpec | None, list[FieldError]]:
    """:func:`spec_from_form`, then :func:`~ddp_tui.spec.validate` over what converted.

    Returns ``(spec, [])`` for a valid spec, else ``(None, errors)`` with every conversion
    and validation error (a field that did not convert is reported once, by conversion)."""
    candidate, conversion = convert_form(form, base)
    errors = merge_errors(conversion, validate(candidate))
    return (None, errors) if errors else (candidate, [])


def merge_errors(
    conversion: Sequence[FieldError], checks: Sequence[FieldError]
) -> list[FieldError]:
    """The conversion errors, then the checks' errors of the fields that did convert: a
    field whose text did not convert was checked at its starting value, so its check
    errors say nothing about what the user typed."""
    failed = {e.field for e in conversion}
    return [*conversion, *(e for e in checks if e.field not in failed)]
