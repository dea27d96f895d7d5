"""The generic checks a field's description drives: a flag, an integer range, a number
range, one of a list, a pattern with a length limit, and free text.

Each takes the field's :class:`FieldSpec` and its value and returns the problems found
(none or one); the message says what is allowed, in the description's own words, and what
was given. :data:`GENERIC_CHECKS` names them as ``FieldSpec.check_name`` does.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Final

from ddp_tui.spec.errors import FieldError
from ddp_tui.spec.fields import FieldSpec

#: A field's check: its description and value in, its problems out.
Check = Callable[[FieldSpec, object], list[FieldError]]

CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f]")


@functools.cache
def compiled(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled once (the descriptions hold their patterns as text)."""
    return re.compile(pattern)


def _bounds(field: FieldSpec) -> tuple[int, int]:
    if field.minimum is None or field.maximum is None:  # test_spec_fields checks every one
        raise TypeError(f"{field.name}: a range check needs minimum and maximum")
    return field.minimum, field.maximum


def check_bool(field: FieldSpec, value: object) -> list[FieldError]:
    if isinstance(value, bool):
        return []
    return [FieldError(field.name, f"must be true or false, got {value!r}")]


def check_int_range(field: FieldSpec, value: object) -> list[FieldError]:
    lo, hi = _bounds(field)
    if field.optional and value is None:
        return []
    if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
        return []
    extra = " (or empty)" if field.optional else ""
    return [FieldError(field.name, f"must be an integer from {lo} to {hi}{extra}, got {value!r}")]


def check_number(field: FieldSpec, value: object) -> list[FieldError]:
    lo, hi = _bounds(field)
    if field.optional and value is None:
        return []
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and lo < value <= hi
    ):
        return []
    # Every optional number is one the trainer picks when empty.
    extra = ", or empty for the trainer's default" if field.optional else ""
    return [
        FieldError(
            field.name, f"must be a number above {lo} and at most {hi}{extra}, got {value!r}"
        )
    ]


def check_one_of(field: FieldSpec, value: object) -> list[FieldError]:
    """One of ``choices``, or (an open list) a value ``pattern`` matches."""
    if isinstance(value, str) and (
        value in field.choices
        or (
            field.pattern != ""
            and len(value) <= field.max_len
            and compiled(field.pattern).fullmatch(value) is not None
        )
    ):
        return []
    listed = field.allowed if field.others else ", ".join(c for c in field.choices if c)
    # A closed list whose first choice is "" (container_runtime: none) says so in words.
    empty = "empty or " if "" in field.choices else ""
    return [FieldError(field.name, f"must be {empty}one of {listed}, got {value!r}")]


def check_pattern(field: FieldSpec, value: object) -> list[FieldError]:
    if not isinstance(value, str):
        return [FieldError(field.name, f"must be a string, got {value!r}")]
    if field.optional and value == "":
        return []
    if len(value) > field.max_len or compiled(field.pattern).fullmatch(value) is None:
        what = field.pattern_words or field.allowed
        empty = " or empty" if field.optional else ""
        return [
            FieldError(
                field.name,
                f"must be {what} (at most {field.max_len} characters){empty}, got {value!r}",
            )
        ]
    return []


def text_error(name: str, value: object, *, max_len: int, required: bool) -> FieldError | None:
    """A one-line text of at most ``max_len`` characters (not blank when ``required``)."""
    if not isinstance(value, str):
        return FieldError(name, f"must be a string, got {value!r}")
    if required and not value.strip():
        return FieldError(name, "must not be empty")
    if len(value) > max_len:
        return FieldError(name, f"must be at most {max_len} characters, got {len(value)}")
    if CONTROL_RE.search(value):
        return FieldError(name, f"must not contain newlines or control characters, got {value!r}")
    return None


def check_text(field: FieldSpec, value: object) -> list[FieldError]:
    error = text_error(field.name, value, max_len=field.max_len, required=field.required)
    return [] if error is None else [error]


GENERIC_CHECKS: Final[Mapping[str, Check]] = {
    "bool": check_bool,
    "int_range": check_int_range,
    "number": check_number,
    "one_of": check_one_of,
    "pattern": check_pattern,
    "text": check_text,
}
