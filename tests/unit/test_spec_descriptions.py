"""Validation is generated from the field descriptions: each description must hold what its
check needs, and the checks must say what the description says.

A new field is added in one place (its ``describe(...)`` in ``ddp_tui/spec/experiment.py``);
these tests fail when that description is not complete enough to check the field.
"""

from __future__ import annotations

import re

import pytest

from ddp_tui.spec import FIELDS, ExperimentSpec, check_form, spec_from_form, validate
from ddp_tui.spec.validate import CHECKS, field_errors

NAMES = list(FIELDS)


@pytest.mark.parametrize("name", NAMES)
def test_each_field_names_a_known_check(name: str) -> None:
    assert FIELDS[name].check_name in CHECKS, name


def test_every_check_is_used() -> None:
    assert {f.check_name for f in FIELDS.values()} == set(CHECKS)


@pytest.mark.parametrize("name", NAMES)
def test_each_description_holds_what_its_check_needs(name: str) -> None:
    f = FIELDS[name]
    check = f.check_name
    if f.kind in ("int", "optint", "float", "optfloat"):
        assert check in ("int_range", "number"), name
        assert f.minimum is not None and f.maximum is not None, f"{name} needs a range"
        assert f.minimum < f.maximum, name
    if f.kind in ("strlist", "env"):
        assert f.check and f.max_len > 0, f"{name}: a list needs a named check and max_len"
    if check in ("pattern", "one_of") and f.pattern:
        re.compile(f.pattern)
        assert f.max_len > 0, name
    if check == "pattern":
        assert f.pattern_words or f.allowed, f"{name}: the message needs words for the pattern"
    if check == "text":
        assert f.max_len > 0, name
    if check == "one_of":
        assert f.choices, name
        # An open list (words in ``others``) needs a pattern for what the words allow.
        assert bool(f.others) == bool(f.pattern), name


def test_closed_lists_are_checked_as_one_of() -> None:
    for f in FIELDS.values():
        if f.choices and not f.others:
            assert f.check_name == "one_of", f.name


@pytest.mark.parametrize("name", [n for n, f in FIELDS.items() if f.check_name == "int_range"])
def test_integer_ranges_are_the_described_ones(name: str) -> None:
    f = FIELDS[name]
    assert f.minimum is not None and f.maximum is not None
    base = (
        ExperimentSpec(entry="script", script="t.py") if f.applies == "script" else ExperimentSpec()
    )
    for ok in (f.minimum, f.maximum):  # (cross-field rules may still refuse them)
        assert field_errors(base.replace(**{name: ok})) == []
    errors = [e for e in validate(base.replace(**{name: f.maximum + 1})) if e.field == name]
    empty = " (or empty)" if f.kind == "optint" else ""
    assert [e.message for e in errors] == [
        f"must be an integer from {f.minimum} to {f.maximum}{empty}, got {f.maximum + 1}"
    ]


@pytest.mark.parametrize("name", [n for n, f in FIELDS.items() if f.check_name == "pattern"])
def test_patterns_take_at_most_the_described_length(name: str) -> None:
    f = FIELDS[name]
    errors = [e for e in validate(ExperimentSpec().replace(**{name: "a" * (f.max_len + 1)}))]
    assert [e.field for e in errors] == [name]
    assert f"(at most {f.max_len} characters)" in errors[0].message


def test_spec_from_form_only_converts() -> None:
    # Compose validates once per keystroke through the facade's plan, so converting must not.
    spec, errors = spec_from_form({"nodes": "0", "backend": "mpi"})
    assert errors == [] and spec is not None and (spec.nodes, spec.backend) == (0, "mpi")
    spec, errors = check_form({"nodes": "0", "backend": "mpi"})
    assert spec is None and [e.field for e in errors] == ["nodes", "backend"]
